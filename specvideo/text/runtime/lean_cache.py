"""LeanLlama's KV cache: keys and values of every layer in one preallocated buffer, a row's token
at position p in slot p. It implements the state's cache contract (``kv_cache.SlotCache``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


class LeanCache:
    """Preallocated keys and values in one buffer (layers, 2, B, H_kv, capacity, D), so a layer writes
    both with one copy. Row b's keys lie at slots equal to their positions, contiguous from slot 0
    as alone whatever the other rows hold: a row's length says which are its own, and ``length``
    is the longest row's (slots past a shorter row's length are stale and masked by position)."""

    def __init__(self, layers: int, batch: int, heads: int, head_dim: int, like: torch.Tensor, capacity: int = 256):
        self.kv = torch.zeros(
            (layers, 2, batch, heads, capacity, head_dim), dtype=like.dtype, device=like.device
        )  # zeros: a masked slot of invariant attention stays finite
        self.length = 0
        self.native = self  # what LeanLlama's forward takes

    def reserve(self, n: int) -> None:
        capacity = self.kv.shape[4]
        if self.length + n > capacity:
            pad = list(self.kv.shape)
            pad[4] = max(capacity, self.length + n - capacity)
            self.kv = torch.cat([self.kv, self.kv.new_zeros(pad)], dim=4)

    @staticmethod
    def attention_mask(lengths: torch.Tensor, valid: torch.Tensor) -> torch.Tensor | None:
        """What LeanLlama reads of a block: its real columns (B, n), or None where every row stands at
        one length and the block is all real (the rows share their slots and calls)."""
        return None if bool(valid.all()) and bool((lengths == lengths[0]).all()) else valid

    def truncate(self, lengths: torch.Tensor) -> None:
        self.length = int(lengths.max()) if len(lengths) else 0

    def crop_to(self, length: int) -> None:
        self.length = min(self.length, length)

    def select_rows(self, rows: torch.Tensor) -> None:
        """Keep only these batch rows (finished rows leave the batch)."""
        self.kv = self.kv[:, :, rows]

    def row(self, i: int) -> LeanCache:
        """A batch-1 copy of row i (this cache unchanged)."""
        copy = object.__new__(LeanCache)
        copy.kv, copy.length, copy.native = self.kv[:, :, i : i + 1].clone(), self.length, copy
        return copy

    def admit(self, other: LeanCache, other_rows: int) -> None:
        """Append ``other``'s batch rows (``other_rows`` of them: its buffer says so too)."""
        capacity = max(self.kv.shape[4], other.kv.shape[4])
        self.kv = torch.cat([_pad_capacity(self.kv, capacity), _pad_capacity(other.kv, capacity)], dim=2)
        self.length = max(self.length, other.length)

    def gather_slots(self, order: torch.Tensor) -> None:
        """Row b's slots become its slots ``order[b]`` (B, W) (a token tree's accepted path)."""
        L, two, B, H, capacity, D = self.kv.shape
        index = order[None, None, :, None, :, None].expand(L, two, B, H, -1, D)
        moved = torch.gather(self.kv[:, :, :, :, : self.length], 4, index)
        self.kv = torch.cat([moved, moved.new_zeros(L, two, B, H, capacity - moved.shape[4], D)], 4)
        self.length = moved.shape[4]

    def snapshot(self, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Copies of row 0's first n slots: per layer (keys, values) (1, H_kv, n, D)."""
        return [(self.kv[i, 0, :1, :, :n].clone(), self.kv[i, 1, :1, :, :n].clone()) for i in range(self.kv.shape[0])]

    def restore(self, layers: list[tuple[torch.Tensor, torch.Tensor]], n: int) -> None:
        """An empty batch-1 cache takes n slots of ``snapshot``'s form."""
        self.reserve(n)
        for i, (keys, values) in enumerate(layers):
            self.kv[i, 0, :, :, :n] = keys[:, :, :n]
            self.kv[i, 1, :, :, :n] = values[:, :, :n]
        self.length = n


def _pad_capacity(kv: torch.Tensor, capacity: int) -> torch.Tensor:
    """(layers, 2, B, H, c, D) -> (layers, 2, B, H, capacity, D), zero slots after c."""
    return F.pad(kv, (0, 0, 0, capacity - kv.shape[4]))
