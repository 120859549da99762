"""Token trees, an optional extension: drafters that propose several candidates per depth and the
verifier that checks them in one masked forward (``verify``). Its rows of the drafter table
(``DRAFTERS``, plain data) join ``specvideo.text.drafting.catalog``; nothing in the core, the cache
contract or the generator names trees.

A tree's masked forward over n nodes costs what n tokens cost on a CPU, and the bf16 and GGUF
targets' invariant runners cannot compute it as their 1-token steps do, so a tree drafter loads
float32 under dtype "auto" and refuses an invariant target (docs/history/benchmarks.md has the
runs that compared trees with chains)."""

from __future__ import annotations

from specvideo.text.drafting import DrafterSpec

_TREES = "specvideo.text.trees.drafters"
_TREE = dict(verifier="specvideo.text.trees.verify:TreeVerifier", float32=True, check=f"{_TREES}:check")

DRAFTERS = {
    # the lean draft's chain with runner-up tokens beside it, verified as one token tree
    "tree": DrafterSpec(f"{_TREES}:model_tree", needs="draft", lean=True, one_row=True, chain="lean", **_TREE),
    # the draft head's EAGLE-2 dynamic tree, alone or behind prompt lookup
    "head-tree": DrafterSpec(f"{_TREES}:head_tree", needs="head", lean=True, chain="head", **_TREE),
    "head-hybrid-tree": DrafterSpec(f"{_TREES}:head_hybrid_tree", needs="head", lean=True, chain="head-hybrid", **_TREE),
    # several earlier occurrences' continuations of the context's last tokens as one tree
    "ngram-tree": DrafterSpec(f"{_TREES}:ngram_tree", one_row=True, chain="ngram", **_TREE),
}
