"""Reading and writing video files.

``read_video`` decodes with OpenCV into RGB uint8 frames; ``write_video`` encodes browser-playable
H.264 (yuv420p, ``+faststart``) MP4 through ``imageio_ffmpeg`` and replaces the destination
atomically; ``probe_video`` reads back codec, pixel format and size from ffmpeg's own report.
Frames are always (F, H, W, 3) uint8 RGB numpy arrays at this boundary; ``frames_to_tensor`` and
``tensor_to_frames`` convert to and from the pipeline's (F, 3, H, W) float tensors in [-1, 1].
"""

from __future__ import annotations

import math
import numbers
import os
import re
import subprocess
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import cv2
import imageio_ffmpeg
import numpy as np
import torch
from einops import rearrange

from specvideo.files import atomic_path

DEFAULT_FPS = 25.0  # used when a file's frame-rate metadata is missing, zero or not finite
DEFAULT_CRF = 18  # libx264 constant rate factor: visually near-lossless, small files


class VideoReadError(ValueError):
    """A file exists but cannot be decoded as the video that was asked for."""


@dataclass(frozen=True)
class VideoClip:
    """Decoded frames (F, H, W, 3) uint8 RGB and their frame rate; ``decoded``: how many frames
    decoded from the start position (more than F when only the last ones were kept), ``listed``: the
    count the file's metadata gives (0 when unknown)."""

    frames: np.ndarray
    fps: float
    decoded: int = 0
    listed: int = 0

    @property
    def short(self) -> bool:
        """Whether decoding stopped before the frame count the metadata lists (a damaged file)."""
        return self.listed > 0 and self.decoded < self.listed

    @property
    def num_frames(self) -> int:
        return self.frames.shape[0]

    @property
    def size(self) -> tuple[int, int]:
        """(H, W)."""
        return self.frames.shape[1], self.frames.shape[2]


@dataclass(frozen=True)
class VideoInfo:
    """What ffmpeg reports about a file's first video stream."""

    codec: str
    pix_fmt: str
    width: int
    height: int


def read_video(
    path: str | os.PathLike,
    max_frames: int | None = None,
    start: int = 0,
    strict: bool = True,
    max_side: int | None = None,
    from_end: bool = False,
) -> VideoClip:
    """Decode up to ``max_frames`` frames starting at frame index ``start``.

    ``from_end`` keeps the *last* ``max_frames`` frames instead: the whole file is decoded but at
    most ``max_frames`` frames are held, so memory stays bounded however long the video is.
    ``max_side`` downscales (area filter, aspect kept) every frame whose longer side exceeds it as
    it is decoded, so a huge resolution never accumulates in memory. Grayscale and RGBA sources
    come out as RGB. A frame rate that is missing, zero or not finite falls back to
    ``DEFAULT_FPS``. Raises FileNotFoundError for a missing file and VideoReadError (a
    ValueError) for anything that is not a decodable video, has no frames, or ends before
    ``start``. With ``strict`` (the default) a file whose decoding stops before the frame count
    in its own metadata is an error too (a truncated download); ``strict=False`` returns the
    frames that decoded.
    """
    path = Path(path)
    _check_read_args(start, max_frames, max_side)
    if not path.exists():
        raise FileNotFoundError(f"video file not found: {path}")
    if not path.is_file():
        raise VideoReadError(f"{path}: not a regular file")
    capture = cv2.VideoCapture(str(path))
    try:
        if not capture.isOpened():
            raise VideoReadError(
                f"{path}: cannot open as a video (not a video file, or an unsupported codec)"
            )
        fps = _valid_fps(capture.get(cv2.CAP_PROP_FPS))
        expected = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))  # 0 or less when unknown
        _skip(capture, start, path)
        frames, decoded = _decode(capture, max_frames, max_side, from_end)
    finally:
        capture.release()
    if not frames and start:
        raise VideoReadError(f"{path}: start={start} is beyond the end of the video ({start} frames)")
    if not frames:
        raise VideoReadError(f"{path}: no decodable frames (empty, truncated or corrupt file)")
    reached_end = from_end or max_frames is None or decoded < max_frames
    if strict and reached_end and start + decoded < expected:
        raise VideoReadError(
            f"{path}: decoding stopped after {start + decoded} of the {expected} frames its "
            "metadata lists (truncated or corrupt file; strict=False returns what decoded)"
        )
    return VideoClip(  # (F, H, W, 3); listed only where decoding reached the end
        frames=np.stack(frames), fps=fps, decoded=start + decoded, listed=max(expected, 0) if reached_end else 0
    )


def read_context(
    path: str | os.PathLike, num_frames: int, max_side: int | None, minimum: int | None = None
) -> VideoClip:
    """The last ``num_frames`` frames of a video to continue, downscaled on decode to ``max_side``.

    A damaged file that decodes fewer frames than its metadata lists is continued when at least
    ``minimum`` (default ``num_frames``) decode (``short_warning`` says so); fewer is a
    VideoReadError naming both counts.
    """
    minimum = num_frames if minimum is None else minimum
    clip = read_video(path, max_frames=num_frames, from_end=True, max_side=max_side, strict=False)
    if clip.num_frames < minimum:
        listed = f" (its metadata lists {clip.listed})" if clip.short else ""
        raise VideoReadError(
            f"{path} has {clip.num_frames} frame(s){listed}; the model needs {minimum} context frames"
        )
    return clip


def short_warning(path: str | os.PathLike, clip: VideoClip) -> str | None:
    """The one-line warning for a clip that decoded fewer frames than its metadata lists, else None."""
    if not clip.short:
        return None
    return (
        f"warning: {path}: {clip.decoded} of the {clip.listed} frames its metadata lists decode "
        f"(a damaged or truncated file); continuing from the last {clip.num_frames} that do"
    )


def _check_read_args(start: int, max_frames: int | None, max_side: int | None) -> None:
    if start < 0:
        raise ValueError(f"start must be >= 0, got {start}")
    if max_frames is not None and max_frames < 1:
        raise ValueError(f"max_frames must be >= 1 or None, got {max_frames}")
    if max_side is not None and max_side < 1:
        raise ValueError(f"max_side must be >= 1 or None, got {max_side}")


def _valid_fps(fps: float) -> float:
    return float(fps) if math.isfinite(fps) and fps > 0 else DEFAULT_FPS


def _skip(capture: cv2.VideoCapture, start: int, path: Path) -> None:
    """Advance by decoding (``grab``): seeking by frame index is not exact for every codec."""
    for skipped in range(start):
        if not capture.grab():
            raise VideoReadError(f"{path}: start={start} is beyond the end of the video ({skipped} frames)")


def _decode(
    capture: cv2.VideoCapture, max_frames: int | None, max_side: int | None, from_end: bool
) -> tuple[list[np.ndarray], int]:
    """The frames kept (the first or, ``from_end``, the last ``max_frames``) and how many decoded."""
    frames: deque[np.ndarray] = deque(maxlen=max_frames if from_end else None)
    decoded = 0
    while from_end or max_frames is None or decoded < max_frames:
        ok, frame = capture.read()
        if not ok or frame is None:
            break
        frames.append(_to_rgb(_shrink(frame, max_side)))
        decoded += 1
    return list(frames), decoded


def _shrink(frame: np.ndarray, max_side: int | None) -> np.ndarray:
    """Downscale with the area filter, aspect kept, so that the longer side is at most ``max_side``."""
    height, width = frame.shape[:2]
    if max_side is None or max(height, width) <= max_side:
        return frame
    scale = max_side / max(height, width)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))  # OpenCV wants (W, H)
    return cv2.resize(frame, size, interpolation=cv2.INTER_AREA)


def _to_rgb(frame: np.ndarray) -> np.ndarray:
    """OpenCV's BGR / BGRA / gray (any integer depth) -> (H, W, 3) uint8 RGB."""
    if frame.dtype == np.uint16:
        frame = (frame >> 8).astype(np.uint8)
    if frame.ndim == 2 or frame.shape[2] == 1:
        return cv2.cvtColor(frame, cv2.COLOR_GRAY2RGB)
    if frame.shape[2] == 4:
        return cv2.cvtColor(frame, cv2.COLOR_BGRA2RGB)
    return cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)


def write_video(
    frames: np.ndarray | list[np.ndarray], path: str | os.PathLike, fps: float, crf: int = DEFAULT_CRF
) -> Path:
    """Encode RGB uint8 frames (F, H, W, 3) (or a list of (H, W, 3)) as H.264 yuv420p MP4.

    yuv420p needs even dimensions, so an odd height or width is padded by one replicated edge
    row / column (97x61 is stored as 98x62; crop after reading if the exact size matters). The
    file is written to a temporary sibling and moved into place with ``os.replace`` only after
    ffmpeg succeeded and the result probes as H.264; on any failure the temporary file is removed
    and an existing file at ``path`` is left untouched. Returns the path written.
    """
    frames = _check_frames(frames)
    _check_encoding(fps, crf)
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"output directory does not exist: {path.parent}")
    frames = _pad_even(frames)  # (F, H', W', 3)
    with atomic_path(path, suffix=".tmp.mp4") as tmp:
        _encode(frames, tmp, fps, crf)
        _check_written(tmp, frames.shape[2], frames.shape[1])
    return path


def _check_frames(frames: np.ndarray | list[np.ndarray]) -> np.ndarray:
    if isinstance(frames, (list, tuple)):
        if not frames:
            raise ValueError("need at least 1 frame, got an empty list")
        shapes = {np.shape(f) for f in frames}
        if len(shapes) != 1:
            raise ValueError(f"all frames must have one shape, got {sorted(shapes)}")
        frames = np.stack([np.asarray(f) for f in frames])
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"frames must be (F, H, W, 3) RGB, got shape {tuple(frames.shape)}")
    if frames.shape[0] < 1 or frames.shape[1] < 1 or frames.shape[2] < 1:
        raise ValueError(f"need at least 1 frame of at least 1x1 pixels, got shape {tuple(frames.shape)}")
    if frames.dtype != np.uint8:
        raise ValueError(
            f"frames must be uint8 in [0, 255], got {frames.dtype}; convert floats in [0, 1] with "
            "(x * 255).round().astype(np.uint8)"
        )
    return frames


def _check_encoding(fps: float, crf: int) -> None:
    if isinstance(fps, bool) or not isinstance(fps, numbers.Real) or not math.isfinite(fps) or fps <= 0:
        raise ValueError(f"fps must be a finite number > 0, got {fps!r}")
    if not 0 <= crf <= 51:
        raise ValueError(f"crf must be in [0, 51] (libx264), got {crf}")


def _pad_even(frames: np.ndarray) -> np.ndarray:
    pad_h, pad_w = frames.shape[1] % 2, frames.shape[2] % 2
    if not (pad_h or pad_w):
        return frames
    return np.pad(frames, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)), mode="edge")  # (F, H', W', 3)


def _encode(frames: np.ndarray, path: Path, fps: float, crf: int) -> None:
    writer = imageio_ffmpeg.write_frames(
        str(path),
        size=(frames.shape[2], frames.shape[1]),
        fps=float(fps),
        codec="libx264",
        pix_fmt_in="rgb24",
        pix_fmt_out="yuv420p",
        quality=None,
        macro_block_size=1,  # we padded to even sizes ourselves; no rescaling by imageio
        ffmpeg_log_level="error",
        output_params=["-crf", str(crf), "-movflags", "+faststart"],
    )
    writer.send(None)  # start ffmpeg
    try:
        for frame in frames:
            writer.send(np.ascontiguousarray(frame))
    finally:
        writer.close()


def _check_written(path: Path, width: int, height: int) -> None:
    """ffmpeg's exit status is not reported by imageio_ffmpeg, so check the result itself."""
    if path.stat().st_size == 0:
        raise OSError(f"ffmpeg wrote nothing to {path}")
    try:
        info = probe_video(path)
    except VideoReadError as error:
        raise OSError(f"ffmpeg did not write a readable video to {path}: {error}") from error
    if (info.codec, info.pix_fmt, info.width, info.height) != ("h264", "yuv420p", width, height):
        raise OSError(f"ffmpeg wrote an unexpected stream to {path}: {info}")


_STREAM = re.compile(r"Stream #\S+.*?: Video: (\w+)[^,]*, (\w+)(?:\([^)]*\))?, (\d+)x(\d+)")


def probe_video(path: str | os.PathLike) -> VideoInfo:
    """Codec, pixel format and size of the first video stream, parsed from ``ffmpeg -i``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"video file not found: {path}")
    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-nostdin", "-i", str(path)]
    report = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stderr
    match = _STREAM.search(report)
    if match is None:
        raise VideoReadError(f"{path}: ffmpeg found no video stream")
    codec, pix_fmt, width, height = match.groups()
    return VideoInfo(codec=codec, pix_fmt=pix_fmt, width=int(width), height=int(height))


def frames_to_tensor(frames: np.ndarray) -> torch.Tensor:
    """(F, H, W, 3) uint8 -> (F, 3, H, W) float32 in [-1, 1]."""
    tensor = torch.from_numpy(np.ascontiguousarray(frames)).float() / 127.5 - 1.0  # (F, H, W, 3)
    return rearrange(tensor, "f h w c -> f c h w").contiguous()


def tensor_to_frames(tensor: torch.Tensor) -> np.ndarray:
    """(F, 3, H, W) float in [-1, 1] -> (F, H, W, 3) uint8 (clamped, rounded)."""
    values = ((tensor.detach().float().clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)  # (F, 3, H, W)
    return rearrange(values, "f c h w -> f h w c").cpu().numpy()
