"""One source of defaults for video generation: the API, the CLI and the app read them from here.

Chosen on the *tuning* split for the shipped sampler (issue #26; docs/BENCHMARKS.md "Video: tuning
split"): DDPM with N = 8 full-sampler steps for the corrections (DDIM needed N = 16 for the realism
DDPM reaches at 8 on 16-frame tuning rollouts: KID 117 vs 107 on shapes), flow drafts, k = 4 a
round, each draft's check re-noising it to t = 0.6 (T - 1) and denoising it in m = 3 DDPM steps
(an SDEdit sample, where one step returns the blurry posterior mean), accepted at SSIM >= 0.9 to
its refinement. The rule (`choose_default`): of the settings of the tuning sweep run with the
held-out protocol (target N 1-16, 4 seeds; flow, s 0.6, tau 0.9 / 0.95 x m 2 / 3 / 4, and the
other drafters at tau 0.9; 3 synthetic + 3 real clips, 16 frames), the one that reaches the most of
the default's targets summed over both workloads (KID to the truth and to target-only frames within
the target's seed-to-seed spread, >= 98 % of its best-of-K SSIM, >= 3x wall clock, >= 5x fewer
passes, acceptance in [0.3, 0.97]), ties by wall clock: m 3, tau 0.9, 7 of 12 (shapes KID x 1000
88 [78-96] against the reference N 4's 96 [62-141], 1.6x wall clock, 5.1x fewer passes; real 118
against N 8's 103 [102-105], 4.0x, 14.2x). No setting reaches 3x on shapes against N 4 (m refine
steps in batches of 4 cost ~0.7 m single passes a frame on this CPU), and no flow setting keeps the
real clips' realism (the flow draft itself is at 114). The previous default, m 4, reached 5. On
the held-out split (docs/BENCHMARKS.md "Video"; reference N 8 on both workloads) m 3, tau 0.9 keeps
the target's realism at 3.8x / 3.6x its wall clock and 7.8x / 14.2x fewer passes.
"""

from __future__ import annotations

from dataclasses import dataclass

MODES = ("speculative", "target", "draft")
# the typicality threshold, chosen on the tuning split by a rule that does not look at the default's
# targets: the largest tau that accepts >= 95 % of the *true* frames in every workload (the 5th
# percentile of their scores as drafts: 0.47 synthetic, 0.335 real; docs/BENCHMARKS.md "Video: the
# typicality check"): a check that rejected more real footage than that would be wrong
TYPICALITY_THRESHOLD = 0.33
# each check's threshold when none is given: SSIM 0.9 and PSNR 30 dB for the refine checks
DEFAULT_THRESHOLDS = {"typicality": TYPICALITY_THRESHOLD, "ssim": 0.9, "psnr": 30.0}


@dataclass(frozen=True)
class VideoConfig:
    num_frames: int = 16
    mode: str = "speculative"
    drafter: str = "flow"
    num_draft_frames: int = 4
    # the check (specvideo.video.metrics.METRICS): "typicality" scores a draft by the target's
    # denoising error on the clip's last real frame over its error on the draft, at the noise levels
    # ``check_levels``, and keeps the draft itself when the score reaches the threshold; "ssim" /
    # "psnr" compare a draft with its refinement (s, m) and keep the refinement
    metric: str = "typicality"
    threshold: float = TYPICALITY_THRESHOLD
    check_levels: tuple[int, ...] = (300,)
    strength: float = 0.6
    num_refine_steps: int = 3
    num_inference_steps: int = 8
    schedule: str = "heuristic"
    seed: int = 0
    fps: float = 8.0
    # frames are generated at the input's resolution, downscaled on decode to this longer side at
    # most (aspect kept): the UNet is fully convolutional, its cost grows with the pixels. Measured
    # (2-core CPU, alone, the sampler-stage UNet, k 4, all 16 drafts accepted): a 16-frame
    # continuation of vtest.avi with these defaults (m 3) took 1.3 s of generation at 64 px (0.08 s /
    # frame) and 45 s at 320 (240 x 320, 2.8 s / frame), 55 s for the whole command with loading and
    # encoding; with m 4 it took 1.9 s and 64.9 s, with m 1 0.6 s at 64, 7.6 s at 256, 16.0 s at 320
    # and 27.0 s at 384. A rejected draft adds N = 8 evaluations. 320 keeps a 320 x 240 clip whole
    # and a continuation under the minute.
    max_side: int = 320
    # the verifier's UNet under bf16 autocast where the device computes bf16 natively (AMX / AVX-512
    # BF16 CPUs): on the tuning split's real clips at 320 px a frame cost 1.34 s instead of 1.91
    # (target N 8) and 0.55 instead of 0.92 (the speculative default), KID, sharpness and SSIM
    # unchanged within the seed spread (docs/BENCHMARKS.md "Video: bf16 autocast")
    autocast: str = "auto"


VIDEO_DEFAULTS = VideoConfig()


def default_threshold(metric: str) -> float:
    """The threshold of ``metric`` when none is given (0 for an unknown metric, which the call's
    checks then name)."""
    return DEFAULT_THRESHOLDS.get(metric, 0.0)
