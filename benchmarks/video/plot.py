"""The Pareto plots: wall-clock speed-up over the reference target against SSIM to the truth, and
realism (KID to the truth, lower is better) against seconds per frame."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.report import atomic_write
from benchmarks.video.results import BenchVideoResults
from benchmarks.video.scoring import VideoMethodResult

_COLOURS = {"flow": "tab:blue", "learned": "tab:orange", "linear": "tab:green", "copy": "tab:purple"}
_STYLES = ("-", "--", ":", "-.")


def plot_pareto(results: BenchVideoResults, path: str | os.PathLike, realism: bool = False) -> Path:
    """PNG, one panel per workload: speed-up over the reference target (log x) against SSIM to the
    truth, or with ``realism`` seconds per frame (log x) against KID to the truth; one line per sweep
    drafter x strength through its thresholds, baselines as points."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    workloads = results.workloads
    fig = Figure(figsize=(6.4 * len(workloads), 5.0), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(workloads), squeeze=False)[0]
    for ax, workload in zip(axes, workloads):
        rows = [r for r in results.rows if r.workload == workload]
        if realism:
            scores = {r.method: results.generative[(workload, r.method)] for r in rows}

            def xy(r, scores=scores):
                return r.seconds_per_frame, scores[r.method].kid_truth
        else:

            def xy(r):
                return r.speedup, r.ssim_gt

        _plot_sweep(ax, rows, xy)
        _plot_baselines(ax, rows, xy)
        ax.set_xscale("log")
        ref = results.reference(workload)
        ax.set_title(f"{workload} (reference target N = {ref.steps})")
        if realism:
            ax.set_xlabel("CPU seconds per frame (median over clips, log)")
            ax.set_ylabel("KID ×10³ to the true frames (mean over seeds; lower is more realistic)")
        else:
            ax.set_xlabel("CPU wall-clock speed-up over the reference target (median per-clip ratio, log)")
            ax.set_ylabel("SSIM to ground truth (mean over clips)")
        ax.grid(True, which="both", linewidth=0.3)
        ax.legend(fontsize=6.5)
    path = Path(path)
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=110), binary=True)
    return path


def _plot_sweep(ax, rows: list[VideoMethodResult], xy) -> None:
    curves: dict[tuple[str, float, int], list[VideoMethodResult]] = {}
    for r in rows:
        if r.family == "speculative" and r.method != "default":
            curves.setdefault((r.drafter, r.strength, r.num_draft_frames), []).append(r)
    strengths = sorted({s for _, s, _ in curves})
    lengths = sorted({k for _, _, k in curves})
    for (drafter, strength, k), points in curves.items():
        points.sort(key=lambda r: r.threshold)
        ax.plot(
            [xy(p)[0] for p in points],
            [xy(p)[1] for p in points],
            marker="o",
            markersize=3,
            color=_COLOURS.get(drafter),
            linestyle=_STYLES[strengths.index(strength) % len(_STYLES)],
            linewidth=1.0 + lengths.index(k),
            label=f"speculative {drafter}, s={strength:g}"
            + (f", k={k}" if len(lengths) > 1 else "")
            + " (τ sweep)",
        )
        for p in points:
            ax.annotate(
                f"{p.threshold:g}",
                xy(p),
                fontsize=5,
                xytext=(2, 2),
                textcoords="offset points",
            )


def _plot_baselines(ax, rows: list[VideoMethodResult], xy) -> None:
    for r in rows:
        if r.family == "target":
            reference = r.steps == r.reference_steps
            ax.plot(
                [xy(r)[0]],
                [xy(r)[1]],
                "k*" if reference else "k.",
                markersize=12 if reference else 7,
                label=f"target-only N={r.steps}" + (" (reference)" if reference else ""),
            )
        elif r.family == "draft":
            ax.plot([xy(r)[0]], [xy(r)[1]], "x", color=_COLOURS.get(r.drafter), markersize=8, label=r.method)
        elif r.family == "first-target":
            ax.plot([xy(r)[0]], [xy(r)[1]], "s", color=_COLOURS.get(r.drafter), mfc="none", label=r.method)
        elif r.family == "refine-all":
            ax.plot([xy(r)[0]], [xy(r)[1]], "D", color=_COLOURS.get(r.drafter), mfc="none", label=r.method)
        if r.is_default:
            label = f"default ({r.drafter}, τ={r.threshold:g}, s={r.strength:g})"
            ax.plot([xy(r)[0]], [xy(r)[1]], "o", mfc="none", mec="red", markersize=13, mew=1.5, label=label)
