#!/usr/bin/env bash
# The replicas' load test: a local Ray cluster, 2 replicas of the default model (smollm2) with one
# thread each, loopback only, bounded in requests and time. Run it alone on the machine.
#   1. Load and a killed replica: `specvideo bench serve --seeded` (waves of 1, 2, 4, 8 streaming
#      chat clients, then a flood of FLOOD requests at once; every second request sampled with a
#      seed) on replicas batching 16 rows each (so that at least 8 streams are mid-way when one dies), while one replica is killed KILL_AFTER s in: every
#      request must be answered or refused with 429; the streams the dead replica was sending are
#      replayed on the other and must end whole. Every answer is then sent again to a single server
#      of the same model (one thread, as a replica) and compared; the entry's replay series follow.
#   2. Prefix routing against Serve's load routing: the team editor replay (8 files typed in turn)
#      once per routing, with each replica's prompt cache sized by rule to hold its share of the
#      files (files / replicas prompts of the largest edit) and once more per routing with the
#      default 512 MB (room for every file on every replica).
# Usage: scripts/replica_load_test.sh [REPORT]   (default docs/SCALING.md; PARTS="load team" picks parts)
set -euo pipefail
REPORT=${1:-docs/SCALING.md}
PARTS=${PARTS:-load team}
TEAM=(--files 8 --edits 6 --context-tokens 1000 --n-predict 16)  # fixed before any run
PORT=${PORT:-8071}
SINGLE_PORT=${SINGLE_PORT:-8072}
FLOOD=${FLOOD:-100}
KILL_AFTER=${KILL_AFTER:-25}
OUT=runs/replicas
mkdir -p "$OUT"
URL=http://127.0.0.1:$PORT

start() {  # $@: extra serve flags
  specvideo serve --replicas 2 --replica-threads 1 --port "$PORT" "$@" >"$OUT/server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 300); do
    curl -sf "$URL/health" >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "the server did not become healthy" >&2; cat "$OUT/server.log" >&2; exit 1
}
stop() { kill -TERM "$SERVER"; wait "$SERVER" || true; }  # SIGINT is ignored by background jobs
healthy() {  # $1: URL
  for _ in $(seq 300); do curl -sf "$1/health" >/dev/null 2>&1 && return 0; sleep 1; done
  echo "$1 did not become healthy" >&2; exit 1
}

kill_one_replica() {  # a SIGKILL-like end of one engine replica's process, through Ray
  python - <<'PY'
import ray
ray.init(address="auto", log_to_driver=False, logging_level="ERROR")
names = sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if "#specvideo#" in a["name"])
ray.kill(ray.get_actor(names[0], namespace="serve"), no_restart=True)
print("killed", names[0], flush=True)
PY
}

# 1. load and a killed replica
if [[ " $PARTS " == *" load "* ]]; then
OMP_NUM_THREADS=1 specvideo serve --port "$SINGLE_PORT" >"$OUT/single.log" 2>&1 &  # idle until the comparison
SINGLE=$!
healthy "http://127.0.0.1:$SINGLE_PORT"
start --routing prefix --max-batch 16
(sleep "$KILL_AFTER"; kill_one_replica) >"$OUT/kill.log" 2>&1 &
KILLER=$!
specvideo bench serve --url "$URL/v1" --concurrency 1,2,4,8 --repeats 2 --max-tokens 16,32,64 --seeded \
  --flood "$FLOOD" --compare "http://127.0.0.1:$SINGLE_PORT/v1" \
  --label "2 replicas on Ray Serve, one killed ${KILL_AFTER} s in" --report "$REPORT" --json >"$OUT/load.json"
wait "$KILLER"; cat "$OUT/kill.log"
python - "$OUT/load.json" <<'PY'  # every request that did not get its answer, by what it was told
import collections, json, sys
for wave in json.load(open(sys.argv[1])):
    told = collections.Counter((r["error"] or "")[:120] for r in wave["requests_detail"] if not r["ok"])
    differ = [r["prompt"][:40] for r in wave["requests_detail"] if r["single"] is False]
    print(wave["concurrency"], {k: v for k, v in wave.items() if k != "requests_detail"}, dict(told), "differ:", differ)
PY
curl -s "$URL/metrics" | grep "^specvideo_entry_" | tee "$OUT/entry-metrics.txt"
grep -c "replica lost" "$OUT/server.log" || true
stop
kill -TERM "$SINGLE"; wait "$SINGLE" || true
fi
[[ " $PARTS " == *" team "* ]] || exit 0

# 2. the team editor replay, prefix against load routing
SHARE_MB=$(python - <<'PY'
import math
from benchmarks.serve_team import TeamReplayConfig, team_steps
from specvideo.serve.settings import ServeSettings, load_generator
from specvideo.text.runtime.prompt_cache import PromptCache
gen = load_generator(ServeSettings())
config = TeamReplayConfig(files=8, edits=6, context_tokens=1000)  # as TEAM above
prompts = [gen.tokenizer(prefix)["input_ids"] for per in team_steps(config).values() for prefix, _ in per]
gen.prompt_cache = PromptCache(2**30)  # the bytes one cached token takes, as the server stores it
gen.generate(prompts[0], max_new_tokens=1)
entry = next(iter(gen.prompt_cache.entries.values()))
per_token = entry.nbytes / len(entry.ids)
print(math.ceil(config.files / 2 * max(map(len, prompts)) * per_token / 2**20))
PY
)
echo "prompt cache per replica by rule: $SHARE_MB MB"
for cache in "$SHARE_MB" 512; do
  for routing in prefix load; do
    start --routing "$routing" --prompt-cache-mb "$cache"
    specvideo bench serve --team "${TEAM[@]}" --url "$URL" --label "$routing routing, ${cache} MB prompt cache per replica" \
      --report "$REPORT" | tee "$OUT/team-$routing-$cache.md"
    stop
  done
done
