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
from specvideo.core.tree import tree_verdict
from specvideo.core.types import Draft, SpecStats, Step
from specvideo.text.prompts import EncodedPrompt
from specvideo.text.sampling import SamplingConfig
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

    def steps(self) -> Iterator[Step]:
        with self.packing():
            yield from speculate(self.drafter, self.verifier, self.accept, self.schedule, self.stats)


def accept_rule(sampling: SamplingConfig, generator: torch.Generator | None):
    def accept(draft: Draft, evidence: torch.Tensor):
        if draft.tree is not None:  # a token tree: walk it (specvideo.core.tree)
            return tree_verdict(draft, evidence, generator)
        if sampling.greedy:
            return greedy_match(evidence, draft.items, draft.lengths)
        return rejection_sample(evidence, draft.q, draft.items, draft.lengths, generator)

    return accept


def check_context(prompt_length: int, max_new_tokens: int, context: int, model: str = "target") -> None:
    """Refuse a generation that would run past a model's positions (they would be clamped silently)."""
    if prompt_length + max_new_tokens > context:
        raise ValueError(
            f"prompt of {prompt_length} tokens + max_new_tokens={max_new_tokens} = "
            f"{prompt_length + max_new_tokens} exceeds the {model}'s context length of {context} tokens"
        )
