"""The vocabulary of the draft -> verify -> accept loop.

Nothing here knows about tokens or pixels: an *item* is whatever a drafter proposes (a token id,
a frame). Names follow the papers: k = draft length, q = draft distribution, p = target
distribution, tau = acceptance threshold.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class Draft:
    """k proposed items per batch row.

    items:   (B, k, ...) proposed items (token ids: (B, k); frames: (B, k, C, H, W)).
    lengths: (B,) how many of the k items row b really proposed (a drafter may run dry early,
             e.g. an n-gram lookup without a match); positions >= lengths[b] are padding.
    q:       (B, k, V) draft probabilities the items were sampled from, for a rule that reads
             them (``acceptance.rejection_sample``); None for greedy / deterministic drafters.
    """

    items: torch.Tensor
    lengths: torch.Tensor
    q: torch.Tensor | None = None

    @property
    def k(self) -> int:
        return self.items.shape[1]

    @property
    def batch_size(self) -> int:
        return self.items.shape[0]

    @property
    def depth(self) -> int:
        """The most items a row can accept: k (a draft whose items are not one chain says less)."""
        return self.k


@dataclass
class Verdict:
    """What the verifier decided about a Draft.

    num_accepted: (B,) length of the accepted prefix of each row's draft.
    next_item:    (B, ...) correction at the first rejection, or the bonus item when all passed;
                  None when the correction is produced later by ``verifier.correct`` (video).
    scores:       (B, k) per-item acceptance scores (similarity for video), if any.
    """

    num_accepted: torch.Tensor
    next_item: torch.Tensor | None = None
    scores: torch.Tensor | None = None


@dataclass
class Step:
    """One round of the loop, as yielded by ``speculate``.

    emitted: per row, the items committed this round (accepted drafts, then the correction).
    active:  (B,) rows that were still generating at the start of the round.
    """

    round: int
    k: int
    draft: Draft
    verdict: Verdict
    emitted: list[list[Any]]
    active: torch.Tensor


@dataclass
class SpecStats:
    """Counters every run returns (docs/ARCHITECTURE.md §2).

    ``target_calls`` counts target forward passes for text and UNet evaluations for video (a
    batched call of B frames counts B). Times are wall-clock seconds.
    """

    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    emitted: int = 0
    target_calls: int = 0
    draft_calls: int = 0
    accepted_length_hist: list[int] = field(default_factory=list)
    position_drafted: list[int] = field(default_factory=list)
    position_accepted: list[int] = field(default_factory=list)
    time_draft: float = 0.0
    time_verify: float = 0.0
    time_correct: float = 0.0
    time_total: float = 0.0
    time_forward: float = 0.0  # the target's forward passes, inside time_verify (text)
    target_only_calls: int = 0

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def per_position_acceptance(self) -> list[float]:
        return [a / d if d else 0.0 for a, d in zip(self.position_accepted, self.position_drafted)]

    @property
    def mean_accepted_length(self) -> float:
        total = sum(self.accepted_length_hist)
        return sum(n * c for n, c in enumerate(self.accepted_length_hist)) / total if total else 0.0

    @property
    def items_per_target_call(self) -> float:
        """Emitted items per target call; the target-only loop scores 1.0 by construction."""
        return self.emitted / self.target_calls if self.target_calls else 0.0

    @property
    def estimated_call_speedup(self) -> float:
        """Counterfactual: target calls that target-only decoding would need / calls we made."""
        return self.target_only_calls / self.target_calls if self.target_calls else 0.0

    def record(self, draft: Draft, verdict: Verdict, active: torch.Tensor, emitted: list[list[Any]]) -> None:
        """Add one round: only rows that were active count."""
        self.rounds += 1
        lengths = draft.lengths[active].tolist()
        accepted = verdict.num_accepted[active].tolist()
        self.drafted += sum(lengths)
        self.accepted += sum(accepted)
        self.emitted += sum(len(e) for e, a in zip(emitted, active.tolist()) if a)
        _grow(self.accepted_length_hist, draft.depth + 1)
        _grow(self.position_drafted, draft.depth)
        _grow(self.position_accepted, draft.depth)
        for n_draft, n_acc in zip(lengths, accepted):
            self.accepted_length_hist[n_acc] += 1
            for i in range(n_draft):
                self.position_drafted[i] += 1
                self.position_accepted[i] += int(i < n_acc)

    @contextmanager
    def timer(self, phase: str) -> Iterator[None]:
        """Accumulate wall time into ``time_<phase>``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            name = f"time_{phase}"
            setattr(self, name, getattr(self, name) + time.perf_counter() - start)

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items()}
        out.update(
            acceptance_rate=self.acceptance_rate,
            per_position_acceptance=self.per_position_acceptance,
            mean_accepted_length=self.mean_accepted_length,
            items_per_target_call=self.items_per_target_call,
            estimated_call_speedup=self.estimated_call_speedup,
        )
        return out


def _grow(values: list[int], size: int) -> None:
    values.extend([0] * (size - len(values)))
