#!/usr/bin/env bash
# The video sampler stage on a GPU machine, for a session that is lent one (the sampler needs far
# more steps than the CPU budget gives). In at most MINUTES + 4 minutes (training is cut at
# MINUTES + 2, the export at 2 more):
#   1. installs what is missing (scripts/device_env.sh);
#   2. continues the committed resume point (models/video-sampler-resume; the shipped
#      models/video/unet when there is none) with `specvideo train video-sampler --device cuda`, 128x
#      the CPU recipe's pixels per step, for MINUTES (work dir outside OUT_DIR: its checkpoint holds
#      the optimiser state);
#   3. writes a new compact resume point into OUT_DIR/resume, exports the pipeline (fp16,
#      samples.png) into OUT_DIR/video and copies the training log, whose evaluations are on the
#      tuning split (x0 error, SSIM and sharpness of frames generated with N = 1..16);
#   4. writes OUT_DIR/summary.json: return codes, minutes, steps, the first and last evaluation.
# Nothing here is committed: the session that runs it benchmarks OUT_DIR/video on the tuning split,
# and commits OUT_DIR/resume over models/video-sampler-resume (the issue's weight budget applies).
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

# 2. train: from the committed resume point, more pixels per step, a constant learning rate
WORK="${TMPDIR:-/tmp}/specvideo-sampler-$$"
START_FROM=(--init models/video/unet)  # this checkout's, whatever SPECVIDEO_MODELS says
[ -f models/video-sampler-resume/resume.json ] && START_FROM=(--resume-from models/video-sampler-resume)
if [ "$DRY" = 1 ]; then
    RECIPE=(--device cpu --steps 2 --pixels-per-batch 8192 --eval-every 1000 --max-minutes 5)
    START_FROM=(--init models/video/unet)  # the dry run trains two steps from the shipped UNet
else
    RECIPE=(--device cuda --steps 1000000 --pixels-per-batch 524288 --eval-every 250 --max-minutes "$MINUTES")
fi
timeout $(( (MINUTES + 2) * 60 )) "$PY" -m specvideo.cli train video-sampler --work "$WORK" "${START_FROM[@]}" \
    --lr 5e-5 --min-lr-ratio 1 "${RECIPE[@]}" >"$OUT_DIR/train.log" 2>&1
TRAIN_RC=$?
cp "$WORK/sampler/log.jsonl" "$OUT_DIR/log.jsonl" 2>/dev/null

# 3. a resume point, then the export (the training config rides along in OUT_DIR/video/training_config.json)
"$PY" -m specvideo.cli train video-sampler --work "$WORK" --write-resume-point "$OUT_DIR/resume" \
    >>"$OUT_DIR/train.log" 2>&1
mkdir -p "$WORK/drafter" && cp -r models/video/drafter "$WORK/drafter/model"
EXPORT=(--sampler ddpm)  # the shipped sampler's scheduler (models/video/README.md)
[ "$DRY" = 1 ] && EXPORT+=(--grid-frames 2)  # a tiny samples.png: the 32-frame one takes minutes on a CPU
timeout 120 "$PY" -m specvideo.cli train video-export --work "$WORK" --out "$OUT_DIR/video" "${EXPORT[@]}" \
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
