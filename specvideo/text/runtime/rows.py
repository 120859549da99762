"""The rows of a run's state: rows that join (``admit``) and leave (``retire``, ``compact``) a
running batch, a round's rollback, and the repacking that keeps a ragged cache near its longest
row. ``CausalLMState`` (``state.py``) inherits these; the cache does the moving (``kv_cache``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from specvideo.text.runtime.state import CausalLMState


class BatchRows:
    """Row bookkeeping over ``cache``, ``mask`` (B', L), ``num_tokens`` (B',), ``live`` (B',),
    ``pending`` / ``pending_valid`` (B', n) and ``round_start`` of a ``CausalLMState``."""

    def mark_round(self) -> None:
        """Remember where this round's slots start and how wide its pending block is (``keep_round``)."""
        self.round_start = self.length
        self.round_width = self.pending_width

    def keep_round(self, accepted: torch.Tensor | int) -> None:
        """The one rollback rule of the verifier and every drafter: keep this round's pending block
        (fed first) and, in row b, the first ``accepted[b]`` of the tokens fed after it (an int:
        every row's); drop the rest. A drafter feeds all but its last drafted token, so accepting
        every token keeps every fed one."""
        fed = self.length - self.round_start - self.round_width  # drafted tokens fed this round
        if not torch.is_tensor(accepted):
            accepted = torch.full((len(self.live),), accepted, dtype=torch.long, device=self.device)
        self.rollback(self.round_width + accepted.clamp(max=fed))

    def admit(self, other: CausalLMState) -> None:
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

    def rollback(self, keep: torch.Tensor) -> None:
        """Keep the first ``keep[b]`` slots written since ``mark_round`` in row b; drop the rest."""
        keep = self._live_rows(keep)
        cols = torch.arange(self.length - self.round_start, device=self.device)  # (n,)
        drop = (cols[None, :] >= keep[:, None]) & self.mask[:, self.round_start :]  # (B', n)
        if bool(drop.any()):
            self._drop(drop)
        self._repack_if_sparse()

    def _drop(self, drop: torch.Tensor) -> None:
        self.num_tokens = self.num_tokens - drop.sum(1)
        self.mask = torch.cat(
            [self.mask[:, : self.round_start], self.mask[:, self.round_start :] & ~drop], dim=1
        )
        self._crop_unused(self.round_start)
        self.full = self.full and bool(self.mask.all())  # rows that keep different counts leave holes

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
        self.round_start = min(self.round_start, order.shape[1])
