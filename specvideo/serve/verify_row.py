"""A row whose drafts come from elsewhere: the server's half of drafting on the user's machine.

``VerifyRow`` is one row of the server's own speculative loop whose drafter is the client. Each
``check(draft)`` is one round of that loop: the client's tokens go through one target forward over
the row's cache, the target's tokens at those positions (the argmax, or under the default Gumbel
rule the argmax of the warped log-probabilities plus noise drawn from the row's seed and position
alone) accept the longest matching prefix, the target's next token follows, and the cache keeps
what was accepted. It is the round a run with any drafter of the server's own takes, so the row's
output is the server's own answer to the same request, whatever the client drafts, greedy or
seeded; a draft only changes how many tokens a round yields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from specvideo.core.loop import speculate
from specvideo.core.types import Draft
from specvideo.text.book import RowRequest
from specvideo.text.drafting.base import Drafter
from specvideo.text.drafting.catalog import spec_of

BASE_DRAFTER = "ngram"  # the run is opened with a drafter that loads nothing; the client's replaces it


class ClientDrafter(Drafter):
    """Proposes the tokens a client sent for this round, as many as the row's budget and context allow."""

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

    @property
    def outputs(self) -> list[int]:
        return self.run.rows.outputs[0]

    @property
    def target_calls(self) -> int:
        return self.run.verifier.calls

    @property
    def finished(self) -> bool:
        return self.run.rows.finished

    def check(self, draft: list[int]) -> Checked:
        """One round over ``draft`` (token ids following the row's output so far)."""
        if self.finished:
            raise ValueError("this answer has ended: start a new one")
        self.client.tokens = list(draft)
        before = len(self.outputs)
        run = self.run
        with run.packing():
            step = next(speculate(run, run.verifier, run.verifier.accept, run.schedule, run.stats))
        out = run.row_output(0)
        new = out.token_ids[before:]
        accepted = min(int(step.verdict.num_accepted[0]), max(0, len(new) - 1), step.draft.k)
        return Checked(step.draft.k, accepted, new, out.finished, out.eos)

    def end(self) -> None:
        """Stop the row (a stop string ended its text): it leaves the cache."""
        if not self.finished:
            self.run.finish([0])
