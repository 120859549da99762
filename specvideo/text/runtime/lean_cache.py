"""LeanLlama's KV cache: keys and values of every layer in one preallocated buffer. It implements
the state's cache contract (``kv_cache.SlotCache``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


class LeanCache:
    """Preallocated keys and values in one buffer (layers, 2, B, H_kv, capacity, D), so a layer writes
    both with one copy; ``crop_to(n)`` keeps the first n slots.

    ``length`` counts the slots of the state's shared slot axis, where rows that kept different
    counts have holes. With ``by_position`` (an invariant model's cache) a row's keys lie at slots
    equal to their positions instead, contiguous from slot 0 as alone, whatever holes that axis has:
    a repack (``gather_slots``) then moves nothing."""

    def __init__(
        self,
        layers: int,
        batch: int,
        heads: int,
        head_dim: int,
        like: torch.Tensor,
        capacity: int = 256,
        by_position: bool = False,
    ):
        self.kv = torch.zeros(
            (layers, 2, batch, heads, capacity, head_dim), dtype=like.dtype, device=like.device
        )  # zeros: a masked slot of invariant attention stays finite
        self.length = 0
        self.by_position = by_position
        self.native = self  # what LeanLlama's forward takes

    def reserve(self, n: int) -> None:
        capacity = self.kv.shape[4]
        if self.length + n > capacity:
            pad = list(self.kv.shape)
            pad[4] = max(capacity, self.length + n - capacity)
            self.kv = torch.cat([self.kv, self.kv.new_zeros(pad)], dim=4)

    def crop_to(self, length: int) -> None:
        self.length = min(self.length, length)

    def select_rows(self, rows: torch.Tensor) -> None:
        """Keep only these batch rows (finished rows leave the batch)."""
        self.kv = self.kv[:, :, rows]

    def row(self, i: int) -> LeanCache:
        """A batch-1 copy of row i (this cache unchanged)."""
        copy = object.__new__(LeanCache)
        copy.kv, copy.length, copy.by_position, copy.native = self.kv[:, :, i : i + 1].clone(), self.length, self.by_position, copy
        return copy

    def admit(self, other: LeanCache, other_rows: int) -> None:
        """Append ``other``'s batch rows (``other_rows`` of them: its buffer says so too); both keep
        their slots from slot 0 (the shorter side's extra slots are holes the caller masks)."""
        capacity = max(self.kv.shape[4], other.kv.shape[4])
        self.kv = torch.cat([_pad_capacity(self.kv, capacity), _pad_capacity(other.kv, capacity)], dim=2)
        self.length = max(self.length, other.length)

    def gather_slots(self, order: torch.Tensor) -> None:
        """Row b's slots become its slots ``order[b]`` (B, W): the holes squeezed out."""
        if self.by_position:  # every row's keys already lie in its own slots 0 .. n_b - 1
            self.length = order.shape[1]
            return
        L, two, B, H, capacity, D = self.kv.shape
        index = order[None, None, :, None, :, None].expand(L, two, B, H, -1, D)
        packed = torch.gather(self.kv[:, :, :, :, : self.length], 4, index)
        self.kv = torch.cat([packed, packed.new_zeros(L, two, B, H, capacity - packed.shape[4], D)], 4)
        self.length = packed.shape[4]

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
