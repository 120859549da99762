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
- temporal consistency: the mean flow-warp error, beside the truth's;
- pretrained eyes (``specvideo.video.pretrained``, EfficientNet-Lite0 on ImageNet): KID x 1000
  per frame and over consecutive frames (cells pooled over clips, per seed: mean and spread),
  fidelity as the features' distance to the true frames (mean, and best of K per clip), and motion
  as the Wasserstein distance between the flow magnitudes of output and truth (pooled over clips,
  per seed);
- the standard yardstick (``specvideo.video.inception``, the TF-FID Inception-v3): KID x 1000 per
  frame on its pool features, the frames of all clips pooled, per seed: mean and spread.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import numpy as np
import torch

from specvideo.video import inception, pretrained
from specvideo.video.metrics import laplacian_energy, psnr, ssim
from specvideo.video.realism import KIDConfig, kid_features, patch_features, standardise, warp_error

KID = KIDConfig()
CELLS = 256  # pretrained cells kept per video, per measure (a fixed draw)


@dataclass
class SampleRecord:
    """One output video (one method, clip and seed), reduced to what the measures need."""

    features: torch.Tensor  # (n, 224) float16 space-time patch features
    ssim_gt: float
    psnr_gt: float
    energy: float  # mean Laplacian energy of its frames
    warp: float
    frame_cells: torch.Tensor | None = None  # (<= CELLS, 1280) float16 pretrained cells
    time_cells: torch.Tensor | None = None  # (<= CELLS, 2560) float16, consecutive frames
    fidelity: float = 0.0  # pretrained feature distance to the true frames
    magnitudes: np.ndarray | None = None  # flow magnitudes between consecutive frames
    maps: torch.Tensor | None = None  # the truth's full feature maps (truth records only)
    inception: torch.Tensor | None = None  # (F, 2048) float16 Inception-v3 pool features, one a frame


def record_sample(
    frames: torch.Tensor, context: torch.Tensor, truth: torch.Tensor, patches: int, truth_maps: torch.Tensor | None = None
) -> SampleRecord:
    """frames, truth: (F, 3, H, W); context: (P, 3, H, W); ``patches``: features kept (fixed draw);
    truth_maps: the truth's pretrained maps of (context's last frame + truth) (None: this is the truth)."""
    video = torch.cat([context[-1:], frames.float().cpu()])  # (F + 1, 3, H, W)
    feats = patch_features([video], KIDConfig(max_patches=patches))
    maps = pretrained.feature_maps(video)  # (F + 1, h, w, 1280)
    return SampleRecord(
        features=feats.half(),
        ssim_gt=float(ssim(frames, truth, data_range=2.0).mean()),
        psnr_gt=float(psnr(frames, truth, data_range=2.0).mean()),
        energy=float(laplacian_energy(frames.float()).mean()),
        warp=warp_error(video),
        frame_cells=_draw(pretrained.frame_cells(maps[1:])).half(),
        time_cells=_draw(pretrained.time_cells(maps)).half(),
        fidelity=0.0 if truth_maps is None else pretrained.fidelity(maps[1:], truth_maps[1:].float()),
        magnitudes=pretrained.flow_magnitudes(video, max_samples=4000),
        maps=maps.half() if truth_maps is None else None,
        inception=inception.inception_features(frames).half(),
    )


def truth_record(context: torch.Tensor, truth: torch.Tensor, patches: int) -> SampleRecord:
    return record_sample(truth, context, truth, patches)


def _draw(cells: torch.Tensor) -> torch.Tensor:
    if len(cells) <= CELLS:
        return cells
    return cells[torch.randperm(len(cells), generator=torch.Generator().manual_seed(0))[:CELLS]]


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
    # pretrained eyes (EfficientNet-Lite0): realism per frame and over time, fidelity, motion
    kid_frames: float = math.nan
    kid_frames_spread: tuple[float, float] = (math.nan, math.nan)
    kid_time: float = math.nan
    kid_time_spread: tuple[float, float] = (math.nan, math.nan)
    fidelity: float = math.nan
    fidelity_best_of_k: float = math.nan
    motion: float = math.nan
    motion_spread: tuple[float, float] = (math.nan, math.nan)
    # the standard yardstick: per-frame KID on the TF-FID Inception-v3's pool features
    kid_inception: float = math.nan
    kid_inception_spread: tuple[float, float] = (math.nan, math.nan)


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
    _pretrained(score, samples, truths)
    if target:
        kid_target = [_kid(_pool(seed), _pool(target[k % len(target)])) for k, seed in enumerate(samples)]
        score.kid_target = statistics.fmean(kid_target)
        score.kid_target_spread = (min(kid_target), max(kid_target))
    return score


def _pretrained(score: GenerativeScore, samples: list[list[SampleRecord]], truths: list[SampleRecord]) -> None:
    """The pretrained measures, per seed pooled over clips; fidelity's best of K per clip."""
    if truths[0].frame_cells is None:
        return
    pool = lambda records, name: torch.cat([getattr(r, name).float() for r in records])  # noqa: E731
    frames = [pretrained.kid_cells(pool(seed, "frame_cells"), pool(truths, "frame_cells")) for seed in samples]
    times = [pretrained.kid_cells(pool(seed, "time_cells"), pool(truths, "time_cells")) for seed in samples]
    truth_mags = np.concatenate([t.magnitudes for t in truths])
    motion = [pretrained.motion_distance(np.concatenate([r.magnitudes for r in seed]), truth_mags) for seed in samples]
    score.kid_frames, score.kid_frames_spread = statistics.fmean(frames), (min(frames), max(frames))
    score.kid_time, score.kid_time_spread = statistics.fmean(times), (min(times), max(times))
    score.fidelity = statistics.fmean(r.fidelity for seed in samples for r in seed)
    score.fidelity_best_of_k = statistics.fmean(min(seed[c].fidelity for seed in samples) for c in range(len(truths)))
    score.motion, score.motion_spread = statistics.fmean(motion), (min(motion), max(motion))
    if truths[0].inception is not None and sum(len(t.inception) for t in truths) >= 2:  # KID needs 2 a set
        kids = [inception.kid_frames(pool(seed, "inception"), pool(truths, "inception")) for seed in samples]
        score.kid_inception, score.kid_inception_spread = statistics.fmean(kids), (min(kids), max(kids))


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
