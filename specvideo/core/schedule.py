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
        all_accepted = bool((verdict.num_accepted[active] >= draft.k).all())
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


def make_schedule(name: str, k: int, **kwargs) -> ConstantSchedule | HeuristicSchedule | ConfidenceSchedule:
    """Build a schedule by name: "constant", "heuristic" or "confidence"."""
    classes = {"constant": ConstantSchedule, "heuristic": HeuristicSchedule, "confidence": ConfidenceSchedule}
    if name not in classes:
        raise ValueError(f"unknown schedule {name!r}; choose one of {', '.join(SCHEDULES)}")
    return classes[name](k, **kwargs)


def _check_k(k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"number of draft items k must be an integer >= 1, got {k!r}")
