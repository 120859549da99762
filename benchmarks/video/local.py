"""The check on rounds drafted from the *true* context: the verifier's discrimination without drift.

In a speculative run every round drafts from the frames the run has already emitted, so a draft's
SSIM to the truth also carries the error of its context, which no check of that round can see or
undo. This measurement isolates the check: each clip is cut into rounds of k frames that start from
the true frames; the drafter drafts them, the verifier scores them exactly as a round of the
pipeline does (draft i conditioned on the context plus drafts 1..i-1, one batched refinement at
strength s), and the reference target generates the same k frames from the same true context
(N steps, autoregressively). Spearman of score against the draft's SSIM to the truth, and ROC-AUC of
"score < tau" as a detector of drafts below the target's frame, pooled over a workload's rounds, for
each drafter and pooled over all of them (``POOLED``: a check must rank a bad drafter's drafts
below a good one's, not only order one drafter's drafts).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from benchmarks.measure import roc_auc, spearman
from benchmarks.video.workloads import BenchClip
from specvideo.video.config import VIDEO_DEFAULTS as D
from specvideo.video.drafters import FrameDrafter
from specvideo.video.metrics import similarity, ssim
from specvideo.video.pipeline import pad_to_multiple
from specvideo.video.rounds import typicality
from specvideo.video.verifier import DiffusionVerifier

POOLED = "all drafters"


@dataclass
class LocalCheck:
    """One drafter at one strength on one workload, pooled over its true-context rounds."""

    workload: str
    drafter: str
    strength: float
    metric: str
    num_drafts: int
    spearman: float | None
    auc: float | None
    worse_share: float  # share of drafts below the reference target's frame (the positives)


@dataclass
class _Round:
    scores: list[float]
    draft_ssim: list[float]
    target_ssim: list[float]


def _noise(seed: int, shape: tuple[int, ...], stream: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed * 7919 + stream))


@torch.inference_mode()
def target_rollout(
    verifier: DiffusionVerifier, window: torch.Tensor, k: int, steps: int, seed: int
) -> torch.Tensor:
    """k frames (k, 3, H, W) generated from the true (P, 3, H, W) ``window``, each from noise."""
    frames = []
    for i in range(k):
        cond = verifier.condition(window[None].to(verifier.device))
        frame = verifier.generate(
            cond, steps, _noise(seed, window.shape[1:], 2 * i)[None].to(verifier.device)
        )[0]
        frames.append(frame.float().cpu())
        window = torch.cat([window[1:], frames[-1][None]])
    return torch.stack(frames)


@torch.inference_mode()
def score_round(
    verifier: DiffusionVerifier,
    window: torch.Tensor,
    drafts: torch.Tensor,
    strength: float,
    metric: str,
    seed: int,
    num_refine_steps: int = 1,
    before: torch.Tensor | None = None,
    levels: tuple[int, ...] = D.check_levels,
    center: float = D.check_center,
) -> list[float]:
    """The pipeline's scores of (k, 3, H, W) ``drafts`` after the true (P, 3, H, W) ``window``
    (m = ``num_refine_steps`` refinement steps at strength s; the typicality check's reference is
    the window's last frame after ``before``, the (P, 3, H, W) true frames before it)."""
    P, k = window.shape[0], drafts.shape[0]
    windows = torch.stack([torch.cat([window, drafts[:i]])[-P:] for i in range(k)])  # (k, P, 3, H, W)
    noise = torch.stack([_noise(seed, drafts.shape[1:], 2 * i + 1) for i in range(k)])  # (k, 3, H, W)
    cond = verifier.condition(windows.to(verifier.device))
    if metric == "typicality":
        device = verifier.device
        reference = verifier.denoising_error(
            verifier.condition(before[None].to(device)),
            window[-1:].to(device),
            levels,
            _noise(seed, drafts.shape[1:], 2 * k + 1)[None].to(device),
        )  # (1, L)
        error = verifier.denoising_error(cond, drafts.to(device), levels, noise.to(device))  # (k, L)
        return typicality(reference, error, center).tolist()
    refined = verifier.refine(
        cond, drafts.to(verifier.device), strength, num_refine_steps, noise.to(verifier.device)
    )
    return similarity(drafts.float(), refined.float().cpu(), metric, data_range=2.0).tolist()


def compare_round(
    verifier: DiffusionVerifier,
    window: torch.Tensor,
    drafts: torch.Tensor,
    seed: int,
    levels: tuple[int, ...] = D.check_levels,
    hint: torch.Tensor | None = None,
) -> list[float]:
    """The comparing check's score of each draft (``compare_ratios``): the smallest of its ratios."""
    return compare_ratios(verifier, window, drafts, seed, levels, hint).min(dim=0).values.tolist()


def compare_ratios(
    verifier: DiffusionVerifier,
    window: torch.Tensor,
    drafts: torch.Tensor,
    seed: int,
    levels: tuple[int, ...] = D.check_levels,
    hint: torch.Tensor | None = None,
) -> torch.Tensor:
    """A comparing check (a diffusion model as a zero-shot classifier, Li et al. ICCV 2023): each
    draft's denoising error beside that of standing still (its context's last frame) under the same
    condition and noise draws; the score is error(still) / error(draft), averaged over the levels
    (> 1: the draft is more typical of the target than no motion; a frozen draft scores exactly 1).
    With ``hint`` (k, 3, H, W), the flow drafter's frames for the same positions, the score is the
    smaller of the two ratios: the draft must beat standing still *and* the plain warp.
    ``compare_ratios`` gives each rival's ratio, (1 or 2, k), from the one batched UNet call."""
    P, k = window.shape[0], drafts.shape[0]
    windows = torch.stack([torch.cat([window, drafts[:i]])[-P:] for i in range(k)])  # (k, P, 3, H, W)
    noise = torch.stack([_noise(seed, drafts.shape[1:], 2 * i + 1) for i in range(k)])  # the pipeline's draws
    device = verifier.device
    rivals = [windows[:, -1]] + ([hint.to(drafts)] if hint is not None else [])  # each (k, 3, H, W)
    n = 1 + len(rivals)
    cond = verifier.condition(windows.to(device)).repeat(n, 1, 1, 1)  # drafts, then each rival
    candidates = torch.cat([drafts, *rivals]).to(device)  # (n k, 3, H, W)
    error = verifier.denoising_error(cond, candidates, levels, noise.repeat(n, 1, 1, 1).to(device))  # (n k, L)
    ratios = [(error[j * k : (j + 1) * k] / error[:k].clamp(min=1e-12)).mean(dim=-1) for j in range(1, n)]
    return torch.stack(ratios)  # (n - 1, k)


def true_context_checks(
    verifier: DiffusionVerifier,
    drafters: dict[str, FrameDrafter],
    workloads: dict[str, list[BenchClip]],
    strengths: tuple[float, ...],
    metric: str,
    k: int,
    steps: dict[str, int],
    seed: int = 0,
    num_refine_steps: int = 1,
    center: float = D.check_center,
    levels: tuple[int, ...] = D.check_levels,
) -> list[LocalCheck]:
    """Every (workload, drafter, strength): rounds of k frames starting at frames 0, k, 2k, ... of
    each clip's true sequence; ``steps[workload]`` is the reference target's N."""
    checks = []
    for workload, clips in workloads.items():
        k = min([k, *(len(c.truth) for c in clips)])  # a round fits in the shortest clip
        rounds_of = [  # (round seed, true window (P, 3, H, W), truth (k, 3, H, W), target frames, before)
            (r_seed, window, truth, target_rollout(verifier, window, k, steps[workload], r_seed), before)
            for r_seed, window, truth, before in true_rounds(verifier, clips, k, seed)
        ]
        pooled = {s: [] for s in strengths}
        for name, drafter in drafters.items():
            drafts = [drafter.propose(w[None], k)[0].float().cpu() for _, w, _, _, _ in rounds_of]
            for s in strengths:
                rounds = [
                    _Round(
                        score_round(verifier, w, d, s, metric, r_seed, num_refine_steps, before, levels, center),
                        ssim(d, truth, data_range=2.0).tolist(),
                        ssim(target, truth, data_range=2.0).tolist(),
                    )
                    for (r_seed, w, truth, target, before), d in zip(rounds_of, drafts)
                ]
                checks.append(_pool(workload, name, s, metric, rounds))
                pooled[s] += rounds
        if len(drafters) > 1:
            checks += [_pool(workload, POOLED, s, metric, rounds) for s, rounds in pooled.items()]
    return checks


def true_rounds(verifier: DiffusionVerifier, clips: list[BenchClip], k: int, seed: int) -> list[tuple]:
    """Rounds of k frames from the true sequence of every clip, at frames 0, k, 2k, ... after its
    context: (round seed, window (P, 3, H', W'), truth (k, 3, H', W'), the P frames before the
    window's last one (the typicality check's reference context)). Frames are padded to the UNet's
    multiple as the pipeline pads (these checks call the verifier directly); the reflected border is
    scored with the frame. The clip's context holds P + 1 frames, so every round has its reference."""
    P, rounds = verifier.num_context_frames, []
    for ci, c in enumerate(clips):
        seq = pad_to_multiple(torch.cat([c.context, c.truth]), verifier.size_multiple)  # (P' + F, 3, H', W')
        offset = len(c.context) - P  # >= 1
        for start in range(0, len(c.truth) - k + 1, k):
            at = offset + start
            r_seed = seed + 10_000 * ci + start  # distinct for every (clip, start)
            rounds.append((r_seed, seq[at : at + P], seq[at + P : at + P + k], seq[at - 1 : at + P - 1]))
    return rounds


def _pool(workload: str, drafter: str, strength: float, metric: str, rounds: list[_Round]) -> LocalCheck:
    scores = [s for r in rounds for s in r.scores]
    truth = [s for r in rounds for s in r.draft_ssim]
    worse = [d < t for r in rounds for d, t in zip(r.draft_ssim, r.target_ssim)]
    return LocalCheck(
        workload,
        drafter,
        strength,
        metric,
        len(scores),
        spearman(scores, truth),
        roc_auc(worse, [-s for s in scores]),
        sum(worse) / len(worse) if worse else 0.0,
    )


def local_table(checks: list[LocalCheck], workload: str) -> str:
    """Markdown table of one workload's true-context checks."""
    lines = [
        "| drafter | s | drafts | below the target's frame | Spearman | AUC |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c in checks:
        if c.workload == workload:
            rho = "-" if c.spearman is None else f"{c.spearman:.3f}"
            auc = "-" if c.auc is None else f"{c.auc:.3f}"
            lines.append(
                f"| {c.drafter} | {c.strength:g} | {c.num_drafts} | {c.worse_share:.2f} | {rho} | {auc} |"
            )
    return "\n".join(lines)
