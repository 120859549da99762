"""The video benchmark's report: target checks, tables, the Pareto plot, the default choice on the
tuning split, and its section of docs/history/benchmarks.md (one per split)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from benchmarks.report import atomic_write, command_block, fmt_load, replace_section
from benchmarks.video.injected import injected_table
from benchmarks.video.inplace import in_place_table
from benchmarks.video.local import POOLED, local_table
from benchmarks.video.realism_report import (
    choose_default,
    format_sampler_targets,
    generative_table,
    pretrained_table,
    realism_vs_steps,
)
from benchmarks.video.results import BenchVideoResults
from benchmarks.video.scoring import VideoMethodResult
from benchmarks.video.workloads import SPLIT_SEEDS
from specvideo.video.metrics import PSNR_CAP_DB

# The targets the video side is held to (docs/ARCHITECTURE.md §4)
TARGET_MARGIN = 0.02  # the reference target beats every draft-only method by this much SSIM
KEEP_QUALITY = 0.98  # the default keeps this share of the reference target's SSIM
WALL_SPEEDUP, PASS_SPEEDUP = 1.5, 3.0
MIN_AUC, MIN_SPEARMAN = 0.8, 0.4
ACCEPTANCE_RANGE = (0.3, 0.97)
SECTION = {"validation": "## Video", "tuning": "## Video: tuning split", "test": "## Video: test split"}
PLOT = {"validation": "video_pareto.png", "tuning": "video_pareto_tuning.png", "test": "video_pareto_test.png"}
REALISM_PLOT = {
    "validation": "video_realism.png",
    "tuning": "video_realism_tuning.png",
    "test": "video_realism_test.png",
}


@dataclass(frozen=True)
class VideoTargetCheck:
    workload: str
    description: str
    passed: bool | None
    detail: str

    def line(self) -> str:
        verdict = "not measured" if self.passed is None else "reached" if self.passed else "NOT reached"
        return f"[{self.workload}] {self.description}: {verdict} ({self.detail})"


def _drafts(results: BenchVideoResults, workload: str) -> list[VideoMethodResult]:
    return [r for r in results.rows if r.workload == workload and r.family == "draft"]


def check_targets(results: BenchVideoResults) -> list[VideoTargetCheck]:
    """Per workload: the reference target beats every draft-only method; the default keeps its
    quality, beats the drafts, pays in wall clock and in sequential passes, and discriminates."""
    checks = []
    for w in results.workloads:
        checks += _check_reference(results, w) + _check_default(results, w)
    return checks


def _check_reference(results: BenchVideoResults, w: str) -> list[VideoTargetCheck]:
    ref, drafts = results.reference(w), _drafts(results, w)
    text = f"the reference target beats every draft-only method by >= {TARGET_MARGIN:g} SSIM and on PSNR"
    if ref is None or not drafts:
        return [VideoTargetCheck(w, text, None, "no reference target or no draft-only method")]
    best = max(drafts, key=lambda r: r.ssim_gt)
    best_psnr = max(drafts, key=lambda r: r.psnr_gt)
    ok = ref.ssim_gt >= best.ssim_gt + TARGET_MARGIN and ref.psnr_gt > best_psnr.psnr_gt
    detail = (
        f"target-N{ref.steps} SSIM {ref.ssim_gt:.4f} vs {best.method} {best.ssim_gt:.4f} "
        f"({ref.ssim_gt - best.ssim_gt:+.4f}); PSNR {ref.psnr_gt:.2f} vs {best_psnr.method} {best_psnr.psnr_gt:.2f} dB"
    )
    return [VideoTargetCheck(w, text, ok, detail)]


def _check_default(results: BenchVideoResults, w: str) -> list[VideoTargetCheck]:
    ref, d, drafts = results.reference(w), results.default_row(w), _drafts(results, w)
    texts = [
        f"the default keeps >= {KEEP_QUALITY:.0%} of the reference target's SSIM to the truth",
        "the default beats every draft-only method on SSIM to the truth",
        f"the default is >= {WALL_SPEEDUP:g}x faster than the reference target in CPU wall clock",
        f"the default makes >= {PASS_SPEEDUP:g}x fewer sequential UNet passes per frame",
        f"discrimination: ROC-AUC >= {MIN_AUC:g}",
        f"discrimination: Spearman >= {MIN_SPEARMAN:g}",
        f"acceptance in [{ACCEPTANCE_RANGE[0]:g}, {ACCEPTANCE_RANGE[1]:g}]",
    ]
    if d is None or ref is None:
        return [VideoTargetCheck(w, t, None, "not run") for t in texts]
    best = max(drafts, key=lambda r: r.ssim_gt, default=None)
    kept = d.ssim_gt / ref.ssim_gt if ref.ssim_gt > 0 else None
    values = [
        (
            kept is not None and kept >= KEEP_QUALITY,
            f"{d.ssim_gt:.4f} vs {ref.ssim_gt:.4f} = {_fmt(kept, '{:.1%}')}",
        ),
        (
            None if best is None else d.ssim_gt > best.ssim_gt,
            "no draft-only method"
            if best is None
            else f"{d.ssim_gt:.4f} vs {best.method} {best.ssim_gt:.4f}",
        ),
        (
            d.speedup is not None and d.speedup >= WALL_SPEEDUP,
            f"{_fmt(d.speedup, '{:.2f}x')} (median per-clip ratio; UNet-time ratio "
            f"{_fmt(_bound(results, d, ref), '{:.2f}x')})",
        ),
        (d.pass_ratio is not None and d.pass_ratio >= PASS_SPEEDUP, f"{_fmt(d.pass_ratio, '{:.2f}x')}"),
        (
            None if d.auc is None else d.auc >= MIN_AUC,
            f"{_fmt(d.auc, '{:.3f}')}; against the target in the draft's place: "
            f"{_fmt(d.in_place_auc, '{:.3f}')}, {_fmt(d.in_place_worse_share, '{:.0%}')} of drafts below it",
        ),
        (
            None if d.spearman is None else d.spearman >= MIN_SPEARMAN,
            f"{_fmt(d.spearman, '{:.3f}')}; a draft's SSIM against that of the frame before it: "
            f"{_fmt(d.inherited_spearman, '{:.3f}')}; score against the draft's margin over the target in its "
            f"place: {_fmt(d.in_place_spearman, '{:.3f}')}",
        ),
        (
            None
            if d.acceptance_rate is None
            else ACCEPTANCE_RANGE[0] <= d.acceptance_rate <= ACCEPTANCE_RANGE[1],
            _fmt(d.acceptance_rate, "{:.3f}"),
        ),
    ]
    name = f"{d.method}: {d.drafter}, tau {d.threshold:g}, s {d.strength:g}, reference N = {ref.steps}"
    return [VideoTargetCheck(w, t, ok, f"{detail}; {name}") for t, (ok, detail) in zip(texts, values)]


def _bound(results: BenchVideoResults, row: VideoMethodResult, ref: VideoMethodResult) -> float | None:
    """The row's UNet-time ratio against the reference target (``RuntimeEstimate.unet_time_ratio``)."""
    return results.estimate.unet_time_ratio(ref.steps, row.unet_passes_per_frame, row.unet_evals_per_frame)


def format_targets(results: BenchVideoResults) -> str:
    return "\n".join(f"- {c.line()}" for c in check_targets(results))


WORKLOAD_TITLES = {
    "synthetic": "Synthetic (moving-shapes sequences)",
    "real": "Real (crops of the sample videos)",
    "clips": "Clips (the given video files)",
}


def to_markdown(results: BenchVideoResults) -> str:
    """One table per workload; '-' where a number does not apply."""
    out = []
    for workload in results.workloads:
        n = len(results.clips[workload])
        ref = results.reference(workload)
        out += [
            f"### {WORKLOAD_TITLES.get(workload, workload)}, {n} clip{'s' * (n != 1)}; reference target N = {ref.steps}",
            "",
            "| method | s / frame | × ref (wall, median [min–max]) | UNet evals / frame | passes / frame | × ref (passes) | PSNR↔GT | SSIM↔GT | SSIM↔ref | acceptance | by position | Spearman | AUC |",
            "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
        ]
        out += [_table_row(r) for r in results.rows if r.workload == workload]
        out += ["", quality_vs_steps(results, workload), ""]
    return "\n".join(out)


def quality_vs_steps(results: BenchVideoResults, workload: str) -> str:
    rows = [r for r in results.rows if r.workload == workload and r.family == "target"]
    head = "| target-only N | " + " | ".join(str(r.steps) for r in rows) + " |"
    sep = "|---|" + "---:|" * len(rows)
    ssim_line = "| SSIM↔GT | " + " | ".join(f"{r.ssim_gt:.4f}" for r in rows) + " |"
    psnr_line = "| PSNR↔GT | " + " | ".join(f"{r.psnr_gt:.2f}" for r in rows) + " |"
    time_line = "| s / frame | " + " | ".join(f"{r.seconds_per_frame:.3f}" for r in rows) + " |"
    return "\n".join([head, sep, ssim_line, psnr_line, time_line])


def _table_row(r: VideoMethodResult) -> str:
    reference = r.family == "target" and r.steps == r.reference_steps
    spread = f" [{r.speedup_spread[0]:.2f}–{r.speedup_spread[1]:.2f}]" if r.speedup_spread else ""
    name = (
        f"**{r.method}** (default)"
        if r.is_default
        else f"**{r.method}** (reference)"
        if reference
        else r.method
    )
    cells = [
        name,
        f"{r.seconds_per_frame:.4f}",
        _fmt(r.speedup, "{:.2f}×") + spread,
        f"{r.unet_evals_per_frame:.2f}",
        f"{r.unet_passes_per_frame:.2f}",
        _fmt(r.pass_ratio, "{:.2f}×"),
        f"{r.psnr_gt:.2f}",
        f"{r.ssim_gt:.4f}",
        "ref" if reference else f"{r.ssim_target:.4f}",
        _fmt(r.acceptance_rate, "{:.3f}"),
        " ".join(f"{a:.2f}" for a in r.per_position_acceptance[:6]) if r.per_position_acceptance else "-",
        _fmt(r.spearman, "{:.3f}"),
        _fmt(r.auc, "{:.3f}"),
    ]
    return "| " + " | ".join(cells) + " |"


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else spec.format(value)


def write_report(
    results: BenchVideoResults, command: str, path: str | os.PathLike = "docs/history/benchmarks.md"
) -> Path:
    """Write (or replace) this split's section of the report, and its Pareto plot next to it."""
    from benchmarks.video.plot import plot_pareto

    split = results.settings.get("split", "validation")
    path = Path(path)
    plot = plot_pareto(results, path.parent / PLOT[split])
    realism = plot_pareto(results, path.parent / REALISM_PLOT[split], realism=True)
    section = video_section(
        results, command, os.path.relpath(plot, path.parent), os.path.relpath(realism, path.parent)
    )
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    atomic_write(path, lambda f: f.write(replace_section(old, SECTION[split], section)))
    return path


def video_section(
    results: BenchVideoResults, command: str, plot_link: str, realism_link: str | None = None
) -> str:
    split = results.settings.get("split", "validation")
    lines = [*command_block(SECTION[split], command), *_notes(results), ""]
    lines += ["Judged as generative video (KID and sharpness with their spread over seeds, best-of-K):", ""]
    for w in results.workloads:
        lines += [
            f"#### {WORKLOAD_TITLES.get(w, w)}",
            "",
            generative_table(results, w),
            "",
            "Judged with pretrained eyes (EfficientNet-Lite0 on ImageNet, `specvideo.video.pretrained`):",
            "",
            pretrained_table(results, w),
            "",
            realism_vs_steps(results, w),
            "",
        ]
    lines += ["Targets of the sampler:", "", format_sampler_targets(results), ""]
    if realism_link:
        lines += [f"![KID against seconds per frame]({Path(realism_link).as_posix()})", ""]
    lines += [to_markdown(results).rstrip(), "", "Targets:", "", format_targets(results), ""]
    lines += local_section(results) + injected_section(results) + in_place_section(results)
    if split == "tuning":
        row, why = choose_default(results)
        lines += [f"Default chosen on this split by `choose_default`: {why}.", ""]
    lines += [f"![speedup against SSIM to the ground truth]({Path(plot_link).as_posix()})", ""]
    return "\n".join(lines)


def local_section(results: BenchVideoResults) -> list[str]:
    """The check on rounds drafted from the true context (``benchmarks.video.local``)."""
    if not results.local_checks:
        return []
    intro = (
        "The check on rounds drafted from the true context (no inherited drift; "
        "`benchmarks/video/local.py`): each clip cut into rounds of k frames that start from true "
        "frames, scored as the pipeline scores a round, against the reference target's frames from the "
        f"same context; every drafter alone, then their drafts pooled ({POOLED}: does the check rank "
        "one drafter's drafts against another's?)."
    )
    return _per_workload(results, intro, lambda w: local_table(results.local_checks, w))


def injected_section(results: BenchVideoResults) -> list[str]:
    """Known-bad drafts against the check (``benchmarks.video.injected``)."""
    if not results.injected:
        return []
    intro = (
        "Known-bad drafts against the check (`benchmarks/video/injected.py`): rounds from the true "
        "context where the drafter's round is replaced by a frozen, shifted, blurred or other clip's round, "
        f"scored as the pipeline scores a round with the run's check ({results.settings.get('metric')}) at "
        "the default threshold; a round is rejected when its first draft scores below it."
    )
    return _per_workload(results, intro, lambda w: injected_table(results.injected, w))


def in_place_section(results: BenchVideoResults) -> list[str]:
    """The check against the target in each draft's place (``benchmarks.video.inplace``)."""
    if not any(r.in_place_worse_share is not None for r in results.rows):
        return []
    intro = (
        "The check against the target in the draft's place (`benchmarks/video/inplace.py`): every draft "
        "the run scored, labelled against the frame the reference target makes from the draft's own context "
        "(the window the check conditioned it on, the same per-frame noise as target-only), so the drift both "
        "share is left out. AUC of 'score < τ' for drafts below that frame; Spearman of the score with the "
        "draft's SSIM margin over it; the run-level figures of the main table beside them."
    )
    return _per_workload(results, intro, lambda w: in_place_table(results.rows, w))


def _per_workload(results: BenchVideoResults, intro: str, table) -> list[str]:
    """A paragraph, then ``table(workload)`` under each workload's title."""
    lines = [intro, ""]
    for w in results.workloads:
        lines += [f"{WORKLOAD_TITLES.get(w, w)}:", "", table(w), ""]
    return lines


def _more_k(settings: dict) -> str:
    more = settings.get("sweep_draft_frames") or ()
    return f" (and {', '.join(map(str, more))} in the rows named -k<k>)" if more else ""


def _more_m(settings: dict) -> str:
    more = settings.get("sweep_refine_steps") or ()
    return f" (and {', '.join(map(str, more))} in the rows named -m<m>)" if more else ""


def _split_line(split: str, workloads: str, frames: str, s: dict) -> str:
    """Where the clips come from: the split's workloads, or the files ``--clips`` named."""
    windows = (
        f"the {s['windows_per_clip']} non-overlapping windows of most motion per clip"
        if s.get("windows") == "moving"
        else "consecutive windows taken round-robin over the clips"
    )
    if s.get("clips"):
        names = ", ".join(Path(c).name for c in s["clips"])
        return f"- Clips: {workloads} windows of the given files ({names}), longer side {s['max_side']} px, {windows}."
    seeds = SPLIT_SEEDS[split]
    return (
        f"- Split **{split}**: {workloads} clips; synthetic: seeds {seeds.start}.., {s['synthetic_size']} px square; "
        f"real: {frames}, longer side {s['max_side']} px, {windows}."
    )


def _notes(results: BenchVideoResults) -> list[str]:
    m, s, e = results.machine, results.settings, results.estimate
    d = s["default_setting"]
    split = s.get("split", "validation")
    frames = {
        "validation": "whole frames 85–100 % of every real clip (training used frames 0–70 % and other seeds)",
        "tuning": "whole frames 70–85 % of every real clip (training used frames 0–70 % and other seeds)",
        "test": "the test split's own clips, whole (footage nothing trained, tuned or validated on)",
    }[split]
    workloads = ", ".join(f"{len(names)} {w}" for w, names in results.clips.items())
    where = _split_line(split, workloads, frames, s)
    return [
        f"- Machine: {m['processor']}, {m['cpu_count']} cores (torch threads: {m['torch_threads']}), "
        f"{m['platform']}, device {m['device']}{', ' + m['gpu'] if 'gpu' in m else ''}; Python {m['python']}, "
        f"torch {m['torch']}, diffusers {m['diffusers']}; load average at start {fmt_load(m.get('load_average'))}; "
        f"run {m['date_utc']} UTC, {s['wall_minutes']:.1f} min in all.",
        f"- Model: {s['model_dir'] or 'the given pipeline'} (UNet {s['unet_params'] / 1e6:.2f}M parameters, "
        f"{s['context_frames']} context frames, hint {s['hint']}, residual {s['residual']}, context noise level "
        f"{s.get('context_noise_level', 0)}, {s['scheduler']}), run at each clip's own resolution.",
        f"{where} Each clip is {s['context_frames'] + 1} context frames (the last {s['context_frames']} condition the "
        f"model; the one before them conditions the typicality check's reference frame) then {s['num_frames']} generated frames; every stochastic method runs {s['num_seeds']} seeds "
        f"per clip (seed k of clip i: {s['seed']} + i + 100003 k, the same for every method; the drafters alone run once); "
        "times and per-draft figures come from seed 0.",
        f"- Target-only at N ∈ {{{', '.join(map(str, s['target_steps']))}}}; the reference target is the cheapest N "
        "whose KID to the truth is within the seed-to-seed spread of the best N's (at most its worst seed), per "
        "workload; every × ref is against it.",
        f"- Speculative: k = {s['num_draft_frames']}{_more_k(s)} ({s['schedule']} schedule), m = {s['num_refine_steps']}{_more_m(s)} "
        f"refinement step(s), corrections and first-frame routing with N = "
        f"{', '.join(f'{n} ({w})' for w, n in s['correction_steps'].items())} (each workload's reference N unless "
        f"--steps is given), metric {s['metric']}{_band(s)}; sweep τ ∈ "
        f"{{{', '.join(f'{t:g}' for t in s['thresholds'])}}} × s ∈ {{{', '.join(f'{x:g}' for x in s['strengths'])}}}. "
        f"Default (VIDEO_DEFAULTS): {d['drafter']}, τ = {d['threshold']:g}, s = {d['strength']:g}. Equal-cost "
        "baselines: refine-all-d (every draft refined and kept, τ = −∞) and target-only at N = m.",
        "- Costs: s / frame (median over clips), UNet evaluations per frame (CPU compute; a batch of n counts n), "
        "sequential UNet passes per frame (a batched call counts once: the GPU-latency proxy). CPU wall-clock "
        "claims come from the s / frame column only.",
        "- Quality: per-clip mean over frames of PSNR/SSIM against the ground truth (GT) and against the reference "
        f"target's output with the same seed (identical frames cap PSNR at {PSNR_CAP_DB:g} dB).",
        "- Discrimination over every draft the verifier scored: Spearman of the score with the draft's SSIM to the "
        "truth; AUC of 'score < τ' as a detector of drafts whose SSIM to the truth is below the reference target's "
        "frame at that index. Beside the Spearman target: the Spearman of a draft's SSIM to the truth with that of "
        "the output frame before it (the error it inherits from frames already emitted, which no check of its "
        "round can see).",
        "- UNet-time ratio (beside the wall-clock target): the CPU wall-clock speed-up over the reference target "
        "that the default's UNet passes alone allow, N · t(1) / (passes per frame · t(b)), with b its mean frames "
        "per pass and t(n) one UNet pass over n frames, measured before the run (drafting, scoring and Python "
        "overhead left out).",
        f"- Estimated before the run: {e.line()}.",
        *[f"- {n}" for n in results.notes],
    ]


def _band(s: dict) -> str:
    """The typicality check's levels, fold and the branch it reads (older reports have none of them)."""
    if s.get("metric") != "typicality" or "check_center" not in s:
        return ""
    center = float(s["check_center"])
    fold = "one-sided" if math.isinf(center) else f"folded at c = {center:g} (kept while τ ≤ r ≤ c²/τ)"
    branch = "" if s.get("check_hint", True) else ", on the hint-free branch"
    return f" at t ∈ {{{', '.join(map(str, s.get('check_levels', [])))}}}, {fold}{branch}"
