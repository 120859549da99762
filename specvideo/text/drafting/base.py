"""The drafter contract every text drafter speaks, with its optional parts defaulted."""

from __future__ import annotations

from collections.abc import Callable

import torch

from specvideo.core.types import Draft


class Drafter:
    """``propose(k, keep_drafting) -> Draft`` of token ids (B, k), drafted from the rows' history
    (the run's ``RowBook``: a drafter with a cache re-syncs it to each row's history by common
    prefix first); a run calls ``start`` on its prompts first. A drafter
    that follows a continuous batch (``batched``) also hears of rows that finish (``retire``), join
    (``admit``) and are renumbered (``compact``); these default to nothing. ``calls`` counts its
    model's forwards (0 for one without a model)."""

    calls = 0
    batched = True  # follows rows joining and leaving a running batch (else a batch swaps it out)
    reads_book = False  # keeps nothing per row but what ``admit`` counts (a row may join mid-answer)

    def start(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        """A new batch of prompts: input_ids (B, T) left-padded, attention_mask (B, T)."""
        self.batch_size, self.device = input_ids.shape[0], input_ids.device

    def propose(self, k: int, keep_drafting: Callable[[torch.Tensor], bool] | None) -> Draft:
        raise NotImplementedError

    def retire(self, done: torch.Tensor) -> None:
        """Rows flagged in ``done`` (B,) have finished."""

    def admit(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        """A prompt (1, T) joins the batch between rounds, numbered after the last row."""

    def compact(self, kept: list[int]) -> None:
        """Only rows ``kept`` remain, renumbered 0 .. len(kept) - 1."""


def no_draft(batch_size: int, device: torch.device) -> Draft:
    """A round that proposes nothing: items (B, 0)."""
    return Draft(
        items=torch.zeros(batch_size, 0, dtype=torch.long, device=device),
        lengths=torch.zeros(batch_size, dtype=torch.long, device=device),
    )


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)
