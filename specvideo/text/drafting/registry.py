"""How a run builds each chain drafter, from the ``DraftParts`` the generator hands over; the
table that names them is ``catalog.DRAFTER_SPECS``."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specvideo.text.drafting.drafters import HybridDrafter, ModelDrafter, NGramDrafter, NullDrafter
from specvideo.text.drafting.head_drafters import HeadDrafter

__all__ = ["DraftParts"]


@dataclass(frozen=True)
class DraftParts:
    """What a drafter is built from for one run."""

    draft: torch.nn.Module | None  # the draft as given: a causal LM, a DraftHead, or None
    runner: object | None  # the draft as run: its LeanLlama where one was built, else ``draft``
    vocab_size: int  # the target's
    # the run's TargetVerifier: its rows (prompt lookup reads them), its sampler (a model drafter
    # draws with the target's noise), its features (the head drafters read them)
    verifier: object
    batch_size: int
    # the generator's TextConfig: the drafters' own settings (max_ngram, hybrid_min_ngram, and an
    # extension's)
    settings: object


def lookup(p: DraftParts, hybrid: bool = False) -> NGramDrafter:
    """Prompt lookup over the run's rows."""
    s = p.settings
    min_ngram = min(s.hybrid_min_ngram, s.max_ngram) if hybrid else 1
    return NGramDrafter(s.max_ngram, min_ngram=min_ngram, rows=p.verifier.rows)


def lean_model(p: DraftParts) -> ModelDrafter:
    return ModelDrafter(p.runner, p.verifier.sampler, p.vocab_size)


def dense_model(p: DraftParts) -> ModelDrafter:
    return ModelDrafter(p.draft, p.verifier.sampler, p.vocab_size)


def hybrid(p: DraftParts) -> HybridDrafter:
    return HybridDrafter(lean_model(p), lookup(p, hybrid=True))


def head(p: DraftParts):
    """The head's chain; a batch of prompts drafts by prompt lookup (the head reads one row's features)."""
    return lookup(p) if p.batch_size > 1 else HeadDrafter(p.runner, p.verifier)


def head_hybrid(p: DraftParts):
    return lookup(p) if p.batch_size > 1 else HybridDrafter(HeadDrafter(p.runner, p.verifier), lookup(p, hybrid=True))


def null(p: DraftParts) -> NullDrafter:
    return NullDrafter()
