"""Adapters that put frame drafters and the diffusion verifier on the shared core loop.

A speculative video round (DESIGN section 5): the drafter proposes d_1..d_k from the accepted
frames; the verifier refines all k at once, each conditioned on the accepted frames plus the drafts
before it; ``threshold_accept`` keeps the longest prefix with similarity >= tau; ``correct``
regenerates the first rejected frame from noise with the full sampler; the refined accepted frames
and the regenerated one are committed, the other drafts discarded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from specvideo.core.types import Draft, SpecStats, Verdict
from specvideo.video.drafters import FrameDrafter
from specvideo.video.metrics import similarity
from specvideo.video.verifier import DiffusionVerifier


@dataclass
class ScoredDraft:
    """One draft the verifier scored: the output frame index it drafted, its score, whether it was
    accepted, and the draft frame (3, H, W). Rejected drafts count too, including those discarded
    after the first rejection of their round."""

    index: int
    score: float
    accepted: bool
    draft: torch.Tensor  # (3, H, W)


@dataclass
class VideoSpecStats(SpecStats):
    """SpecStats plus per output frame: its draft's score (None when no draft was scored) and
    whether the draft was accepted; every scored draft in ``scored_drafts``; ``target_calls``
    counts UNet evaluations."""

    frame_scores: list[float | None] = field(default_factory=list)
    frame_accepted: list[bool] = field(default_factory=list)
    scored_drafts: list[ScoredDraft] = field(default_factory=list)

    @property
    def unet_evals(self) -> int:
        return self.target_calls

    def to_dict(self) -> dict:
        scored = [{"index": r.index, "score": r.score, "accepted": r.accepted} for r in self.scored_drafts]
        return {**super().to_dict(), "scored_drafts": scored, "unet_evals": self.unet_evals}


class FrameNoise:
    """Noise derived per output frame index from one seed drawn from the user's generator, so a
    frame's noise does not depend on how the frames before it were made: rejecting every draft
    reproduces target-only generation exactly. Drawn on the CPU, so CPU and GPU runs agree."""

    def __init__(self, generator: torch.Generator | None, shape: tuple[int, ...], device: torch.device):
        self.seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        self.shape, self.device = shape, device

    def generator(self, index: int, stream: int) -> torch.Generator:
        return torch.Generator().manual_seed(self.seed + 4 * index + stream)

    def full(self, index: int) -> torch.Tensor:
        return torch.randn(self.shape, generator=self.generator(index, 0)).to(self.device)  # (3, H, W)

    def refine(self, index: int) -> torch.Tensor:
        return torch.randn(self.shape, generator=self.generator(index, 1)).to(self.device)  # (3, H, W)


class FrameHistory:
    """Context frames then emitted frames, (3, H, W) each; the verifier conditions on the last P."""

    def __init__(self, context: torch.Tensor, num_context_frames: int):
        self.frames = list(context)
        self.num_context = len(self.frames)
        self.P = num_context_frames

    @property
    def emitted(self) -> int:
        return len(self.frames) - self.num_context

    def window(self, extra: list[torch.Tensor] = ()) -> torch.Tensor:
        return torch.stack((self.frames + list(extra))[-self.P :])  # (P, 3, H, W)


class VideoDrafter:
    """Core adapter over a FrameDrafter (batch of one video)."""

    def __init__(self, drafter: FrameDrafter | None, history: FrameHistory):
        self.drafter, self.history, self.calls = drafter, history, 0

    def propose(self, k: int, keep_drafting) -> Draft:
        if k == 0 or self.drafter is None:
            empty = torch.zeros(1, 0, *self.history.frames[0].shape, device=self.history.frames[0].device)
            return Draft(items=empty, lengths=torch.zeros(1, dtype=torch.long))
        items = self.drafter.propose(self.history.window()[None], k)  # (1, k, 3, H, W)
        self.calls += k
        return Draft(items=items, lengths=torch.tensor([k]))

    def commit(self, draft: Draft, verdict: Verdict) -> None:
        pass  # the history is shared with the verifier, which appends the emitted frames


@dataclass(frozen=True)
class RoundSettings:
    num_frames: int
    strength: float
    num_refine_steps: int
    num_inference_steps: int
    metric: str
    refine: bool = True  # False: draft mode, drafts are emitted as they are


class VideoVerifier:
    """Core adapter over a DiffusionVerifier; owns the frame history and the per-frame records."""

    def __init__(
        self,
        verifier: DiffusionVerifier,
        history: FrameHistory,
        settings: RoundSettings,
        noise: FrameNoise,
        stats: VideoSpecStats,
    ):
        self.verifier, self.history, self.settings, self.noise, self.stats = (
            verifier,
            history,
            settings,
            noise,
            stats,
        )
        self.active = torch.tensor([True])
        self.drafts: list[torch.Tensor | None] = []
        self._evals_at_start = verifier.unet_evals  # the draft behind every emitted frame

    @property
    def calls(self) -> int:
        return self.verifier.unet_evals - self._evals_at_start  # this call's UNet evaluations

    @property
    def target_only_calls(self) -> int:
        return self.history.emitted * self.settings.num_inference_steps

    @property
    def finished(self) -> bool:
        return self.history.emitted >= self.settings.num_frames

    def max_draft_length(self) -> int:
        return self.settings.num_frames - self.history.emitted

    def verify(self, draft: Draft) -> torch.Tensor:
        drafts = list(draft.items[0])  # k x (3, H, W)
        if not drafts or not self.settings.refine:
            self._refined = drafts
            return torch.full((1, len(drafts)), math.inf)
        start = self.history.emitted
        windows = torch.stack([self.history.window(drafts[:i]) for i in range(len(drafts))])  # (k, P, 3, H, W)
        cond = self.verifier.condition(windows)  # (k, C, H, W)
        noise = torch.stack([self.noise.refine(start + i) for i in range(len(drafts))])  # (k, 3, H, W)
        s = self.settings
        refined = self.verifier.refine(
            cond, draft.items[0], s.strength, s.num_refine_steps, noise
        )  # (k, 3, H, W)
        self._refined = list(refined)
        return similarity(draft.items[0], refined, s.metric, data_range=2.0).float().cpu()[None]  # (1, k)

    def correct(self, draft: Draft, verdict: Verdict) -> Verdict:
        j = int(verdict.num_accepted[0])
        self._correction = None
        if j < draft.k or draft.k == 0:
            index = self.history.emitted + j
            cond = self.verifier.condition(self.history.window(self._refined[:j])[None])  # (1, C, H, W)
            noise = self.noise.full(index)[None]  # (1, 3, H, W)
            gen = self.noise.generator(index, 2)  # step noise of stochastic schedulers
            self._correction = self.verifier.generate(cond, self.settings.num_inference_steps, noise, gen)[0]
        return verdict

    def commit(self, draft: Draft, verdict: Verdict) -> list[list[torch.Tensor]]:
        j = int(verdict.num_accepted[0])
        scores = verdict.scores[0].tolist() if verdict.scores is not None and self.settings.refine else []
        new = self._refined[:j] + ([self._correction] if self._correction is not None else [])
        new = new[: self.settings.num_frames - self.history.emitted]
        start = self.history.emitted
        for i, score in enumerate(scores):
            self.stats.scored_drafts.append(ScoredDraft(start + i, score, i < j, draft.items[0, i]))
        for i, frame in enumerate(new):
            self.history.frames.append(frame)
            self.drafts.append(draft.items[0, i] if i < draft.k else None)
            self.stats.frame_scores.append(scores[i] if i < len(scores) else None)
            self.stats.frame_accepted.append(i < j)
        self.active = torch.tensor([not self.finished])
        return [new]
