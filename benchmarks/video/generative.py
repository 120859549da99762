"""The benchmark's generative measures: a method judged as generative video is judged.

Every stochastic method runs with K seeds per clip (``BenchVideoConfig.num_seeds``); the drafters
alone are deterministic and run once. Per (method, clip, seed) the run keeps a ``SampleRecord``:
a few hundred space-time patch features of the output (``specvideo.video.realism``), its mean
SSIM / PSNR to the truth, its Laplacian energy and its flow-warp error, so nothing holds K copies
of every video. Aggregated per workload (``GenerativeScore``):

- distortion: mean SSIM / PSNR over clips and seeds, and best-of-K (per clip, the best seed's
  mean, as SVG and SAVP report it), averaged over clips;
- realism: KID x 1000 between the outputs (context's last frame prepended, so the first transition
  counts) and the workload's true frames, per seed, pooled over clips: the mean and the seed-to-seed
  spread (min, max); the sharpness ratio (Laplacian energy over the truth's) the same way;
- fidelity to the target: the same KID against the reference target's outputs of the same seed;
- temporal consistency: the mean flow-warp error, beside the truth's.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import torch

from specvideo.video.metrics import laplacian_energy, psnr, ssim
from specvideo.video.realism import KIDConfig, kid_features, patch_features, standardise, warp_error

KID = KIDConfig()


@dataclass
class SampleRecord:
    """One output video (one method, clip and seed), reduced to what the measures need."""

    features: torch.Tensor  # (n, 224) float16 space-time patch features
    ssim_gt: float
    psnr_gt: float
    energy: float  # mean Laplacian energy of its frames
    warp: float


def record_sample(
    frames: torch.Tensor, context: torch.Tensor, truth: torch.Tensor, patches: int
) -> SampleRecord:
    """frames, truth: (F, 3, H, W); context: (P, 3, H, W); ``patches``: features kept (fixed draw)."""
    video = torch.cat([context[-1:], frames.float().cpu()])  # (F + 1, 3, H, W)
    feats = patch_features([video], KIDConfig(max_patches=patches))
    return SampleRecord(
        features=feats.half(),
        ssim_gt=float(ssim(frames, truth, data_range=2.0).mean()),
        psnr_gt=float(psnr(frames, truth, data_range=2.0).mean()),
        energy=float(laplacian_energy(frames.float()).mean()),
        warp=warp_error(video),
    )


def truth_record(context: torch.Tensor, truth: torch.Tensor, patches: int) -> SampleRecord:
    return record_sample(truth, context, truth, patches)


@dataclass
class GenerativeScore:
    """One method on one workload: means over seeds with their (min, max) over seeds."""

    num_seeds: int
    ssim_gt: float
    psnr_gt: float
    ssim_best_of_k: float
    psnr_best_of_k: float
    kid_truth: float
    kid_truth_spread: tuple[float, float]
    sharpness: float
    sharpness_spread: tuple[float, float]
    warp_error: float
    warp_error_truth: float
    kid_target: float | None = None
    kid_target_spread: tuple[float, float] | None = None
    seeds_kid: list[float] = field(default_factory=list)


def score_generative(
    samples: list[list[SampleRecord]],
    truths: list[SampleRecord],
    target: list[list[SampleRecord]] | None = None,
) -> GenerativeScore:
    """samples[k][c]: seed k's record of clip c; truths[c]: the truth of clip c; target[k][c]: the
    reference target's record of clip c with seed k (seed k % len(target) for a method with more)."""
    K = len(samples)
    truth_feats = _pool(truths)
    kid_truth = [_kid(_pool(seed), truth_feats) for seed in samples]
    truth_energy = statistics.fmean(t.energy for t in truths)
    sharp = [statistics.fmean(r.energy for r in seed) / max(truth_energy, 1e-12) for seed in samples]
    score = GenerativeScore(
        num_seeds=K,
        ssim_gt=statistics.fmean(r.ssim_gt for seed in samples for r in seed),
        psnr_gt=statistics.fmean(r.psnr_gt for seed in samples for r in seed),
        ssim_best_of_k=statistics.fmean(max(seed[c].ssim_gt for seed in samples) for c in range(len(truths))),
        psnr_best_of_k=statistics.fmean(max(seed[c].psnr_gt for seed in samples) for c in range(len(truths))),
        kid_truth=statistics.fmean(kid_truth),
        kid_truth_spread=(min(kid_truth), max(kid_truth)),
        sharpness=statistics.fmean(sharp),
        sharpness_spread=(min(sharp), max(sharp)),
        warp_error=statistics.fmean(r.warp for seed in samples for r in seed),
        warp_error_truth=statistics.fmean(t.warp for t in truths),
        seeds_kid=kid_truth,
    )
    if target:
        kid_target = [_kid(_pool(seed), _pool(target[k % len(target)])) for k, seed in enumerate(samples)]
        score.kid_target = statistics.fmean(kid_target)
        score.kid_target_spread = (min(kid_target), max(kid_target))
    return score


def reference_steps_by_realism(kid_by_steps: dict[int, GenerativeScore]) -> int | None:
    """The cheapest N whose mean KID to the truth lies within the seed-to-seed spread of the best N's
    (at most the best N's worst seed); None where KID could not be measured."""
    if any(math.isnan(s.kid_truth) for s in kid_by_steps.values()):
        return None
    best = min(kid_by_steps.values(), key=lambda s: s.kid_truth)
    return min(n for n, s in kid_by_steps.items() if s.kid_truth <= best.kid_truth_spread[1])


def patches_per_clip(num_clips: int) -> int:
    return max(64, math.ceil(KID.max_patches / max(1, num_clips)))


def _pool(records: list[SampleRecord]) -> torch.Tensor:
    return torch.cat([r.features.float() for r in records])


def _kid(x: torch.Tensor, reference: torch.Tensor) -> float:
    """KID x 1000, or NaN where a set has fewer than 2 patches (clips too small or too short)."""
    if min(len(x), len(reference)) < 2:
        return math.nan
    x, reference = standardise(x, reference, KID.std_floor)  # the measure's own (specvideo.video.realism)
    return 1000 * kid_features(x, reference, KID)
