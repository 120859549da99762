"""The figures of docs/BENCHMARKS.md, drawn from the numbers its tables quote.

Each figure's numbers are copied from one bench run's report (the command and the section of
docs/history/benchmarks.md that holds the full report are in FIGURES below); this script only draws
them, so a figure changes when a new run's numbers are put here.

    python scripts/plot_benchmarks.py            # writes docs/figures/*.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# tokens/s, greedy; "ours" is the default drafter on the file's blocks, "alone" our target-only loop
TEXT = {
    "source": "docs/BENCHMARKS.md 'Text' (the commands there; full reports in docs/history/benchmarks.md)",
    "rows": [
        # (label, ours, alone, llama.cpp best mode, transformers generate() or None)
        ("SmolLM2-135M code\n(tuning, Intel AMX)", 187.2, 122.3, 88.8, None),
        ("SmolLM2-135M chat\n(tuning, Intel AMX)", 122.0, 130.6, 75.8, None),
        ("Qwen2.5-Coder-1.5B code\n(held-out, Intel AMX)", 20.4, 15.3, 12.8, None),
        ("Qwen2.5-Coder-1.5B chat\n(held-out, Intel AMX)", 17.4, 16.2, 13.0, None),
    ],
}

# the fresh test split at 320 px, moving windows, read once (#55 item 4): s / frame, realism per
# frame (Inception KID x 10^3 to the truth), fidelity (feature distance, best of the seeds)
VIDEO = {
    "source": "docs/history/benchmarks.md 'Video: the fresh test split at 320 px, moving windows'",
    "rows": [
        ("target alone (N 8)", 2.5597, 6.9, 0.386),
        ("copy", 0.0008, -1.7, 0.262),
        ("flow", 0.0100, 0.2, 0.317),
        ("first frame by the target, then flow", 0.3308, 2.2, 0.331),
        ("every flow draft refined", 1.1161, 3.0, 0.344),
        ("learned check (--metric features)", 0.0530, 0.5, 0.324),
        ("default (typicality check)", 0.4443, 0.2, 0.317),
    ],
}


def plot_text(path: Path) -> None:
    rows = [r for r in TEXT["rows"] if r[1] is not None]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    series = [("ours (default drafter)", 1), ("ours, target alone", 2), ("llama.cpp, its best mode", 3), ("transformers generate()", 4)]
    width = 0.2
    for i, (name, col) in enumerate(series):
        xs = [j + (i - 1.5) * width for j, r in enumerate(rows) if r[col] is not None]
        ys = [r[col] for r in rows if r[col] is not None]
        if ys:
            bars = ax.bar(xs, ys, width, label=name)
            ax.bar_label(bars, fmt="%.0f", fontsize=7)
    ax.set_xticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
    ax.set_ylabel("tokens / s (greedy, 2 CPU cores)")
    ax.set_yscale("log")
    ax.set_title("Text: ours against llama.cpp on the same GGUF file")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_video(path: Path) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), sharex=True)
    for name, seconds, kid, fidelity in VIDEO["rows"]:
        for ax, y in ((left, kid), (right, fidelity)):
            ax.scatter(seconds, y)
            ax.annotate(name, (seconds, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    left.set_ylabel("realism: KID x 10^3 per frame (lower: better)")
    right.set_ylabel("fidelity: distance, best of 2 (lower: better)")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_xlim(3e-4, 20)
        ax.set_xlabel("seconds per frame at 320 px (2 CPU cores)")
    fig.suptitle("Video: quality against cost, fresh test split (read once)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/figures"))
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    plot_text(out / "text_vs_llama_cpp.png")
    plot_video(out / "video_quality_vs_cost.png")
    print(f"wrote {out}/text_vs_llama_cpp.png, {out}/video_quality_vs_cost.png")


if __name__ == "__main__":
    main()
