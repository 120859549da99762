"""``samples.png`` of a video pipeline: 32-frame rollouts on held-out clips, one row per method.

Per clip (two synthetic held-out sequences, 64 px, and two held-out real clips, whole frames at a
longer side of 128 px): the truth, the flow drafter alone, the target alone and the speculative
pipeline, each with the pipeline's defaults (``VIDEO_DEFAULTS``) and the same generator, every
``stride``-th generated frame side by side: drift and blur show over the long horizon.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import torch

from specvideo.video.data import split_synthetic
from specvideo.video.drafters import make_drafter
from specvideo.video.real import evaluation_frames

GRID_ROWS = ("truth", "flow (draft only)", "target only", "speculative")
LABEL_WIDTH, GAP = 130, 2


def sample_clips(P: int, num_frames: int) -> list[np.ndarray]:
    """2 synthetic and (where the held-out split has them) 2 real clips of P + num_frames frames."""
    clips = split_synthetic(2, P + num_frames, 64)
    real = evaluation_frames("validation", P + num_frames, max_side=128)
    return clips + [r.frames for r in real[:2]]


def sample_grid(pipe, path: str | Path, num_frames: int = 32, stride: int = 4, seed: int = 0) -> Path:
    """Write the grid PNG (module docstring) and return its path."""
    P = pipe.verifier.num_context_frames
    flow = type(pipe)(pipe.verifier, make_drafter("flow"))
    blocks = []
    for i, clip in enumerate(sample_clips(P, num_frames)):
        rows = [clip[P::stride]]
        for p, mode in ((flow, "draft"), (pipe, "target"), (pipe, "speculative")):
            g = torch.Generator().manual_seed(seed + i)
            rows.append(
                p(clip[:P], num_frames=num_frames, mode=mode, generator=g, progress=False).frames[::stride]
            )
        blocks.append(np.concatenate([_labelled(name, row) for name, row in zip(GRID_ROWS, rows)]))
    width = max(b.shape[1] for b in blocks)
    padded = [np.pad(b, ((0, 8), (0, width - b.shape[1]), (0, 0)), constant_values=255) for b in blocks]
    path = Path(path)
    cv2.imwrite(str(path), cv2.cvtColor(np.concatenate(padded)[:-8], cv2.COLOR_RGB2BGR))
    return path


def _labelled(name: str, frames: np.ndarray) -> np.ndarray:
    gap = np.full((frames.shape[1], GAP, 3), 255, np.uint8)
    strip = np.concatenate([p for f in frames for p in (f, gap)][:-1], axis=1)
    label = np.full((strip.shape[0], LABEL_WIDTH, 3), 255, np.uint8)
    cv2.putText(
        label, name, (4, strip.shape[0] // 2 + 4), cv2.FONT_HERSHEY_SIMPLEX, 0.38, (0, 0, 0), 1, cv2.LINE_AA
    )
    return np.concatenate([label, strip], axis=1)
