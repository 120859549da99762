"""One source of defaults for video generation: the API, the CLI and the app read them from here.

Drafter, k, threshold, metric, strength and steps were chosen from the Pareto curve of
`specvideo bench video` on the shipped (flow-hinted) models (docs/BENCHMARKS.md, "Video"): flow
drafts, tau 0.8 on SSIM at strength 0.6 has the highest SSIM to the truth of every setting at least
3x faster than target-only on both held-out workloads (synthetic 0.642 at 6.5x, real 0.591 at
6.8x; target-only 0.554 and 0.466). N = 5 full-sampler steps: target-only quality at N = 5 is at
least that of N = 10 and 25 on sequences outside the benchmark (models/video/README.md).
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
    threshold: float = 0.8
    metric: str = "ssim"
    strength: float = 0.6
    num_refine_steps: int = 1
    num_inference_steps: int = 5
    schedule: str = "heuristic"
    seed: int = 0
    fps: float = 8.0
    max_input_side: int = 1024  # input video frames are downscaled to this longer side on decode


VIDEO_DEFAULTS = VideoConfig()
