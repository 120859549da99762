"""A row whose drafts come from elsewhere: the server's half of drafting on the user's machine.

``VerifyRow`` is one row of the server's own speculative loop whose drafter is the client. Each
``check(draft)`` is one round of that loop: the client's tokens go through one target forward over
the row's cache, the target's tokens at those positions (the argmax, or under the default Gumbel
rule the argmax of the warped log-probabilities plus noise drawn from the row's seed and position
alone) accept the longest matching prefix, the target's next token follows, and the cache keeps
what was accepted. It is the round a run with any drafter of the server's own takes, so the row's
output is the server's own answer to the same request, whatever the client drafts, greedy or
seeded; a draft only changes how many tokens a round yields.

A round runs alone (``check``) or as a row of the server's running batch: ``join`` moves the row
(its cache, output and noise) into that run with the client's tokens as its draft for the next
round, ``back`` takes it out after that round, as any row of the batch is verified.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from specvideo.core.types import Draft, Step
from specvideo.text.book import BookRow, RowRequest
from specvideo.text.drafting.base import Drafter
from specvideo.text.drafting.catalog import spec_of
from specvideo.text.run import Run

BASE_DRAFTER = "ngram"  # the run is opened with a drafter that loads nothing; the client's replaces it


class ClientDrafter(Drafter):
    """Proposes the tokens a client sent for this round, as many as the row's budget and context allow."""

    reads_book = True  # nothing kept per row: the row may leave and come back

    def __init__(self, verifier):
        self.verifier = verifier
        self.tokens: list[int] = []

    def propose(self, k: int, keep_drafting: Callable[[torch.Tensor], bool] | None) -> Draft:
        n = min(len(self.tokens), self.verifier.max_draft_length())
        device = self.verifier.state.device
        items = torch.tensor([self.tokens[:n]], dtype=torch.long, device=device).reshape(1, n)  # (1, n)
        return Draft(items=items, lengths=torch.tensor([n], device=device))


@dataclass(frozen=True)
class Checked:
    """One round: ``accepted`` of the ``checked`` draft tokens, then ``tokens`` emitted (the accepted
    ones and the target's next, cut at an end-of-sequence id or the budget)."""

    checked: int
    accepted: int
    tokens: list[int]
    finished: bool
    eos: bool


class VerifyRow:
    """One request's row, kept between rounds (its cache holds the prompt and the accepted tokens)."""

    def __init__(self, generator, request: RowRequest):
        if generator.config.sampling_rule != "gumbel":
            raise ValueError(
                "verifying a client's draft by equality needs the gumbel sampling rule (a row's tokens a "
                f"function of its seed and position); this generator samples by {generator.config.sampling_rule!r}"
            )
        encoded = generator.encode_row(request, spec_of(BASE_DRAFTER))
        self.run = generator.open(encoded, [request], generator.models.eos_ids(), drafter=BASE_DRAFTER)
        self.client = ClientDrafter(self.run.verifier)
        self.run.drafter = self.client
        self.rounds_elsewhere = 0  # rounds run as a row of another run (one target forward each)
        self.ended: BookRow | None = None  # the row, once it ended in another run
        self.away: tuple[int, int] | None = None  # (its row there, its output length) while in another run
        self.closed = False

    @property
    def outputs(self) -> list[int]:
        return self.ended.output if self.ended is not None else self.run.rows.outputs[0]

    @property
    def target_calls(self) -> int:
        return self.run.verifier.calls + self.rounds_elsewhere

    @property
    def finished(self) -> bool:
        return self.closed or self.ended is not None or (self.away is None and self.run.rows.finished)

    @property
    def joinable(self) -> bool:
        """The row can join another run (its prompt was prefilled by a round of its own)."""
        return self.run.verifier.calls > 0 and not self.finished and self.away is None

    def check(self, draft: list[int]) -> Checked:
        """One round over ``draft`` (token ids following the row's output so far)."""
        if self.finished:
            raise ValueError("this answer has ended: start a new one")
        self.client.tokens = list(draft)
        before = len(self.outputs)
        step = self.run.round()
        return _checked(self.run, 0, step, before)

    def join(self, host: Run, draft: list[int], tag=None) -> None:
        """Move the row into ``host`` (a run of the same target), ``draft`` its next round's draft,
        ``tag`` its tag there."""
        before = len(self.outputs)
        parked = self.run.take(0)
        parked.tag = tag
        try:
            self.away = (host.put(parked, draft), before)
        except ValueError:
            self.run.put(parked)
            raise

    def back(self, host: Run, step: Step) -> Checked:
        """Take the row back from ``host`` after its round ``step``; what the round gave it."""
        b, before = self.away
        checked = _checked(host, b, step, before)
        parked, self.away = host.take(b), None
        self.rounds_elsewhere += 1
        if parked.state is None or self.closed:
            self.ended = parked.book
        else:
            self.run.put(parked)
        return checked

    def end(self) -> None:
        """Stop the row (a stop string ended its text, its session expired): it leaves the cache."""
        self.closed = True
        if self.away is None and not self.run.rows.finished:
            self.run.finish([0])


def _checked(run: Run, b: int, step: Step, before: int) -> Checked:
    """What round ``step`` of ``run`` gave row b, whose output was ``before`` tokens long."""
    out = run.row_output(b)
    new, checked = out.token_ids[before:], int(step.draft.lengths[b])
    accepted = min(int(step.verdict.num_accepted[b]), max(0, len(new) - 1), checked)
    return Checked(checked, accepted, new, out.finished, out.eos)
