"""One source of defaults for video generation: the API, the CLI and the app read them from here.

Chosen on the *tuning* split for the shipped sampler (issue #26; models/video/README.md): DDPM
with N = 8 full-sampler steps (DDIM needed N = 16 for the realism DDPM reaches at 8 on 16-frame
tuning rollouts: KID 117 vs 107 on shapes), flow drafts, k = 4 a round, each draft's check
re-noising it to t = 0.6 (T - 1) and denoising it in one step, accepted at SSIM >= 0.95 to its
refinement. Of the tuning probe's flow settings (tau 0.9 / 0.95 x s 0.6 / 0.8, 4 shapes + 3 real
clips, seed 0), tau 0.95 at s 0.6 was the only one near the target's realism on shapes (KID x 1000
178 against the target's 107 and flow's 196; s 0.8 scored 393-445: the stronger re-noising blurs
accepted drafts) and the one that rejects any: acceptance 0.77 on shapes. On real clips every
setting accepted every draft. The full tuning sweep (`specvideo bench video --split tuning`) was
started and stopped after 39 minutes for want of session time; the held-out split reports these
settings (docs/BENCHMARKS.md "Video").
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
    threshold: float = 0.95
    metric: str = "ssim"
    strength: float = 0.6
    num_refine_steps: int = 1
    num_inference_steps: int = 8
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
