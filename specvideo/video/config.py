"""One source of defaults for video generation: the API, the CLI and the app read them from here.

Threshold, strength and steps are provisional until the shipped models' Pareto curve picks them
(docs/BENCHMARKS.md); strength is high because at low strength the refinement barely moves any
draft and the score stops discriminating (DESIGN section 5).
"""

from __future__ import annotations

from dataclasses import dataclass

MODES = ("speculative", "target", "draft")


@dataclass(frozen=True)
class VideoConfig:
    num_frames: int = 16
    mode: str = "speculative"
    drafter: str = "flow"
    num_draft_frames: int = 4
    threshold: float = 0.85
    metric: str = "ssim"
    strength: float = 0.8
    num_refine_steps: int = 1
    num_inference_steps: int = 25
    schedule: str = "heuristic"
    seed: int = 0
    fps: float = 8.0
    max_input_side: int = 1024  # input video frames are downscaled to this longer side on decode


VIDEO_DEFAULTS = VideoConfig()
