"""One source of defaults for text generation: the API, the CLI and the app read them from here."""

from __future__ import annotations

from dataclasses import dataclass

# the drafters that run a draft head on the target's features (specvideo.text.head): a chain, an
# EAGLE-2 tree, and either behind prompt lookup (batch 1)
HEAD_DRAFTERS = ("head", "head-tree", "head-hybrid", "head-hybrid-tree")
DRAFTERS = ("model", "lean", "hybrid", "tree", *HEAD_DRAFTERS, "ngram", "ngram-tree", "none")
# the drafters that run the draft with LeanLlama (and draft_vocab); tree: the lean draft's chain
# with its runner-up tokens beside it, verified as one token tree (batch 1)
LEAN_DRAFTERS = ("lean", "hybrid", "tree", *HEAD_DRAFTERS)
MODEL_DRAFTERS = ("model", *LEAN_DRAFTERS)  # the drafters that run a draft model
NO_MODEL_DRAFTERS = ("ngram", "ngram-tree", "none")  # the drafters that load no draft model
TREE_DRAFTERS = ("tree", "ngram-tree", "head-tree", "head-hybrid-tree")  # propose token trees
# one prompt at a time (a batch is refused); the head drafters draft a batch by prompt lookup
ONE_ROW_DRAFTERS = ("tree", "ngram-tree")


@dataclass(frozen=True)
class TextConfig:
    drafter: str = "model"
    # k 3 at a constant length: the pick of the tuning split for prompt lookup, the hybrid and the
    # draft head alike (docs/BENCHMARKS.md "Text: tuning split, draft head")
    num_draft_tokens: int = 3
    schedule: str = "constant"
    max_new_tokens: int = 128
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    max_ngram: int = 3
    # hybrid drafter: look up only matches of at least this many tokens (else the model drafts);
    # chosen on train-split prompts (models/text/README.md), 1-token matches cost sampled speed
    hybrid_min_ngram: int = 2
    confidence_threshold: float = 0.4
    # ngram-tree drafter: continuations of up to this many earlier occurrences, merged into a tree
    # of at most tree_nodes nodes (batch 1)
    tree_branches: int = 4
    tree_nodes: int = 12
    tree_width: int = 1  # tree drafter: runner-up tokens beside the chain's at each depth
    # head-tree drafters (EAGLE-2): nodes expanded per depth, children per expanded node
    head_tree_width: int = 2
    draft_vocab_size: int = 2048  # lean and hybrid drafters: the most frequent tokens they propose (0 = all)
    seed: int = 0


TEXT_DEFAULTS = TextConfig()
