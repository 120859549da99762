# Sourced by the scripts/device_*.sh scripts: on a bare GPU machine with no network, installs the
# wheels in .whl/ (fetched beforehand by scripts/device_wheels.sh) beside the machine's torch, puts
# the repository on PYTHONPATH, and stops with exit 3 if a package is still missing.
# Needs NAME (the calling script's name, for messages) and OUT_DIR; run from the repo root. Sets
# START (the script's start, in seconds), PY (the python: $PYTHON or python3) and creates OUT_DIR.
START=$(date +%s)
PY="${PYTHON:-python3}"
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/specvideo-site .whl/*.whl \
        && export PYTHONPATH="$PYTHONPATH:/tmp/specvideo-site"
fi
"$PY" - <<'PY' || { echo "$NAME: missing packages (run scripts/device_wheels.sh where there is network)" >&2; exit 3; }
import importlib, sys
missing = [m for m in ("torch", "diffusers", "transformers", "cv2", "einops", "safetensors", "imageio_ffmpeg", "pytest")
           if importlib.util.find_spec(m) is None]
if missing:
    print("missing:", ", ".join(missing), file=sys.stderr)
    sys.exit(1)
PY
