"""Draft-length controllers: how many items k to propose next round.

A schedule answers two questions: ``draft_length()`` before a round, and ``keep_drafting(confidence)``
after each drafted item (asked only when ``uses_confidence`` and only by drafters that have a
confidence). ``update`` sees the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specvideo.core.types import Draft, Verdict

SCHEDULES = ("constant", "heuristic", "confidence")


@dataclass
class ConstantSchedule:
    """Always propose k items."""

    k: int
    uses_confidence = False

    def __post_init__(self) -> None:
        _check_k(self.k)

    def draft_length(self) -> int:
        return self.k

    def keep_drafting(self, confidence: torch.Tensor) -> bool:
        return True

    def update(self, draft: Draft, verdict: Verdict, active: torch.Tensor) -> None:
        pass


@dataclass
class HeuristicSchedule:
    """+2 after a round where every active row accepted its whole draft, -1 otherwise (bounded).

    The same rule as transformers' assisted generation ("heuristic" num_assistant_tokens_schedule).
    """

    k: int
    k_min: int = 1
    k_max: int = 16
    uses_confidence = False

    def __post_init__(self) -> None:
        _check_k(self.k)
        if not 1 <= self.k_min <= self.k_max:
            raise ValueError(f"need 1 <= k_min <= k_max, got k_min={self.k_min}, k_max={self.k_max}")
        self.k_max = max(self.k_max, self.k)

    def draft_length(self) -> int:
        return self.k

    def keep_drafting(self, confidence: torch.Tensor) -> bool:
        return True

    def update(self, draft: Draft, verdict: Verdict, active: torch.Tensor) -> None:
        if draft.k == 0 or not bool(active.any()):
            return
        all_accepted = bool((verdict.num_accepted[active] >= draft.depth).all())
        self.k = min(self.k + 2, self.k_max) if all_accepted else max(self.k - 1, self.k_min)


@dataclass
class ConfidenceSchedule:
    """Propose up to k items, stopping early once the draft's top probability falls below a threshold.

    With a batch, drafting continues while any active row is still confident (the extra item costs
    one batched draft call whoever uses it).
    """

    k: int
    threshold: float = 0.4
    uses_confidence = True

    def __post_init__(self) -> None:
        _check_k(self.k)
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"confidence threshold must be in [0, 1], got {self.threshold}")

    def draft_length(self) -> int:
        return self.k

    def keep_drafting(self, confidence: torch.Tensor) -> bool:
        return bool((confidence >= self.threshold).any())

    def update(self, draft: Draft, verdict: Verdict, active: torch.Tensor) -> None:
        pass


class RowSchedules:
    """One schedule per batch row, so that a row's draft lengths depend on its own acceptance only
    (a row of a batch then runs exactly as it would alone). ``draft_length()`` is the longest k of
    the active rows; ``row_k(b)`` is row b's own, which its drafter caps its proposal to."""

    def __init__(self, schedules: list):
        if not schedules:
            raise ValueError("RowSchedules needs at least one row")
        self.schedules = schedules
        self.uses_confidence = any(s.uses_confidence for s in schedules)
        self._active = torch.ones(len(schedules), dtype=torch.bool)

    def row_k(self, b: int) -> int:
        return self.schedules[b].draft_length()

    def draft_length(self) -> int:
        return (
            max(s.draft_length() for s, a in zip(self.schedules, self._active.tolist()) if a)
            if self._active.any()
            else 0
        )

    def keep_drafting(self, confidence: torch.Tensor) -> bool:
        return any(s.keep_drafting(confidence) for s in self.schedules)

    def update(self, draft: Draft, verdict: Verdict, active: torch.Tensor) -> None:
        for b, schedule in enumerate(self.schedules):
            if not bool(active[b]):
                continue
            n = int(draft.lengths[b])
            row_draft = Draft(items=draft.items[b : b + 1, :n], lengths=draft.lengths[b : b + 1])
            schedule.update(
                row_draft, Verdict(num_accepted=verdict.num_accepted[b : b + 1]), active[b : b + 1]
            )
        self._active = active.clone()


def make_schedule(name: str, k: int, **kwargs) -> ConstantSchedule | HeuristicSchedule | ConfidenceSchedule:
    """Build a schedule by name: "constant", "heuristic" or "confidence"."""
    classes = {"constant": ConstantSchedule, "heuristic": HeuristicSchedule, "confidence": ConfidenceSchedule}
    if name not in classes:
        raise ValueError(f"unknown schedule {name!r}; choose one of {', '.join(SCHEDULES)}")
    return classes[name](k, **kwargs)


def _check_k(k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"number of draft items k must be an integer >= 1, got {k!r}")
