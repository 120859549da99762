"""One source of defaults for text generation: the API, the CLI and the app read them from here."""

from __future__ import annotations

from dataclasses import dataclass

DRAFTERS = ("model", "lean", "hybrid", "ngram", "none")
LEAN_DRAFTERS = ("lean", "hybrid")  # the drafters that run the draft with LeanLlama (and draft_vocab)
MODEL_DRAFTERS = ("model", *LEAN_DRAFTERS)  # the drafters that run a draft model


@dataclass(frozen=True)
class TextConfig:
    drafter: str = "model"
    num_draft_tokens: int = 5
    schedule: str = "heuristic"
    max_new_tokens: int = 128
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    max_ngram: int = 3
    # hybrid drafter: look up only matches of at least this many tokens (else the model drafts);
    # chosen on train-split prompts (models/text/README.md), 1-token matches cost sampled speed
    hybrid_min_ngram: int = 2
    confidence_threshold: float = 0.4
    draft_vocab_size: int = 2048  # lean and hybrid drafters: the most frequent tokens they propose (0 = all)
    seed: int = 0


TEXT_DEFAULTS = TextConfig()
