"""A frequency-ranked draft vocabulary (FR-Spec, Zhao et al. 2025, "FR-Spec: Accelerating
Large-Vocabulary Language Models via Frequency-Ranked Speculative Sampling").

A tiny draft's per-token cost on CPU is dominated by its output projection (vocabulary x hidden
weights read for every token). Restricting the draft's logits to the N most frequent tokens of its
training data cuts that read by V / N while the draft rarely wanted the other tokens anyway.
Exactness does not depend on it: the target verifies every token, and the draft's distribution q
is zero outside the subset, which the rejection rule handles like any other q.

The ranking is saved beside the draft as ``token_ranking.json`` (every token id, most frequent
first, counted on the training split only).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import torch

from specvideo.files import atomic_write

RANKING_FILE = "token_ranking.json"


def token_ranking(train_ids: np.ndarray, vocab_size: int) -> list[int]:
    """Every token id 0 .. vocab_size - 1, most frequent in ``train_ids`` first (ties by id)."""
    counts = np.bincount(np.asarray(train_ids, dtype=np.int64), minlength=vocab_size)[:vocab_size]
    return np.argsort(-counts, kind="stable").tolist()


def save_token_ranking(directory: str | os.PathLike, ranking: list[int], source: str) -> Path:
    """Written to a temp file and renamed, so an existing ranking is never left half-written."""
    path = Path(directory) / RANKING_FILE
    atomic_write(path, lambda f: f.write(json.dumps({"source": source, "ranking": [int(t) for t in ranking]})))
    return path


def load_token_ranking(directory: str | os.PathLike) -> list[int] | None:
    """The ranking saved beside a draft, or None when the directory has none."""
    path = Path(directory) / RANKING_FILE
    if not path.is_file():
        return None
    try:
        ranking = json.loads(path.read_text())["ranking"]
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"{path} is not a token ranking (expected JSON with a 'ranking' list): {err}"
        ) from err
    if not isinstance(ranking, list) or not all(isinstance(t, int) for t in ranking):
        raise ValueError(f"{path}: 'ranking' must be a list of token ids")
    return ranking


def draft_vocabulary(ranking: list[int], size: int, vocab_size: int) -> torch.Tensor | None:
    """The ``size`` most frequent token ids (sorted), or None for the whole vocabulary (size 0 or
    size >= vocab_size)."""
    check_size(size)
    if size == 0 or size >= vocab_size:
        return None
    if len(ranking) < size:
        raise ValueError(f"the token ranking lists {len(ranking)} tokens, fewer than the {size} asked for")
    return torch.tensor(sorted(ranking[:size]), dtype=torch.long)


def ranked_vocabulary(draft_dir: str | os.PathLike | None, size: int, vocab_size: int) -> torch.Tensor | None:
    """The ``size`` most frequent token ids by the ranking saved beside a draft; None (all tokens)
    when size is 0 or the draft directory has no ranking (the size is checked either way)."""
    check_size(size)
    ranking = load_token_ranking(draft_dir) if draft_dir and os.path.isdir(draft_dir) else None
    return None if ranking is None else draft_vocabulary(ranking, size, vocab_size)


def check_size(size) -> None:
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ValueError(f"draft vocabulary size must be an integer >= 0 (0 = all tokens), got {size!r}")
