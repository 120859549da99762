"""Video file I/O: round trips through real H.264 files, error messages, atomic replacement."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import imageio_ffmpeg
import numpy as np
import pytest
import torch

from specvideo.video import io as video_io
from specvideo.video.io import (
    DEFAULT_FPS,
    VideoReadError,
    frames_to_tensor,
    probe_video,
    read_video,
    tensor_to_frames,
    write_video,
)


def smooth_frames(num_frames: int = 6, height: int = 32, width: int = 48) -> np.ndarray:
    """(F, H, W, 3) uint8 gradients and sinusoids moving over time: easy for H.264."""
    ys, xs = np.mgrid[:height, :width].astype(np.float64)
    frames = [
        np.stack(
            [
                128 + 90 * np.sin(xs / 12 + t / 2),
                255 * ys / max(height - 1, 1),
                128 + 90 * np.cos((xs + ys) / 16 - t / 3),
            ],
            axis=-1,
        )
        for t in range(num_frames)
    ]
    return np.clip(np.stack(frames), 0, 255).round().astype(np.uint8)


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, np.ndarray]:
    frames = smooth_frames()
    path = tmp_path_factory.mktemp("io") / "clip.mp4"
    write_video(frames, path, fps=12.5)
    return path, frames


def psnr_u8(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float(10 * np.log10(255**2 / mse))


def ffmpeg(*args: str) -> None:
    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-v", "error", *args]
    subprocess.run(cmd, check=True, capture_output=True, timeout=30)


def test_round_trip_keeps_count_size_fps_and_pixels(written):
    path, frames = written
    clip = read_video(path)
    assert clip.frames.shape == frames.shape and clip.frames.dtype == np.uint8
    assert clip.num_frames == 6 and clip.size == (32, 48)
    assert clip.fps == pytest.approx(12.5)
    assert psnr_u8(clip.frames, frames) > 33.0  # H.264 at crf 18 plus 4:2:0 chroma: measured ~35.7 dB


def test_written_file_is_browser_playable_h264(written):
    path, _ = written
    info = probe_video(path)
    assert (info.codec, info.pix_fmt, info.width, info.height) == ("h264", "yuv420p", 48, 32)
    assert not list(path.parent.glob(".*tmp*"))  # no temporary file left behind
    assert os.stat(path).st_mode & 0o777 == 0o644


def test_start_and_max_frames_select_a_window(written):
    path, _ = written
    full = read_video(path).frames
    window = read_video(path, max_frames=2, start=3).frames
    np.testing.assert_array_equal(window, full[3:5])
    assert read_video(path, max_frames=100).num_frames == 6
    assert read_video(path, start=5).num_frames == 1


def test_odd_size_is_padded_to_even_with_edge_pixels(tmp_path):
    frames = smooth_frames(num_frames=3, height=61, width=97)
    path = write_video(list(frames), tmp_path / "odd.mp4", fps=10)
    info = probe_video(path)
    assert (info.codec, info.pix_fmt, info.width, info.height) == ("h264", "yuv420p", 98, 62)
    clip = read_video(path)
    assert clip.frames.shape == (3, 62, 98, 3)
    assert psnr_u8(clip.frames[:, :61, :97], frames) > 33.0
    padded_column = clip.frames[:, :61, 97].astype(np.int16)
    assert np.abs(padded_column - frames[:, :, 96]).mean() < 6.0  # replicated edge, not black


def test_grayscale_and_rgba_sources_come_out_rgb(tmp_path):
    source = ["-f", "lavfi", "-i", "testsrc=size=64x48:rate=10:duration=0.3"]
    ffmpeg(*source, "-pix_fmt", "gray", "-c:v", "ffv1", str(tmp_path / "gray.mkv"))
    ffmpeg(*source, "-pix_fmt", "rgba", "-c:v", "png", str(tmp_path / "rgba.mov"))
    gray = read_video(tmp_path / "gray.mkv")
    assert gray.frames.shape == (3, 48, 64, 3) and gray.fps == pytest.approx(10)
    np.testing.assert_array_equal(gray.frames[..., 0], gray.frames[..., 2])
    rgba = read_video(tmp_path / "rgba.mov")
    assert rgba.frames.shape == (3, 48, 64, 3)
    # testsrc's top-left quarter holds coloured bars: the channels must differ somewhere
    assert np.abs(rgba.frames[..., 0].astype(int) - rgba.frames[..., 2]).max() > 50


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        (0.0, DEFAULT_FPS),
        (float("nan"), DEFAULT_FPS),
        (-3.0, DEFAULT_FPS),
        (float("inf"), DEFAULT_FPS),
        (24.0, 24.0),
    ],
)
def test_broken_fps_metadata_falls_back_to_default(reported, expected):
    assert video_io._valid_fps(reported) == expected


def test_missing_file_raises_file_not_found(tmp_path):
    path = tmp_path / "nope.mp4"
    with pytest.raises(FileNotFoundError, match="nope.mp4"):
        read_video(path)


def test_empty_and_text_files_are_not_videos(tmp_path):
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    text = tmp_path / "notes.mp4"
    text.write_text("this is not a video\n" * 20)
    for path in (empty, text):
        with pytest.raises(VideoReadError, match=path.name) as info:
            read_video(path)
        assert isinstance(info.value, ValueError)
    with pytest.raises(VideoReadError, match="not a regular file"):
        read_video(tmp_path)


@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.99])
def test_truncated_file_raises(written, tmp_path, fraction):
    data = written[0].read_bytes()
    path = tmp_path / "cut.mp4"
    path.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(VideoReadError, match="cut.mp4"):
        read_video(path)


def test_truncated_file_read_leniently_returns_what_decodes(written, tmp_path):
    data = written[0].read_bytes()
    path = tmp_path / "cut.mp4"
    path.write_bytes(data[: int(len(data) * 0.99)])  # the last frames' bytes are missing
    clip = read_video(path, strict=False)
    assert 1 <= clip.num_frames < 6


def test_bad_read_arguments(written):
    path, _ = written
    with pytest.raises(VideoReadError, match="start=6 is beyond the end"):
        read_video(path, start=6)
    with pytest.raises(ValueError, match="start must be >= 0"):
        read_video(path, start=-1)
    with pytest.raises(ValueError, match="max_frames must be >= 1"):
        read_video(path, max_frames=0)


@pytest.mark.parametrize(
    ("frames", "fps", "message"),
    [
        (np.zeros((2, 8, 8, 3), np.float32), 10, "must be uint8"),
        (np.zeros((2, 8, 8), np.uint8), 10, r"\(F, H, W, 3\).*\(2, 8, 8\)"),
        (np.zeros((2, 8, 8, 4), np.uint8), 10, r"\(2, 8, 8, 4\)"),
        (np.zeros((0, 8, 8, 3), np.uint8), 10, "at least 1 frame"),
        ([], 10, "at least 1 frame"),
        ([np.zeros((8, 8, 3), np.uint8), np.zeros((8, 6, 3), np.uint8)], 10, "one shape"),
        (np.zeros((2, 8, 8, 3), np.uint8), 0, "fps"),
        (np.zeros((2, 8, 8, 3), np.uint8), float("nan"), "fps"),
        (np.zeros((2, 8, 8, 3), np.uint8), -5, "fps"),
        (np.zeros((2, 8, 8, 3), np.uint8), "25", "fps"),
    ],
)
def test_write_validates_inputs(tmp_path, frames, fps, message):
    with pytest.raises(ValueError, match=message):
        write_video(frames, tmp_path / "out.mp4", fps=fps)
    assert list(tmp_path.iterdir()) == []


def test_write_to_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing"):
        write_video(smooth_frames(1), tmp_path / "missing" / "out.mp4", fps=10)


def test_failed_encode_leaves_no_partial_file_and_keeps_existing(tmp_path, monkeypatch):
    path = tmp_path / "keep.mp4"
    path.write_bytes(b"precious")

    def broken_encode(frames, tmp, fps, crf):
        tmp.write_bytes(b"half a video")
        raise RuntimeError("encoder died")

    monkeypatch.setattr(video_io, "_encode", broken_encode)
    with pytest.raises(RuntimeError, match="encoder died"):
        write_video(smooth_frames(2), path, fps=10)
    assert path.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.mp4"]


def test_encode_that_produces_garbage_is_rejected(tmp_path, monkeypatch):
    path = tmp_path / "keep.mp4"
    path.write_bytes(b"precious")
    monkeypatch.setattr(video_io, "_encode", lambda frames, tmp, fps, crf: tmp.write_bytes(b"garbage"))
    with pytest.raises(OSError, match="readable video"):
        write_video(smooth_frames(2), path, fps=10)
    assert path.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.mp4"]


def test_successful_write_replaces_existing_file(tmp_path):
    path = tmp_path / "clip.mp4"
    path.write_bytes(b"old")
    write_video(smooth_frames(2), path, fps=np.float32(10))
    assert read_video(path).num_frames == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clip.mp4"]


def test_tensor_conversion_round_trip():
    frames = smooth_frames(num_frames=2, height=5, width=7)
    tensor = frames_to_tensor(frames)
    assert tensor.shape == (2, 3, 5, 7) and tensor.dtype == torch.float32
    assert tensor.min() >= -1 and tensor.max() <= 1
    assert float(tensor[0, 1, -1, 0]) == 1.0  # the green ramp reaches 255 on the last row
    np.testing.assert_array_equal(tensor_to_frames(tensor), frames)
    assert tensor_to_frames(torch.full((1, 3, 2, 2), 3.0)).max() == 255  # clamped
