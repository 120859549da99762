#!/usr/bin/env bash
# An editor's /infill against `specvideo serve` and llama.cpp's llama-server on the same GGUF file,
# one server at a time, each started fresh (cold), 2 threads each: `specvideo bench serve --editor`
# replays the same typed file against both and writes each server's "Editor replay" report into DIR
# (specvideo.md, llama-server.md).
#
#   scripts/editor_first_token.sh [DIR]        (env: CONTEXT=2000 EDITS=5 N_PREDICT=16)
#
# Needs scripts/fetch_qwen_coder.sh (the GGUF files) and scripts/build_llama_cpp.sh (llama-server).
set -euo pipefail
DIR=${1:-runs/editor_first_token}
CONTEXT=${CONTEXT:-2000}
EDITS=${EDITS:-5}
N_PREDICT=${N_PREDICT:-16}
mkdir -p "$DIR"
GGUF=$(python -c "from specvideo.text.models.names import _qwen_coder_files; print(_qwen_coder_files()[0])")
LLAMA=$(python -c "from benchmarks.text.llama_cpp import binary; print(binary('llama-server'))")
PORT=$(python -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
PID=
stop() { if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; PID=; fi; }
trap stop EXIT

wait_ready() {  # GET /health until 200 (the model loaded), at most 10 minutes
  for _ in $(seq 1 1200); do
    if python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=2).status != 200)" 2>/dev/null; then
      return 0
    fi
    kill -0 "$PID" 2>/dev/null || { echo "the server exited" >&2; return 1; }
    sleep 0.5
  done
  echo "the server did not get ready" >&2
  return 1
}

replay() {  # $1: report name
  specvideo bench serve --editor --url "http://127.0.0.1:$PORT/v1" --context-tokens "$CONTEXT" \
    --edits "$EDITS" --n-predict "$N_PREDICT" --report "$DIR/$1.md"
}

OMP_NUM_THREADS=2 specvideo serve --model qwen-coder --port "$PORT" &
PID=$!
wait_ready
replay specvideo
stop

"$LLAMA" -m "$GGUF" --host 127.0.0.1 --port "$PORT" -t 2 -tb 2 -c 4096 -np 1 --no-webui >/dev/null 2>&1 &
PID=$!
wait_ready
replay llama-server
stop
echo "wrote $DIR/specvideo.md and $DIR/llama-server.md"
