"""The KV-cache contract a run's state speaks, and its adapter over transformers' ``DynamicCache``.

The state (``CausalLMState``) knows each row's length, the count of its cached tokens; rolling a
row back is lowering its length (``truncate``). A cache stores the keys and values behind those
lengths through the operations of ``SlotCache``. Two layouts implement it:

- ``LeanCache`` (``lean_cache.py``, LeanLlama's): one preallocated buffer where a row's token at
  position p lies at slot p, so a length is all a row needs: the runner writes and masks by position;
- ``DynamicSlots`` (below): transformers' ``DynamicCache``, whose rows share one slot axis; rows
  that keep different counts leave holes there, which this adapter masks and repacks.

The model's forward takes ``cache.native`` and the mask ``attention_mask`` gives for each block.
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
    def length(self) -> int: ...  # slots in use

    def reserve(self, n: int) -> None: ...  # room for n more slots before a forward

    def attention_mask(self, lengths: torch.Tensor, valid: torch.Tensor): ...  # the model's mask for a block

    def truncate(self, lengths: torch.Tensor) -> None: ...  # row b keeps its first lengths[b] tokens (B,)

    def select_rows(self, rows: torch.Tensor) -> None: ...  # keep these batch rows (B',)

    def row(self, i: int) -> SlotCache: ...  # a batch-1 copy of row i (this cache unchanged)

    def admit(self, other: SlotCache, other_rows: int) -> None: ...  # append other's rows

    def gather_slots(self, order: torch.Tensor) -> None: ...  # row b's slots become order[b] (B, W)

    def snapshot(self, n: int) -> KV: ...  # copies of row 0's first n slots

    def restore(self, layers: KV, n: int) -> None: ...  # an empty batch-1 cache takes n slots


def make_slot_cache(model, batch_size: int, device: torch.device) -> SlotCache:
    """The model's own cache where it brings one (LeanLlama's ``make_cache``), else a ``DynamicCache``."""
    make = getattr(model, "make_cache", None)
    return make(batch_size) if make is not None else DynamicSlots(batch_size, device)


class DynamicSlots:
    """``SlotCache`` over transformers' ``DynamicCache``: keys and values (B, H_kv, L, D) per layer,
    grown by the model's own writes. Row b's tokens are the slots ``mask[b]`` marks, in order
    (``mask`` None: every slot is real, and the model gets no attention mask)."""

    def __init__(self, batch_size: int, device: torch.device):
        self.native = DynamicCache()
        self.rows, self.device = batch_size, device
        self.mask: torch.Tensor | None = None  # (B, L) real slots

    @property
    def layers(self):
        return self.native.layers

    @property
    def length(self) -> int:
        return self.native.get_seq_length()

    def reserve(self, n: int) -> None:
        """The model's writes grow the cache."""

    def attention_mask(self, lengths: torch.Tensor, valid: torch.Tensor) -> torch.Tensor | None:
        """(B, L + n) over the cached slots and a block whose real columns are ``valid`` (B, n), as
        the next forward writes them; None while every slot is real."""
        if self.mask is None and bool(valid.all()):
            return None
        self.mask = torch.cat([self._slots(), valid], dim=1)
        return self.mask.long()

    def _slots(self) -> torch.Tensor:
        """(B, L) real slots."""
        if self.mask is not None:
            return self.mask
        return torch.ones(self.rows, self.length, dtype=torch.bool, device=self.device)

    def truncate(self, lengths: torch.Tensor) -> None:
        """Drop the real slots past each row's length; trailing slots no row uses go."""
        mask = self._slots()
        if self.mask is None and bool((lengths == mask.shape[1]).all()):
            return
        self._set_mask(mask & (mask.long().cumsum(1) <= lengths.to(mask.device)[:, None]))

    def _set_mask(self, mask: torch.Tensor) -> None:
        """Crop the slots no row uses; None when no hole is left; repacked when holes fill over half."""
        used = mask.any(dim=0).nonzero()
        width = int(used[-1]) + 1 if len(used) else 0
        if width < self.length:
            self.native.crop(width - self.length)  # transformers 5: a negative count of slots to drop
        mask = mask[:, :width]
        self.mask = None if bool(mask.all()) else mask
        if self.mask is not None and width > 2 * int(mask.sum(1).max()) + 16:
            self.repack()

    def repack(self) -> None:
        """Move every row's real slots to the right end of an axis as wide as the longest row (left
        padding). Keys carry their rotary positions, so attention is unchanged."""
        mask = self._slots()
        order = torch.sort(mask.long(), dim=1, stable=True).indices[:, -int(mask.sum(1).max()) :]  # (B, W) holes first
        self.gather_slots(order)
        mask = torch.gather(mask, 1, order)
        self.mask = None if bool(mask.all()) else mask

    def select_rows(self, rows: torch.Tensor) -> None:
        mask = self._slots()[rows]
        self.native.batch_select_indices(rows)
        self.rows = len(rows)
        self._set_mask(mask)

    def row(self, i: int) -> DynamicSlots:
        """Row i's real slots, holes squeezed out."""
        copy = DynamicSlots(1, self.device)
        slots = self._slots()[i].nonzero()[:, 0]  # (n_i,)
        for n, layer in enumerate(self.layers):
            copy.native.update(layer.keys[i : i + 1, :, slots].clone(), layer.values[i : i + 1, :, slots].clone(), n)
        return copy

    def admit(self, other: DynamicSlots, other_rows: int) -> None:
        """Both sides keep their slots from slot 0; the shorter is padded with zero slots (holes in
        the mask). A side with nothing cached yet (a 1-token prompt) adds zero rows."""
        width = max(self.length, other.length)
        mask = torch.cat([F.pad(self._slots(), (0, width - self.length)), F.pad(other._slots(), (0, width - other.length))])
        theirs = list(other.layers) if other.length else []
        for i, mine in enumerate(self.layers):
            for name in ("keys", "values"):
                ours = getattr(mine, name)
                new = getattr(theirs[i], name) if theirs else ours.new_zeros(other_rows, *ours.shape[1:])
                setattr(mine, name, torch.cat([_pad_slots(ours, width), _pad_slots(new, width)]))
        self.rows += other_rows
        self.mask = None if bool(mask.all()) else mask

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
