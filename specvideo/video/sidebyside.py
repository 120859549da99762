"""The side-by-side view: context | draft | final, accepted frames framed green, regenerated red."""

from __future__ import annotations

import cv2
import numpy as np

GREEN, RED = (40, 200, 60), (220, 40, 40)


def side_by_side(last_context: np.ndarray, out, border: int = 2) -> np.ndarray:
    """Last context frame (any size, uint8) + a VideoPipelineOutput with "np" frames -> (F, H, 3W, 3)."""
    return side_by_side_frames(last_context, out.frames, out.drafts, out.stats.frame_accepted, border)


def side_by_side_frames(
    last_context: np.ndarray, frames: np.ndarray, drafts: list, kept: list[bool], border: int = 2
):
    """The same from one video's (F, H, W, 3) uint8 frames, their drafts (or None) and accept flags ``kept``."""
    H, W = frames.shape[1:3]
    last_context = cv2.resize(last_context, (W, H), interpolation=cv2.INTER_AREA)
    rows = []
    for frame, draft, accepted in zip(frames, drafts, kept, strict=True):
        draft = draft if draft is not None else np.zeros_like(frame)
        final = frame.copy()
        color = GREEN if accepted else RED
        final[:border], final[-border:], final[:, :border], final[:, -border:] = color, color, color, color
        rows.append(np.concatenate([last_context, draft, final], axis=1))  # (H, 3W, 3)
    return np.stack(rows)
