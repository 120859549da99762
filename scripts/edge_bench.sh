#!/usr/bin/env bash
# Drafting on the client, verifying on the server (#68): a server with one torch thread, the client
# (this script's bench) with the other, loopback with an added round trip of 0, 20 and 80 ms.
# Run it alone on the machine. VERIFY_ALONE=1 starts a server whose /v1/verify rounds never join
# the running batch (each is a target forward of its own, as before #68's batching): the baseline of
# `--load N`.
#   scripts/edge_bench.sh MODEL LOCAL_DRAFT [LABEL] [bench edge flags...]
#   scripts/edge_bench.sh smollm2 lookup "SmolLM2, prompt lookup on the client" --workload chat
#   scripts/edge_bench.sh qwen-coder ~/.cache/specvideo/qwen-coder/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf "code pair" --workload code
set -euo pipefail
MODEL=${1:?model}; DRAFT=${2:?local draft}; LABEL=${3:-$MODEL, $DRAFT}; shift $(( $# < 3 ? $# : 3 ))
PORT=${PORT:-8090}
URL=http://127.0.0.1:$PORT
mkdir -p runs/edge
if [ "${VERIFY_ALONE:-0}" = 1 ]; then
  OMP_NUM_THREADS=1 python -c "import sys; from specvideo.serve import verify; from specvideo.cli import main
verify.Turn.joinable = lambda self, run: False
sys.exit(main(['serve', '--model', sys.argv[1], '--port', sys.argv[2]]))" "$MODEL" "$PORT" >"runs/edge/server-$PORT.log" 2>&1 &
else
  OMP_NUM_THREADS=1 specvideo serve --model "$MODEL" --port "$PORT" >"runs/edge/server-$PORT.log" 2>&1 &
fi
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 600); do curl -sf "$URL/health" >/dev/null 2>&1 && break; sleep 1; done
curl -sf "$URL/health" >/dev/null || { echo "the server did not become healthy" >&2; cat "runs/edge/server-$PORT.log" >&2; exit 1; }
NAME=$(curl -s "$URL/v1/models" | python -c "import json,sys; print(json.load(sys.stdin)['data'][0]['id'])")
OMP_NUM_THREADS=1 specvideo bench edge --url "$URL" --model "$NAME" --local-draft "$DRAFT" --label "$LABEL" "$@"
