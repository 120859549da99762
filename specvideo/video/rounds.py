"""Adapters that put frame drafters and the diffusion verifier on the shared core loop.

A speculative video round (docs/ARCHITECTURE.md §4), for B videos at once: the drafter proposes
d_1..d_k for every row from its last real or target-sampled frame (the window ending there, with
the motion accumulated over the drafts accepted since: ``FrameHistory.anchor``); the verifier checks all drafts of all rows in one
batch, each conditioned on its row's frames plus the drafts before it. The default check
(``metric="typicality"``) noises each draft to the check's levels and compares the target's
denoising error on it with its error on the row's last real frame (``typicality``): a draft is kept
as drafted. The refine checks ("ssim", "psnr") re-noise each draft to strength s and denoise it in
m steps, compare draft and refinement, and keep the refinement. ``threshold_accept`` keeps each
row's longest prefix with a score >= tau; ``correct`` regenerates every row's first rejected frame
from noise with the full sampler (one batch over the rows that need it); the accepted frames and
the regenerated one are committed, the other drafts discarded. Rows finish independently; a
finished row drafts nothing and costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from specvideo.core.types import Draft, SpecStats, Verdict
from specvideo.video.drafters import FrameDrafter
from specvideo.video.history import FrameHistory, FrameNoise
from specvideo.video.metrics import similarity
from specvideo.video.verifier import DiffusionVerifier


def typicality(reference: torch.Tensor, error: torch.Tensor, center: float = math.inf) -> torch.Tensor:
    """(n,) typicality scores from the target's denoising errors (n, L) on the drafts and on the
    clip's last real frame (n or 1, L): their ratio r = reference / error averaged over the L levels
    (1: the draft is as typical of the target as the real footage; higher: easier for the target
    than real footage), folded at ``center`` c into min(r, c^2 / r), so that a draft far *easier*
    than real footage (a copy, a blur, the target's own hint) scores low as well as one far harder:
    a threshold tau then keeps r in the band [tau, c^2 / tau]. c = inf: one-sided, the score is r."""
    r = (reference / error.clamp(min=1e-12)).mean(dim=-1)  # (n,)
    return r if math.isinf(center) else torch.minimum(r, center**2 / r)


@dataclass
class ScoredDraft:
    """One draft the verifier scored: its row, the output frame index it drafted, its score, whether
    it was accepted, the draft frame (3, H, W), and its position in its round (0 for the first draft:
    the round started at output index ``index - position``, and the check conditioned this draft on
    the row's frames before that plus the round's drafts before it). Rejected drafts count too,
    including those discarded after the first rejection of their round."""

    index: int
    score: float
    accepted: bool
    draft: torch.Tensor  # (3, H, W)
    row: int = 0
    position: int = 0


@dataclass
class VideoSpecStats(SpecStats):
    """SpecStats plus per output frame: its draft's score (None when no draft was scored) and
    whether the draft was accepted; every scored draft in ``scored_drafts``; ``target_calls``
    counts UNet evaluations (a batched call of n frames counts n) and ``unet_passes`` sequential
    UNet calls (a batched call counts once: the latency proxy on hardware that runs a batch in the
    time of one frame)."""

    frame_scores: list[float | None] = field(default_factory=list)
    frame_accepted: list[bool] = field(default_factory=list)
    still_frames: int = 0  # corrections replaced by the last frame (``RoundSettings.fallback``)
    scored_drafts: list[ScoredDraft] = field(default_factory=list)
    unet_passes: int = 0

    @property
    def unet_evals(self) -> int:
        return self.target_calls

    def to_dict(self) -> dict:
        scored = [
            {"row": r.row, "index": r.index, "position": r.position, "score": r.score, "accepted": r.accepted}
            for r in self.scored_drafts
        ]
        return {**super().to_dict(), "scored_drafts": scored, "unet_evals": self.unet_evals, "still_frames": self.still_frames}


class VideoRows:
    """The B videos of one call: their histories, noise, per-row statistics, and ``row_k(b)``, row
    b's own draft length from its schedule (``RowSchedules.row_k``)."""

    def __init__(
        self,
        histories: list[FrameHistory],
        noises: list[FrameNoise],
        num_frames: int,
        row_k: Callable[[int], int],
    ):
        self.histories, self.noises, self.num_frames, self.row_k = histories, noises, num_frames, row_k
        self.stats = [VideoSpecStats() for _ in histories]

    def __len__(self) -> int:
        return len(self.histories)

    def remaining(self, b: int) -> int:
        return self.num_frames - self.histories[b].emitted

    @property
    def active(self) -> torch.Tensor:
        return torch.tensor([self.remaining(b) > 0 for b in range(len(self))])  # (B,)

    def active_rows(self) -> list[int]:
        return [b for b in range(len(self)) if self.remaining(b) > 0]

    def lengths(self, k: int) -> torch.Tensor:
        return torch.tensor([min(k, self.row_k(b), self.remaining(b)) for b in range(len(self))])  # (B,)


class VideoDrafter:
    """Core adapter over a FrameDrafter: drafts k frames for every active row, one call per
    distance from the rows' anchors. ``from_anchor`` (speculative mode): from each row's last real or
    target-sampled frame (``FrameHistory.anchor``); else (draft mode) from its last P frames."""

    def __init__(self, drafter: FrameDrafter | None, rows: VideoRows, from_anchor: bool = True):
        self.drafter, self.rows, self.calls, self.from_anchor = drafter, rows, 0, from_anchor

    def propose(self, k: int, keep_drafting) -> Draft:
        frame = self.rows.histories[0].frames[0]
        B, active = len(self.rows), self.rows.active_rows()
        if k == 0 or self.drafter is None or not active:
            empty = torch.zeros(B, 0, *frame.shape, device=frame.device)
            return Draft(items=empty, lengths=torch.zeros(B, dtype=torch.long))
        items = torch.zeros(B, k, *frame.shape, device=frame.device)  # (B, k, 3, H, W)
        histories = [self.rows.histories[b] for b in active]
        anchors = [h.anchor() if self.from_anchor else (h.window(), 0) for h in histories]  # (window, since)
        for skip in sorted({s for _, s in anchors}):  # one call per distance from the anchor
            rows = [i for i, (_, s) in enumerate(anchors) if s == skip]
            windows = torch.stack([anchors[i][0] for i in rows])  # (b, P, 3, H, W)
            items[[active[i] for i in rows]] = self.drafter.propose(windows, k, skip).to(items)
        self.calls += k * len(active)
        return Draft(items=items, lengths=self.rows.lengths(k))  # the histories it reads are the verifier's


@dataclass(frozen=True)
class RoundSettings:
    num_frames: int
    strength: float
    num_refine_steps: int
    num_inference_steps: int
    metric: str
    refine: bool = True  # False: draft mode, drafts are emitted as they are
    levels: tuple[int, ...] = (300,)  # the typicality check's noise levels
    center: float = math.inf  # the typicality check's fold (``typicality``)
    feature_check: object | None = None  # the "features" check (``feature_check.FeatureCheck``)
    fallback: str = "none"  # "still": a correction the feature check rejects too becomes the last frame


class VideoVerifier:
    """Core adapter over a DiffusionVerifier; appends every row's emitted frames to its history."""

    def __init__(
        self, verifier: DiffusionVerifier, rows: VideoRows, settings: RoundSettings, stats: VideoSpecStats
    ):
        self.verifier, self.rows, self.settings, self.stats = verifier, rows, settings, stats
        self.drafts: list[list[torch.Tensor | None]] = [[] for _ in range(len(rows))]
        self._references: dict[int, torch.Tensor] = {}  # row -> (L,) the typicality check's reference
        self._evals_at_start, self._passes_at_start = verifier.unet_evals, verifier.unet_passes

    @property
    def calls(self) -> int:
        return self.verifier.unet_evals - self._evals_at_start  # this call's UNet evaluations

    @property
    def target_only_calls(self) -> int:
        return sum(h.emitted for h in self.rows.histories) * self.settings.num_inference_steps

    @property
    def active(self) -> torch.Tensor:
        return self.rows.active

    @property
    def finished(self) -> bool:
        return not self.rows.active_rows()

    def max_draft_length(self) -> int:
        return max((self.rows.remaining(b) for b in self.rows.active_rows()), default=0)

    def verify(self, draft: Draft) -> torch.Tensor:
        B, k = draft.batch_size, draft.k
        lengths = draft.lengths.tolist()
        self._refined = [list(draft.items[b, : lengths[b]]) for b in range(B)]
        if k == 0 or not self.settings.refine:
            return torch.full((B, k), math.inf)
        pairs = [(b, i) for b in range(B) for i in range(lengths[b])]
        if not pairs:
            return torch.full((B, k), -math.inf)
        h, noise = self.rows.histories, self.rows.noises
        windows = torch.stack([h[b].window(list(draft.items[b, :i])) for b, i in pairs])  # (n, P, 3, H, W)
        index = [h[b].emitted + i for b, i in pairs]
        x = torch.stack([draft.items[b, i] for b, i in pairs])  # (n, 3, H, W)
        s = self.settings
        context_noise = self._context_noise([b for b, _ in pairs], index)  # (n, P, 3, H, W) or None
        if s.metric == "typicality":
            values = self._typicality(pairs, windows, index, x, context_noise)  # (n,)
            return self._scores(B, k, pairs, values, passes=1, evals=len(s.levels))
        if s.metric == "features":  # no UNet pass: the learned check on pretrained features
            return self._scores(B, k, pairs, s.feature_check.score(windows, x), passes=0, evals=0)
        refined = self.verifier.refine(
            self.verifier.condition(windows, context_noise),  # (n, C, H, W)
            x,
            s.strength,
            s.num_refine_steps,
            torch.stack([noise[b].refine(j) for (b, _), j in zip(pairs, index)]),  # (n, 3, H, W)
            generator=[noise[b].generator(j, 3) for (b, _), j in zip(pairs, index)],
        )  # (n, 3, H, W)
        values = similarity(x.float(), refined.float(), s.metric, data_range=2.0).float().cpu()  # (n,)
        for n, (b, i) in enumerate(pairs):
            self._refined[b][i] = refined[n]
        return self._scores(B, k, pairs, values, s.num_refine_steps, s.num_refine_steps)

    def _scores(self, B: int, k: int, pairs, values: torch.Tensor, passes: int, evals: int) -> torch.Tensor:
        """(B, k) scores from the (n,) values of the scored (row, position) pairs; charges the call."""
        scores = torch.full((B, k), -math.inf)
        for n, (b, i) in enumerate(pairs):
            scores[b, i] = values[n]
        rows = [b for b, _ in pairs]
        self._charge(sorted(set(rows)), rows, passes, evals)
        return scores

    def _typicality(self, pairs, windows, index, x, context_noise) -> torch.Tensor:
        """(n,) typicality of each draft: the target's denoising error on the clip's last real frame
        over its error on the draft, averaged over the check's levels (1: as typical as the real
        footage; the accepted frame is the draft itself, nothing is refined)."""
        noise = self.rows.noises
        error = self.verifier.denoising_error(
            self.verifier.condition(windows, context_noise),  # (n, C, H, W)
            x,
            self.settings.levels,
            torch.stack([noise[b].refine(j) for (b, _), j in zip(pairs, index)]),  # (n, 3, H, W)
        )  # (n, L)
        self._reference([b for b, _ in pairs])
        reference = torch.stack([self._references[b] for b, _ in pairs])  # (n, L)
        return typicality(reference, error, self.settings.center).float().cpu()

    def _reference(self, rows: list[int]) -> None:
        """The target's denoising error (L,) on each row's last context frame, conditioned on the
        frames before it (the oldest repeated when the context holds only P), for the rows that lack
        one: once per row, in one batched call."""
        rows = [b for b in dict.fromkeys(rows) if b not in self._references]
        if not rows:
            return
        P = self.verifier.num_context_frames
        windows, frames = [], []
        for b in rows:
            h = self.rows.histories[b]
            before = h.frames[: h.num_context - 1][-P:]
            windows.append(torch.stack([before[0]] * (P - len(before)) + before))  # (P, 3, H, W)
            frames.append(h.frames[h.num_context - 1])
        error = self.verifier.denoising_error(
            self.verifier.condition(torch.stack(windows), self._context_noise(rows, [-1] * len(rows))),
            torch.stack(frames),  # (r, 3, H, W)
            self.settings.levels,
            torch.stack([self.rows.noises[b].refine(-1) for b in rows]),
        )  # (r, L)
        self._references.update(zip(rows, error))
        self._charge(rows, rows, 1, len(self.settings.levels))

    def correct(self, draft: Draft, verdict: Verdict) -> Verdict:
        accepted, lengths = verdict.num_accepted.tolist(), draft.lengths.tolist()
        need = [b for b in self.rows.active_rows() if accepted[b] < lengths[b] or lengths[b] == 0]
        self._corrections: dict[int, torch.Tensor] = {}
        if not need:
            return verdict
        h, noise = self.rows.histories, self.rows.noises
        windows = torch.stack([h[b].window(self._refined[b][: accepted[b]]) for b in need])  # (n, P, 3, H, W)
        index = [h[b].emitted + accepted[b] for b in need]
        context_noise = self._context_noise(need, index)  # (n, P, 3, H, W) or None
        frames = self.verifier.generate(
            self.verifier.condition(windows, context_noise),  # (n, C, H, W)
            self.settings.num_inference_steps,
            torch.stack([noise[b].full(j) for b, j in zip(need, index)]),  # (n, 3, H, W)
            [noise[b].generator(j, 2) for b, j in zip(need, index)],
        )  # (n, 3, H, W)
        self._charge(need, need, self.settings.num_inference_steps)
        rejected = torch.tensor([accepted[b] < lengths[b] for b in need])  # a draft failed before it
        self._corrections = dict(zip(need, self._stand_still(need, windows, frames, rejected)))
        return verdict

    def _stand_still(
        self, rows: list[int], windows: torch.Tensor, frames: torch.Tensor, rejected: torch.Tensor
    ) -> torch.Tensor:
        """With ``fallback="still"``: each correction (n, 3, H, W) of a rejected draft (``rejected``
        (n,)) that the learned check scores below its threshold too becomes its window's last frame:
        where neither the drafter nor the target can be trusted, the video stands still."""
        check = self.settings.feature_check
        if self.settings.fallback != "still" or check is None or not rejected.any():
            return frames
        scores = check.score(windows, frames).to(frames.device)  # (n,)
        distrusted = (scores < check.config.threshold) & rejected.to(frames.device)  # (n,)
        for b in (b for b, bad in zip(rows, distrusted.tolist()) if bad):
            self.rows.stats[b].still_frames += 1
        return torch.where(distrusted[:, None, None, None], windows[:, -1].to(frames), frames)

    def _context_noise(self, rows: list[int], index: list[int]) -> torch.Tensor | None:
        """The context noise of each (row, output index), or None for a verifier that takes none."""
        v = self.verifier
        if not (v.takes_context_noise and v.context_noise_level):
            return None
        return torch.stack([self.rows.noises[b].context(j, v.num_context_frames) for b, j in zip(rows, index)])

    def _charge(self, rows: list[int], frames_of: list[int], passes: int, evals: int | None = None) -> None:
        """Count a batched UNet call in the rows' statistics: ``passes`` sequential passes for every
        row in it, ``evals`` (default ``passes``) evaluations per frame (``frames_of`` names each
        frame's row)."""
        for b in rows:
            self.rows.stats[b].unet_passes += passes
        for b in frames_of:
            self.rows.stats[b].target_calls += passes if evals is None else evals
        self.stats.unet_passes = self.verifier.unet_passes - self._passes_at_start

    def commit(self, draft: Draft, verdict: Verdict) -> list[list[torch.Tensor]]:
        emitted: list[list[torch.Tensor]] = []
        active = self.rows.active
        for b in range(draft.batch_size):
            emitted.append(self._commit_row(b, draft, verdict) if active[b] else [])
        return emitted

    def _commit_row(self, b: int, draft: Draft, verdict: Verdict) -> list[torch.Tensor]:
        j, n = int(verdict.num_accepted[b]), int(draft.lengths[b])
        history, stats = self.rows.histories[b], self.rows.stats[b]
        scores = verdict.scores[b, :n].tolist() if verdict.scores is not None and self.settings.refine else []
        new = self._refined[b][:j] + ([self._corrections[b]] if b in self._corrections else [])
        new = new[: self.rows.remaining(b)]
        # the typicality and feature checks and draft mode keep the drafts; the refine checks keep the
        # target's refinements
        kept_as_drafted = not self.settings.refine or self.settings.metric in ("typicality", "features")
        start = history.emitted
        for i, score in enumerate(scores):
            stats.scored_drafts.append(
                ScoredDraft(start + i, score, i < j, draft.items[b, i], row=b, position=i)
            )
        for i, frame in enumerate(new):
            history.frames.append(frame.float())
            history.drafted.append(i < j and kept_as_drafted)
            self.drafts[b].append(draft.items[b, i] if i < n else None)
            stats.frame_scores.append(scores[i] if i < len(scores) else None)
            stats.frame_accepted.append(i < j)
        row_draft = Draft(items=draft.items[b : b + 1, :n], lengths=draft.lengths[b : b + 1])
        row_verdict = Verdict(num_accepted=verdict.num_accepted[b : b + 1])
        stats.record(row_draft, row_verdict, torch.tensor([True]), [new])
        stats.draft_calls += n
        stats.target_only_calls = history.emitted * self.settings.num_inference_steps
        return new


def merge_row_stats(total: VideoSpecStats, rows: list[VideoSpecStats]) -> VideoSpecStats:
    """Fill the per-frame lists of the totals from the rows, in row order."""
    total.frame_scores = [s for r in rows for s in r.frame_scores]
    total.frame_accepted = [a for r in rows for a in r.frame_accepted]
    total.scored_drafts = [d for r in rows for d in r.scored_drafts]
    total.still_frames = sum(r.still_frames for r in rows)
    for r in rows:  # the loop's wall times belong to every row alike
        r.time_draft, r.time_verify, r.time_correct, r.time_total = (
            total.time_draft,
            total.time_verify,
            total.time_correct,
            total.time_total,
        )
    return total
