"""What real users hit with outputs and damaged inputs: no output path may replace an input or
another output (relative paths, '..' and symlinks included), nothing the user had is lost, a file
that decodes fewer frames than its header lists is continued with a warning when the context
decodes, and files written temp-then-rename get the mode a plain write would."""

import json
import os
import stat

import cv2
import numpy as np
import pytest

from specvideo.cli import main
from specvideo.files import atomic_write, clashing_outputs
from specvideo.video.io import read_context, read_video, write_video

FAST = ["--num-frames", "2", "--steps", "2"]


@pytest.fixture(scope="module")
def models(tiny_models):
    return tiny_models  # the session's tiny models (tests/conftest.py)


@pytest.fixture
def clip(tmp_path):
    path = tmp_path / "clip.mp4"
    write_video(np.random.default_rng(0).integers(0, 256, (4, 16, 24, 3), dtype=np.uint8), path, fps=10)
    return path


def run(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("how", ["same", "relative", "dotdot", "symlink"])
def test_video_out_equal_to_the_input_is_refused(how, models, clip, tmp_path, capsys, monkeypatch):
    before = clip.read_bytes()
    monkeypatch.chdir(tmp_path)
    out = {
        "same": clip,
        "relative": "clip.mp4",
        "dotdot": tmp_path / "sub" / ".." / "clip.mp4",
        "symlink": tmp_path / "link.mp4",
    }[how]
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.mp4").symlink_to(clip)
    code, err = run(capsys, "video", clip, "--out", out, "--model", models / "video", *FAST)
    assert code == 2 and err.count("\n") == 1
    assert f"--out {out} is the input {clip}" in err and "replace the input" in err
    assert clip.read_bytes() == before


def test_side_by_side_equal_to_out_is_refused(models, clip, tmp_path, capsys):
    out = tmp_path / "out.mp4"
    out.write_bytes(b"an earlier result")
    code, err = run(
        capsys,
        "video",
        clip,
        "--out",
        out,
        "--side-by-side",
        tmp_path / "." / "out.mp4",
        "--model",
        models / "video",
    )
    assert code == 2 and "--side-by-side" in err and "--out" in err and "same file" in err
    assert out.read_bytes() == b"an earlier result"


def test_batch_video_into_its_own_input_folder_is_refused(models, clip, tmp_path, capsys):
    before = clip.read_bytes()
    code, err = run(
        capsys, "batch", "video", tmp_path, "--out-dir", tmp_path, "--model", models / "video", *FAST
    )
    assert code == 2 and f"the output of {clip}" in err and "is the input" in err
    assert clip.read_bytes() == before and not (tmp_path / "manifest.jsonl").exists()


def test_batch_text_results_over_the_prompts_is_refused(models, tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "def f(x):"}\n')
    code, err = run(
        capsys, "batch", "text", prompts, "--out", prompts, "--target", models / "text" / "target"
    )
    assert code == 2 and "the results file" in err and "is the input" in err
    assert prompts.read_text() == '{"prompt": "def f(x):"}\n'


def test_clashing_outputs_names_both_paths(tmp_path):
    a, b = tmp_path / "a.mp4", tmp_path / "b.mp4"
    a.write_bytes(b"x")
    os.link(a, b)  # a hard link is the same file too
    assert "is the input" in clashing_outputs({"--out": str(b)}, [str(a)])
    assert "same file" in clashing_outputs(
        {"--out": str(tmp_path / "c.mp4"), "--sbs": str(tmp_path / "c.mp4")}
    )
    assert clashing_outputs({"--out": str(tmp_path / "c.mp4")}, [str(a)]) is None


def short_avi(path, frames: int = 20, keep: float = 0.6):
    """An MJPEG AVI whose header lists ``frames`` frames, cut so that only about 60 % decode."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (24, 16))
    rng = np.random.default_rng(0)
    for _ in range(frames):
        writer.write(rng.integers(0, 256, (16, 24, 3), dtype=np.uint8))
    writer.release()
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def test_a_short_file_is_continued_with_a_warning(models, tmp_path, capsys):
    path = short_avi(tmp_path / "short.avi")
    clip = read_context(path, 2, 256)
    assert clip.short and clip.listed == 20 and 2 < clip.decoded < 20
    out = tmp_path / "out.mp4"
    code, err = run(capsys, "video", path, "--out", out, "--model", models / "video", *FAST)
    assert code == 0
    warning = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and f"{clip.decoded} of the 20 frames" in warning[0]
    assert read_video(out).frames.shape == (2, 16, 24, 3)


def test_a_short_file_without_the_context_is_refused_with_both_counts(tmp_path, capsys, models):
    path = short_avi(tmp_path / "tiny.avi", frames=20, keep=0.4)  # 1 of 20 decodes
    decoded = read_video(path, strict=False).num_frames
    assert decoded < 2
    code, err = run(capsys, "video", path, "--out", tmp_path / "o.mp4", "--model", models / "video", *FAST)
    assert code == 2 and f"has {decoded} frame(s) (its metadata lists 20)" in err


def test_batch_rows_carry_the_short_file_warning(models, tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    short_avi(folder / "short.avi")
    code, err = run(
        capsys, "batch", "video", folder, "--out-dir", tmp_path / "out", "--model", models / "video", *FAST
    )
    assert code == 0 and "warning:" in err and "of the 20 frames" in err
    row = json.loads((tmp_path / "out" / "manifest.jsonl").read_text().splitlines()[0])
    assert row["status"] == "ok" and "of the 20 frames" in row["warning"]


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_atomic_writes_get_the_plain_mode(tmp_path, umask_022):
    path = tmp_path / "results.jsonl"
    atomic_write(path, lambda f: f.write("{}\n"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    path.chmod(0o600)  # an existing file keeps its own mode
    atomic_write(path, lambda f: f.write("{}\n"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_batch_manifest_and_results_have_the_umask_mode(models, clip, tmp_path, capsys, umask_022):
    code, _ = run(
        capsys, "batch", "video", clip, "--out-dir", tmp_path / "out", "--model", models / "video", *FAST
    )
    assert code == 0 and stat.S_IMODE((tmp_path / "out" / "manifest.jsonl").stat().st_mode) == 0o644
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "def f(x):", "max_new_tokens": 2}\n')
    results = tmp_path / "results.jsonl"
    code, _ = run(
        capsys, "batch", "text", prompts, "--out", results, "--target", models / "text" / "target", "--ngram"
    )
    assert code == 0 and stat.S_IMODE(results.stat().st_mode) == 0o644
