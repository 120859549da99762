"""The shared draft -> verify -> accept core. Knows nothing about tokens or pixels."""

from specvideo.core.acceptance import greedy_match, rejection_sample, sample_categorical, threshold_accept
from specvideo.core.loop import speculate
from specvideo.core.schedule import ConfidenceSchedule, ConstantSchedule, HeuristicSchedule, make_schedule
from specvideo.core.types import Draft, SpecStats, Step, Verdict

__all__ = [
    "ConfidenceSchedule",
    "ConstantSchedule",
    "Draft",
    "HeuristicSchedule",
    "SpecStats",
    "Step",
    "Verdict",
    "greedy_match",
    "make_schedule",
    "rejection_sample",
    "sample_categorical",
    "speculate",
    "threshold_accept",
]
