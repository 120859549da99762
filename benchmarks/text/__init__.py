"""Text benchmark (``specvideo bench text``): our speculative loop against transformers' own
generation, side by side, on two workloads with tuning and held-out splits.

config (settings) / prompts, fim and workloads (the prompts of each workload and split) / methods (what runs) / run (the timed loop
and decode costs) / results (aggregation and targets) / report (tables, plot, sections).
"""

from benchmarks.report import machine_info, replace_section
from benchmarks.text.config import (
    BENCH_TEXT_DEFAULTS,
    FAMILIES,
    SCHEDULES,
    BenchTextConfig,
    parse_drafter,
)
from benchmarks.text.prompts import (
    CHAT_HELDOUT,
    CHAT_TUNING,
    BenchPrompt,
    chat_prompts,
    code_prompts,
    heldout_prompts,
    load_prompts_jsonl,
)
from benchmarks.text.report import choose, format_targets, plot_speedup_vs_k, to_markdown, write_report
from benchmarks.text.results import BenchResults, MethodResult, TargetCheck, check_targets
from benchmarks.text.run import decode_costs, run_benchmark
from benchmarks.text.workloads import workload_prompts

_replace_section = replace_section  # the name the tests import

__all__ = [
    "BENCH_TEXT_DEFAULTS", "CHAT_HELDOUT", "CHAT_TUNING", "FAMILIES", "SCHEDULES", "BenchPrompt",
    "BenchResults", "BenchTextConfig", "MethodResult", "TargetCheck", "chat_prompts", "check_targets",
    "choose", "code_prompts", "decode_costs", "format_targets", "heldout_prompts", "load_prompts_jsonl",
    "machine_info", "parse_drafter", "plot_speedup_vs_k", "run_benchmark", "to_markdown",
    "workload_prompts", "write_report",
]
