#!/usr/bin/env bash
# Fetch, on a machine with network, the wheels that a bare GPU machine (Python 3.12, CUDA torch, no
# network) lacks for scripts/device_check.sh, into .whl/ (ignored by git; carry it to the machine).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d .whl diffusers imageio-ffmpeg scikit-video
