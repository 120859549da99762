#!/usr/bin/env bash
# GPU check of specvideo, for a bare GPU machine with no network (scripts/device_wheels.sh on a
# networked machine fetches the wheels it lacks into .whl/ beforehand). In at most 8 minutes:
#   1. installs what is missing (from .whl/ when present) and puts the repository on PYTHONPATH;
#   2. runs the gpu-marked tests (tests/gpu): video in fp16 and bf16, text greedy identity in fp32
#      on CUDA, bf16 text, batches of both;
#   3. runs a short GPU benchmark: text on the default pair, video target-only vs speculative with
#      the sequential-pass count;
#   4. writes summary.json (and the logs and benchmark JSON) into OUT_DIR (default: $OUT or ./device_out).
# Usage: scripts/device_check.sh [OUT_DIR] [--dry-run]
#   --dry-run: the same steps on the CPU with tiny sizes (the gpu tests skip): checks the script itself.
set -uo pipefail
cd "$(dirname "$0")/.."

DRY=0
OUT_DIR="${OUT:-device_out}"
for arg in "$@"; do
    case "$arg" in
        --dry-run) DRY=1 ;;
        -*) echo "device_check: unknown option $arg" >&2; exit 2 ;;
        *) OUT_DIR="$arg" ;;
    esac
done

# 1. install (scripts/device_env.sh: also START, PY and OUT_DIR)
NAME=device_check
. scripts/device_env.sh

if [ "$DRY" = 1 ]; then
    DEVICE=cpu; VIDEO=(--num-synthetic 1 --num-real 0 --num-frames 2 --target-steps 1); TEXT=(--num-prompts 1 --repeats 1 --max-new-tokens 8 --workloads code --target models/text/target --draft models/text/draft)
else
    DEVICE=cuda; VIDEO=(--num-synthetic 4 --num-real 2 --num-frames 16 --target-steps 1,5); TEXT=(--num-prompts 8 --repeats 1 --max-new-tokens 96)
fi
budget() { echo $(( 480 - ($(date +%s) - START) )); }  # seconds left of the 8 minutes

# 2. the gpu-marked tests
timeout "$(budget)" "$PY" -m pytest -m gpu tests/gpu -q -p no:cacheprovider --junitxml="$OUT_DIR/gpu_tests.xml" \
    >"$OUT_DIR/gpu_tests.log" 2>&1
TESTS_RC=$?

# 3. short benchmarks (no report written)
timeout "$(budget)" "$PY" -m specvideo.cli bench video --device "$DEVICE" "${VIDEO[@]}" --sweep-drafters flow \
    --drafters flow,copy --no-write --json >"$OUT_DIR/bench_video.json" 2>"$OUT_DIR/bench_video.log"
VIDEO_RC=$?
timeout "$(budget)" "$PY" -m specvideo.cli bench text --device "$DEVICE" "${TEXT[@]}" --no-report --json \
    >"$OUT_DIR/bench_text.json" 2>"$OUT_DIR/bench_text.log"
TEXT_RC=$?

# 4. summary
"$PY" - "$OUT_DIR" "$DRY" "$TESTS_RC" "$VIDEO_RC" "$TEXT_RC" "$(( $(date +%s) - START ))" <<'PY'
import json, sys, xml.etree.ElementTree as ET
from pathlib import Path

out, dry, tests_rc, video_rc, text_rc, seconds = sys.argv[1], sys.argv[2] == "1", *map(int, sys.argv[3:])
out = Path(out)
summary = {"dry_run": dry, "seconds": seconds, "return_codes": {"tests": tests_rc, "bench_video": video_rc, "bench_text": text_rc}}
try:
    import torch
    summary["torch"] = torch.__version__
    summary["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
except Exception as err:  # noqa: BLE001 - the summary reports what it can
    summary["torch"] = f"unavailable: {err}"
try:
    suite = ET.parse(out / "gpu_tests.xml").getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    summary["tests"] = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    summary["tests"]["cases"] = {
        c.get("name"): ("skipped" if c.find("skipped") is not None else "failed" if c.find("failure") is not None
                        or c.find("error") is not None else "passed")
        for c in suite.iter("testcase")
    }
except (OSError, ET.ParseError) as err:
    summary["tests"] = f"no results: {err}"
for name in ("bench_video", "bench_text"):
    try:
        data = json.loads((out / f"{name}.json").read_text())
    except (OSError, ValueError) as err:
        summary[name] = f"no results: {err}"
        continue
    keep = ("workload", "method", "seconds_per_frame", "unet_passes_per_frame", "pass_ratio", "speedup", "ssim_gt",
            "acceptance_rate", "temperature", "tokens_per_s", "speedup_vs_hf", "exact_match", "target_calls")
    summary[name] = {"rows": [{k: r[k] for k in keep if k in r} for r in data.get("rows", [])],
                     "targets": data.get("targets")}
(out / "summary.json").write_text(json.dumps(summary, indent=2))
print(json.dumps({k: summary[k] for k in ("dry_run", "seconds", "return_codes", "tests")}, indent=2))
PY
[ "$TESTS_RC" = 0 ] && [ "$VIDEO_RC" = 0 ] && [ "$TEXT_RC" = 0 ]
