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

from specvideo.core.acceptance import greedy_match, rejection_sample, sample_categorical
from specvideo.core.types import Draft, Verdict


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


RULES = ("gumbel", "rejection")


class RowSampler:
    """The rule a run's sampled tokens are drawn and checked by, each row's settings, seed, output
    position and generator read from the run's ``RowBook``: the sampling path of every run (the
    target's tokens, a model drafter's, the verdict).

    ``gumbel`` (the default): the token of a sampled row at output position t is
    ``argmax(log p_t + g_t)`` with Gumbel noise ``g_t`` drawn from the row's seed and t alone
    (``gumbel_noise``): an exact sample of p_t (the Gumbel-max trick) that depends on neither the
    draft, the round nor the batch, so a row decodes the same tokens alone or beside any others, and
    the verdict is a greedy match of the draft against the target's tokens. A model drafter draws
    with the same noise (coupled drafting), so its tokens are the ones the target is likely to pick.

    ``rejection``: speculative sampling (Leviathan et al. 2023) on each row's own generator: a model
    drafter samples x from q, the target accepts it with probability min(1, p(x) / q(x)), else
    samples the residual. Exact too, and it accepts more sampled model drafts (the optimal coupling
    of q and p; docs/history/benchmarks.md "Text: the sampling rule"), but a row's tokens then depend on
    its drafts and round lengths, so on the run it is in. Greedy rows take the argmax under both.
    """

    def __init__(self, rule: str = "gumbel", rows=None):
        if rule not in RULES:
            raise ValueError(f"sampling_rule must be one of {', '.join(RULES)}, got {rule!r}")
        self.rule = rule
        self.rows = rows  # the run's ``RowBook``: each row's request, output so far and generator
        self._warpers: dict[SamplingConfig, object] = {}

    def config(self, b: int) -> SamplingConfig:
        return self.rows.requests[b].sampling

    def _warp(self, config: SamplingConfig):
        if config not in self._warpers:
            self._warpers[config] = config.warpers()
        return self._warpers[config]

    @property
    def rejection(self) -> bool:
        """Rounds draw and check by rejection sampling (the rule, with a sampled row in the run)."""
        return self.rule == "rejection" and not all(r.sampling.greedy for r in self.rows.requests)

    def probs(self, logits: torch.Tensor, b: int) -> torch.Tensor:
        """(..., V) logits -> row b's warped distribution (..., V); one-hot at the argmax when greedy."""
        if self.config(b).greedy:
            return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
        return to_probs(logits, self._warp(self.config(b)))

    def tokens(self, logits: torch.Tensor, step: int = 0, depths: torch.Tensor | None = None) -> torch.Tensor:
        """logits (B, n, V) -> the Gumbel-max token ids (B, n): position j of row b's block is its
        output position ``len(outputs[b]) + step + j``, or ``len(outputs[b]) + depths[j]`` for a tree's nodes.
        Rows of the same settings are warped together (a retired row's token is never read)."""
        out = logits.argmax(dim=-1)  # (B, n): the greedy rows'
        for rows in self._sampled_groups():
            blocks = []
            for b in rows:
                first = len(self.rows.outputs[b]) + step
                blocks.append(range(first, first + logits.shape[1]) if depths is None else (first + depths).tolist())
            index = torch.tensor(rows, device=logits.device)
            out[index] = self._gumbel_max(logits[index], rows, blocks)
        return out

    def _sampled_groups(self) -> list[list[int]]:
        """The sampled rows, grouped by their settings."""
        groups: dict[SamplingConfig, list[int]] = {}
        for b, request in enumerate(self.rows.requests):
            if not (config := request.sampling).greedy:
                groups.setdefault(config, []).append(b)
        return list(groups.values())

    def _gumbel_max(self, logits: torch.Tensor, rows: list[int], positions: list) -> torch.Tensor:
        """Tokens (G, n) of rows ``rows`` (one setting) at their output ``positions`` (G lists of n)
        from their logits (G, n, V)."""
        log_p = to_probs(logits, self._warp(self.config(rows[0]))).log()  # (G, n, V), -inf outside top-k / top-p
        V = log_p.shape[-1]
        noise = torch.stack([torch.stack([gumbel_noise(self.rows.requests[b].seed, int(t), V) for t in ts]) for b, ts in zip(rows, positions)])
        return (log_p + noise.to(log_p.device)).argmax(dim=-1)

    def draft(self, logits: torch.Tensor, step: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """A drafter's token per row at draft step ``step`` from its logits (B, V): (B,), and the
        distribution q (B, V) it was sampled from under rejection sampling (else None)."""
        if not self.rejection:
            return self.tokens(logits[:, None], step)[:, 0], None
        q = self._all_probs(logits)  # (B, V)
        return self._sample(q), q

    def evidence(self, logits: torch.Tensor) -> torch.Tensor:
        """The target's evidence from its logits (B, k+1, V): its tokens (B, k+1), or under
        rejection sampling each row's distribution p (B, k+1, V)."""
        if not self.rejection:
            return self.tokens(logits)
        return self._all_probs(logits)

    def _all_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """Every row's distribution (B, ..., V) from its logits: one-hot at the argmax for a greedy
        row, warped by its settings (rows of one setting together) for a sampled one."""
        out = torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
        for rows in self._sampled_groups():
            index = torch.tensor(rows, device=logits.device)
            out[index] = to_probs(logits[index], self._warp(self.config(rows[0])))
        return out

    def accept(self, draft: Draft, evidence: torch.Tensor) -> Verdict:
        """The verdict on a chain: a greedy match of the target's tokens, or rejection sampling on
        each row's generator."""
        if not self.rejection:
            return greedy_match(evidence, draft.items, draft.lengths)
        rows = [
            rejection_sample(
                evidence[b : b + 1], None if draft.q is None else draft.q[b : b + 1],
                draft.items[b : b + 1], draft.lengths[b : b + 1], self.rows.generators[b],
            )
            for b in range(draft.batch_size)
        ]
        return Verdict(torch.cat([v.num_accepted for v in rows]), torch.cat([v.next_item for v in rows]))

    def first(self, logits: torch.Tensor, b: int) -> int:
        """Row b's first token (output position 0) from its prefill's logits (V,)."""
        if self.config(b).greedy:
            return int(logits.argmax())
        if self.rejection:
            return int(self._sample(self.probs(logits[None], b), rows=[b])[0])
        return int(self._gumbel_max(logits[None, None], [b], [[0]])[0, 0])

    def _sample(self, probs: torch.Tensor, rows: list[int] | None = None) -> torch.Tensor:
        rows = range(len(probs)) if rows is None else rows
        return torch.cat([sample_categorical(probs[i : i + 1], self.rows.generators[b]) for i, b in enumerate(rows)])
