"""The check against the target *in the draft's place*: what the target would have made there.

The run-level AUC compares each draft with the reference target's frame at the same output index,
taken from the target-only run: a different rollout with its own drift. This measurement labels a
draft against the frame the reference target generates from the draft's own context: the window
the check conditioned it on (the run's frames before its round, then the round's drafts before
it), from the same per-frame noise the pipeline's target-only call draws for that index. A draft
is *worse than the target in its place* when its SSIM to the truth is below that frame's. This is
the speculative-decoding question (would the target, given the same prefix, have done better?)
and it leaves out the drift both share. Run after the timed call; it costs one UNet evaluation per
scored draft, batched.
"""

from __future__ import annotations

import torch

from specvideo.video.history import FrameNoise
from specvideo.video.metrics import ssim
from specvideo.video.pipeline import pad_to_multiple
from specvideo.video.rounds import VideoSpecStats
from specvideo.video.verifier import DiffusionVerifier

CHUNK = 64  # frames per batched generate call


def draft_windows(stats: VideoSpecStats, context: torch.Tensor, frames: torch.Tensor, P: int) -> torch.Tensor:
    """The (n, P, 3, H, W) window each scored draft of a one-row call was checked with.

    context: (P', 3, H, W) the call's context; frames: (F, 3, H, W) the frames it emitted."""
    if any(d.row for d in stats.scored_drafts):
        raise ValueError("draft_windows reads one-row calls; split a batched call's stats by row first")
    made = list(torch.cat([context.float().cpu(), frames.float().cpu()]))  # P' + F frames (3, H, W)
    offset = len(context)
    rounds: dict[int, dict[int, torch.Tensor]] = {}  # round start -> position -> draft
    for d in stats.scored_drafts:
        rounds.setdefault(d.index - d.position, {})[d.position] = d.draft.float().cpu()
    windows = []
    for d in stats.scored_drafts:
        start = d.index - d.position
        before = [rounds[start][i] for i in range(d.position)]
        windows.append(torch.stack((made[: offset + start] + before)[-P:]))  # (P, 3, H, W)
    return torch.stack(windows)


@torch.inference_mode()
def target_in_place(
    verifier: DiffusionVerifier,
    windows: torch.Tensor,
    index: list[int],
    steps: int,
    seed: int,
) -> torch.Tensor:
    """(n, 3, H, W): the target's frame (N = ``steps``) from each (n, P, 3, H, W) window, with the
    noise a target-only call seeded with ``seed`` draws for output frame ``index[i]``."""
    h, w = windows.shape[-2:]
    windows = pad_to_multiple(windows, verifier.size_multiple)  # as the pipeline pads its context
    shape = tuple(windows.shape[2:])
    noise = FrameNoise(torch.Generator().manual_seed(seed), shape, verifier.device)
    out = []
    for lo in range(0, len(index), CHUNK):
        js = index[lo : lo + CHUNK]
        cond = verifier.condition(windows[lo : lo + CHUNK].to(verifier.device))
        frames = verifier.generate(
            cond,
            steps,
            torch.stack([noise.full(j) for j in js]),  # (n', 3, H, W)
            [noise.generator(j, 2) for j in js],
        )
        out.append(frames[..., :h, :w].float().cpu())
    return torch.cat(out)


def in_place_ssim(
    verifier: DiffusionVerifier,
    stats: VideoSpecStats,
    context: torch.Tensor,
    frames: torch.Tensor,
    truth: torch.Tensor,
    steps: int,
    seed: int,
) -> list[float]:
    """SSIM to the truth (F, 3, H, W) of the target's frame in each scored draft's place."""
    if not stats.scored_drafts:
        return []
    windows = draft_windows(stats, context, frames, verifier.num_context_frames)
    index = [d.index for d in stats.scored_drafts]
    made = target_in_place(verifier, windows, index, steps, seed)  # (n, 3, H, W)
    return ssim(made, truth[torch.tensor(index)], data_range=2.0).tolist()


def in_place_table(rows: list, workload: str) -> str:
    """Markdown table of one workload's speculative rows (``VideoMethodResult``): the check against
    the target in each draft's place beside the run-level figures."""
    lines = [
        "| method | drafts | below the target in place | AUC in place | Spearman with the margin | AUC (run) | Spearman (run) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r.workload != workload or r.family != "speculative" or r.in_place_worse_share is None:
            continue
        name = f"**{r.method}** (default)" if r.is_default else r.method
        cells = [name, str(r.num_scored), _fmt(r.in_place_worse_share, "{:.2f}")]
        cells += [_fmt(v, "{:.3f}") for v in (r.in_place_auc, r.in_place_spearman, r.auc, r.spearman)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else spec.format(value)
