"""Drafters by name: the one place that says what each drafter needs and how a run builds it.

Each name maps to a ``DrafterSpec``: the model it runs (none, a draft causal LM or a draft head on
the target's features), whether that model runs on ``LeanLlama`` (and FR-Spec's ``draft_vocab``),
whether it proposes token trees, whether it can draft a batch of prompts, the chain drafter a
continuous batch uses in its place, the weight format of the target's copy it drafts with (the
self drafters), and ``build``: the drafter object for one run, from the
``DraftParts`` the generator hands over. The name tuples of ``specvideo.text.config`` (the CLI's
choices), the generator's checks, the serving engine's batching and ``specvideo.text.batching`` all
read these specs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from specvideo.text.drafting.drafters import HybridDrafter, ModelDrafter, NGramDrafter, NullDrafter
from specvideo.text.drafting.head_drafters import HeadDrafter, HeadTreeDrafter
from specvideo.text.drafting.tree_drafters import ModelTreeDrafter, NGramTreeDrafter
from specvideo.text.sampling import SamplingConfig

__all__ = ["DRAFTER_SPECS", "DraftParts", "DrafterSpec", "spec_of"]


@dataclass(frozen=True)
class DraftParts:
    """What a drafter is built from for one run."""

    draft: torch.nn.Module | None  # the draft as given: a causal LM, a DraftHead, or None
    runner: object | None  # the draft as run: its LeanLlama where one was built, else ``draft``
    vocab_size: int  # the target's
    sampling: SamplingConfig
    generator: torch.Generator | None
    verifier: object  # the run's TargetVerifier (the head drafters read its features)
    batch_size: int
    # the generator's TextConfig: the drafters' own settings (max_ngram, hybrid_min_ngram,
    # tree_branches, tree_nodes, tree_width, head_tree_width)
    settings: object
    row_sampler: object = None  # a continuous batch's RowSampler: a model drafter draws with its noise


@dataclass(frozen=True)
class DrafterSpec:
    build: Callable[[DraftParts], object]
    needs: str = ""  # the model it runs: "" none, "draft" a causal LM, "head" a DraftHead
    lean: bool = False  # runs that model with LeanLlama (and FR-Spec's draft_vocab)
    tree: bool = False  # proposes token trees
    one_row: bool = False  # verifies one prompt at a time: a batch is refused
    chain: str | None = None  # a tree drafter's chain: what a continuous batch drafts with
    copy: str | None = None  # drafts with a copy of the target in this weight format (self-speculation)


def _lookup(p: DraftParts, hybrid: bool = False) -> NGramDrafter:
    """Prompt lookup over the rows the run's verifier owns (its prompts and outputs)."""
    s = p.settings
    min_ngram = min(s.hybrid_min_ngram, s.max_ngram) if hybrid else 1
    return NGramDrafter(s.max_ngram, min_ngram=min_ngram, rows=p.verifier)


def _model(p: DraftParts, lean: bool = True) -> ModelDrafter:
    return ModelDrafter(p.runner if lean else p.draft, p.sampling, p.generator, p.vocab_size, p.row_sampler)


def _head(p: DraftParts, tree: bool = False, hybrid: bool = False):
    """The head's chain or EAGLE-2 tree, behind prompt lookup for the hybrids; a batch of prompts
    drafts by prompt lookup (the head reads one row's features)."""
    if p.batch_size > 1:
        return _lookup(p)
    if tree:
        drafter = HeadTreeDrafter(
            p.runner, p.verifier, p.sampling, p.generator, p.settings.head_tree_width, p.settings.tree_nodes
        )
    else:
        drafter = HeadDrafter(p.runner, p.verifier, p.sampling, p.generator)
    return HybridDrafter(drafter, _lookup(p, hybrid=True)) if hybrid else drafter


def _ngram_tree(p: DraftParts) -> NGramTreeDrafter:
    s = p.settings
    return NGramTreeDrafter(s.max_ngram, branches=s.tree_branches, max_nodes=s.tree_nodes)


DRAFTER_SPECS: dict[str, DrafterSpec] = {
    # a small causal LM through transformers
    "model": DrafterSpec(lambda p: _model(p, lean=False), needs="draft"),
    # the same Llama draft run by LeanLlama: much less per-call overhead on CPU
    "lean": DrafterSpec(_model, needs="draft", lean=True),
    # prompt lookup when the context's last tokens occurred before, else the lean draft
    "hybrid": DrafterSpec(lambda p: HybridDrafter(_model(p), _lookup(p, hybrid=True)), needs="draft", lean=True),
    # the lean draft's chain with runner-up tokens beside it, verified as one token tree
    "tree": DrafterSpec(
        lambda p: ModelTreeDrafter(_model(p), p.settings.tree_width),
        needs="draft", lean=True, tree=True, one_row=True, chain="lean",
    ),
    # a draft head on the target's features (EAGLE): its chain, its dynamic tree, behind lookup
    "head": DrafterSpec(_head, needs="head", lean=True),
    "head-tree": DrafterSpec(lambda p: _head(p, tree=True), needs="head", lean=True, tree=True, chain="head"),
    "head-hybrid": DrafterSpec(lambda p: _head(p, hybrid=True), needs="head", lean=True),
    "head-hybrid-tree": DrafterSpec(
        lambda p: _head(p, tree=True, hybrid=True), needs="head", lean=True, tree=True, chain="head-hybrid"
    ),
    # self-speculation (ML-SpecQD): an int4 copy of the target drafts, no second model to load;
    # behind prompt lookup for its hybrid
    "self": DrafterSpec(_model, lean=True, copy="int4"),
    "self-hybrid": DrafterSpec(lambda p: HybridDrafter(_model(p), _lookup(p, hybrid=True)), lean=True, copy="int4"),
    # prompt lookup, no model: one continuation, or several earlier occurrences' as one tree
    "ngram": DrafterSpec(_lookup),
    "ngram-tree": DrafterSpec(_ngram_tree, tree=True, one_row=True, chain="ngram"),
    # plain target-only decoding through the same loop: the baseline
    "none": DrafterSpec(lambda p: NullDrafter()),
}


def spec_of(name: str) -> DrafterSpec:
    """The spec of drafter ``name``; a clear error for an unknown name."""
    try:
        return DRAFTER_SPECS[name]
    except KeyError:
        raise ValueError(f"unknown drafter {name!r}; choose one of {', '.join(DRAFTER_SPECS)}") from None
