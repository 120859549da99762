"""The one speculative loop: propose -> verify -> accept -> correct -> commit -> record.

Caches, rollback and stopping rules live in the drafter and verifier adapters, never here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import torch

from specvideo.core.types import Draft, SpecStats, Step, Verdict


class Drafter(Protocol):
    """Proposes from the rows' history, which the verifier's commit extends (a drafter with a cache
    re-syncs to it), so it has nothing to commit."""

    calls: int

    def propose(self, k: int, keep_drafting: Callable[[torch.Tensor], bool] | None) -> Draft: ...


class Verifier(Protocol):
    calls: int
    target_only_calls: int
    active: torch.Tensor  # (B,) rows still generating
    finished: bool

    def max_draft_length(self) -> int: ...

    def verify(self, draft: Draft) -> Any: ...

    def correct(self, draft: Draft, verdict: Verdict) -> Verdict: ...

    def commit(self, draft: Draft, verdict: Verdict) -> list[list[Any]]: ...


AcceptRule = Callable[[Draft, Any], Verdict]


def speculate(
    drafter: Drafter, verifier: Verifier, accept: AcceptRule, schedule, stats: SpecStats
) -> Iterator[Step]:
    """Run rounds until the verifier says it is finished, yielding one Step per round.

    ``accept(draft, evidence)`` turns the verifier's evidence into a Verdict (one of the pure
    functions in ``specvideo.core.acceptance``); ``stats`` is updated in place after every round.
    """
    round_index = 0
    while not verifier.finished:
        start = time.perf_counter()
        k = max(0, min(schedule.draft_length(), verifier.max_draft_length()))
        with stats.timer("draft"):
            draft = drafter.propose(k, schedule.keep_drafting if schedule.uses_confidence else None)
        with stats.timer("verify"):
            verdict = accept(draft, verifier.verify(draft))
        with stats.timer("correct"):
            verdict = verifier.correct(draft, verdict)
        active = verifier.active.clone()
        emitted = verifier.commit(draft, verdict)
        stats.record(draft, verdict, active, emitted)
        stats.target_calls, stats.draft_calls = verifier.calls, drafter.calls
        stats.target_only_calls = verifier.target_only_calls
        schedule.update(draft, verdict, active)
        stats.time_total += time.perf_counter() - start
        yield Step(round=round_index, k=draft.k, draft=draft, verdict=verdict, emitted=emitted, active=active)
        round_index += 1
