"""Turning logits into tokens: the temperature / top-k / top-p of a row, and the per-row sampler every
run draws with (the target and a model drafter alike)."""

from __future__ import annotations

import functools
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


@functools.lru_cache(maxsize=64)
def gumbel_noise(seed: int, position: int, vocab_size: int) -> torch.Tensor:
    """(V,) Gumbel(0, 1) noise of output position ``position`` of a row seeded ``seed``."""
    generator = torch.Generator().manual_seed((seed * 0x9E3779B97F4A7C15 + position) % (1 << 63))
    u = torch.rand(vocab_size, generator=generator).clamp_min(torch.finfo(torch.float32).tiny)
    return -torch.log(-torch.log(u))


class RowSampler:
    """Each row's sampling settings and seed: the one sampling rule of every run.

    The token of a sampled row at output position t is ``argmax(log p_t + g_t)`` with Gumbel noise
    ``g_t`` drawn from the row's seed and t alone (``gumbel_noise``): an exact sample of p_t (the
    Gumbel-max trick) that depends on neither the draft, the round nor the batch, so a row decodes
    the same tokens alone or beside any others, and a verdict is a greedy match of the draft against
    the target's tokens. A model drafter draws with the same noise (coupled drafting), so its tokens
    are the ones the target is likely to pick. A greedy row takes the argmax.
    """

    def __init__(self):
        self.configs: list[SamplingConfig] = []
        self.seeds: list[int] = []
        self.offsets: list[int] = []  # tokens each row has emitted (the verifier keeps it current)
        self._warpers: list = []

    @classmethod
    def of(cls, rows: int, sampling: SamplingConfig = SamplingConfig(), seed: int = 0) -> RowSampler:
        """A sampler of ``rows`` rows with the same settings (row b seeded ``seed + b``)."""
        sampler = cls()
        for b in range(rows):
            sampler.admit(sampling, seed + b)
        return sampler

    def admit(self, sampling: SamplingConfig, seed: int) -> None:
        self.configs.append(sampling)
        self.seeds.append(int(seed))
        self.offsets.append(0)
        self._warpers.append(sampling.warpers())

    def compact(self, kept: list[int]) -> None:
        for name in ("configs", "seeds", "offsets", "_warpers"):
            setattr(self, name, [getattr(self, name)[b] for b in kept])

    @property
    def greedy(self) -> bool:
        return all(c.greedy for c in self.configs)

    def tokens(self, logits: torch.Tensor, step: int = 0, depths: torch.Tensor | None = None) -> torch.Tensor:
        """logits (B, n, V) -> token ids (B, n): position j of row b's block is its output position
        ``offsets[b] + step + j``, or ``offsets[b] + depths[j]`` for a token tree's nodes."""
        out = logits.argmax(dim=-1)  # (B, n)
        for b, config in enumerate(self.configs):
            if config.greedy or not bool(logits[b].any()):  # greedy, or a retired row's zeros
                continue
            first = self.offsets[b] + step
            positions = range(first, first + logits.shape[1]) if depths is None else (first + depths).tolist()
            out[b] = self.row_tokens(logits[b], b, positions)
        return out

    def probs(self, logits: torch.Tensor, b: int) -> torch.Tensor:
        """(..., V) logits -> row b's warped distribution (..., V)."""
        return to_probs(logits, self._warpers[b])

    def row_tokens(self, logits: torch.Tensor, b: int, positions) -> torch.Tensor:
        """Row b's tokens (n,) at output ``positions`` (n,) from its logits (n, V)."""
        if self.configs[b].greedy:
            return logits.argmax(dim=-1)
        V = logits.shape[-1]
        log_p = self.probs(logits, b).log()  # (n, V), -inf outside top-k / top-p
        noise = torch.stack([gumbel_noise(self.seeds[b], int(t), V) for t in positions]).to(log_p.device)
        return (log_p + noise).argmax(dim=-1)
