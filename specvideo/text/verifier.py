"""The target LM as verifier: scores every row's drafted tokens in one forward pass over its KV cache."""

from __future__ import annotations

import time

import torch
from transformers import PreTrainedModel

from specvideo.core.types import Draft, Verdict
from specvideo.text.book import RowBook
from specvideo.text.runtime.contract import context_length
from specvideo.text.runtime.state import CausalLMState
from specvideo.text.sampling import RowSampler


class TargetVerifier:
    """Runs the target over [unseen tokens, d_1 .. d_k] and returns, per row, the target's token at
    each of the k + 1 positions (B, k+1), drawn by the run's ``RowSampler`` (the argmax for a greedy
    row); ``accept`` matches the draft against them. Under the sampler's rejection rule the evidence
    is each row's distribution p (B, k+1, V) instead, and ``accept`` rejection-samples.

    ``commit`` appends what each row accepted to the run's ``RowBook`` (which applies the budget
    and stop rules), truncates the target's cache to each row's accepted length and queues the next
    token. Rows that finish leave the target's cache and every state in ``followers`` (the
    drafter's: ``retire(done)``).
    """

    def __init__(self, model: PreTrainedModel, sampler: RowSampler, rows: RowBook):
        self.model = model
        self.sampler = sampler
        self.rows = rows
        self.context_length = context_length(model)
        self.calls = 0
        self.forward_seconds = 0.0  # wall time of the target's forward passes (the check's model part)
        self.followers: list = []

    def start(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        self.state = CausalLMState(self.model, input_ids, attention_mask)

    @property
    def active(self) -> torch.Tensor:
        return self.rows.active

    @property
    def finished(self) -> bool:
        return self.rows.finished

    @property
    def target_only_calls(self) -> int:
        return self.rows.target_only_calls

    def max_draft_length(self) -> int:
        return self.rows.max_draft_length(self.context_length)

    def verify(self, draft: Draft) -> torch.Tensor:
        logits = self.timed_forward(lambda: self.state.forward(draft.items, num_logits=draft.k + 1))  # (B, k+1, V)
        return self.sampler.evidence(logits)  # (B, k+1) tokens, or (B, k+1, V) p under rejection

    def timed_forward(self, forward) -> torch.Tensor:
        """A round's one target forward (``forward()``, its logits), counted and timed."""
        start = time.perf_counter()
        logits = forward()
        self.forward_seconds += time.perf_counter() - start  # on CPU: the forward's own time
        self.calls += 1
        return logits

    def accept(self, draft: Draft, evidence: torch.Tensor) -> Verdict:
        """The accept rule, the sampler's: the longest prefix of each row's draft that the target's
        tokens match (or rejection sampling on each row's generator)."""
        return self.sampler.accept(draft, evidence)

    def correct(self, draft: Draft, verdict: Verdict) -> Verdict:
        return verdict  # the correction token is the target's own, from ``verify``

    def commit(self, draft: Draft, verdict: Verdict) -> list[list[int]]:
        accepted = verdict.num_accepted.tolist()
        items, next_tokens = draft.items.tolist(), verdict.next_item.tolist()
        active = self.rows.active.tolist()
        emitted = [self.rows.emit(b, items[b][: accepted[b]] + [next_tokens[b]]) if on else [] for b, on in enumerate(active)]
        self.keep_accepted()
        self.state.push(verdict.next_item[:, None])
        self._retire()
        return emitted

    def keep_accepted(self) -> None:
        """Truncate the target's cache to each row's history but its last token (the next to feed)."""
        self.state.truncate(torch.tensor([self.rows.length(b) - 1 for b in range(len(self.rows))]))

    def finish(self, rows: list[int]) -> None:
        """End these rows now (a client went away, a stop string the caller matched): they leave
        the target's cache and the followers' before the next round."""
        self.rows.finish(rows)
        self._retire()

    def _retire(self) -> None:
        done = ~self.rows.active
        if bool(done.any()):
            for state in (self.state, *self.followers):
                state.retire(done)

    def first_token(self, row: CausalLMState, b: int) -> int:
        """Pick row b's first token from ``row`` (prefilled up to its last prompt token, which this
        feeds in a 1-token step)."""
        logits = row.forward(num_logits=1)[0, -1]  # (V,)
        return self.sampler.first(logits, b)

    def admit(self, row: CausalLMState) -> None:
        """Append a batch-1 state (its pending token the row's first) as the last row."""
        self.state.admit(row)
        self._retire()  # the row may end at once (an end-of-sequence first token, a budget of 1)

    def compact(self, kept: list[int]) -> None:
        """Only rows ``kept`` remain, renumbered (the book's ``compact`` said which)."""
        self._retire()
        self.state.compact()
        for follower in self.followers:
            follower.compact(kept)

    def drop_features(self) -> None:
        """The target stops keeping its features (the head that read them was swapped out)."""
        self.state.keep_hidden, self.state.hidden, self.state.feature_layers = False, None, ()
