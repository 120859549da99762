"""One source of defaults for video generation: the API, the CLI and the app read them from here.

Drafter, k, threshold, metric, strength and steps were chosen from the Pareto curve of
`specvideo bench video` on the shipped models (docs/BENCHMARKS.md, "Video"): flow drafts, tau 0.7
on SSIM at strength 0.8 is Pareto-optimal on the held-out synthetic workload (13.6x faster than
target-only, SSIM to the truth 0.602 vs 0.488) and is where the score discriminates best there
(ROC-AUC 0.82); higher tau rejects more drafts, which with this verifier costs both speed and
quality. N = 10 full-sampler steps: target-only quality equals N = 25 (models/video/README.md).
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
    threshold: float = 0.7
    metric: str = "ssim"
    strength: float = 0.8
    num_refine_steps: int = 1
    num_inference_steps: int = 10
    schedule: str = "heuristic"
    seed: int = 0
    fps: float = 8.0
    max_input_side: int = 1024  # input video frames are downscaled to this longer side on decode


VIDEO_DEFAULTS = VideoConfig()
