"""The clips a video benchmark runs on: one split's synthetic and real workloads, or video files.

A clip is P context frames and the ``num_frames`` ground-truth frames after them, at its own
resolution (the pipeline generates at the context's size). Synthetic: moving-shapes sequences of the
split's seed range, ``synthetic_size`` pixels square; real: whole frames of the split's part of every
real clip (``specvideo.video.real``: tuning 70-85 %, held-out 85-100 % of each clip's frames; training
saw only the first 70 %), downscaled to a longer side of ``max_side``, cut into consecutive windows
and taken round-robin over the clips.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from benchmarks.video.config import BenchVideoConfig
from specvideo.video.data import HELDOUT_SEEDS, TEST_SEEDS, TUNING_SEEDS, heldout_synthetic
from specvideo.video.io import frames_to_tensor, read_video, short_warning
from specvideo.video.real import RealVideo, load_real_videos

SPLIT_SEEDS = {"tuning": TUNING_SEEDS, "heldout": HELDOUT_SEEDS, "test": TEST_SEEDS}


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
    total = P + config.num_frames
    if config.clips:
        videos = [_read_clip(p, config.max_side) for p in config.clips]
        for v in videos:
            if len(v.frames) < total:
                raise ValueError(
                    f"{v.name} has {len(v.frames)} frames; a clip needs {P} context + {config.num_frames} frames = {total}"
                )
        return {"clips": [c for v in videos for c in _windows(v, P, total)]}
    workloads = {}
    if config.num_synthetic:
        seeds = SPLIT_SEEDS[config.split]
        synthetic = heldout_synthetic(config.num_synthetic, total, config.synthetic_size, split=config.split)
        workloads["synthetic"] = [_clip(f"seed {seeds[i]}", v, P) for i, v in enumerate(synthetic)]
    if config.num_real:
        videos = load_real_videos(config.split, config.max_side, train_only=False)
        per_video = [_windows(v, P, total) for v in videos]
        rounds = [
            c
            for i in range(max(map(len, per_video), default=0))
            for w in per_video
            if i < len(w)
            for c in [w[i]]
        ]
        if not rounds:
            raise ValueError(f"no real clip of the {config.split} split has {total} frames")
        workloads["real"] = rounds[: config.num_real]
    return workloads


def _windows(video: RealVideo, P: int, total: int) -> list[BenchClip]:
    frames = video.frames
    return [
        _clip(f"{video.name} [{i * total}:{(i + 1) * total}]", frames[i * total : (i + 1) * total], P)
        for i in range(len(frames) // total)
    ]


def _clip(name: str, frames: np.ndarray, P: int) -> BenchClip:
    x = frames_to_tensor(frames)  # (P + F, 3, H, W)
    return BenchClip(name, x[:P], x[P:])
