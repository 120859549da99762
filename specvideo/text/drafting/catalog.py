"""What each drafter is, by name, as plain data: the model it needs, how that model runs, whether
it proposes trees, what a batch drafts with. The settings (``specvideo.text.config``), the CLI's
choices and the loaders read it without importing torch or any drafter; how a run builds each
drafter lives in ``specvideo.text.drafting.registry``."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DRAFTER_SPECS", "DrafterSpec", "spec_of"]


@dataclass(frozen=True)
class DrafterSpec:
    needs: str = ""  # the model it runs: "" none, "draft" a causal LM, "head" a DraftHead
    lean: bool = False  # runs that model with LeanLlama (and FR-Spec's draft_vocab)
    tree: bool = False  # proposes token trees
    one_row: bool = False  # verifies one prompt at a time: a batch is refused
    chain: str | None = None  # a tree drafter's chain: what a continuous batch drafts with
    copy: str | None = None  # drafts with a copy of the target in this weight format (self-speculation)


DRAFTER_SPECS: dict[str, DrafterSpec] = {
    # a small causal LM through transformers
    "model": DrafterSpec(needs="draft"),
    # the same Llama draft run by LeanLlama: much less per-call overhead on CPU
    "lean": DrafterSpec(needs="draft", lean=True),
    # prompt lookup when the context's last tokens occurred before, else the lean draft
    "hybrid": DrafterSpec(needs="draft", lean=True),
    # the lean draft's chain with runner-up tokens beside it, verified as one token tree
    "tree": DrafterSpec(needs="draft", lean=True, tree=True, one_row=True, chain="lean"),
    # a draft head on the target's features (EAGLE): its chain, its dynamic tree, behind lookup
    "head": DrafterSpec(needs="head", lean=True),
    "head-tree": DrafterSpec(needs="head", lean=True, tree=True, chain="head"),
    "head-hybrid": DrafterSpec(needs="head", lean=True),
    "head-hybrid-tree": DrafterSpec(needs="head", lean=True, tree=True, chain="head-hybrid"),
    # self-speculation (ML-SpecQD): an int4 copy of the target drafts, no second model to load;
    # behind prompt lookup for its hybrid
    "self": DrafterSpec(lean=True, copy="int4"),
    "self-hybrid": DrafterSpec(lean=True, copy="int4"),
    # prompt lookup, no model: one continuation, or several earlier occurrences' as one tree
    "ngram": DrafterSpec(),
    "ngram-tree": DrafterSpec(tree=True, one_row=True, chain="ngram"),
    # plain target-only decoding through the same loop: the baseline
    "none": DrafterSpec(),
}


def spec_of(name: str) -> DrafterSpec:
    """The spec of drafter ``name``; a clear error for an unknown name."""
    try:
        return DRAFTER_SPECS[name]
    except KeyError:
        raise ValueError(f"unknown drafter {name!r}; choose one of {', '.join(DRAFTER_SPECS)}") from None
