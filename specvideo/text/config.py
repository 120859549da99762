"""One source of defaults for text generation: the API, the CLI and the app read them from here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from specvideo.settings import Settings
from specvideo.text.drafting.catalog import DRAFTER_SPECS

# the drafters by name, each with what it needs (specvideo.text.drafting.catalog: plain data, so the
# settings import no torch); these tuples are read off it: the CLI's choices and the checks
DRAFTERS = tuple(DRAFTER_SPECS)
HEAD_DRAFTERS = tuple(n for n, s in DRAFTER_SPECS.items() if s.needs == "head")  # a head on the target's features
LEAN_DRAFTERS = tuple(n for n, s in DRAFTER_SPECS.items() if s.lean)  # run the draft with LeanLlama
MODEL_DRAFTERS = tuple(n for n, s in DRAFTER_SPECS.items() if s.needs)  # the drafters that run a draft model
NO_MODEL_DRAFTERS = tuple(n for n, s in DRAFTER_SPECS.items() if not s.needs)  # load no draft model
SELF_DRAFTERS = tuple(n for n, s in DRAFTER_SPECS.items() if s.copy)  # draft with a quantised copy of the target


@dataclass(frozen=True)
class TextConfig(Settings):
    """Every per-call text setting under one name: the generator's (drafter, k, schedule, the
    drafters' own) and each call's defaults (max_new_tokens, temperature, top_k, top_p, seed). The
    CLI, the app, batch jobs and the server build one and hand it to a ``SpeculativeGenerator`` over
    loaded ``TextModels``; what is loaded and how it runs (dtype, device, runners) is TextModels'."""

    KIND: ClassVar[str] = "text"

    # None: by the models given (``default_drafter``): the head's hybrid for a draft head, the draft
    # model for a draft model, prompt lookup ("ngram") without one, which is the default pair's: the
    # fastest configuration of the tuning split, for raw prompts and chat alike (docs/history/benchmarks.md
    # "Text: tuning split, one default or one per kind of prompt"): prompt lookup k 3 tied the draft
    # head behind lookup on code greedily and led it sampled and on chat, so no per-kind default
    drafter: str | None = None
    # k 3 at a constant length: the pick of the tuning split for prompt lookup, the hybrid and the
    # draft head alike (docs/history/benchmarks.md "Text: tuning split, draft head")
    num_draft_tokens: int = 3
    schedule: str = "constant"
    max_new_tokens: int = 128
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    # how sampled rows draw and check tokens (``RowSampler``): "gumbel", each row's tokens from its
    # own seed alone, whatever the batch; "rejection", speculative sampling on each row's generator,
    # which accepted 11-19 % more sampled model drafts on the tuning split but ties a row's tokens to
    # its run (docs/history/benchmarks.md "Text: the sampling rule")
    sampling_rule: str = "gumbel"
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

    def drafter_for(self, draft=None, is_head: bool = False) -> str:
        """``drafter``, or the one the models given call for when it is None (``default_drafter``)."""
        return self.drafter or default_drafter(draft, is_head)


TEXT_DEFAULTS = TextConfig()


def default_drafter(draft, is_head: bool) -> str:
    """The drafter for the models given when none is named: the head's hybrid for a draft head, the
    draft model through transformers for a draft model, prompt lookup without one."""
    if draft is None:
        return "ngram"
    return "head-hybrid" if is_head else "model"
