"""The KV-cache contract a run's state speaks, and its adapter over transformers' ``DynamicCache``.

A cache holds keys and values in slots along one axis shared by the batch's rows. The state
(``CausalLMState``) decides which slots hold real tokens; the cache only stores, moves and drops
slots, through the operations of ``SlotCache``. Two layouts implement it:

- ``LeanCache`` (``lean_cache.py``, LeanLlama's): one preallocated buffer, and for an invariant
  model a row's keys lie at slots equal to their positions;
- ``DynamicSlots`` (below): transformers' ``DynamicCache``, for models that transformers runs.

The model's forward takes ``cache.native``: the ``DynamicCache`` itself, or the ``LeanCache``.
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F
from transformers import DynamicCache

KV = list[tuple[torch.Tensor, torch.Tensor]]  # per layer (keys, values) (1, H_kv, n, D)


class SlotCache(Protocol):
    native: object  # what the model's forward takes as its cache

    @property
    def length(self) -> int: ...  # slots on the shared axis

    def reserve(self, n: int) -> None: ...  # room for n more slots before a forward

    def crop_to(self, length: int) -> None: ...  # keep the first ``length`` slots

    def select_rows(self, rows: torch.Tensor) -> None: ...  # keep these batch rows (B',)

    def row(self, i: int) -> SlotCache: ...  # a batch-1 copy of row i (this cache unchanged)

    def admit(self, other: SlotCache, other_rows: int) -> None: ...  # append other's rows

    def gather_slots(self, order: torch.Tensor) -> None: ...  # row b's slots become order[b] (B, W)

    def snapshot(self, n: int) -> KV: ...  # copies of row 0's first n slots

    def restore(self, layers: KV, n: int) -> None: ...  # an empty batch-1 cache takes n slots


def make_slot_cache(model, batch_size: int) -> SlotCache:
    """The model's own cache where it brings one (LeanLlama's ``make_cache``), else a ``DynamicCache``."""
    make = getattr(model, "make_cache", None)
    return make(batch_size) if make is not None else DynamicSlots()


class DynamicSlots:
    """``SlotCache`` over transformers' ``DynamicCache``: keys and values (B, H_kv, L, D) per layer,
    grown by the model's own writes."""

    def __init__(self):
        self.native = DynamicCache()

    @property
    def layers(self):
        return self.native.layers

    @property
    def length(self) -> int:
        return self.native.get_seq_length()

    def reserve(self, n: int) -> None:
        """The model's writes grow the cache."""

    def crop_to(self, length: int) -> None:
        if length < self.length:
            self.native.crop(length - self.length)  # transformers 5: a negative count of slots to drop

    def select_rows(self, rows: torch.Tensor) -> None:
        self.native.batch_select_indices(rows)

    def row(self, i: int) -> DynamicSlots:
        copy = DynamicSlots()
        for n, layer in enumerate(self.layers):
            copy.native.update(layer.keys[i : i + 1].clone(), layer.values[i : i + 1].clone(), n)
        return copy

    def admit(self, other: DynamicSlots, other_rows: int) -> None:
        """Both sides keep their slots from slot 0; the shorter is padded with zero slots (holes
        the state masks). A side with nothing cached yet (a 1-token prompt) adds zero rows."""
        width = max(self.length, other.length)
        theirs = list(other.layers) if other.length else []
        for i, mine in enumerate(self.layers):
            for name in ("keys", "values"):
                ours = getattr(mine, name)
                new = getattr(theirs[i], name) if theirs else ours.new_zeros(other_rows, *ours.shape[1:])
                setattr(mine, name, torch.cat([_pad_slots(ours, width), _pad_slots(new, width)]))

    def gather_slots(self, order: torch.Tensor) -> None:
        for layer in self.layers:
            index = order[:, None, :, None].expand(-1, layer.keys.shape[1], -1, layer.keys.shape[3])
            layer.keys = torch.gather(layer.keys, 2, index)
            layer.values = torch.gather(layer.values, 2, index)

    def snapshot(self, n: int) -> KV:
        return [(layer.keys[:1, :, :n].clone(), layer.values[:1, :, :n].clone()) for layer in self.layers]

    def restore(self, layers: KV, n: int) -> None:
        for i, (keys, values) in enumerate(layers):
            self.native.update(keys[:, :, :n].clone(), values[:, :, :n].clone(), i)


def _pad_slots(x: torch.Tensor, width: int) -> torch.Tensor:
    """(B, H, L, D) keys or values -> (B, H, width, D), zero slots after the last."""
    return F.pad(x, (0, 0, 0, width - x.shape[2]))
