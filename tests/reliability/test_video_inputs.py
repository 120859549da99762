"""Bad-input matrix for video, through the Python API and ``specvideo video`` (docs/RELIABILITY.md).

Every failure is a specific exception (a ValueError subclass, or FileNotFoundError for a missing
file) whose message names the problem; the CLI prints one line on stderr, exits 2 and leaves an
existing file at ``--out`` as it was. Inputs that are odd but valid (grayscale, RGBA, odd or huge
sizes, long clips, broken frame-rate metadata) must work on both surfaces.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from diffusers import UNet2DModel

from specvideo.cli import main
from specvideo.video import io as video_io
from specvideo.video.config import VIDEO_DEFAULTS
from specvideo.video.drafters import LearnedDrafter, LinearDrafter
from specvideo.video.io import DEFAULT_FPS, VideoReadError, read_video, write_video
from specvideo.video.pipeline import SpeculativeVideoPipeline
from specvideo.video.verifier import DiffusionVerifier
from tests.video.test_io import ffmpeg, smooth_frames
from tests.video.test_pipeline import SIZE, P, context_uint8, tiny_unet

KEEP = b"an earlier result that a failed run must not clobber"
FAST = ["--num-frames", "2", "--steps", "2"]


# ---------------------------------------------------------------------------------------- fixtures


def tiny_pipeline(num_context_frames: int = P, drafter=None) -> SpeculativeVideoPipeline:
    config = dict(tiny_unet().config, in_channels=3 * (num_context_frames + 1))
    torch.manual_seed(0)
    unet = UNet2DModel.from_config(config).eval()
    return SpeculativeVideoPipeline(DiffusionVerifier(unet), drafter or LinearDrafter())


@pytest.fixture(scope="module")
def pipe():
    return tiny_pipeline()


@pytest.fixture(scope="module")
def model_dir(pipe, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("model") / "pipe"
    pipe.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    """A real 6-frame H.264 MP4, the source of the truncated case and the CLI's input elsewhere."""
    return write_video(smooth_frames(6), tmp_path_factory.mktemp("clip") / "clip.mp4", fps=10)


@pytest.fixture
def out(tmp_path) -> Path:
    """An existing output file, alone in its own directory."""
    path = tmp_path / "out" / "result.mp4"
    path.parent.mkdir()
    path.write_bytes(KEEP)
    return path


def cli(capsys, *argv) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exit:  # argparse's own usage errors
        code = exit.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_cli_error(code: int, err: str, message: str) -> None:
    assert code == 2, err
    assert err.startswith("specvideo: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert message in err, err


def assert_untouched(out: Path) -> None:
    assert out.read_bytes() == KEEP
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temporary or partial file


def api_continue(pipe: SpeculativeVideoPipeline, path: Path, num_frames: int = 2):
    """The API path the CLI takes: the last P frames, downscaled on decode, then the pipeline."""
    clip = read_video(
        path,
        max_frames=pipe.verifier.num_context_frames,
        from_end=True,
        max_side=VIDEO_DEFAULTS.max_side,
    )
    out = pipe(
        clip.frames,
        num_frames=num_frames,
        num_inference_steps=2,
        generator=torch.Generator().manual_seed(0),
        progress=False,
    )
    return clip, out


# ------------------------------------------------------------------------------ bad video files


@dataclass(frozen=True)
class BadFile:
    id: str
    make: Callable[[Path, Path], Path]  # (tmp_path, a real clip) -> the bad input
    error: type[Exception]
    api_message: str
    cli_message: str | None = None  # default: the API's


def _write(name: str, data: bytes) -> Callable[[Path, Path], Path]:
    def make(tmp: Path, clip: Path) -> Path:
        (tmp / name).write_bytes(data)
        return tmp / name

    return make


def _truncated(tmp: Path, clip: Path) -> Path:
    data = clip.read_bytes()
    (tmp / "cut.mp4").write_bytes(data[: int(len(data) * 0.6)])
    return tmp / "cut.mp4"


def _directory(tmp: Path, clip: Path) -> Path:
    (tmp / "folder.mp4").mkdir()
    return tmp / "folder.mp4"


def _one_frame(tmp: Path, clip: Path) -> Path:
    return write_video(smooth_frames(1), tmp / "single.mp4", fps=10)


BAD_FILES = [
    BadFile("missing", lambda tmp, clip: tmp / "missing.mp4", FileNotFoundError, "video file not found"),
    BadFile("zero-bytes", _write("empty.mp4", b""), VideoReadError, "cannot open as a video"),
    BadFile(
        "text-named-mp4",
        _write("notes.mp4", b"this is not a video\n" * 20),
        VideoReadError,
        "cannot open as a video",
    ),
    BadFile("truncated-mp4", _truncated, VideoReadError, "truncated or corrupt file"),
    BadFile("directory", _directory, VideoReadError, "not a regular file"),
    BadFile(
        "one-frame",
        _one_frame,
        ValueError,
        "the model conditions on 2 context frames, got 1",
        "has 1 frame(s); the model needs 2 context frames",
    ),
]


@pytest.mark.parametrize("case", BAD_FILES, ids=lambda c: c.id)
def test_api_rejects_bad_file(case, pipe, clip, tmp_path):
    with pytest.raises(case.error) as info:
        api_continue(pipe, case.make(tmp_path, clip))
    assert case.api_message in str(info.value)
    assert case.error is FileNotFoundError or isinstance(info.value, ValueError)


@pytest.mark.parametrize("case", BAD_FILES, ids=lambda c: c.id)
def test_cli_rejects_bad_file(case, model_dir, clip, tmp_path, out, capsys):
    source = case.make(tmp_path, clip)
    code, stdout, err = cli(capsys, "video", source, "--out", out, "--model", model_dir, *FAST)
    assert_cli_error(code, err, case.cli_message or case.api_message)
    assert source.name in err and stdout == ""
    assert_untouched(out)


def test_fewer_frames_than_the_context_needs(tmp_path, out, capsys):
    pipe3 = tiny_pipeline(num_context_frames=3)
    pipe3.save_pretrained(tmp_path / "model3")
    source = write_video(smooth_frames(2), tmp_path / "two.mp4", fps=10)
    with pytest.raises(ValueError, match="the model conditions on 3 context frames, got 2"):
        api_continue(pipe3, source)
    code, _, err = cli(capsys, "video", source, "--out", out, "--model", tmp_path / "model3", *FAST)
    assert_cli_error(code, err, "two.mp4 has 2 frame(s); the model needs 3 context frames")
    assert_untouched(out)


# ------------------------------------------------------------------ odd but valid video files


@dataclass(frozen=True)
class GoodFile:
    id: str
    make: Callable[[Path], Path]
    decoded_size: tuple[int, int]  # (H, W) after read_video's downscaling
    fps: float


def _lavfi(name: str, size: str, *args: str, rate: int = 10, frames: int = 3) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        source = ["-f", "lavfi", "-i", f"testsrc=size={size}:rate={rate}"]
        ffmpeg(*source, "-frames:v", str(frames), *args, str(tmp / name))
        return tmp / name

    return make


H264 = ["-c:v", "libx264", "-pix_fmt", "yuv420p"]
GOOD_FILES = [
    GoodFile("grayscale", _lavfi("gray.mkv", "64x48", "-pix_fmt", "gray", "-c:v", "ffv1"), (48, 64), 10),
    GoodFile("rgba", _lavfi("rgba.mov", "64x48", "-pix_fmt", "rgba", "-c:v", "png"), (48, 64), 10),
    GoodFile("odd-97x61", _lavfi("odd.mkv", "97x61", "-pix_fmt", "rgb24", "-c:v", "ffv1"), (61, 97), 10),
    GoodFile("huge-3840x2160", _lavfi("huge.mp4", "3840x2160", *H264), (180, 320), 10),
    GoodFile("long-600-frames", _lavfi("long.mp4", "48x32", *H264, rate=25, frames=600), (32, 48), 25),
    GoodFile("raw-h264-no-fps", _lavfi("raw.h264", "64x48", *H264, "-f", "h264"), (48, 64), DEFAULT_FPS),
]


@pytest.fixture(scope="module")
def good_files(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("good")
    return {case.id: case.make(tmp) for case in GOOD_FILES}


@pytest.mark.parametrize("case", GOOD_FILES, ids=lambda c: c.id)
def test_api_handles_odd_file(case, pipe, good_files):
    clip, out = api_continue(pipe, good_files[case.id])
    assert clip.size == case.decoded_size and clip.num_frames == P
    assert clip.fps == pytest.approx(case.fps)
    assert out.frames.shape == (2, *case.decoded_size, 3) and out.frames.dtype == np.uint8


@pytest.mark.parametrize("case", GOOD_FILES, ids=lambda c: c.id)
def test_cli_handles_odd_file(case, model_dir, good_files, out, capsys):
    code, stdout, err = cli(capsys, "video", good_files[case.id], "--out", out, "--model", model_dir, *FAST)
    assert code == 0, err
    written = read_video(out)
    even = tuple(side + side % 2 for side in case.decoded_size)  # H.264 yuv420p pads odd sides
    assert written.frames.shape == (2, *even, 3) and written.fps == pytest.approx(case.fps)


def test_long_video_keeps_only_the_last_frames(good_files):
    path = good_files["long-600-frames"]
    every = read_video(path).frames
    last = read_video(path, max_frames=P, from_end=True)
    assert every.shape[0] == 600
    np.testing.assert_array_equal(last.frames, every[-P:])


def test_huge_frames_are_downscaled_on_decode(good_files):
    path = good_files["huge-3840x2160"]
    assert read_video(path, max_side=100).size == (56, 100)  # aspect kept
    assert read_video(path, max_side=5000).size == (2160, 3840)  # never upscaled
    with pytest.raises(ValueError, match="max_side must be >= 1 or None, got 0"):
        read_video(path, max_side=0)


class _NanFpsCapture:
    """A real capture whose container reports a NaN frame rate."""

    def __init__(self, path: str):
        self._capture = _REAL_CAPTURE(path)

    def get(self, prop: int) -> float:
        return math.nan if prop == cv2.CAP_PROP_FPS else self._capture.get(prop)

    def __getattr__(self, name: str):
        return getattr(self._capture, name)


_REAL_CAPTURE = cv2.VideoCapture


def test_nan_fps_metadata_falls_back_on_both_surfaces(model_dir, clip, out, monkeypatch, capsys):
    monkeypatch.setattr(video_io.cv2, "VideoCapture", _NanFpsCapture)
    assert read_video(clip).fps == DEFAULT_FPS
    code, _, err = cli(capsys, "video", clip, "--out", out, "--model", model_dir, *FAST)
    monkeypatch.undo()
    assert code == 0, err
    assert read_video(out).fps == pytest.approx(DEFAULT_FPS)


# ------------------------------------------------------------------ pipeline parameters (CLI)

BAD_FLAGS = [
    (["--num-frames", "0"], "num_frames must be an integer >= 1, got 0"),
    (["--num-frames", "-3"], "num_frames must be an integer >= 1, got -3"),
    (["--num-frames", "two"], "argument --num-frames: invalid int value: 'two'"),
    (["-k", "0"], "num_draft_frames must be an integer >= 1, got 0"),
    (["--threshold", "nan"], "threshold must be a number (+/-inf allowed), got nan"),
    (["--strength", "0"], "strength must be in (0, 1], got 0.0"),
    (["--strength", "-0.5"], "strength must be in (0, 1], got -0.5"),
    (["--strength", "1.5"], "strength must be in (0, 1], got 1.5"),
    (["--strength", "nan"], "strength must be in (0, 1], got nan"),
    (["--steps", "0"], "num_inference_steps must be an integer >= 1, got 0"),
    (["--refine-steps", "0"], "num_refine_steps must be an integer >= 1, got 0"),
    (["--check-center", "0"], "check_center must be a number > 0 (inf: a one-sided check), got 0.0"),
    (["--check-levels", "100,1000"], "check_levels must be noise levels t in [0, 1000), got (100, 1000)"),
]


@pytest.mark.parametrize("flags,message", BAD_FLAGS, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_cli_rejects_bad_parameter(flags, message, model_dir, clip, out, capsys):
    code, stdout, err = cli(capsys, "video", clip, "--out", out, "--model", model_dir, *FAST, *flags)
    if "invalid int value" in message:  # argparse's own one-line usage error
        assert code == 2 and err.count("\n") == 1 and message in err and "Traceback" not in err
    else:
        assert_cli_error(code, err, message)
    assert stdout == ""
    assert_untouched(out)


@pytest.mark.parametrize("threshold,accepted", [("inf", "none"), ("-inf", "all")])
def test_cli_infinite_threshold_accepts_none_or_all(threshold, accepted, model_dir, clip, out, capsys):
    # "--threshold=-inf": argparse reads a separate "-inf" as an option name, not a value
    code, stdout, err = cli(
        capsys, "video", clip, "--out", out, "--model", model_dir, *FAST, f"--threshold={threshold}", "--json"
    )
    assert code == 0, err
    stats = json.loads(stdout)["stats"]
    assert stats["drafted"] > 0
    assert stats["accepted"] == (0 if accepted == "none" else stats["drafted"])


# ---------------------------------------------------------------- pipeline parameters (API)
# num_frames=0, k=0, threshold=NaN, strength 0 / 1.5, steps 0 and +/-inf thresholds are covered
# by tests/video/test_pipeline.py; these are the rows it does not have.

BAD_KWARGS = [
    (dict(num_frames=-3), "num_frames must be an integer >= 1, got -3"),
    (dict(num_frames=2.5), "num_frames must be an integer >= 1, got 2.5"),
    (dict(strength=-0.5), r"strength must be in \(0, 1\], got -0.5"),
    (dict(strength=math.nan), r"strength must be in \(0, 1\], got nan"),
    (dict(threshold="high"), r"threshold must be a number \(\+/-inf allowed\), got 'high'"),
]


@pytest.mark.parametrize("kwargs,message", BAD_KWARGS, ids=lambda v: str(v) if isinstance(v, dict) else "")
def test_api_rejects_bad_parameter(pipe, kwargs, message):
    with pytest.raises(ValueError, match=message):
        pipe(context_uint8(), progress=False, **kwargs)


# ------------------------------------------------------------------- context arrays (API)


def _nonfinite(value: float) -> torch.Tensor:
    frames = torch.zeros(3, 3, SIZE, SIZE)
    frames[1, 2, 3, 4] = value
    return frames


BAD_CONTEXTS = [
    ("inf-tensor", _nonfinite(math.inf), "context frames contain NaN or infinite values"),
    ("minus-inf-tensor", _nonfinite(-math.inf), "context frames contain NaN or infinite values"),
    (
        "gray-without-channel-axis",
        context_uint8()[..., 0],
        r"must be \(F, H, W, 3\) uint8 RGB.*\(3, 16, 16\)",
    ),
    ("two-channels", context_uint8()[..., :2], r"must be \(F, H, W, 3\) uint8 RGB.*\(3, 16, 16, 2\)"),
    ("uint16", context_uint8().astype(np.uint16), r"must be \(F, H, W, 3\) uint8 RGB.*uint16"),
    ("empty-list", [], "no context frames given"),
    ("string", "clip.mp4", "context_frames must be a list of HxWx3 uint8 arrays.*got str"),
]


@pytest.mark.parametrize("context,message", [c[1:] for c in BAD_CONTEXTS], ids=[c[0] for c in BAD_CONTEXTS])
def test_api_rejects_bad_context(pipe, context, message):
    with pytest.raises(ValueError, match=message):
        pipe(context, progress=False)


def generate(pipe, context, **kwargs) -> np.ndarray:
    kwargs = dict(num_frames=3, num_inference_steps=2, progress=False, **kwargs)
    return pipe(context, generator=torch.Generator().manual_seed(7), **kwargs).frames


def test_api_gray_and_rgba_arrays_are_converted_to_rgb(pipe):
    rgb = context_uint8()
    gray = rgb[..., :1]
    as_rgb = generate(pipe, np.repeat(gray, 3, axis=-1))
    np.testing.assert_array_equal(generate(pipe, gray), as_rgb)  # (F, H, W, 1)
    np.testing.assert_array_equal(generate(pipe, list(gray[..., 0])), as_rgb)  # list of (H, W)
    rgba = np.concatenate([rgb, np.full_like(rgb[..., :1], 17)], axis=-1)
    np.testing.assert_array_equal(generate(pipe, rgba), generate(pipe, rgb))  # alpha dropped


def test_api_odd_sizes_come_back_at_their_size_and_tiny_frames_are_refused(pipe):
    odd = context_uint8(h=61, w=97)
    assert generate(pipe, odd).shape == (3, 61, 97, 3)
    with pytest.raises(ValueError, match=r"context frames of 1 x 5 are smaller than the model's 2 x 2 minimum"):
        generate(pipe, context_uint8(h=1, w=5))


def test_api_long_context_uses_only_the_last_frames(pipe):
    long = np.random.default_rng(3).integers(0, 256, (400, SIZE, SIZE, 3), dtype=np.uint8)
    np.testing.assert_array_equal(generate(pipe, long), generate(pipe, long[-P:]))
    np.testing.assert_array_equal(generate(pipe, list(long)), generate(pipe, long[-P:]))


# ------------------------------------------------------------------ model directories (both)


def _edit(relative: str, text: str) -> Callable[[Path], None]:
    return lambda root: (root / relative).write_text(text)


def _truncate(relative: str) -> Callable[[Path], None]:
    def cut(root: Path) -> None:
        data = (root / relative).read_bytes()
        (root / relative).write_bytes(data[: len(data) // 2])

    return cut


BAD_MODELS = [
    ("missing-directory", lambda root: shutil.rmtree(root), {}, "is not a specvideo pipeline directory"),
    ("no-unet", lambda root: shutil.rmtree(root / "unet"), {}, "unet: it does not exist"),
    ("no-scheduler", lambda root: shutil.rmtree(root / "scheduler"), {}, "scheduler: it does not exist"),
    (
        "truncated-unet-weights",
        _truncate("unet/diffusion_pytorch_model.safetensors"),
        {},
        "unet: Unable to load weights",
    ),
    ("garbled-unet-config", _edit("unet/config.json", "{garbage"), {}, "unet: It looks like the config file"),
    (
        "garbled-model-index",
        _edit("model_index.json", "{garbage"),
        {},
        "model_index.json: Expecting property",
    ),
    (
        "model-index-not-an-object",
        _edit("model_index.json", "[1, 2]"),
        {},
        "expected a JSON object, got list",
    ),
    (
        "model-index-wrong-context",
        _edit("model_index.json", '{"num_context_frames": 5}'),
        {},
        "num_context_frames=5 does not match the UNet",
    ),
    (
        "model-index-hint-without-its-channels",
        _edit("model_index.json", '{"num_context_frames": 2, "hint": "flow"}'),
        {},
        "in_channels=9 with hint='flow' means P=1",
    ),
    ("model-index-unknown-hint", _edit("model_index.json", '{"hint": "depth"}'), {}, "hint must be one of"),
    ("garbled-scheduler", _edit("scheduler/scheduler_config.json", ""), {}, "scheduler: Expecting value"),
    (
        "unknown-scheduler",
        _edit("scheduler/scheduler_config.json", '{"_class_name": "NoSuchScheduler"}'),
        {},
        "unknown scheduler class 'NoSuchScheduler'",
    ),
    (
        "garbled-drafter-json",
        _edit("drafter/drafter.json", "{garbage"),
        {},
        "drafter.json: Expecting property",
    ),
    ("unknown-drafter", _edit("drafter/drafter.json", '{"name": "magic"}'), {}, "unknown drafter 'magic'"),
    ("learned-without-weights", lambda root: None, {"drafter": "learned"}, "needs trained weights"),
]


def _cli_drafter(kwargs: dict) -> list[str]:
    return ["--drafter", kwargs["drafter"]] if "drafter" in kwargs else []


@pytest.mark.parametrize("mutate,kwargs,message", [c[1:] for c in BAD_MODELS], ids=[c[0] for c in BAD_MODELS])
def test_bad_model_directory(mutate, kwargs, message, model_dir, clip, tmp_path, out, capsys):
    root = tmp_path / "model"
    shutil.copytree(model_dir, root)
    mutate(root)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        SpeculativeVideoPipeline.from_pretrained(root, **kwargs)
    code, _, err = cli(capsys, "video", clip, "--out", out, "--model", root, *_cli_drafter(kwargs), *FAST)
    assert_cli_error(code, err, message)
    assert_untouched(out)


def test_truncated_learned_drafter_weights(clip, tmp_path, out, capsys):
    tiny_pipeline(drafter=LearnedDrafter()).save_pretrained(tmp_path / "model")
    _truncate("drafter/diffusion_pytorch_model.safetensors")(tmp_path / "model")
    with pytest.raises(ValueError, match="drafter: Unable to load weights"):
        SpeculativeVideoPipeline.from_pretrained(tmp_path / "model", drafter="learned")
    code, _, err = cli(capsys, "video", clip, "--out", out, "--model", tmp_path / "model", *FAST)
    assert_cli_error(code, err, "drafter: Unable to load weights")
    assert_untouched(out)


# ------------------------------------------------------------------------ output paths (CLI)


def test_output_in_a_missing_directory_fails_before_any_work(clip, tmp_path, capsys):
    target = tmp_path / "nowhere" / "out.mp4"
    code, _, err = cli(capsys, "video", clip, "--out", target, "--model", tmp_path / "no-model")
    assert_cli_error(code, err, f"output directory {target.parent} does not exist")
    assert not target.parent.exists()


def test_output_that_is_a_directory_is_refused(clip, tmp_path, capsys):
    code, _, err = cli(capsys, "video", clip, "--out", tmp_path, "--model", tmp_path / "no-model")
    assert_cli_error(code, err, f"output path {tmp_path} is a directory")


def test_bad_side_by_side_path_keeps_the_existing_output(model_dir, clip, tmp_path, out, capsys):
    side = tmp_path / "nowhere" / "sbs.mp4"
    code, _, err = cli(
        capsys, "video", clip, "--out", out, "--model", model_dir, "--side-by-side", side, *FAST
    )
    assert_cli_error(code, err, f"output directory {side.parent} does not exist")
    assert_untouched(out)
