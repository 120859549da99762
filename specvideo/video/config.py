"""One source of defaults for video generation: the API, the CLI and the app read them from here.

Since issue #39 the check is a typicality test (``metric="typicality"``, tau 0.33: the rule below)
and an accepted frame is the draft itself; on the tuning and validation splits keeping the draft
beat keeping its refinement on KID and sharpness (docs/BENCHMARKS.md "Video: the typicality
check"). The other settings were chosen on the tuning split for the shipped sampler (issue #26;
docs/BENCHMARKS.md "Video: tuning split"): DDPM with N = 8 full-sampler steps for the corrections,
flow drafts, k = 4 a round; s = 0.6 and m = 3 are the refine checks' (``metric="ssim"`` / "psnr":
the draft re-noised to t = 0.6 (T - 1) and denoised in m DDPM steps, accepted at SSIM >= 0.9 to
that refinement, the refinement kept), the default before #39.
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
