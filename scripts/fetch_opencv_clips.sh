#!/usr/bin/env bash
# Fetch the OpenCV sample clips that Debian's opencv-doc package ships (vtest.avi, Megamind.avi,
# tree.avi) into specvideo's data cache, without installing the package: `apt-get download` the
# .deb, extract only the three clips and Debian's copyright file. Real training / tuning / held-out
# video for the video models (specvideo/video/real.py splits each clip by time). Run once; nothing
# downloads at run time, and the default test run does not need these files.
#
#   scripts/fetch_opencv_clips.sh            # -> ${SPECVIDEO_CACHE:-~/.cache/specvideo}/video-data/opencv
set -euo pipefail
DEST="${SPECVIDEO_CACHE:-$HOME/.cache/specvideo}/video-data/opencv"
CLIPS=(vtest.avi Megamind.avi tree.avi)
if [ -n "${1:-}" ]; then echo "usage: $0  (no arguments; SPECVIDEO_CACHE moves the cache)" >&2; exit 2; fi
have=1
for c in "${CLIPS[@]}"; do [ -s "$DEST/$c" ] || have=0; done
if [ "$have" = 1 ]; then echo "already fetched: $DEST"; exit 0; fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
if ! apt-get download opencv-doc >/dev/null 2>apt.err; then
    echo "error: 'apt-get download opencv-doc' failed (needs Debian's package index: apt-get update):" >&2
    cat apt.err >&2
    exit 1
fi
DATA=./usr/share/doc/opencv-doc/examples/data
dpkg-deb --fsys-tarfile opencv-doc_*.deb | tar -x \
    "$DATA/vtest.avi" "$DATA/Megamind.avi" "$DATA/tree.avi" ./usr/share/doc/opencv-doc/copyright
mkdir -p "$DEST.tmp"
for c in "${CLIPS[@]}"; do
    [ -s "$DATA/$c" ] || { echo "error: $c is missing from the opencv-doc package" >&2; exit 1; }
    cp "$DATA/$c" "$DEST.tmp/$c"
done
cp ./usr/share/doc/opencv-doc/copyright "$DEST.tmp/copyright"
dpkg-deb -f opencv-doc_*.deb Version > "$DEST.tmp/VERSION"
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
echo "fetched ${CLIPS[*]} (opencv-doc $(cat "$DEST/VERSION")) into $DEST"
