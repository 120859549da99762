"""What one ``specvideo bench video`` run does: its settings and the methods they expand to.

Methods, all on the same clips with the same generator seed per clip (docs/ARCHITECTURE.md §4):

    target-N<n>            every frame by the full sampler with n steps (mode="target"), for each n in
                           ``target_steps``; the *reference target* is the cheapest n whose SSIM to
                           the truth is within 1 % of the best n, and every speed-up is against it
    draft-<d>              the drafter alone (mode="draft"), for each drafter
    first-target+<d>       frame 1 by the full sampler, the rest drafted on top of it, all kept
    refine-all-<d>         every draft refined (m steps at strength s) and kept (an SSIM check at
                           tau = -inf whatever the run's metric: the typicality check refines nothing), the
                           equal-cost baseline of the speculative setting (target-only at N = m is
                           its other one, a target-N row)
    spec-<d>-s<s>-t<tau>   speculative, for each sweep drafter x strength s x threshold tau
    ...-k<k>               the same at each further draft length k of ``sweep_draft_frames``
                           (refine-all too); the rows without the suffix use ``num_draft_frames``
    ...-m<m>               the same at each further number m of refinement steps of
                           ``sweep_refine_steps`` (refine-all too): m DDPM steps from t(s) make the
                           refined frame a sample (SDEdit) rather than the one-step posterior mean;
                           the rows without the suffix use ``num_refine_steps``
    default                VIDEO_DEFAULTS' speculative setting, when the sweep does not contain it
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from specvideo.video.config import FALLBACKS
from specvideo.video.config import VIDEO_DEFAULTS as D
from specvideo.video.drafters import DRAFTERS
from specvideo.video.inputs import VIDEO_SCHEDULES, check_typicality
from specvideo.video.metrics import METRICS

FAMILIES = ("target", "draft", "first-target", "refine-all", "speculative")
SPLITS = ("tuning", "validation", "test")  # validation: once "heldout", read for decisions since
SWEEP_DRAFTERS = ("flow", "learned")
WINDOWS = ("consecutive", "moving")
THRESHOLD_SWEEPS = {  # tau values swept by default, per metric, around each metric's default
    "typicality": (0.2, 0.33, 0.5, 1.0),  # e(real) / e(draft): 1 is as typical as the real frame
    "ssim": (0.8, 0.9, 0.95, 0.97, 0.98, 0.99),  # SSIM scores of refined drafts sit near 1
    "psnr": (25.0, 30.0, 35.0, 40.0),
    "features": (0.3, 0.5, 0.7),  # the learned check's P(true next frame); its own tau is stored with it
}
STRENGTHS = (0.6, 0.8, 1.0)
TARGET_STEPS = (1, 2, 4, 8, 16)
REFERENCE_WITHIN = 0.01  # SSIM rule (kept for the distortion tables): the cheapest N within 1 % of the best


def _check_int(name: str, value, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _check_sweep(thresholds: Sequence[float], strengths: Sequence[float]) -> None:
    if not thresholds or not strengths:
        raise ValueError("give at least one threshold and one strength")
    for t in thresholds:
        if not isinstance(t, (int, float)) or not math.isfinite(t):
            raise ValueError(f"thresholds must be finite numbers, got {t!r}")
    for s in strengths:
        if not isinstance(s, (int, float)) or not 0 < s <= 1:
            raise ValueError(f"strengths must be in (0, 1], got {s!r}")


@dataclass(frozen=True)
class BenchVideoConfig:
    """Defaults of ``specvideo bench video`` (the CLI reads them from here).

    split: "tuning" (choose settings here: TUNING_SEEDS, real frames 70-85 %) or "validation" (report
    here: VALIDATION_SEEDS, real frames 85-100 %). model: pipeline directory (None: the shipped
    models/video). clips: video files instead of the split's workloads (whole frames downscaled to
    max_side, cut into P + num_frames windows). num_seeds: K samples of every stochastic method per
    clip (the drafters alone run once). drafters: the draft-only baselines; sweep_drafters:
    the drafters of the tau x s sweep, the first-frame-by-target routing and refine-all. The learned
    drafter runs only where the pipeline has weights. num_inference_steps: N of the speculative
    corrections and of first-target routing; None (the default) takes each workload's reference
    target N, found from the target-only rows, which run first on every clip.
    sweep_draft_frames: further draft lengths k for the sweep and refine-all, beside
    ``num_draft_frames`` (a longer round batches more frames per UNet pass).
    sweep_refine_steps: further refinement step counts m for the sweep and refine-all, beside
    ``num_refine_steps``.
    """

    model: str | None = None
    split: str = "validation"
    num_synthetic: int = 12
    num_real: int = 6
    num_frames: int = 32  # drift and blur show over long rollouts
    num_seeds: int = 4  # K samples per clip of every stochastic method (best-of-K, seed-to-seed spread)
    synthetic_size: int = 64
    max_side: int = 128  # real clips: whole frames, downscaled to this longer side
    # real windows: "consecutive" (each clip cut in order, taken round-robin) or "moving": per clip
    # the ``windows_per_clip`` non-overlapping windows of most motion (benchmarks.video.workloads)
    windows: str = "consecutive"
    windows_per_clip: int = 3
    # read every frame_step-th frame (2-4: real camera motion made fast, where flow breaks; #65)
    frame_step: int = 1
    clips: tuple[str, ...] = ()
    drafters: tuple[str, ...] = ("copy", "linear", "flow", "learned")  # any of DRAFTERS
    sweep_drafters: tuple[str, ...] = SWEEP_DRAFTERS
    thresholds: tuple[float, ...] = ()  # empty: THRESHOLD_SWEEPS[metric]
    strengths: tuple[float, ...] = STRENGTHS
    target_steps: tuple[int, ...] = TARGET_STEPS
    metric: str = D.metric
    check_center: float = D.check_center  # the typicality check's fold (VideoConfig.check_center)
    check_levels: tuple[int, ...] = D.check_levels  # its noise levels
    fallback: str = D.fallback  # the sweep's fallback (VideoConfig.fallback): "still" adds -still to the names
    # the injected table's candidate checks: the two-sided band's fold (None: not reported) and the
    # learned check's directory (None: <model>/check when there is one)
    band_center: float | None = None
    feature_check: str | None = None
    num_draft_frames: int = D.num_draft_frames
    num_refine_steps: int = D.num_refine_steps
    schedule: str = D.schedule
    num_inference_steps: int | None = None
    sweep_draft_frames: tuple[int, ...] = ()
    sweep_refine_steps: tuple[int, ...] = ()
    seed: int = 0
    device: str = "cpu"
    autocast: str = D.autocast  # the verifier's UNet under bf16 autocast: off, bf16, auto
    report: str = "docs/history/benchmarks.md"

    def __post_init__(self) -> None:
        if self.split == "heldout":  # the validation split's old name, in the commands of older reports
            object.__setattr__(self, "split", "validation")
        if not self.thresholds and self.metric in THRESHOLD_SWEEPS:
            object.__setattr__(self, "thresholds", THRESHOLD_SWEEPS[self.metric])
        for name in ("clips", "drafters", "sweep_drafters", "thresholds", "strengths", "target_steps"):
            object.__setattr__(self, name, tuple(dict.fromkeys(getattr(self, name))))
        for name, base in (
            ("sweep_draft_frames", "num_draft_frames"),
            ("sweep_refine_steps", "num_refine_steps"),
        ):
            for k in getattr(self, name):
                _check_int(name, k, 1)
            extra = [k for k in dict.fromkeys(getattr(self, name)) if k != getattr(self, base)]
            object.__setattr__(self, name, tuple(extra))
        object.__setattr__(self, "target_steps", tuple(sorted(self.target_steps)))
        for name in ("num_frames", "num_draft_frames", "num_refine_steps", "num_seeds"):
            _check_int(name, getattr(self, name), 1)
        if self.num_inference_steps is not None:
            _check_int("num_inference_steps", self.num_inference_steps, 1)
        _check_int("num_synthetic", self.num_synthetic, 0)
        _check_int("num_real", self.num_real, 0)
        _check_int("synthetic_size", self.synthetic_size, 16)
        _check_int("max_side", self.max_side, 16)
        _check_int("windows_per_clip", self.windows_per_clip, 1)
        _check_int("frame_step", self.frame_step, 1)
        if self.windows not in WINDOWS:
            raise ValueError(f"windows must be one of {', '.join(WINDOWS)}, got {self.windows!r}")
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if not self.clips and self.num_synthetic + self.num_real < 1:
            raise ValueError("num_synthetic + num_real must be >= 1, or give clips")
        if not self.target_steps:
            raise ValueError("give at least one target step count")
        for n in self.target_steps:
            _check_int("target_steps", n, 1)
        for d in (*self.drafters, *self.sweep_drafters):
            if d not in DRAFTERS:
                raise ValueError(f"unknown drafter {d!r}; choose from {', '.join(DRAFTERS)}")
        _check_sweep(self.thresholds, self.strengths)
        check_typicality(self.check_levels, self.check_center)
        if self.fallback not in FALLBACKS:
            raise ValueError(f"fallback must be one of {', '.join(FALLBACKS)}, got {self.fallback!r}")
        if self.band_center is not None and not (0 < self.band_center < math.inf):
            raise ValueError(f"band_center must be a positive finite fold c, got {self.band_center}")
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {self.metric!r}")
        if self.schedule not in VIDEO_SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(VIDEO_SCHEDULES)}, got {self.schedule!r}")
        try:
            torch.device(self.device)
        except RuntimeError:
            raise ValueError(f"unknown device {self.device!r}") from None


BENCH_VIDEO_DEFAULTS = BenchVideoConfig()


@dataclass(frozen=True)
class SpecSetting:
    """One speculative setting: drafter, tau, s and the knobs the sweep keeps fixed."""

    drafter: str
    threshold: float
    strength: float
    metric: str = D.metric
    num_draft_frames: int = D.num_draft_frames
    num_refine_steps: int = D.num_refine_steps
    schedule: str = D.schedule
    check_center: float = D.check_center
    check_levels: tuple[int, ...] = D.check_levels
    fallback: str = D.fallback


DEFAULT_SETTING = SpecSetting(D.drafter, D.tau, D.strength)


@dataclass(frozen=True)
class Method:
    name: str
    family: str  # one of FAMILIES
    drafter: str | None = None
    setting: SpecSetting | None = None
    is_default: bool = False
    steps: int | None = None  # target-only: its N


def build_methods(config: BenchVideoConfig, available: Sequence[str]) -> list[Method]:
    """Every method of the run, the target-only rows first; the default setting always among them."""
    methods = [Method(f"target-N{n}", "target", steps=n) for n in config.target_steps]
    methods += [Method(f"draft-{d}", "draft", d) for d in config.drafters if d in available]
    sweep = [d for d in config.sweep_drafters if d in available]
    methods += [Method(f"first-target+{d}", "first-target", d) for d in sweep]

    def setting(d: str, tau: float, s: float, k: int, m: int) -> SpecSetting:
        return SpecSetting(
            d, tau, s, config.metric, k, m, config.schedule, config.check_center, config.check_levels, config.fallback
        )

    shapes = {  # (k, m) -> the name's suffix
        (k, m): ("" if k == config.num_draft_frames else f"-k{k}")
        + ("" if m == config.num_refine_steps else f"-m{m}")
        for k in (config.num_draft_frames, *config.sweep_draft_frames)
        for m in (config.num_refine_steps, *config.sweep_refine_steps)
    }
    # refine-all refines and keeps: with a check that keeps the draft, it refines under SSIM
    refined = "ssim" if config.metric in ("typicality", "features") else config.metric
    methods += [
        Method(
            f"refine-all-{d}{tail}",
            "refine-all",
            d,
            replace(setting(d, -math.inf, D.strength, k, m), metric=refined),
        )
        for (k, m), tail in shapes.items()
        for d in sweep
    ]
    for (k, m), tail in shapes.items():
        for d in sweep:
            for s in config.strengths:
                for t in config.thresholds:
                    spec = setting(d, t, s, k, m)
                    name = f"spec-{d}-s{s:g}-t{t:g}{tail}" + ("-still" if config.fallback == "still" else "")
                    methods.append(Method(name, "speculative", d, spec, spec == DEFAULT_SETTING))
    if not any(m.is_default for m in methods):
        methods.append(Method("default", "speculative", D.drafter, DEFAULT_SETTING, True))
    # the default setting with every other drafter too: the check's discrimination pooled over drafters
    for d in available:
        spec = replace(DEFAULT_SETTING, drafter=d)
        if not any(m.setting == spec for m in methods):
            methods.append(Method(f"spec-{d}-s{spec.strength:g}-t{spec.threshold:g}", "speculative", d, spec))
    return methods
