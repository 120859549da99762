"""Turning logits into the distributions p and q: the same temperature / top-k / top-p for both."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)


@dataclass(frozen=True)
class SamplingConfig:
    """temperature = 0 is greedy decoding; top_k / top_p = None disable those filters."""

    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self) -> None:
        t = self.temperature
        if not isinstance(t, (int, float)) or math.isnan(t) or math.isinf(t) or t < 0:
            raise ValueError(f"temperature must be a finite number >= 0, got {t!r}")
        if self.top_k is not None and (not isinstance(self.top_k, int) or self.top_k < 1):
            raise ValueError(f"top_k must be an integer >= 1 (or None), got {self.top_k!r}")
        if self.top_p is not None and not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1] (or None), got {self.top_p!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def warpers(self) -> LogitsProcessorList:
        """transformers' own warpers, in the order ``generate(do_sample=True)`` applies them."""
        warpers = LogitsProcessorList()
        if self.greedy:
            return warpers
        if self.temperature != 1.0:
            warpers.append(TemperatureLogitsWarper(float(self.temperature)))
        if self.top_k is not None:
            warpers.append(TopKLogitsWarper(self.top_k))
        if self.top_p is not None and self.top_p < 1.0:
            warpers.append(TopPLogitsWarper(self.top_p))
        return warpers


def to_probs(logits: torch.Tensor, warpers: LogitsProcessorList) -> torch.Tensor:
    """(..., V) logits -> (..., V) float32 probabilities after the warpers."""
    shape = logits.shape
    flat = logits.reshape(-1, shape[-1]).float()  # (N, V)
    flat = warpers(None, flat) if len(warpers) else flat
    return torch.softmax(flat, dim=-1).reshape(shape)
