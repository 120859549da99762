"""Measurement helpers both benchmarks share: device sync, timed repeats, ratios, rank statistics,
and the progress bar."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch


def sync(device: torch.device) -> None:
    """Wait for queued GPU work, so that a timer brackets the computation itself."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_time(fn: Callable[[], object], repeats: int, device: torch.device) -> float:
    """Median seconds of ``repeats`` calls of ``fn`` after one untimed warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        sync(device)
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def median_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> float | None:
    """Median of the paired ratios a / b (per prompt or clip), None when there are none."""
    ratios = [a / b for a, b in zip(numerators, denominators) if b]
    return statistics.median(ratios) if ratios else None


def spread(values: Sequence[float]) -> tuple[float, float] | None:
    """(min, max) of the values, the spread reported beside a median; None when empty."""
    return (min(values), max(values)) if values else None


def progress_bar(total: int, enabled: bool, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="run", file=sys.stderr, disable=not enabled)


def _ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks, ties sharing their average rank."""
    x = np.asarray(values, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    _, inverse = np.unique(x, return_inverse=True)
    return (np.bincount(inverse, weights=ranks) / np.bincount(inverse))[inverse]


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman rank correlation (ties averaged); None for fewer than 2 points or a constant side."""
    if len(x) < 2:
        return None
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def roc_auc(labels: Sequence[bool], scores: Sequence[float]) -> float | None:
    """Area under the ROC curve of ``scores`` for the positive ``labels`` (Mann-Whitney, ties 1/2);
    None when a class is empty."""
    labels = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = _ranks(scores)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
