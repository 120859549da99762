"""One source of defaults for video generation: the API, the CLI, the app and batch jobs read them
from here, as one ``VideoConfig``. How each default was chosen, with its measurements, is in
docs/history/benchmarks.md ("Video: the typicality check (#39)", "Video: tuning split", "Video: bf16
autocast of the verifier").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from specvideo.settings import Settings

MODES = ("speculative", "target", "draft")
# what a round emits where it trusts neither the draft nor the target's correction (#65 item 5):
# "none": the correction, whatever the check says of it; "still": where the learned check (check/)
# scores the correction below its threshold too, the last frame again (standing still)
FALLBACKS = ("none", "still")
# the typicality threshold, chosen on the tuning split by a rule that does not look at the default's
# targets: the largest tau that accepts >= 95 % of the *true* frames in every workload (the 5th
# percentile of their scores as drafts: 0.47 synthetic, 0.335 real; docs/history/benchmarks.md "Video: the
# typicality check"): a check that rejected more real footage than that would be wrong. The
# two-sided band (#47: t 100, tau 0.369, check_center 2.217, set by scripts/check_band.py) is not
# the default: it lost on the tuning split's default rule (9 of 14 targets against 10) and on
# validation realism (docs/history/benchmarks.md "Video: a two-sided check")
TYPICALITY_THRESHOLD = 0.33
# each check's threshold when none is given: SSIM 0.9 and PSNR 30 dB for the refine checks
DEFAULT_THRESHOLDS = {"typicality": TYPICALITY_THRESHOLD, "ssim": 0.9, "psnr": 30.0}


@dataclass(frozen=True)
class VideoConfig(Settings):
    """Every video setting under one name: the pipeline's call reads ``CALL_SETTINGS``; the drafter,
    ``max_side`` and ``autocast`` choose and load the pipeline; ``seed`` and ``fps`` are the
    commands'. The CLI, the app and batch jobs build one and hand it over whole."""

    KIND: ClassVar[str] = "video"

    num_frames: int = 16
    mode: str = "speculative"
    drafter: str = "flow"
    num_draft_frames: int = 4
    # the check (specvideo.video.metrics.METRICS): "typicality" scores a draft by the target's
    # denoising error on the clip's last real frame over its error on the draft, at the noise levels
    # ``check_levels``, and keeps the draft itself when the score reaches the threshold; "ssim" /
    # "psnr" compare a draft with its refinement (s, m) and keep the refinement
    metric: str = "typicality"
    threshold: float | None = None  # tau; None: the metric's own (DEFAULT_THRESHOLDS; ``tau``)
    check_levels: tuple[int, ...] = (300,)
    # the typicality check's fold c: a draft's ratio r scores min(r, c^2 / r), so tau keeps r in
    # [tau, c^2 / tau] and a draft far easier for the target than real footage is rejected too
    # (a copy, a blur, the flow hint); inf: one-sided (specvideo.video.rounds.typicality)
    check_center: float = math.inf
    fallback: str = "none"
    strength: float = 0.6
    num_refine_steps: int = 3
    num_inference_steps: int = 8
    schedule: str = "heuristic"
    seed: int = 0
    fps: float = 8.0
    # frames are generated at the input's resolution, downscaled on decode to this longer side at
    # most (aspect kept): the UNet is fully convolutional, its cost grows with the pixels; 320 keeps a
    # 320 x 240 clip whole (0.35 s a frame for the default on this project's CPU: docs/history/benchmarks.md "Video: test split at 320 px")
    max_side: int = 320
    # the verifier's UNet under bf16 autocast where the device computes bf16 natively (AMX / AVX-512
    # BF16 CPUs, GPUs): realism unchanged within the seed spread, 1.4-1.7x faster at 320 px
    autocast: str = "auto"

    @property
    def tau(self) -> float:
        """The acceptance threshold: ``threshold``, or the metric's own when it is None."""
        return default_threshold(self.metric) if self.threshold is None else self.threshold



VIDEO_DEFAULTS = VideoConfig()
# the settings the pipeline's call reads (the rest choose the pipeline or belong to a command)
CALL_SETTINGS = (
    "num_frames",
    "mode",
    "num_draft_frames",
    "threshold",
    "metric",
    "strength",
    "num_refine_steps",
    "num_inference_steps",
    "schedule",
    "check_levels",
    "check_center",
    "fallback",
)


def default_threshold(metric: str) -> float:
    """The threshold of ``metric`` when none is given (0 for an unknown metric, which the call's
    checks then name)."""
    return DEFAULT_THRESHOLDS.get(metric, 0.0)
