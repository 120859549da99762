#!/usr/bin/env bash
# A text model's first use as a new user meets it: `specvideo text` on an empty cache (the GGUF files
# present, as scripts/fetch_qwen_coder.sh leaves them; the kernel built into it by the README's install
# step, unless KERNEL=0), once for the code pair and once for the default SmolLM2, each then run
# a second time on the cache the first left. Per run: wall seconds, peak resident memory (GNU time)
# and what the run wrote under the cache (MB, the GGUF files and the kernel excluded).
#
#   scripts/first_use.sh [DIR]        (env: KERNEL=1 THREADS=2 TOKENS=32)
set -euo pipefail
DIR=${1:-runs/first_use}
KERNEL=${KERNEL:-1}
THREADS=${THREADS:-2}
TOKENS=${TOKENS:-32}
mkdir -p "$DIR"
SOURCE=$(python -c "from specvideo.paths import cache_root; print(cache_root())")
PROMPT="Give me a simple recipe for pancakes"
echo "| model | run | wall (s) | peak memory (MB) | written under the cache (MB) |" > "$DIR/first_use.md"
echo "|---|---|---:|---:|---:|" >> "$DIR/first_use.md"
for model in qwen-coder smollm2; do
  CACHE=$(mktemp -d)
  ln -s "$SOURCE/qwen-coder" "$CACHE/qwen-coder"
  if [ "$KERNEL" = 1 ]; then  # the README's install step, untimed
    SPECVIDEO_CACHE=$CACHE python -m specvideo.text.runtime.kernels > /dev/null
  fi
  args=(text --max-new-tokens "$TOKENS" --chat)
  if [ "$model" = qwen-coder ]; then args+=(--target qwen-coder); fi
  for run in first second; do
    before=$(du -sm --exclude=kernels --exclude=qwen-coder "$CACHE" | cut -f1)
    SPECVIDEO_CACHE=$CACHE OMP_NUM_THREADS=$THREADS /usr/bin/time -f "%e %M" -o "$DIR/time" \
      specvideo "${args[@]}" "$PROMPT" > "$DIR/$model-$run.txt" 2> "$DIR/$model-$run.err"
    after=$(du -sm --exclude=kernels --exclude=qwen-coder "$CACHE" | cut -f1)
    read -r wall kb < "$DIR/time"
    echo "| $model | $run | $wall | $((kb / 1024)) | $((after - before)) |" >> "$DIR/first_use.md"
  done
  rm -rf "$CACHE"
done
cat "$DIR/first_use.md"
