"""How a run builds each drafter by name, from the ``DraftParts`` the generator hands over. What
each drafter *is* (the model it needs, trees, batching) is plain data in ``catalog``, which the
settings read without importing this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from specvideo.text.drafting.drafters import HybridDrafter, ModelDrafter, NGramDrafter, NullDrafter
from specvideo.text.drafting.head_drafters import HeadDrafter
from specvideo.text.drafting.tree_drafters import HeadTreeDrafter, ModelTreeDrafter, NGramTreeDrafter
from specvideo.text.tree import TreeVerifier
from specvideo.text.verifier import TargetVerifier

__all__ = ["BUILDERS", "DraftParts", "build_drafter", "build_verifier"]


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
    # the generator's TextConfig: the drafters' own settings (max_ngram, hybrid_min_ngram,
    # tree_branches, tree_nodes, tree_width, head_tree_width)
    settings: object


def _lookup(p: DraftParts, hybrid: bool = False) -> NGramDrafter:
    """Prompt lookup over the rows the run's verifier owns (its prompts and outputs)."""
    s = p.settings
    min_ngram = min(s.hybrid_min_ngram, s.max_ngram) if hybrid else 1
    return NGramDrafter(s.max_ngram, min_ngram=min_ngram, rows=p.verifier.rows)


def _model(p: DraftParts, lean: bool = True) -> ModelDrafter:
    return ModelDrafter(p.runner if lean else p.draft, p.verifier.sampler, p.vocab_size)


def _head(p: DraftParts, tree: bool = False, hybrid: bool = False):
    """The head's chain or EAGLE-2 tree, behind prompt lookup for the hybrids; a batch of prompts
    drafts by prompt lookup (the head reads one row's features)."""
    if p.batch_size > 1:
        return _lookup(p)
    if tree:
        drafter = HeadTreeDrafter(p.runner, p.verifier, p.settings.head_tree_width, p.settings.tree_nodes)
    else:
        drafter = HeadDrafter(p.runner, p.verifier)
    return HybridDrafter(drafter, _lookup(p, hybrid=True)) if hybrid else drafter


def _ngram_tree(p: DraftParts) -> NGramTreeDrafter:
    s = p.settings
    return NGramTreeDrafter(s.max_ngram, branches=s.tree_branches, max_nodes=s.tree_nodes, rows=p.verifier.rows)


BUILDERS: dict[str, Callable[[DraftParts], object]] = {
    "model": lambda p: _model(p, lean=False),
    "lean": _model,
    "hybrid": lambda p: HybridDrafter(_model(p), _lookup(p, hybrid=True)),
    "tree": lambda p: ModelTreeDrafter(_model(p), p.settings.tree_width),
    "head": _head,
    "head-tree": lambda p: _head(p, tree=True),
    "head-hybrid": lambda p: _head(p, hybrid=True),
    "head-hybrid-tree": lambda p: _head(p, tree=True, hybrid=True),
    "self": _model,
    "self-hybrid": lambda p: HybridDrafter(_model(p), _lookup(p, hybrid=True)),
    "ngram": _lookup,
    "ngram-tree": _ngram_tree,
    "none": lambda p: NullDrafter(),
}


def build_drafter(name: str, parts: DraftParts):
    """Drafter ``name`` for one run."""
    return BUILDERS[name](parts)


def build_verifier(spec, model, sampler, rows) -> TargetVerifier:
    """The target's verifier for a drafter of ``spec``: the tree verifier for one that proposes
    token trees (its catalog entry's ``tree``), the chain verifier for every other."""
    verifier = TreeVerifier if spec.tree else TargetVerifier
    return verifier(model, sampler, rows)
