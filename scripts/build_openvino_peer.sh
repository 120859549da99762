#!/usr/bin/env bash
# Make the OpenVINO GenAI peer once, for `specvideo bench text --methods ...,openvino` (a baseline,
# never a runtime need): a virtual environment of its own with openvino-genai and optimum-intel
# (torch's CPU wheel first, so nothing pulls a CUDA build), and int4 exports of the code pair's
# local bf16 weights (the directories `specvideo` converts from the GGUF files of
# scripts/fetch_qwen_coder.sh on first use), each with its tokenizer saved beside it. The
# venv does not see this project's site-packages (their diffusers breaks optimum-intel's import).
# About 10 min on 2 cores (install ~3, the 1.5B export ~5, the 0.5B ~2); a second run with the
# exports in place does nothing.
#
#   scripts/build_openvino_peer.sh   # -> <cache>/openvino/{venv,qwen2.5-coder-1.5b-int4,qwen2.5-coder-0.5b-int4}
set -euo pipefail
CACHE="${SPECVIDEO_CACHE:-$HOME/.cache/specvideo}"
DEST="$CACHE/openvino"
PY="${PYTHON:-python3}"
if [ -n "${1:-}" ]; then echo "usage: $0  (no arguments; SPECVIDEO_CACHE moves the cache)" >&2; exit 2; fi
if [ -f "$DEST/qwen2.5-coder-1.5b-int4/openvino_model.xml" ] && [ -f "$DEST/qwen2.5-coder-0.5b-int4/openvino_model.xml" ]; then
  echo "already made: $DEST"; exit 0
fi
mkdir -p "$DEST"
if [ ! -x "$DEST/venv/bin/python" ]; then
  "$PY" -m venv "$DEST/venv"
  "$DEST/venv/bin/pip" install -q torch==2.13.0
  "$DEST/venv/bin/pip" install -q -c <(echo torch==2.13.0) openvino-genai "optimum-intel[openvino]" nncf
  "$DEST/venv/bin/pip" uninstall -y -q torchvision || true  # built for another torch: breaks the import
fi
for size in 1.5b 0.5b; do
  out="$DEST/qwen2.5-coder-$size-int4"
  [ -f "$out/openvino_model.xml" ] && continue
  stage="$(mktemp -d)"
  # the converted bf16 directory (made on first use) and its tokenizer, as specvideo loads them
  "$PY" - "$size" "$stage" <<'PYEOF'
import os, shutil, sys
from specvideo.text.models.loading import load_tokenizer
from specvideo.text.models.names import resolve_model
choice = resolve_model("qwen-coder", "bfloat16")
src = choice.target if sys.argv[1] == "1.5b" else choice.draft
for name in ("config.json", "generation_config.json"):  # copies: save_pretrained must not write into src
    shutil.copy(os.path.join(src, name), sys.argv[2])
os.symlink(os.path.join(src, "model.safetensors"), os.path.join(sys.argv[2], "model.safetensors"))
load_tokenizer(str(src)).save_pretrained(sys.argv[2])
PYEOF
  "$DEST/venv/bin/optimum-cli" export openvino --model "$stage" --task text-generation-with-past --weight-format int4 "$out.tmp"
  mv "$out.tmp" "$out"
  rm -rf "$stage"
done
echo "made: $DEST"
