"""The rows of a model's state over a batch: rows that join (``admit``) and leave (``retire``,
``compact``) a running batch, rollback to each row's length (``truncate``), and the repacking that
keeps a ragged cache near its longest row. ``CausalLMState`` (``state.py``) builds on these; the
cache does the moving (``kv_cache``)."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from specvideo.text.runtime.kv_cache import SlotCache


class BatchRows:
    """The rows of a batch over one slot axis: row b's real tokens are the slots ``mask[b]`` marks,
    in order (rows that kept different counts leave holes); ``pending`` tokens wait for the next
    forward. Callers number rows 0 .. batch_size - 1; ``live`` are those still in the cache."""

    model: object
    device: torch.device
    batch_size: int
    live: torch.Tensor  # (B',) the callers' number of each cached row
    cache: SlotCache
    mask: torch.Tensor  # (B', L) real slots
    num_tokens: torch.Tensor  # (B',) real tokens cached
    pending: torch.Tensor  # (B', n) fed at the next forward
    pending_valid: torch.Tensor  # (B', n)
    pending_features: torch.Tensor | None
    hidden: torch.Tensor | None
    full: bool  # no hole anywhere: no attention mask needed
    _prefill: int

    @property
    def length(self) -> int:
        return self.mask.shape[1]

    @property
    def pending_width(self) -> int:
        return self.pending.shape[1]

    def truncate(self, lengths: torch.Tensor) -> None:
        """Rollback by position: row b keeps its first ``lengths[b]`` tokens (B,) (cached, then
        pending) and drops the rest."""
        lengths = self._live_rows(lengths.to(self.device))
        real = self.mask.long().cumsum(1)  # (B', L) the count of real slots up to each
        drop = self.mask & (real > lengths[:, None])  # (B', L)
        if bool(drop.any()):
            self.num_tokens = self.num_tokens - drop.sum(1)
            self.mask = self.mask & ~drop
            self._crop_unused(0)
            self.full = self.full and bool(self.mask.all())  # rows that keep different counts leave holes
        if bool((lengths < self.num_tokens + self.pending_valid.sum(1)).any()) and self.pending_width:
            raise ValueError("truncate drops cached tokens only; a pending token is never rolled back")
        self._repack_if_sparse()

    def admit(self, other: BatchRows) -> None:
        """Append ``other``'s rows (a fresh state of the same model after ``prefill``) to this batch
        between rounds, numbered after the last row. Every row keeps its slots from slot 0 on; the
        shorter side is padded with holes, the pending blocks with invalid columns on the left."""
        if other.model is not self.model or other._prefill or self._prefill:
            raise ValueError("a row joins a batch of the same model, after both have prefilled")
        if other.pending_features is not None or self.pending_features is not None:
            raise ValueError("rows with pending draft-head features cannot join a batch")
        width = max(self.length, other.length)
        self.cache.admit(other.cache, other.batch_size)
        self.mask = torch.cat([F.pad(self.mask, (0, width - self.length)), F.pad(other.mask, (0, width - other.length))])
        self.num_tokens = torch.cat([self.num_tokens, other.num_tokens])
        pad = [max(self.pending_width, other.pending_width) - s.pending_width for s in (self, other)]
        self.pending = torch.cat([F.pad(s.pending, (p, 0)) for s, p in zip((self, other), pad)])
        self.pending_valid = torch.cat([F.pad(s.pending_valid, (p, 0)) for s, p in zip((self, other), pad)])
        self.live = torch.cat([self.live, other.live + self.batch_size])
        self.batch_size += other.batch_size
        self.full = bool(self.mask.all()) and bool(self.pending_valid.all())
        self.hidden = None

    def split(self, b: int) -> BatchRows:
        """A batch-1 copy of row b (its cache, pending tokens and no holes), for another batch to
        ``admit``; this batch is unchanged (``retire`` drops the row here)."""
        i = int((self.live == b).nonzero()[0, 0])
        if self._prefill or self.pending_features is not None:
            raise ValueError("a row leaves a batch between rounds, after its prefill and without pending features")
        row = copy.copy(self)
        valid = self.pending_valid[i]
        row.cache, row.mask, row.num_tokens = self.cache.row(i), self.mask[i : i + 1], self.num_tokens[i : i + 1]
        row.pending, row.pending_valid = self.pending[i : i + 1, valid], self.pending_valid[i : i + 1, valid]
        row.live, row.batch_size, row.hidden = torch.zeros(1, dtype=torch.long, device=self.device), 1, None
        row._crop_unused(0)
        if not bool(row.mask.all()):
            row._repack()
        row.full = True
        return row

    def compact(self) -> torch.Tensor:
        """Number the rows still in the batch 0 .. B' - 1 (retired rows leave the callers' numbering
        too); returns their former numbers (B',)."""
        kept = self.live
        self.batch_size = len(kept)
        self.live = torch.arange(len(kept), device=self.device)
        return kept

    def _live_rows(self, x: torch.Tensor) -> torch.Tensor:
        return x if x.shape[0] == len(self.live) else x[self.live]

    def retire(self, done: torch.Tensor) -> None:
        """Drop the rows flagged in ``done`` (B,) from the cache, the mask and the pending tokens."""
        keep = ~done.to(self.device)[self.live]  # (B',)
        if bool(keep.all()):
            return
        rows = keep.nonzero()[:, 0]
        self.cache.select_rows(rows)
        self.live, self.mask, self.num_tokens = self.live[rows], self.mask[rows], self.num_tokens[rows]
        self.pending, self.pending_valid = self.pending[rows], self.pending_valid[rows]
        if self.pending_features is not None:
            self.pending_features = self.pending_features[rows]
        self._crop_unused(0)
        self.full = bool(self.mask.all()) and bool(self.pending_valid.all())
        self._repack_if_sparse()

    def _repack_if_sparse(self) -> None:
        if not self.full and len(self.live) and self.length > 2 * int(self.num_tokens.max()) + 16:
            self._repack()

    def _crop_unused(self, floor: int) -> None:
        """Remove trailing slots no row uses (never below ``floor``)."""
        used = self.mask.any(dim=0).nonzero()
        new_length = max(int(used[-1]) + 1 if len(used) else 0, floor)
        if new_length < self.length:
            self.cache.crop_to(new_length)
            self.mask = self.mask[:, :new_length]

    def _repack(self) -> None:
        """Move every row's real slots to the right end of a cache as wide as the longest row
        (left padding). Keys carry their rotary positions, so attention is unchanged."""
        width = int(self.num_tokens.max())
        order = torch.sort(self.mask.long(), dim=1, stable=True).indices[:, -width:]  # (B', W) holes first
        self.mask = torch.gather(self.mask, 1, order)
        self._gather_slots(order)

    def _gather_slots(self, order: torch.Tensor) -> None:
        """Row b's cache slots become its slots ``order[b]`` (B', W), in that order."""
        self.cache.gather_slots(order)
