"""The target LM as verifier: scores every row's drafted tokens in one forward pass over its KV cache."""

from __future__ import annotations

import time

import torch
from transformers import PreTrainedModel

from specvideo.core.types import Draft, Verdict
from specvideo.text.models.loading import context_length
from specvideo.text.prompts import unpadded_rows
from specvideo.text.runtime.state import CausalLMState
from specvideo.text.sampling import RowSampler


class TargetVerifier:
    """Runs the target over [unseen tokens, d_1 .. d_k] and returns, per row, the target's token at
    each of the k + 1 positions (B, k+1), drawn by the run's ``RowSampler`` (the argmax for a greedy
    row); ``accept`` matches the draft against them. Under the sampler's rejection rule the evidence
    is each row's distribution p (B, k+1, V) instead, and ``accept`` rejection-samples.

    Commit keeps the accepted prefix in the cache (cropping the rest), applies the stop rules (each
    row's budget, end-of-sequence ids, stop strings) and returns what each row emitted. Rows that
    finish leave the target's cache and every state in ``followers`` (the drafter's: ``retire(done)``);
    rows join between rounds (``admit``) and the finished ones leave the numbering (``compact``).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        sampler: RowSampler,
        budgets: list[int],
        stop_ids: frozenset[int] = frozenset(),
    ):
        self.model = model
        self.sampler = sampler
        self.budgets = list(budgets)  # (B,) the most tokens each row emits
        self.stop_ids = stop_ids
        self.context_length = context_length(model)
        self.calls = 0
        self.forward_seconds = 0.0  # wall time of the target's forward passes (the check's model part)
        self.followers: list = []
        self.stop_strings: tuple[str, ...] = ()
        self._decode = None

    def stop_on_text(self, strings: tuple[str, ...], tokenizer) -> None:
        """Also end a row at the token that completes one of ``strings`` in its decoded text."""
        self.stop_strings = tuple(strings)
        self._decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)

    def start(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        self.state = CausalLMState(self.model, input_ids, attention_mask)
        # the rows the run owns: each row's prompt and what it emitted (prompt lookup reads them)
        self.prompts = unpadded_rows(input_ids, attention_mask)
        self.outputs: list[list[int]] = [[] for _ in self.prompts]
        self.active = torch.tensor([budget > 0 for budget in self.budgets])

    @property
    def finished(self) -> bool:
        return not bool(self.active.any())

    @property
    def target_only_calls(self) -> int:
        """Target-only decoding needs one forward per generated token (the first is the prefill)."""
        return max(len(out) for out in self.outputs)

    def max_draft_length(self) -> int:
        """Keep k + 1 tokens within the budget of the row furthest from done and within the context."""
        rows = [b for b, on in enumerate(self.active.tolist()) if on]
        budget = max(self.budgets[b] - len(self.outputs[b]) for b in rows) - 1
        room = min(self.context_length - len(self.prompts[b]) - len(self.outputs[b]) for b in rows)
        return max(0, min(budget, room))

    def verify(self, draft: Draft) -> torch.Tensor:
        logits = self.timed_forward(lambda: self.state.forward(draft.items, num_logits=draft.k + 1))  # (B, k+1, V)
        return self.sampler.evidence(logits)  # (B, k+1) tokens, or (B, k+1, V) p under rejection

    def timed_forward(self, forward) -> torch.Tensor:
        """A round's one target forward (``forward()``, its logits), counted and timed."""
        self.state.mark_round()
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
        emitted = []
        for b, on in enumerate(self.active.tolist()):
            new = items[b][: accepted[b]] + [next_tokens[b]] if on else []
            emitted.append(self._emit(b, new))
        self.state.keep_round(verdict.num_accepted)
        self.state.push(verdict.next_item[:, None])
        self.end_round()
        return emitted

    def end_round(self) -> None:
        """The finished rows leave the caches; the sampler's output positions follow the outputs,
        so the next round's drafter and check draw the noise of the same positions."""
        self._retire()
        self.sampler.offsets = [len(o) for o in self.outputs]

    def finish(self, rows: list[int]) -> None:
        """End these rows now (a client went away, a stop string the caller matched): they leave
        the target's cache and the followers' before the next round."""
        self.active[rows] = False
        self._retire()

    def _retire(self) -> None:
        done = ~self.active
        if bool(done.any()):
            for state in (self.state, *self.followers):
                state.retire(done)

    def first_token(self, row: CausalLMState) -> int:
        """Pick the first token of the row the sampler admitted last from ``row`` (prefilled up to
        its last prompt token, which this feeds in a 1-token step)."""
        logits = row.forward(num_logits=1)[0, -1]  # (V,)
        return self.sampler.first(logits, len(self.sampler.configs) - 1)

    def admit(self, row: CausalLMState, prompt_ids: list[int], budget: int, first: int) -> None:
        """Append a batch-1 state whose pending token is the row's ``first`` as the last row; the
        row may end at once (an end-of-sequence first token, a budget of 1)."""
        self.state.admit(row)
        self.prompts.append(list(prompt_ids))
        self.outputs.append([])
        self.budgets.append(budget)
        self.active = torch.cat([self.active, torch.tensor([True])])
        self._emit(len(self.outputs) - 1, [first])
        self.end_round()

    def compact(self) -> list[int]:
        """Drop the finished rows from the numbering; returns the kept rows' former numbers."""
        kept = self.state.compact().tolist()
        self.prompts = [self.prompts[b] for b in kept]
        self.outputs = [self.outputs[b] for b in kept]
        self.budgets = [self.budgets[b] for b in kept]
        self.active = self.active[kept]
        self.sampler.compact(kept)
        for follower in self.followers:
            follower.compact(kept)
        return kept

    def _text_stop(self, before: list[int], new: list[int]) -> int | None:
        """Index in ``new`` of the token that completes a stop string (None: none does). Only text
        past what ``before`` decoded to, less a stop string's length, is searched."""
        start = max(0, len(self._decode(before)) - max(len(s) for s in self.stop_strings))
        if not any(s in self._decode(before + new)[start:] for s in self.stop_strings):
            return None
        return next(i for i in range(len(new)) if any(s in self._decode(before + new[: i + 1])[start:] for s in self.stop_strings))

    def _emit(self, b: int, new: list[int]) -> list[int]:
        """Append to row b up to its budget and through its first stop token; deactivate it when done."""
        room = self.budgets[b] - len(self.outputs[b])
        new = new[:room]
        stop_at = next((i for i, t in enumerate(new) if t in self.stop_ids), None)
        if stop_at is not None:
            new = new[: stop_at + 1]
        if self.stop_strings:
            at = self._text_stop(self.outputs[b], new)
            stop_at = at if at is not None else stop_at
            new = new if at is None else new[: at + 1]
        self.outputs[b].extend(new)
        if stop_at is not None or len(self.outputs[b]) >= self.budgets[b]:
            self.active[b] = False
        return new
