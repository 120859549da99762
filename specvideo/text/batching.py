"""Continuous batching: requests join a running speculative batch between rounds and leave it when
they finish, each with its own length budget, sampling settings and seed.

A joining prompt is prefilled on its own (through the prompt cache when one is set), its first token
picked from the prefill's last logits, then its cache rows are appended to the batch's
(``CausalLMState.admit``); the next round feeds that token with the drafted tokens of every row.
Its time to first token is the wait for the running round plus its own prefill. Finished rows leave the caches at once
and the row numbering at the next admission (``compact``).

Sampled rows draw their tokens with the Gumbel-max trick (``RowSampler``): the token at output
position t is ``argmax(log p_t + g_t)`` with Gumbel noise ``g_t`` drawn from the row's seed and t
alone, an exact sample of p_t. The noise depends on neither the draft nor the round nor the batch,
so a row decodes the same tokens alone or beside any others, and the verdict is a greedy match of
the draft against those tokens. A model drafter draws with the same noise (coupled drafting), so
its tokens are the ones the target is likely to pick.

The head drafters read one row's target features: a run that starts alone keeps the head, and when
a second request joins, the batch drafts by prompt lookup from then on (``_lookup_drafter``).
Tree drafters verify one row: the run uses their chain (their spec's ``chain``). Both are decided
here, for every caller (the serving engine among them).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from specvideo.core.types import SpecStats, Step
from specvideo.text.drafting.catalog import spec_of
from specvideo.text.drafting.drafters import NGramDrafter
from specvideo.text.prompts import encode_prompt
from specvideo.text.run import RowOutput, row_output
from specvideo.text.runtime.state import CausalLMState
from specvideo.text.sampling import SamplingConfig, to_probs
from specvideo.text.verifier import TargetVerifier


@dataclass(frozen=True)
class RowRequest:
    """One request of a continuous batch: prompt token ids and its own settings."""

    prompt_ids: list[int]
    max_new_tokens: int
    sampling: SamplingConfig = SamplingConfig()
    seed: int = 0  # the noise a sampled row draws (ignored when greedy)
    cache_prompt: bool = True  # reuse and keep its prefix in the generator's prompt cache


@functools.lru_cache(maxsize=64)
def gumbel_noise(seed: int, position: int, vocab_size: int) -> torch.Tensor:
    """(V,) Gumbel(0, 1) noise of output position ``position`` of a row seeded ``seed``."""
    generator = torch.Generator().manual_seed((seed * 0x9E3779B97F4A7C15 + position) % (1 << 63))
    u = torch.rand(vocab_size, generator=generator).clamp_min(torch.finfo(torch.float32).tiny)
    return -torch.log(-torch.log(u))


class RowSampler:
    """Each row's sampling settings and seed. ``tokens(logits, step)`` picks, per row, the token at
    every position: argmax for a greedy row, ``argmax(log p + g)`` (``gumbel_noise``) for a sampled
    one; position j of a row's block is its output position ``offsets[b] + step + j``."""

    def __init__(self):
        self.configs: list[SamplingConfig] = []
        self.seeds: list[int] = []
        self.offsets: list[int] = []  # tokens each row has emitted (the verifier keeps it current)
        self._warpers: list = []

    def admit(self, sampling: SamplingConfig, seed: int) -> None:
        self.configs.append(sampling)
        self.seeds.append(int(seed))
        self.offsets.append(0)
        self._warpers.append(sampling.warpers())

    def compact(self, kept: list[int]) -> None:
        for name in ("configs", "seeds", "offsets", "_warpers"):
            setattr(self, name, [getattr(self, name)[b] for b in kept])

    def tokens(self, logits: torch.Tensor, step: int = 0) -> torch.Tensor:
        """logits (B, n, V) -> token ids (B, n)."""
        out = logits.argmax(dim=-1)  # (B, n)
        for b, config in enumerate(self.configs):
            if config.greedy or not bool(logits[b].any()):  # greedy, or a retired row's zeros
                continue
            out[b] = self.row_tokens(logits[b], b, self.offsets[b] + step)
        return out

    def row_tokens(self, logits: torch.Tensor, b: int, first: int) -> torch.Tensor:
        """Row b's tokens (n,) at output positions first .. first + n - 1 from its logits (n, V)."""
        if self.configs[b].greedy:
            return logits.argmax(dim=-1)
        n, V = logits.shape
        log_p = to_probs(logits, self._warpers[b]).log()  # (n, V), -inf outside top-k / top-p
        noise = torch.stack([gumbel_noise(self.seeds[b], first + j, V) for j in range(n)]).to(log_p.device)
        return (log_p + noise).argmax(dim=-1)


class RowVerifier(TargetVerifier):
    """The target verifier of a continuous batch: per-row budgets and sampling, rows admitted
    between rounds. Its evidence is always token ids (B, k+1), checked by greedy match."""

    def __init__(self, model, sampler: RowSampler, max_new_tokens: int, stop_ids: frozenset[int]):
        super().__init__(model, SamplingConfig(), max_new_tokens, stop_ids)
        self.sampler = sampler

    def _evidence(self, logits: torch.Tensor) -> torch.Tensor:
        return self.sampler.tokens(logits)  # (B, k+1)

    def commit(self, draft, verdict) -> list[list[int]]:
        emitted = super().commit(draft, verdict)
        self._sync_offsets()
        return emitted

    def _sync_offsets(self) -> None:
        """The sampler's output positions follow the outputs, so the next round's drafter and
        check draw the noise of the same positions."""
        self.sampler.offsets = [len(o) for o in self.outputs]

    def first_token(self, row: CausalLMState, request: RowRequest) -> int:
        """Admit the request's settings and pick its first token from ``row`` (prefilled up to its
        last prompt token, which this feeds in a 1-token step)."""
        self.sampler.admit(request.sampling, request.seed)
        logits = row.forward(num_logits=1)[0]  # (1, V)
        b = len(self.sampler.configs) - 1
        return int(self.sampler.row_tokens(logits, b, 0)[0])

    def admit(self, row: CausalLMState, request: RowRequest, first: int) -> None:
        """Append a batch-1 state whose pending token is the request's ``first`` as the last row;
        the row may end at once (an end-of-sequence first token, a budget of 1)."""
        self.state.admit(row)
        self.prompts.append(list(request.prompt_ids))
        self.outputs.append([])
        self.budgets.append(request.max_new_tokens)
        self.active = torch.cat([self.active, torch.tensor([True])])
        self._emit(len(self.outputs) - 1, [first])
        self._sync_offsets()
        self._retire()

    def compact(self) -> list[int]:
        """Drop the finished rows from the numbering; returns the kept rows' former numbers."""
        kept = self.state.compact().tolist()
        self.prompts = [self.prompts[b] for b in kept]
        self.outputs = [self.outputs[b] for b in kept]
        self.budgets = [self.budgets[b] for b in kept]
        self.active = self.active[kept]
        self.sampler.compact(kept)
        for follower in self.followers:
            follower.compact(kept)
        return kept


class BatchRun:
    """A speculative run whose rows come and go: ``admit`` a request between rounds (iterating
    ``steps()``), ``finish`` rows a caller ends, ``tags`` keeps each row's caller object.

    generator: a ``SpeculativeGenerator``; the run is opened by its ``open``, as every run is."""

    def __init__(self, generator, first: RowRequest, tag: Any = None):
        g = self.g = generator
        self.sampler = RowSampler()
        self.name = g.drafter_spec.chain or g.drafter_name
        self.tags: list[Any] = [tag]
        encoded = self._encode(first)
        self.verifier = RowVerifier(g.models.target_runner, self.sampler, first.max_new_tokens, g.models.eos_ids())
        self.run = g.open(
            encoded, self.verifier, first.sampling, torch.Generator().manual_seed(first.seed),
            drafter=self.name, cache_prompt=first.cache_prompt, row_sampler=self.sampler,
        )
        self.drafter, self.run.drafter = self.run.drafter, self  # rounds ask this run: its drafter may change
        self.cached_tokens = self.run.cached_tokens
        self.sampler.admit(first.sampling, first.seed)

    @property
    def stats(self) -> SpecStats:
        return self.run.stats

    @property
    def calls(self) -> int:
        return self.drafter.calls

    def propose(self, k: int, keep_drafting):
        return self.drafter.propose(k, keep_drafting)

    def commit(self, draft, verdict) -> None:
        self.drafter.commit(draft, verdict)

    @property
    def size(self) -> int:
        """Rows still generating."""
        return int(self.verifier.active.sum())

    def steps(self) -> Iterator[Step]:
        """Rounds until every row has finished (rows admitted meanwhile included)."""
        return self.run.steps()

    def row_output(self, b: int) -> RowOutput:
        return row_output(self.verifier, b)

    def rows(self) -> list[tuple[int, Any]]:
        """(row, tag) of every row still generating."""
        return [(b, self.tags[b]) for b, on in enumerate(self.verifier.active.tolist()) if on]

    def finish(self, rows: list[int]) -> None:
        if rows:
            self.verifier.finish(rows)

    def admit(self, request: RowRequest, tag: Any = None) -> int:
        """Join ``request`` to the batch before the next round; returns its row. Prefills it now
        (the batch waits that long) and picks its first token from the prefill, so its text starts
        before the next round; the prompt-cache tokens it reused are in ``last_cached``."""
        encoded = self._encode(request)
        if not self.drafter.batched:
            lookup = NGramDrafter(self.g.max_ngram, rows=self.verifier, device=self.verifier.state.device)
            self._swap(lookup)  # prompt lookup over every row's prompt and output
        kept = self.verifier.compact()
        self.tags = [self.tags[b] for b in kept]
        row = CausalLMState(self.verifier.model, encoded.input_ids, encoded.attention_mask)
        with self.run.packing():
            self.last_cached = self.g.models.cache_prompt(request.prompt_ids, row) if request.cache_prompt else 0
            row.prefill()
            first = self.verifier.first_token(row, request)  # its first token comes with its prefill
            row.push(torch.tensor([[first]], device=row.device))
            seen = torch.tensor([request.prompt_ids + [first]], device=row.device)
            self.drafter.admit(seen, torch.ones_like(seen))
            self.verifier.admit(row, request, first)
        self.tags.append(tag)
        return len(self.tags) - 1

    def _encode(self, request: RowRequest):
        g = self.g
        if not isinstance(request.max_new_tokens, int) or request.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be an integer >= 1, got {request.max_new_tokens!r}")
        encoded = encode_prompt(request.prompt_ids, None, g.models.vocab_size, g.device)
        g.models.check_room(encoded.max_length, request.max_new_tokens, spec_of(self.name))
        return encoded

    def _swap(self, drafter) -> None:
        self.verifier.followers = [drafter]
        self.verifier.state.keep_hidden, self.verifier.state.hidden = False, None
        self.drafter = drafter
        self.name = "ngram"
