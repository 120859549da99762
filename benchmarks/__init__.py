"""Side-by-side benchmarks (docs/ARCHITECTURE.md §4): every method on the same inputs, in one process."""

from benchmarks.text import (
    BENCH_TEXT_DEFAULTS,
    FAMILIES,
    BenchPrompt,
    BenchResults,
    BenchTextConfig,
    MethodResult,
    TargetCheck,
    check_targets,
    format_targets,
    heldout_prompts,
    load_prompts_jsonl,
    machine_info,
    plot_speedup_vs_k,
    run_benchmark,
    to_markdown,
    write_report,
)

__all__ = [
    "BENCH_TEXT_DEFAULTS",
    "FAMILIES",
    "BenchPrompt",
    "BenchResults",
    "BenchTextConfig",
    "MethodResult",
    "TargetCheck",
    "check_targets",
    "format_targets",
    "heldout_prompts",
    "load_prompts_jsonl",
    "machine_info",
    "plot_speedup_vs_k",
    "run_benchmark",
    "to_markdown",
    "write_report",
]
