"""One source of defaults for video generation: the API, the CLI and the app read them from here.

Chosen on the *tuning* split with the shipped verifier (the rollout pass; docs/BENCHMARKS.md,
"Video: tuning split"; `choose_default`): among the settings that keep >= 98 % of the reference
target's SSIM to the truth with acceptance in [0.3, 0.97] on both workloads, flow drafts with tau
0.9 on SSIM at strength 0.8 (each draft's check re-noises it to t = 0.8 (T - 1), denoises it in one step
conditioned on the context and on the warp, and compares) save the most sequential UNet passes on
the worse workload (4.27x) and keep 99.1 % of the reference's SSIM there. k = 4 drafts a round (the
heuristic schedule lengthens rounds that are accepted whole): k = 8 and 16 keep as much quality on
the real crops but are rejected more often on shapes (acceptance 0.77 and 0.50 at tau 0.9), saving
fewer passes there (3.88x and 4.00x). N = 1 full-sampler step:
the reference target N of both tuning workloads (the cheapest N within 1 % of the best N; quality
falls with N for this one-step-trained model). The held-out split reports these settings ("Video").
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
    threshold: float = 0.9
    metric: str = "ssim"
    strength: float = 0.8
    num_refine_steps: int = 1
    num_inference_steps: int = 1
    schedule: str = "heuristic"
    seed: int = 0
    fps: float = 8.0
    # frames are generated at the input's resolution, downscaled on decode to this longer side at
    # most (aspect kept): the UNet is fully convolutional, its cost grows with the pixels. Measured
    # (2-core CPU, alone, the sampler-stage UNet, k 4, N 8, all 16 drafts accepted): a 16-frame
    # continuation of vtest.avi took 0.6 s at 64 px (0.04 s / frame), 7.6 s at 256 (192 x 256),
    # 16.0 s at 320 (240 x 320, 1.0 s / frame) and 27.0 s at 384, plus ~10 s of loading; a rejected
    # draft adds N evaluations. 320 keeps a 320 x 240 clip whole and a continuation near the minute.
    max_side: int = 320


VIDEO_DEFAULTS = VideoConfig()
