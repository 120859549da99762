"""The clips a video benchmark runs on: one split's synthetic and real workloads, or video files.

A clip is P context frames and the ``num_frames`` ground-truth frames after them. Synthetic:
moving-shapes sequences of the split's seed range; real: fixed crops of the split's frames of the
sample videos (tuning: 70-85 %, held-out: 85-100 %; training saw only the first 70 %).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch

from specvideo.bench.video.config import BenchVideoConfig
from specvideo.video.data import HELDOUT_SEEDS, TUNING_SEEDS, heldout_real, heldout_synthetic
from specvideo.video.io import frames_to_tensor, read_video

SPLIT_SEEDS = {"tuning": TUNING_SEEDS, "heldout": HELDOUT_SEEDS}


@dataclass
class BenchClip:
    name: str
    context: torch.Tensor  # (P, 3, H, W) in [-1, 1]
    truth: torch.Tensor  # (F, 3, H, W) in [-1, 1], the frames after the context


def load_workloads(config: BenchVideoConfig, P: int, size: int) -> dict[str, list[BenchClip]]:
    """{"synthetic": ..., "real": ...} from the config's split, or {"clips": ...} from config.clips."""
    total = P + config.num_frames
    if config.clips:
        return {"clips": [c for path in config.clips for c in _file_clips(path, P, config.num_frames, size)]}
    workloads = {}
    if config.num_synthetic:
        seeds = SPLIT_SEEDS[config.split]
        synthetic = heldout_synthetic(config.num_synthetic, total, size, split=config.split)
        workloads["synthetic"] = [_clip(f"seed {seeds[i]}", v, P) for i, v in enumerate(synthetic)]
    if config.num_real:
        real = heldout_real(config.num_real, total, size, split=config.split)
        workloads["real"] = [_clip(f"{config.split} crop {i}", v, P) for i, v in enumerate(real)]
    return workloads


def _clip(name: str, frames: np.ndarray, P: int) -> BenchClip:
    x = frames_to_tensor(frames)  # (P + F, 3, H, W)
    return BenchClip(name, x[:P], x[P:])


def _file_clips(path: str, P: int, num_frames: int, size: int) -> list[BenchClip]:
    """Consecutive P + num_frames windows of a video file, centre square crop resized to size."""
    frames = read_video(path).frames  # (F, H, W, 3)
    total = P + num_frames
    if len(frames) < total:
        raise ValueError(
            f"{path} has {len(frames)} frames; a clip needs {P} context + {num_frames} frames = {total}"
        )
    H, W = frames.shape[1:3]
    side = min(H, W)
    y, x = (H - side) // 2, (W - side) // 2
    interpolation = cv2.INTER_AREA if side >= size else cv2.INTER_LINEAR
    square = np.stack(
        [cv2.resize(f[y : y + side, x : x + side], (size, size), interpolation=interpolation) for f in frames]
    )
    name = Path(path).name
    return [
        _clip(f"{name} [{i * total}:{(i + 1) * total}]", square[i * total : (i + 1) * total], P)
        for i in range(len(frames) // total)
    ]
