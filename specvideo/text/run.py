"""One generation's pieces that the generator assembles: its output, the Run that steps it, the
accept rule it verifies with and the context check it starts with."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from specvideo.core.acceptance import greedy_match, rejection_sample
from specvideo.core.loop import speculate
from specvideo.core.types import Draft, SpecStats, Step
from specvideo.text.prompts import EncodedPrompt
from specvideo.text.sampling import SamplingConfig
from specvideo.text.tree import tree_verdict
from specvideo.text.verifier import TargetVerifier


@dataclass
class TextOutput:
    """text: decoded new text (None without a tokenizer); token_ids: the new token ids.

    Both are lists with one entry per prompt when the input was a batch.
    """

    text: str | list[str] | None
    token_ids: list[int] | list[list[int]]
    stats: SpecStats


@dataclass
class Run:
    """One generation in progress: iterate ``steps()`` to run it round by round; ``stats`` fills up."""

    drafter: Any
    verifier: TargetVerifier
    accept: Any
    schedule: Any
    stats: SpecStats
    prompt: EncodedPrompt
    packing: Any = contextlib.nullcontext  # () -> the context the models' forwards run in
    cached_tokens: int = 0  # prompt tokens reused from the prompt cache (not prefilled)

    def steps(self) -> Iterator[Step]:
        with self.packing():
            for step in speculate(self.drafter, self.verifier, self.accept, self.schedule, self.stats):
                self.stats.time_forward = self.verifier.forward_seconds  # the check's model part
                yield step

    def row_output(self, b: int) -> RowOutput:
        return row_output(self.verifier, b)

    def prefill(self) -> None:
        """Run the prompt's prefill now (a warm-up that generates nothing fills the prompt cache)."""
        self.verifier.state.forward()


@dataclass(frozen=True)
class RowOutput:
    """One row of a run so far: what its callers read between rounds."""

    token_ids: list[int]  # the tokens emitted so far
    eos: bool  # the last one is a stop id
    finished: bool  # the row generates no more


def row_output(verifier: TargetVerifier, b: int) -> RowOutput:
    tokens = verifier.outputs[b]
    return RowOutput(tokens, bool(tokens) and tokens[-1] in verifier.stop_ids, not bool(verifier.active[b]))


def accept_rule(sampling: SamplingConfig, generator: torch.Generator | None):
    def accept(draft: Draft, evidence: torch.Tensor):
        if draft.tree is not None:  # a token tree: walk it (specvideo.text.tree)
            return tree_verdict(draft, evidence, generator)
        if sampling.greedy:
            return greedy_match(evidence, draft.items, draft.lengths)
        return rejection_sample(evidence, draft.q, draft.items, draft.lengths, generator)

    return accept


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


def fim_prompt(tokenizer, prompt, suffix):
    """Token ids of fill-in-the-middle prompts (a str, or a list of str with a list of suffixes)."""
    from specvideo.text.prompts import FIM_TOKENS, fim_ids

    if tokenizer is None:
        raise ValueError("suffix= fills in the middle with the model's FIM tokens and needs a tokenizer")
    prompts, suffixes = ([prompt], [suffix]) if isinstance(prompt, str) else (prompt, suffix)
    if not (isinstance(prompts, list) and isinstance(suffixes, list) and len(prompts) == len(suffixes)
            and all(isinstance(t, str) for t in prompts + suffixes)):
        raise ValueError("suffix= takes a str prompt with a str suffix, or a list of str prompts with as many suffixes")
    rows = [fim_ids(tokenizer, p, s) for p, s in zip(prompts, suffixes)]
    if any(r is None for r in rows):
        raise ValueError(f"the model has no fill-in-the-middle tokens {list(FIM_TOKENS)}: drop suffix=")
    return rows[0] if isinstance(prompt, str) else rows
