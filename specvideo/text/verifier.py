"""The target LM as verifier: scores all k drafted tokens in one forward pass over its KV cache."""

from __future__ import annotations

import time

import torch
from transformers import PreTrainedModel

from specvideo.core.types import Draft, Verdict
from specvideo.text.models.loading import context_length
from specvideo.text.runtime.state import CausalLMState
from specvideo.text.sampling import SamplingConfig, to_probs
from specvideo.text.tree import forward_tree, keep_tree_path


class TargetVerifier:
    """Runs the target over [unseen tokens, d_1 .. d_k] and returns, per row,

    greedy:   the target's argmax at each of the k + 1 positions, (B, k+1);
    sampling: the processed target distribution p at each position, (B, k+1, V).

    Commit keeps the accepted prefix in the cache (cropping the rest), applies the stop rules
    (max_new_tokens, end-of-sequence ids) and returns what each row emitted. Rows that finish leave
    the target's cache and every state in ``followers`` (the drafter's: ``retire(done)``).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        sampling: SamplingConfig,
        max_new_tokens: int,
        stop_ids: frozenset[int] = frozenset(),
    ):
        self.model = model
        self.sampling = sampling
        self.max_new_tokens = max_new_tokens
        self.stop_ids = stop_ids
        self.context_length = context_length(model)
        self._warpers = sampling.warpers()
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
        self.prompts = [row[mask.bool()].tolist() for row, mask in zip(input_ids.cpu(), attention_mask.cpu())]
        self.outputs: list[list[int]] = [[] for _ in self.prompts]
        self.budgets = [self.max_new_tokens] * len(self.outputs)  # (B,) the most tokens each row emits
        self.active = torch.tensor([self.max_new_tokens > 0] * len(self.outputs))

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
        self.state.mark_round()
        start = time.perf_counter()
        if draft.tree is not None:  # n nodes in one forward, each seeing its ancestors only
            logits = forward_tree(self.state, draft.tree)  # (1, n+1, V)
        else:
            logits = self.state.forward(draft.items, num_logits=draft.k + 1)  # (B, k+1, V)
        self.forward_seconds += time.perf_counter() - start  # on CPU: the forward's own time
        self.calls += 1
        return self._evidence(logits)

    def _evidence(self, logits: torch.Tensor) -> torch.Tensor:
        if self.sampling.greedy:
            return logits.argmax(dim=-1)  # (B, k+1)
        return to_probs(logits, self._warpers)  # (B, k+1, V)

    def correct(self, draft: Draft, verdict: Verdict) -> Verdict:
        return verdict  # the correction token was sampled by the acceptance rule

    def commit(self, draft: Draft, verdict: Verdict) -> list[list[int]]:
        if draft.tree is not None:
            return self._commit_tree(draft, verdict)
        accepted = verdict.num_accepted.tolist()
        items, next_tokens = draft.items.tolist(), verdict.next_item.tolist()
        emitted = []
        for b, on in enumerate(self.active.tolist()):
            new = items[b][: accepted[b]] + [next_tokens[b]] if on else []
            emitted.append(self._emit(b, new))
        self.state.keep_round(verdict.num_accepted)
        self.state.push(verdict.next_item[:, None])
        self._retire()
        return emitted

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

    def _commit_tree(self, draft: Draft, verdict: Verdict) -> list[list[int]]:
        """The accepted path and the next token; the cache keeps the path's slots only."""
        new = [int(draft.tree.tokens[i]) for i in verdict.path] + [int(verdict.next_item[0])]
        emitted = [self._emit(0, new) if bool(self.active[0]) else []]
        keep_tree_path(self.state, draft.tree, verdict.path)
        self.state.push(verdict.next_item[:, None])
        return emitted

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
