"""Scoring one method's output on one clip, and aggregating a method over a workload's clips.

Quality is PSNR and SSIM against the ground truth and against every target-only output of the same
clip (the reference target is chosen after the run). Costs: seconds, UNet evaluations (CPU compute)
and sequential UNet passes (a batched call counts once: the latency proxy for hardware that runs a
batch in the time of one frame). The verifier's discrimination (docs/ARCHITECTURE.md §4) over every scored
draft: Spearman of its score with its true SSIM to the ground-truth frame, and ROC-AUC of
"score < tau" as a detector of drafts whose SSIM to the truth is below the reference target's frame;
and the same two against the target *in the draft's place* (``benchmarks.video.inplace``): AUC
for drafts below the frame the target makes from the draft's own context, Spearman of the score
with the draft's margin over that frame.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np
import torch

from benchmarks.measure import roc_auc, spearman, spread
from benchmarks.video.config import REFERENCE_WITHIN, Method
from benchmarks.video.methods import MethodOutput
from benchmarks.video.workloads import BenchClip
from specvideo.video.metrics import psnr, ssim


@dataclass
class ClipResult:
    """One method on one clip. vs_target[n]: (PSNR, SSIM) against target-N<n>'s frames. Scored drafts
    (speculative only): their score, true SSIM to the truth, and each target-N's SSIM at that frame."""

    seconds: float
    unet_evals: int
    unet_passes: int
    psnr_gt: float
    ssim_gt: float
    vs_target: dict[int, tuple[float, float]] = field(default_factory=dict)
    drafted: int | None = None
    accepted: int | None = None
    position_drafted: list[int] = field(default_factory=list)
    position_accepted: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    draft_ssim: list[float] = field(default_factory=list)
    target_ssim: dict[int, list[float]] = field(default_factory=dict)
    previous_ssim: list[float] = field(default_factory=list)  # the output frame before each draft
    in_place_ssim: list[float] = field(default_factory=list)  # the target's frame in each draft's place


def score_output(
    out: MethodOutput,
    clip: BenchClip,
    targets: dict[int, torch.Tensor],
    in_place: list[float] | None = None,
) -> ClipResult:
    """Quality against the ground truth and each target-only output in ``targets`` ({N: (F, 3, H, W)});
    ``in_place``: SSIM to the truth of the target's frame in each scored draft's place, if measured."""
    result = ClipResult(
        seconds=out.seconds,
        unet_evals=out.unet_evals,
        unet_passes=out.unet_passes,
        psnr_gt=float(psnr(out.frames, clip.truth, data_range=2.0).mean()),
        ssim_gt=float(ssim(out.frames, clip.truth, data_range=2.0).mean()),
        vs_target={
            n: (
                float(psnr(out.frames, t, data_range=2.0).mean()),
                float(ssim(out.frames, t, data_range=2.0).mean()),
            )
            for n, t in targets.items()
        },
    )
    stats = out.stats
    if stats is None:
        return result
    result.drafted, result.accepted = stats.drafted, stats.accepted
    result.position_drafted, result.position_accepted = (
        list(stats.position_drafted),
        list(stats.position_accepted),
    )
    if stats.scored_drafts:
        index = torch.tensor([r.index for r in stats.scored_drafts])  # (n,)
        drafts = torch.stack([r.draft.float().cpu() for r in stats.scored_drafts])  # (n, 3, H, W)
        result.scores = [r.score for r in stats.scored_drafts]
        result.draft_ssim = ssim(drafts, clip.truth[index], data_range=2.0).tolist()
        result.target_ssim = {
            n: ssim(t[index], clip.truth[index], data_range=2.0).tolist() for n, t in targets.items()
        }
        result.previous_ssim = _previous_ssim(out.frames, clip, index)
        result.in_place_ssim = list(in_place or [])
    return result


def _previous_ssim(frames: torch.Tensor, clip: BenchClip, index: torch.Tensor) -> list[float]:
    """SSIM to the truth of the frame each draft followed: output frame j - 1 for a draft at output
    index j, the last (true) context frame for j = 0. The error a draft inherits from its context."""
    P = len(clip.context)
    made = torch.cat([clip.context, frames.float().cpu()])  # (P + F, 3, H, W)
    true = torch.cat([clip.context, clip.truth])  # (P + F, 3, H, W)
    before = index + P - 1  # (n,)
    return ssim(made[before], true[before], data_range=2.0).tolist()


def reference_steps(target_ssim: dict[int, float]) -> int:
    """The cheapest N whose SSIM to the truth is within 1 % of the best N's."""
    best = max(target_ssim.values())
    return min(n for n, v in target_ssim.items() if v >= best - REFERENCE_WITHIN * abs(best))


@dataclass
class VideoMethodResult:
    """One method on one workload, aggregated over its clips (per-clip lists kept). Ratios are
    against the workload's reference target (``reference_steps``): wall clock as the median over
    clips of the per-clip time ratio (with its min-max over clips), passes and evaluations as
    ratios of the per-frame means."""

    workload: str
    method: str
    family: str
    drafter: str | None
    threshold: float | None
    strength: float | None
    num_draft_frames: int | None  # k of a speculative or refine-all row
    steps: int | None
    is_default: bool
    reference_steps: int
    seconds_per_frame: float  # median over clips
    unet_evals_per_frame: float  # mean over clips
    unet_passes_per_frame: float  # mean over clips
    speedup: float | None  # median over clips of time(reference) / time(method)
    speedup_spread: tuple[float, float] | None
    pass_ratio: float | None  # reference passes per frame / method's (None: the method makes none)
    eval_ratio: float | None
    psnr_gt: float  # means over clips of the per-clip mean over frames
    ssim_gt: float
    psnr_target: float  # against the reference target's frames
    ssim_target: float
    acceptance_rate: float | None  # accepted / drafted over all clips (speculative only)
    per_position_acceptance: list[float] | None
    spearman: float | None
    auc: float | None
    num_scored: int
    seconds: list[float] = field(default_factory=list)
    ssim_gt_clips: list[float] = field(default_factory=list)
    # Spearman of a draft's SSIM to the truth with that of the output frame before it: how much of
    # the draft's quality it inherits from frames already emitted, which no check of its round sees
    inherited_spearman: float | None = None
    # against the target in each draft's place (measured for speculative rows): AUC of "score < tau"
    # for drafts below that frame, their share, and Spearman of score with the draft's margin over it
    in_place_auc: float | None = None
    in_place_worse_share: float | None = None
    in_place_spearman: float | None = None


def aggregate(
    workload: str,
    method: Method,
    runs: list[ClipResult],
    reference: list[ClipResult],
    ref_n: int,
    num_frames: int,
) -> VideoMethodResult:
    """``runs``: the method's clip results; ``reference``: the reference target's, clip for clip."""
    scored = method.setting is not None
    spec = method.family == "speculative"
    scores = [s for r in runs for s in r.scores]
    truth = [s for r in runs for s in r.draft_ssim]
    worse = [d < t for r in runs for d, t in zip(r.draft_ssim, r.target_ssim.get(ref_n, []))]
    in_place = _in_place(runs) if spec else (None, None, None)
    ratios = [t.seconds / r.seconds for t, r in zip(reference, runs)]
    per_frame = num_frames * len(runs)
    evals, passes = sum(r.unet_evals for r in runs) / per_frame, sum(r.unet_passes for r in runs) / per_frame
    ref_evals = sum(r.unet_evals for r in reference) / per_frame
    ref_passes = sum(r.unet_passes for r in reference) / per_frame
    return VideoMethodResult(
        workload=workload,
        method=method.name,
        family=method.family,
        drafter=method.drafter,
        threshold=method.setting.threshold if spec else None,
        strength=method.setting.strength if scored else None,
        num_draft_frames=method.setting.num_draft_frames if scored else None,
        steps=method.steps,
        is_default=method.is_default,
        reference_steps=ref_n,
        seconds_per_frame=statistics.median(r.seconds / num_frames for r in runs),
        unet_evals_per_frame=evals,
        unet_passes_per_frame=passes,
        speedup=statistics.median(ratios),
        speedup_spread=spread(ratios),
        pass_ratio=ref_passes / passes if passes else None,
        eval_ratio=ref_evals / evals if evals else None,
        psnr_gt=statistics.fmean(r.psnr_gt for r in runs),
        ssim_gt=statistics.fmean(r.ssim_gt for r in runs),
        psnr_target=statistics.fmean(r.vs_target[ref_n][0] for r in runs),
        ssim_target=statistics.fmean(r.vs_target[ref_n][1] for r in runs),
        acceptance_rate=_ratio(sum(r.accepted for r in runs), sum(r.drafted for r in runs))
        if scored
        else None,
        per_position_acceptance=_per_position(runs) if scored else None,
        spearman=spearman(scores, truth) if spec else None,
        auc=roc_auc(worse, [-s for s in scores]) if spec else None,
        num_scored=len(scores),
        seconds=[r.seconds for r in runs],
        ssim_gt_clips=[r.ssim_gt for r in runs],
        inherited_spearman=spearman(truth, [s for r in runs for s in r.previous_ssim]) if spec else None,
        in_place_auc=in_place[0],
        in_place_worse_share=in_place[1],
        in_place_spearman=in_place[2],
    )


def _in_place(runs: list[ClipResult]) -> tuple[float | None, float | None, float | None]:
    """(AUC, share of drafts below the target in their place, Spearman of score with the margin)
    over the clips that measured it (a clip measures every scored draft or none)."""
    if any(r.in_place_ssim and len(r.in_place_ssim) != len(r.scores) for r in runs):
        raise ValueError("in_place_ssim must hold one value per scored draft")
    pairs = [
        (s, d - t)
        for r in runs
        if r.in_place_ssim
        for s, d, t in zip(r.scores, r.draft_ssim, r.in_place_ssim)
    ]
    if not pairs:
        return None, None, None
    scores, margin = [s for s, _ in pairs], [m for _, m in pairs]
    worse = [m < 0 for m in margin]
    return roc_auc(worse, [-s for s in scores]), sum(worse) / len(worse), spearman(scores, margin)


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _per_position(runs: list[ClipResult]) -> list[float]:
    size = max((len(r.position_drafted) for r in runs), default=0)
    drafted, accepted = np.zeros(size), np.zeros(size)
    for r in runs:
        drafted[: len(r.position_drafted)] += r.position_drafted
        accepted[: len(r.position_accepted)] += r.position_accepted
    return [float(a / d) if d else 0.0 for a, d in zip(accepted, drafted)]
