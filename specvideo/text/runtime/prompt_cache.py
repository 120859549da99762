"""A cache of recent prompts' keys and values, so a prompt that shares a prefix with one seen
before prefills only what differs (an editor resends nearly the same file on every keystroke).

``store`` snapshots a batch-1 target state right after its prefill: the keys and values of the
prompt's slots (and its final hidden states when the state keeps them, which a draft head reads).
``restore`` finds the stored prompt with the longest common token prefix and copies that many
slots into a fresh state, which then feeds only the rest; at least the prompt's last token is
always fed. Snapshots are copies, so speculation's rollback in a later run never touches them.
Least recently used entries leave first once their bytes pass ``max_bytes``; an entry whose prompt,
but for its last ``SLACK`` tokens, starts a newly stored one leaves at once (an editor typing at
the end of a file keeps one entry, not one per keystroke).

Exactness: an invariant target (LeanLlama(invariant=True), bf16) prefills in chunks that end at
multiples of ``invariant.PREFILL_CHUNK`` slots and a restore takes whole chunks only, so the rest is
computed in the very calls a cold prefill makes and the output equals a cold run's bit for bit.
Elsewhere any prefix is reused, and a split prefill rounds differently at float rounding level
(greedy output equal but for near ties).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch


@dataclass
class PrefixKV:
    """The first ``length`` slots of one prompt: per layer (keys, values) (1, H_kv, length, D), and
    its final hidden states (1, length, d) or None."""

    ids: tuple[int, ...]
    layers: list[tuple[torch.Tensor, torch.Tensor]]
    hidden: torch.Tensor | None

    @property
    def nbytes(self) -> int:
        tensors = [t for kv in self.layers for t in kv] + ([self.hidden] if self.hidden is not None else [])
        return sum(t.numel() * t.element_size() for t in tensors)


SLACK = 2  # tokens at the end of an entry a newer entry may differ in and still supersede it


class PromptCache:
    def __init__(self, max_bytes: int = 512 << 20):
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self.entries: OrderedDict[tuple[int, ...], PrefixKV] = OrderedDict()
        self.hits = self.lookups = self.reused_tokens = 0

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self.entries.values())

    def store(self, ids: list[int], state) -> None:
        """Snapshot the prompt slots of a batch-1 ``state`` just after its prefill (all of ``ids``,
        or all but the last when the state prefilled up to it, ``CausalLMState.prefill``)."""
        key = tuple(ids[: state.length])
        entry = PrefixKV(key, state.snapshot(len(key)), None)
        if state.hidden is not None and state.hidden.shape[1] >= len(key):
            entry.hidden = state.hidden[:, : len(key)].clone()
        if entry.nbytes > self.max_bytes:
            return
        for ids in [k for k, e in self.entries.items() if self._superseded(k, e, entry)]:
            del self.entries[ids]
        self.entries[key] = entry
        while self.nbytes > self.max_bytes:
            self.entries.popitem(last=False)

    @staticmethod
    def _superseded(ids: tuple[int, ...], old: PrefixKV, new: PrefixKV) -> bool:
        """``old`` starts ``new`` but for at most its last ``SLACK`` tokens: for any later prompt
        ``new`` restores all that ``old`` would, less at most those tokens (a tokenizer merges the
        last token of a text with what is typed after it)."""
        if new.hidden is None and old.hidden is not None:
            return False
        return len(ids) - SLACK <= _common_prefix(ids, new.ids)

    def restore(self, ids: list[int], state) -> int:
        """Copy the longest cached prefix of ``ids`` into a fresh batch-1 ``state`` (it must not
        have run yet); returns how many tokens were reused (0: a cold prefill)."""
        self.lookups += 1
        best, reused = None, 0
        for entry in self.entries.values():
            n = _common_prefix(entry.ids, ids)
            if state.keep_hidden and (entry.hidden is None or entry.hidden.shape[-1] != state.feature_width):
                continue  # a head drafter needs the prefix's features, of its layers
            if n > reused:
                best, reused = entry, n
        reused = state.restorable(min(reused, len(ids) - 1))
        if best is None or reused < 1:
            return 0
        self.entries.move_to_end(best.ids)
        state.restore(best.layers, reused, None if best.hidden is None else best.hidden[:, :reused])
        self.hits += 1
        self.reused_tokens += reused
        return reused


def _common_prefix(a: tuple[int, ...], b) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
