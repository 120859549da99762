#!/usr/bin/env bash
# The video rollout stage on a GPU machine, for a session that is lent one (docs/BENCHMARKS.md
# "Video" says why it is the open lever: the target drifts on its own frames on real crops). In at
# most MINUTES + 4 minutes (training is cut at MINUTES + 2, the export at 2 more):
#   1. installs what is missing (scripts/device_env.sh);
#   2. continues the shipped verifier (models/video/unet) with the rollout loss on longer unrolls at a
#      constant learning rate, `specvideo train video-rollout --device cuda`, for MINUTES (work dir
#      outside OUT_DIR: its checkpoint holds the optimiser state);
#   3. exports the pipeline (fp16, samples.png) into OUT_DIR/video and copies the training log, whose
#      evaluations are on the tuning split (rollout SSIM against the flow and copy drafters);
#   4. writes OUT_DIR/summary.json: return codes, minutes, steps, the first and last evaluation.
# Nothing here is committed: the session that runs it copies OUT_DIR/video/unet over models/video/unet
# (the export has no learned drafter), benchmarks it on the tuning split and decides (the issue's
# weight budget applies).
# Usage: scripts/device_train_video.sh [OUT_DIR] [--minutes M] [--dry-run]
#   --dry-run: two tiny steps on the CPU: checks the script itself.
set -uo pipefail
cd "$(dirname "$0")/.."

DRY=0
MINUTES=8
OUT_DIR="${OUT:-device_out}"
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) DRY=1 ;;
        --minutes) MINUTES="${2:?--minutes needs a number}"; shift ;;
        -*) echo "device_train_video: unknown option $1" >&2; exit 2 ;;
        *) OUT_DIR="$1" ;;
    esac
    shift
done
case "$MINUTES" in
    "" | *[!0-9]* | 0) echo "device_train_video: --minutes needs a whole number >= 1, got '$MINUTES'" >&2; exit 2 ;;
esac

# 1. install (scripts/device_env.sh: also START, PY and OUT_DIR)
NAME=device_train_video
. scripts/device_env.sh

# 2. train: longer unrolls (6 frames), a larger batch, a constant learning rate after the warm-up
WORK="${TMPDIR:-/tmp}/specvideo-rollout-$$"
if [ "$DRY" = 1 ]; then
    RECIPE=(--device cpu --steps 2 --unroll 2 --batch-size 2 --eval-every 1000 --max-minutes 5)
else
    RECIPE=(--device cuda --steps 1000000 --unroll 6 --batch-size 32 --eval-every 250 --max-minutes "$MINUTES")
fi
timeout $(( (MINUTES + 2) * 60 )) "$PY" -m specvideo.cli train video-rollout --init models/video/unet --work "$WORK" \
    --lr 5e-5 --min-lr-ratio 1 "${RECIPE[@]}" >"$OUT_DIR/train.log" 2>&1
TRAIN_RC=$?
cp "$WORK/rollout/log.jsonl" "$OUT_DIR/log.jsonl" 2>/dev/null

# 3. export (the training config rides along in OUT_DIR/video/training_config.json)
timeout 120 "$PY" -m specvideo.cli train video-export --work "$WORK" --out "$OUT_DIR/video" \
    >"$OUT_DIR/export.log" 2>&1
EXPORT_RC=$?
rm -rf "$WORK"

# 4. summary
"$PY" - "$OUT_DIR" "$DRY" "$TRAIN_RC" "$EXPORT_RC" "$(( $(date +%s) - START ))" <<'PY'
import json, sys
from pathlib import Path

out, dry, train_rc, export_rc, seconds = Path(sys.argv[1]), sys.argv[2] == "1", *map(int, sys.argv[3:])
records = []
if (out / "log.jsonl").is_file():
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if line.strip()]
evals = [r for r in records if len(r) > 3]
summary = {
    "dry_run": dry, "seconds": seconds, "return_codes": {"train": train_rc, "export": export_rc},
    "steps": records[-1]["step"] if records else 0, "minutes": records[-1]["minutes"] if records else 0,
    "first_eval": evals[0] if evals else None, "last_eval": evals[-1] if evals else None,
    "exported": (out / "video" / "unet").is_dir(),
}
(out / "summary.json").write_text(json.dumps(summary, indent=2))
print(json.dumps(summary, indent=2))
PY
[ "$TRAIN_RC" = 0 ] && [ "$EXPORT_RC" = 0 ]
