"""One generation: the Run that steps its rows (together from the start, or joining between
rounds), each row's request and output, and the stop rules its text ends by."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from specvideo.core.loop import speculate
from specvideo.core.types import Draft, SpecStats, Step
from specvideo.text.drafting.catalog import spec_of
from specvideo.text.drafting.drafters import NGramDrafter
from specvideo.text.prompts import EncodedPrompt
from specvideo.text.runtime.state import CausalLMState
from specvideo.text.sampling import SamplingConfig


@dataclass
class TextOutput:
    """text: decoded new text (None without a tokenizer); token_ids: the new token ids.

    Both are lists with one entry per prompt when the input was a batch.
    """

    text: str | list[str] | None
    token_ids: list[int] | list[list[int]]
    stats: SpecStats


@dataclass(frozen=True)
class RowRequest:
    """One row of a run: prompt token ids and its own settings."""

    prompt_ids: list[int]
    max_new_tokens: int
    sampling: SamplingConfig = SamplingConfig()
    seed: int = 0  # the noise a sampled row draws (ignored when greedy)
    cache_prompt: bool = True  # reuse and keep its prefix in the generator's prompt cache

    def __post_init__(self) -> None:  # the one check of a budget: generate, stream, server and batch jobs
        n = self.max_new_tokens
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"max_new_tokens must be an integer >= 0, got {n!r}")


@dataclass(frozen=True)
class RowOutput:
    """One row of a run so far: what its callers read between rounds."""

    token_ids: list[int]  # the tokens emitted so far
    eos: bool  # the last one is a stop id
    finished: bool  # the row generates no more


class Run:
    """One generation in progress, opened by ``SpeculativeGenerator.open``: rows that start together
    (a batch of prompts) and rows that join between rounds (``admit``, the server's continuous
    batch) run the same rounds; iterate ``steps()`` to run it; ``stats`` fills up.

    Each row is decoded by the run's ``RowSampler`` with its own settings and seed, so its tokens
    never depend on its neighbours, greedy or sampled (under the default Gumbel rule; the rejection
    rule ties a sampled row to its drafts). The loop asks this run for drafts: when a
    second row joins a run whose drafter reads one row (the head's features), the batch drafts by
    prompt lookup from then on. ``tags`` keeps each row's caller object."""

    def __init__(self, generator, drafter, verifier, prompt: EncodedPrompt, packing, cached_tokens: int, name: str, tags):
        self.g, self.drafter, self.verifier, self.prompt = generator, drafter, verifier, prompt
        self.schedule, self.stats = generator.schedule(), SpecStats()
        self.packing = packing  # () -> the context the models' forwards run in
        self.cached_tokens = self.last_cached = cached_tokens  # prompt tokens reused from the prompt cache
        self.name, self.tags = name, list(tags)

    @property
    def calls(self) -> int:
        return self.drafter.calls

    def propose(self, k: int, keep_drafting):
        return self.drafter.propose(k, keep_drafting)

    def commit(self, draft: Draft, verdict) -> None:
        self.drafter.commit(draft, verdict)

    def steps(self) -> Iterator[Step]:
        """Rounds until every row has finished (rows admitted meanwhile included)."""
        with self.packing():
            for step in speculate(self, self.verifier, self.verifier.accept, self.schedule, self.stats):
                self.stats.time_forward = self.verifier.forward_seconds  # the check's model part
                yield step

    def prefill(self) -> None:
        """Run the prompt's prefill now (a warm-up that generates nothing fills the prompt cache)."""
        self.verifier.state.forward()

    @property
    def size(self) -> int:
        """Rows still generating."""
        return int(self.verifier.active.sum())

    def row_output(self, b: int) -> RowOutput:
        tokens = self.verifier.outputs[b]
        return RowOutput(tokens, bool(tokens) and tokens[-1] in self.verifier.stop_ids, not bool(self.verifier.active[b]))

    def rows(self) -> list[tuple[int, Any]]:
        """(row, tag) of every row still generating."""
        return [(b, self.tags[b]) for b, on in enumerate(self.verifier.active.tolist()) if on]

    def finish(self, rows: list[int]) -> None:
        if rows:
            self.verifier.finish(rows)

    def admit(self, request: RowRequest, tag: Any = None) -> int:
        """Join ``request`` to the run before the next round; returns its row. Prefills it now (the
        batch waits that long) and picks its first token from the prefill, so its text starts
        before the next round; the prompt-cache tokens it reused are in ``last_cached``."""
        g, verifier = self.g, self.verifier
        encoded = g.encode_row(request, spec_of(self.name))
        if not self.drafter.batched:  # prompt lookup over every row's prompt and output
            self._swap(NGramDrafter(g.max_ngram, rows=verifier, device=verifier.state.device))
        kept = verifier.compact()
        self.tags = [self.tags[b] for b in kept]
        row = CausalLMState(verifier.model, encoded.input_ids, encoded.attention_mask)
        with self.packing():
            self.last_cached = g.models.cache_prompt(request.prompt_ids, row) if request.cache_prompt else 0
            row.prefill()
            verifier.sampler.admit(request.sampling, request.seed)
            first = verifier.first_token(row)  # its first token comes with its prefill
            row.push(torch.tensor([[first]], device=row.device))
            seen = torch.tensor([request.prompt_ids + [first]], device=row.device)
            self.drafter.admit(seen, torch.ones_like(seen))
            verifier.admit(row, request.prompt_ids, request.max_new_tokens, first)
        self.tags.append(tag)
        return len(self.tags) - 1

    def _swap(self, drafter) -> None:
        self.verifier.followers = [drafter]
        state = self.verifier.state
        state.keep_hidden, state.hidden, state.feature_layers = False, None, ()
        self.drafter, self.name = drafter, "ngram"


def stop_rules(stop, eos_ids: frozenset[int], tokenizer) -> tuple[frozenset[int], tuple[str, ...]]:
    """(stop token ids, stop strings) of a ``stop`` argument.

    "eos": the end-of-sequence ids; None: nothing (exactly max_new_tokens); a token id or a list
    of them: those ids; any other string, or a list of strings: those stop strings (the text ends
    before the first of them), with the end-of-sequence ids too, as OpenAI's ``stop`` does. A list
    may mix token ids, "eos" and strings."""
    if stop is None:
        return frozenset(), ()
    items = [stop] if isinstance(stop, (str, int)) else stop
    if not isinstance(items, (list, tuple, set, frozenset)) or not all(
        isinstance(t, (str, int)) and not isinstance(t, bool) for t in items
    ):
        raise ValueError(f"stop must be 'eos', None, a token id, a string or a list of them, got {stop!r}")
    ids = {t for t in items if isinstance(t, int)}
    strings = tuple(dict.fromkeys(t for t in items if isinstance(t, str) and t != "eos"))
    if any(not s for s in strings):
        raise ValueError("a stop string must not be empty")
    if strings and tokenizer is None:
        raise ValueError("stop strings are matched on decoded text and need a tokenizer")
    if "eos" in items or (strings and not ids):
        ids |= eos_ids
    return frozenset(ids), strings


def first_stop(text: str, stops) -> tuple[int, str] | None:
    """Where the first stop string in ``text`` starts, and which one (None: none occurs)."""
    return min(((text.find(s), s) for s in stops if s in text), default=None)


def cut_at_stop(text: str, stops: tuple[str, ...]) -> tuple[str, bool]:
    """The text before the first stop string, and whether one occurred."""
    found = first_stop(text, stops)
    return (text, False) if found is None else (text[: found[0]], True)


def shown_length(text: str, stops, final: bool) -> int:
    """How much of a row's decoded ``text`` (already cut at a stop string) a stream may show now:
    all of it once the row is final; else all but an incomplete character at its end and the last
    len(longest stop) - 1 characters, which could still become a stop string. The one hold-back rule
    of ``SpeculativeGenerator.stream`` and the server."""
    if final:
        return len(text)
    hold = max((len(s) - 1 for s in stops), default=0)
    return max(0, len(text.rstrip("\ufffd")) - hold)
