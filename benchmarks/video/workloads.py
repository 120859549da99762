"""The clips a video benchmark runs on: one split's synthetic and real workloads, or video files.

A clip is P context frames and the ``num_frames`` ground-truth frames after them, at its own
resolution (the pipeline generates at the context's size). Synthetic: moving-shapes sequences of the
split's seed range, ``synthetic_size`` pixels square; real: whole frames of the split's part of every
real clip (``specvideo.video.real``: tuning 70-85 %, validation 85-100 % of each clip's frames;
training saw only the first 70 %; the test split's clips whole), downscaled to a longer side of
``max_side``, cut into consecutive windows and taken round-robin over the clips.

``windows="moving"`` picks windows that move instead, by a rule fixed before any result was read
(#47): every window start on a grid of a quarter window's length is a candidate; its motion is the
median over its frame pairs of the mean optical-flow speed (OpenCV DIS, pixels per frame at the
working size); per clip the ``windows_per_clip`` non-overlapping candidates of most motion are kept
(greedy, fastest first), then taken round-robin over the clips, the fastest of each first.
``--clips`` files follow the same rule (every window of each file, or its moving ones).

``frame_step`` s > 1 reads every s-th frame of each source (real clips, files and moving shapes
alike) before it is cut into windows: the same footage, s times faster (the *fast* windows of #65).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch

from benchmarks.video.config import BenchVideoConfig
from specvideo.video.data import TEST_SEEDS, TUNING_SEEDS, VALIDATION_SEEDS, split_synthetic
from specvideo.video.io import frames_to_tensor, read_video, short_warning
from specvideo.video.real import RealVideo, load_real_videos

SPLIT_SEEDS = {"tuning": TUNING_SEEDS, "validation": VALIDATION_SEEDS, "test": TEST_SEEDS}


def _read_clip(path: str, max_side: int) -> RealVideo:
    """A --clips file, whole. A damaged file is benchmarked on the frames that decode, with the CLI's
    warning (OpenCV's own tree.avi lists more frames than it holds)."""
    clip = read_video(path, max_side=max_side, strict=False)
    if warning := short_warning(path, clip):
        print(warning.replace("continuing from the last", "benchmarking the"), file=sys.stderr)
    return RealVideo(Path(path).name, clip.frames)


@dataclass
class BenchClip:
    name: str
    context: torch.Tensor  # (P, 3, H, W) in [-1, 1]
    truth: torch.Tensor  # (F, 3, H, W) in [-1, 1], the frames after the context


def load_workloads(config: BenchVideoConfig, P: int) -> dict[str, list[BenchClip]]:
    """{"synthetic": ..., "real": ...} from the config's split, or {"clips": ...} from config.clips."""
    total, step = P + config.num_frames, config.frame_step
    window = _moving_windows if config.windows == "moving" else _windows
    if config.clips:
        videos = [stepped(_read_clip(p, config.max_side), step) for p in config.clips]
        for v in videos:
            if len(v.frames) < total:
                raise ValueError(
                    f"{v.name} has {len(v.frames)} frames; a clip needs {P} context + {config.num_frames} frames = {total}"
                )
        return {"clips": [c for v in videos for c in window(v, P, total, config.windows_per_clip)]}
    workloads = {}
    if config.num_synthetic:
        seeds = SPLIT_SEEDS[config.split]
        synthetic = split_synthetic(config.num_synthetic, total * step, config.synthetic_size, split=config.split)
        workloads["synthetic"] = [_clip(f"seed {seeds[i]}", v[::step], P) for i, v in enumerate(synthetic)]
    if config.num_real:
        videos = [stepped(v, step) for v in load_real_videos(config.split, config.max_side, train_only=False)]
        per_video = [window(v, P, total, config.windows_per_clip) for v in videos]
        rounds = [
            c
            for i in range(max(map(len, per_video), default=0))
            for w in per_video
            if i < len(w)
            for c in [w[i]]
        ]
        if not rounds:
            raise ValueError(f"no real clip of the {config.split} split has {total} frames at frame step {step}")
        workloads["real"] = rounds[: config.num_real]
    return workloads


def stepped(video: RealVideo, step: int) -> RealVideo:
    """Every ``step``-th frame of ``video`` (itself when step is 1)."""
    return video if step == 1 else RealVideo(f"{video.name} every {step}", video.frames[::step])


def _windows(video: RealVideo, P: int, total: int, _: int = 0) -> list[BenchClip]:
    frames = video.frames
    return [
        _clip(f"{video.name} [{i * total}:{(i + 1) * total}]", frames[i * total : (i + 1) * total], P)
        for i in range(len(frames) // total)
    ]


def _moving_windows(video: RealVideo, P: int, total: int, per_clip: int) -> list[BenchClip]:
    """The clip's ``per_clip`` non-overlapping windows of most motion, fastest first (the rule above)."""
    frames, stride = video.frames, max(1, total // 4)
    speed = frame_speeds(frames)  # (F - 1,) pixels per frame between frames i and i + 1
    starts = range(0, len(frames) - total + 1, stride)
    motion = {s: float(np.median(speed[s : s + total - 1])) for s in starts}
    chosen: list[int] = []
    for s in sorted(motion, key=lambda s: (-motion[s], s)):
        if len(chosen) < per_clip and all(abs(s - c) >= total for c in chosen):
            chosen.append(s)
    return [
        _clip(f"{video.name} [{s}:{s + total}] {motion[s]:.2f} px/frame", frames[s : s + total], P) for s in chosen
    ]


def frame_speeds(frames: np.ndarray) -> np.ndarray:
    """(F, H, W, 3) uint8 -> (F - 1,) mean optical-flow speed between consecutive frames (DIS)."""
    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    gray = [cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in frames]
    return np.array([np.linalg.norm(dis.calc(a, b, None), axis=-1).mean() for a, b in zip(gray, gray[1:])])


def _clip(name: str, frames: np.ndarray, P: int) -> BenchClip:
    x = frames_to_tensor(frames)  # (P + F, 3, H, W)
    return BenchClip(name, x[:P], x[P:])
