"""Text drafters: a small causal LM, prompt lookup (n-gram), both (lookup first), or none
(target-only decoding).

Each speaks the contract of ``base.Drafter``: ``start`` on a new batch, ``propose(k, keep_drafting)``
returning a Draft of token ids (B, k) from the rows' history (the run's ``RowBook``), and the rows'
``retire`` / ``admit`` / ``compact`` where it keeps per-row state.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from transformers import PreTrainedModel

from specvideo.core.types import Draft
from specvideo.text.drafting.base import Drafter, common_prefix, no_draft
from specvideo.text.prompts import unpadded_rows
from specvideo.text.runtime.state import CausalLMState
from specvideo.text.sampling import RowSampler


class ModelDrafter(Drafter):
    """Drafts with any transformers causal LM, keeping its own KV cache.

    In a round it re-syncs each row to the row's history (``seen``: the tokens its cache holds or
    will feed; the cache is truncated to the common prefix, the rest of the history is queued),
    then drafts k tokens autoregressively, each row's token drawn by the
    run's ``RowSampler`` (``specvideo.text.sampling``): its argmax for a greedy row, else the
    Gumbel-max sample with the noise the target draws at that position (coupled drafting), so a
    drafted token is the one the target would likely pick.

    ``vocab_size`` is the target's: a draft whose vocabulary is padded to another size (the same
    tokenizer, e.g. Qwen2.5 0.5B and 7B) has its logits cut or padded with -inf to it, so q has
    zeros where the draft has no token and the draft never proposes a padding id of its own; a
    target token the draft has no row for is fed to it as id 0 (its context only, never its output).
    """

    def __init__(self, model: PreTrainedModel, sampler: RowSampler, vocab_size: int | None = None):
        self.model = model
        self.sampler = sampler
        self.calls = 0
        self.vocab_size = vocab_size
        self._own = getattr(model, "vocab_size", None) or model.config.vocab_size  # rows of the draft's head

    def start(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        self.state = CausalLMState(self.model, self.feedable(input_ids), attention_mask)
        self.seen = unpadded_rows(input_ids, attention_mask)  # (B lists) what each row's cache holds or queues
        self.synced = [len(seen) for seen in self.seen]  # (B,) how much of each history ``seen`` has in common

    def feedable(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens.masked_fill(tokens >= self._own, 0) if self._own < (self.vocab_size or 0) else tokens

    def fit_vocab(self, logits: torch.Tensor) -> torch.Tensor:
        """(B, V_draft) -> (B, V_target) logits."""
        V = self.vocab_size
        if V is None or V == logits.shape[-1]:
            return logits
        if logits.shape[-1] > V:
            return logits[..., :V]
        return torch.cat(
            [logits, logits.new_full((*logits.shape[:-1], V - logits.shape[-1]), float("-inf"))], -1
        )

    def propose(self, k: int, keep_drafting: Callable[[torch.Tensor], bool] | None) -> Draft:
        B, device = self.state.batch_size, self.state.device
        if k == 0:
            return no_draft(B, device)
        self.sync()
        logits = self.fit_vocab(self.state.forward()[:, -1])  # (B, V)
        tokens, qs = [], []
        for i in range(k):
            token, q = self.sampler.draft(logits, step=i)  # (B,), q (B, V) under rejection sampling
            tokens.append(token)
            qs.append(q)
            if i == k - 1 or (keep_drafting is not None and not keep_drafting(torch.softmax(logits, -1).max(dim=-1).values)):
                break
            logits = self.fit_vocab(self.state.forward(tokens[-1][:, None])[:, -1])  # (B, V)
        self.calls += len(tokens)
        items = torch.stack(tokens, dim=1)  # (B, m)
        for seen, fed in zip(self.seen, items[:, :-1].tolist()):  # d_1 .. d_{m-1} were fed, d_m was not
            seen.extend(fed)
        q = None if qs[0] is None else torch.stack(qs, dim=1)  # (B, m, V)
        return Draft(items=items, lengths=torch.full((B,), items.shape[1], device=device), q=q)

    def sync(self) -> None:
        """Bring every generating row's cache to its history: keep the common prefix of what it
        has seen and the history, queue the rest (left-padded: every row's last column is real).
        A history only grows, so the prefix synced last is common and the comparison starts there."""
        rows = self.rows
        on = rows.active.tolist()
        keep, new = [], []
        for b, seen in enumerate(self.seen):
            start = self.synced[b] if on[b] else len(seen)
            tail = rows.tail(b, start) if on[b] else []  # history[start:]
            n = start + common_prefix(seen[start:], tail)
            keep.append(n)
            new.append(tail[n - start :])
            del seen[n:]
            seen.extend(new[-1])
            self.synced[b] = len(seen)
        self.state.truncate(torch.tensor(keep))
        width = max(len(t) for t in new)
        if width:
            tokens = torch.tensor([[0] * (width - len(t)) + t for t in new], device=self.state.device)  # (B, width)
            valid = torch.tensor([[False] * (width - len(t)) + [True] * len(t) for t in new], device=self.state.device)
            self.state.push(self.feedable(tokens), valid)

    @property
    def rows(self):
        """The run's ``RowBook`` (the sampler reads the same one)."""
        return self.sampler.rows

    def retire(self, done: torch.Tensor) -> None:
        self.state.retire(done)

    def admit(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        """A prompt (1, T) joins the batch between rounds (continuous batching): prefilled on its
        own up to its last token, which the next round feeds with the others' tokens."""
        row = CausalLMState(self.model, self.feedable(input_ids), attention_mask)
        row.prefill()
        self.state.admit(row)
        self.seen += unpadded_rows(input_ids, attention_mask)
        self.synced.append(len(self.seen[-1]))

    def compact(self, kept: list[int]) -> None:
        self.state.compact()
        self.seen = [self.seen[b] for b in kept]
        self.synced = [self.synced[b] for b in kept]


class HybridDrafter(Drafter):
    """Prompt lookup first, the draft model otherwise, decided each round.

    When the context's last tokens occurred earlier in every row (``NGramDrafter.lookup``), the
    tokens that followed are proposed for free; otherwise the model drafts. Code repeats itself, so
    many rounds cost no draft forward at all. The model re-syncs to the rounds it sat out in its
    next forward. Either way the target verifies every token, so the output stays exact.
    """

    def __init__(self, model: ModelDrafter, lookup: NGramDrafter):
        self.model = model
        self.lookup = lookup
        self.lookup_rounds = 0

    @property
    def calls(self) -> int:
        return self.model.calls

    @property
    def batched(self) -> bool:
        return self.model.batched

    def start(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        self.model.start(input_ids, attention_mask)
        self.lookup.start(input_ids, attention_mask)

    def retire(self, done: torch.Tensor) -> None:
        self.model.retire(done)
        self.lookup.retire(done)

    def admit(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        self.model.admit(input_ids, attention_mask)
        self.lookup.admit(input_ids, attention_mask)

    def compact(self, kept: list[int]) -> None:
        self.model.compact(kept)
        self.lookup.compact(kept)

    def propose(self, k: int, keep_drafting: Callable[[torch.Tensor], bool] | None) -> Draft:
        draft = self.lookup.propose(k, None)
        found = (draft.lengths > 0) | ~self.lookup.rows.active.to(draft.lengths.device)  # finished rows need none
        if k > 0 and bool(found.all()):
            self.lookup_rounds += 1
            return draft
        return self.model.propose(k, keep_drafting)


class NGramDrafter(Drafter):
    """Prompt lookup decoding: find the latest earlier occurrence of the last n tokens in the context
    (prompt and generated text) and propose the tokens that followed it. No model, no cost.

    Tries n = max_ngram down to min_ngram; a row without a match proposes nothing that round.

    rows: the run's ``RowBook`` (each row's history, and whether it is ``active``), so rows that
    join, leave or are renumbered need nothing from here.
    """

    reads_book = True

    def __init__(self, max_ngram: int, min_ngram: int = 1, *, rows, device: torch.device | None = None):
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.rows, self.device = rows, device  # device: of the drafts (``start`` sets it)

    def start(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        self.device = input_ids.device

    def propose(self, k: int, keep_drafting: Callable[[torch.Tensor], bool] | None) -> Draft:
        rows = self.rows
        proposals = [self.lookup(rows.history(b), k) if k > 0 and on else [] for b, on in enumerate(rows.active.tolist())]
        m = max(len(p) for p in proposals)
        items = torch.zeros(len(proposals), m, dtype=torch.long)
        for b, proposal in enumerate(proposals):
            items[b, : len(proposal)] = torch.tensor(proposal, dtype=torch.long)
        lengths = torch.tensor([len(p) for p in proposals], dtype=torch.long)
        return Draft(items=items.to(self.device), lengths=lengths.to(self.device))

    def lookup(self, history: list[int], k: int) -> list[int]:
        """Up to k tokens that followed the latest earlier occurrence of the longest matching suffix."""
        for n in range(min(self.max_ngram, len(history) - 1), self.min_ngram - 1, -1):
            pattern = history[-n:]
            for start in range(len(history) - n - 1, -1, -1):
                if history[start : start + n] == pattern:
                    return history[start + n : start + n + k]
        return []


class NullDrafter(Drafter):
    """Proposes nothing: the loop degenerates to plain target-only decoding (our baseline)."""

    reads_book = True

    def propose(self, k: int, keep_drafting: Callable[[torch.Tensor], bool] | None) -> Draft:
        return no_draft(self.batch_size, self.device)

    def admit(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        self.batch_size += 1

    def compact(self, kept: list[int]) -> None:
        self.batch_size = len(kept)
