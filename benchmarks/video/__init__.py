"""Video benchmark: speculative frame generation against honest baselines, side by side.

``config`` (settings and methods), ``workloads`` (the split's clips), ``methods`` (running and
timing one method), ``scoring`` (quality, costs, discrimination, aggregation), ``run`` (the run),
``report`` (targets, tables, the default choice, docs/history/benchmarks.md) and ``plot`` (the Pareto PNG).
Settings are chosen with ``--split tuning`` and reported with ``--split validation``.
"""

from benchmarks.measure import roc_auc, spearman
from benchmarks.video.config import (
    BENCH_VIDEO_DEFAULTS,
    DEFAULT_SETTING,
    FAMILIES,
    SPLITS,
    BenchVideoConfig,
    Method,
    SpecSetting,
    build_methods,
)
from benchmarks.video.methods import RuntimeEstimate, estimate_runtime, run_method
from benchmarks.video.plot import plot_pareto
from benchmarks.video.report import (
    VideoTargetCheck,
    check_targets,
    choose_default,
    format_targets,
    to_markdown,
    write_report,
)
from benchmarks.video.results import BenchVideoResults
from benchmarks.video.run import run_benchmark
from benchmarks.video.scoring import VideoMethodResult, reference_steps
from benchmarks.video.workloads import BenchClip, load_workloads

__all__ = [
    "BENCH_VIDEO_DEFAULTS",
    "DEFAULT_SETTING",
    "FAMILIES",
    "SPLITS",
    "BenchClip",
    "BenchVideoConfig",
    "BenchVideoResults",
    "Method",
    "RuntimeEstimate",
    "SpecSetting",
    "VideoMethodResult",
    "VideoTargetCheck",
    "build_methods",
    "check_targets",
    "choose_default",
    "estimate_runtime",
    "format_targets",
    "load_workloads",
    "plot_pareto",
    "reference_steps",
    "roc_auc",
    "run_benchmark",
    "run_method",
    "spearman",
    "to_markdown",
    "write_report",
]
