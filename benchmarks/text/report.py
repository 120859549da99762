"""The text benchmark's tables, plot and report sections ("## Text" for the held-out split,
"## Text: tuning split" for the sweep that chose the setting)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from benchmarks.report import atomic_write, command_block, fmt_load, replace_section
from benchmarks.text.config import TARGETS
from benchmarks.text.results import BenchResults, MethodResult, best_row, check_targets

PLOT_NAMES = {"heldout": "text_speedup_vs_k.png", "tuning": "text_tuning_speedup_vs_k.png", "test": "text_test_speedup_vs_k.png"}
SECTIONS = {"heldout": "## Text", "tuning": "## Text: tuning split", "test": "## Text: test split"}
# a named pair reports into sections of its own, beside the default pair's
PAIR_SECTIONS = {
    "qwen-coder": {
        "heldout": "## Text, code pair (Qwen2.5-Coder-1.5B)",
        "tuning": "## Text, code pair: tuning split",
        "test": "## Text, code pair: test split",
    }
}
PAIR_PLOTS = {"qwen-coder": "text_code_pair_"}


def section_heading(settings: dict) -> str:
    split = settings.get("split", "heldout")
    return PAIR_SECTIONS.get(settings.get("pair"), SECTIONS)[split]


def _rows(results: BenchResults | Iterable[MethodResult]) -> list[MethodResult]:
    return list(results.rows if isinstance(results, BenchResults) else results)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else spec.format(value)


def _band(row: MethodResult) -> str:
    if row.speedup_vs_hf is None:
        return "-"
    lo_hi = row.speedup_vs_hf_spread
    return f"{row.speedup_vs_hf:.2f}×" + (f" [{lo_hi[0]:.2f}–{lo_hi[1]:.2f}]" if lo_hi and lo_hi[0] != lo_hi[1] else "")


def _positions(values: list[float] | None, shown: int = 6) -> str:
    return "-" if not values else " / ".join(f"{v:.2f}" for v in values[:shown])


def _margins(values: list[float] | None) -> str:
    """The float32 target's logit gaps where greedy runs first differ from hf-target's (max first)."""
    return "-" if not values else f"max {max(values):.3f} ({len(values)} prompts)"


def to_markdown(results: BenchResults | Iterable[MethodResult]) -> str:
    """One table per workload and temperature; '-' where a number does not apply."""
    rows = _rows(results)
    out = []
    for workload in dict.fromkeys(r.workload for r in rows):
        for temperature in dict.fromkeys(r.temperature for r in rows if r.workload == workload):
            title = "greedy" if temperature == 0 else f"T = {temperature:g}"
            out += [
                f"### {workload}, {title}",
                "",
                "| method | tokens/s | × HF target-only [min–max over repeats] | × our target-only | acceptance | by position | tokens / target call | = HF | = our loop | gap at 1st difference |",
                "|---|---:|---:|---:|---:|---|---:|---:|---:|---|",
            ]
            for r in rows:
                if r.workload != workload or r.temperature != temperature:
                    continue
                cells = [
                    r.method, f"{r.tokens_per_s:.1f}", _band(r), _fmt(r.speedup_vs_loop, "{:.2f}×"),
                    _fmt(r.acceptance_rate, "{:.3f}"), _positions(r.position_acceptance),
                    _fmt(r.tokens_per_target_call, "{:.2f}"),
                    _fmt(r.exact_match, "{:.2f}"), _fmt(r.exact_vs_loop, "{:.2f}"), _margins(r.tie_margins),
                ]
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
    return "\n".join(out)


def round_table(results: BenchResults | Iterable[MethodResult]) -> str:
    """Where a round's time goes, per method of ours (ms, mean over rounds), greedy and sampled."""
    rows = [r for r in _rows(results) if r.round_ms]
    if not rows:
        return ""
    out = [
        "Time per round (ms, mean over every round of every run; forward: the target's forward passes;"
        " check: the acceptance rule and correction; bookkeeping: commits, cache rollback, stats):",
        "",
        "| workload | T | method | draft | target forward | check | bookkeeping | total | forward share |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        m = r.round_ms
        share = m["forward"] / m["total"] if m["total"] else 0.0
        cells = [r.workload, f"{r.temperature:g}", r.method] + [
            f"{m[k]:.1f}" for k in ("draft", "forward", "check", "bookkeeping", "total")
        ] + [f"{share:.2f}"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def decode_table(decode: dict | None) -> str:
    if not decode:
        return ""
    lines = ["| forward | ms | × target, 1 token |", "|---|---:|---:|"]
    one = decode["target"]  # the 1-token step of the first target runner (transformers, else a LeanLlama format)
    for name, value in decode.items():
        if name == "target" or name.endswith("_over_target"):
            continue
        if name.startswith("target"):
            runner = {"target_lean": "LeanLlama", "target_packed": "oneDNN pre-packed weights",
                      "target_invariant": "LeanLlama, invariant",
                      "target_int8": "LeanLlama, int8 weights", "target_int4": "LeanLlama, int4 weights",
                      "target_gguf": "LeanLlama, the GGUF's own blocks"}.get(
                name.split("@")[0], "transformers"
            )
            label = f"target ({runner}), {name.split('@')[1]} tokens at once"
        else:
            label = f"{name.replace('_', ' ')}, 1 token"
        lines.append(f"| {label} | {value:.2f} | {value / one:.3f} |")
    return "\n".join(lines)


def plot_speedup_vs_k(results: BenchResults | Iterable[MethodResult], path: str | os.PathLike) -> Path:
    """PNG of speedup over HF target-only against k: one panel per workload x temperature, one line
    per sweep (ours: drafter x schedule; HF assisted: schedule; prompt lookups)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = [r for r in _rows(results) if r.speedup_vs_hf is not None]
    panels = list(dict.fromkeys((r.workload, r.temperature) for r in rows)) or [("", 0.0)]
    fig = Figure(figsize=(5.0 * len(panels), 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (workload, temperature) in zip(axes, panels):
        lines: dict[str, list] = {}
        for r in rows:
            if (r.workload, r.temperature) != (workload, temperature):
                continue
            if r.k is None:
                ax.axhline(r.speedup_vs_hf, linestyle=":", color="tab:grey", linewidth=1.2, label=r.method)
                continue
            label = {"ours-draft": f"ours {r.drafter} / {r.schedule}", "hf-assisted": f"HF assisted / {r.schedule}"}.get(
                r.family, r.family)
            lines.setdefault(label, []).append((r.k, r.speedup_vs_hf))
        for label, points in lines.items():
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label,
                    linestyle="--" if label.startswith(("HF", "hf")) else "-")
        ax.axhline(1.0, color="lightgrey", linewidth=1.0, label="HF target-only (1×)")
        ax.set_title(f"{workload}, {'greedy' if temperature == 0 else f'T={temperature:g}'}")
        ax.set_xlabel("draft length k (heuristic: initial k)")
        ax.set_ylabel("speedup over HF target-only (median)")
        ax.legend(fontsize=7)
    path = Path(path)
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=110), binary=True)
    return path


def format_targets(results: BenchResults) -> str:
    return "\n".join(f"- {check.line()}" for check in check_targets(results))


def choose(results: BenchResults) -> dict[str, MethodResult | None]:
    """The tuning split's picks: per family, the greedy row with the best speedup over HF
    target-only, taken as the geometric mean over workloads (one setting for both)."""
    import math

    picks = {}
    for family in ("ours-draft", "hf-assisted", "hf-lookup", "ours-ngram"):
        by_method: dict[str, list[MethodResult]] = {}
        for r in results.rows:
            if r.family == family and r.temperature == 0 and r.speedup_vs_hf is not None:
                by_method.setdefault(r.method, []).append(r)
        if not by_method:
            continue
        best = max(by_method.values(), key=lambda rs: math.fsum(math.log(r.speedup_vs_hf) for r in rs) / len(rs))
        picks[family] = best[0]
    return picks


def write_report(results: BenchResults, command: str, path: str | os.PathLike = "docs/history/benchmarks.md") -> Path:
    """Write (or replace) the split's section of the report, and its plot next to it."""
    path = Path(path)
    split = results.settings.get("split", "heldout")
    name = PLOT_NAMES[split]
    if results.settings.get("pair") in PAIR_PLOTS:
        name = name.replace("text_", PAIR_PLOTS[results.settings["pair"]], 1)
    plot = plot_speedup_vs_k(results, path.parent / name)
    section = text_section(results, command, os.path.relpath(plot, path.parent))
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    atomic_write(path, lambda f: f.write(replace_section(old, section_heading(results.settings), section)))
    return path


def text_section(results: BenchResults, command: str, plot_link: str) -> str:
    m, s = results.machine, results.settings
    split = s.get("split", "heldout")
    counts = ", ".join(f"{n} {w}" for w, n in s["num_prompts_run"].items())
    tokens = "; ".join(f"{w} {min(t)}–{max(t)} tokens" for w, t in s["prompt_tokens"].items())
    notes = [
        f"- Machine: {m['processor']}, {m['cpu_count']} cores (torch threads: {m['torch_threads']}), "
        f"{m['platform']}, device {m['device']}{', ' + m['gpu'] if 'gpu' in m else ''}; "
        f"Python {m['python']}, torch {m['torch']}, transformers {m['transformers']}; "
        f"load average at start {fmt_load(m.get('load_average'))}; run {m['date_utc']} UTC.",
        f"- Split: **{split}** ({counts} prompts; {tokens}); exactly {s['max_new_tokens']} new tokens per run "
        f"for every method (end-of-sequence ignored, equal work), {s['repeats']} repeat(s) of every prompt, "
        "methods interleaved per prompt, one untimed warm-up per method.",
        f"- Sampling: T with top-p {s['top_p']:g} on both sides (top-k off). tokens/s: median over runs. "
        "Speedups: per repeat the median over prompts of the per-prompt time ratio; the median over repeats "
        "with [min–max]. = HF / = our loop: fraction of greedy runs token-identical to HF target-only / to our "
        "own target-only loop; gap at 1st difference: the float32 target's logit gap between the two tokens "
        "where a run first differs from HF's (a near tie when small).",
        f"- Number format: **{s.get('torch_dtype', 'float32')}** (--dtype {s.get('dtype', 'float32')}) for every "
        "method; in bf16 our loop verifies on LeanLlama(invariant=True); rows marked +int8 / +int4 run the "
        "target's projections and output head weight-only quantised over those activations (invariant too; "
        "= our loop compares them with our target-only loop in the same format); rows marked +gguf run the "
        "GGUF file's own blocks with float32 activations.",
    ]
    if s.get("hf_assisted"):
        notes.append("- HF assisted, the draft's generation config otherwise: "
                     + ", ".join(f"{k}={v}" for k, v in s["hf_assisted"].items()) + ".")
    lines = [*command_block(section_heading(s), command), *notes, ""]
    if s.get("decode_ms"):
        times = f"{s.get('decode_repeats', 5)} × {s.get('decode_forwards', 32)}"
        lines += [f"Decode cost (batch 1, one forward over the cache after the first prompt, median of {times}):", "",
                  decode_table(s["decode_ms"]), ""]
    lines += [to_markdown(results).rstrip(), ""]
    if round_table(results):
        lines += [round_table(results)]
    if split == "tuning":
        lines += ["Chosen on this split (greedy, geometric mean over workloads):", ""]
        lines += [f"- {family}: `{row.method}`" for family, row in choose(results).items()]
    else:
        lines += ["Targets:", "", format_targets(results)]
    lines += ["", f"![speedup over HF target-only against k]({Path(plot_link).as_posix()})", ""]
    return "\n".join(lines)


__all__ = ["TARGETS", "best_row", "choose", "decode_table", "format_targets", "plot_speedup_vs_k",
           "round_table", "text_section", "to_markdown", "write_report"]
