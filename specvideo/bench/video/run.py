"""The benchmark run: every method on every clip of one split, in one process, then aggregated."""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from specvideo.bench.measure import progress_bar
from specvideo.bench.report import machine_info
from specvideo.bench.video.config import (
    BENCH_VIDEO_DEFAULTS,
    DEFAULT_SETTING,
    BenchVideoConfig,
    Method,
    build_methods,
)
from specvideo.bench.video.inplace import in_place_ssim
from specvideo.bench.video.local import LocalCheck, true_context_checks
from specvideo.bench.video.methods import RuntimeEstimate, estimate_runtime, measure_costs, run_method
from specvideo.bench.video.scoring import (
    ClipResult,
    VideoMethodResult,
    aggregate,
    reference_steps,
    score_output,
)
from specvideo.bench.video.workloads import load_workloads
from specvideo.paths import shipped, shown_path
from specvideo.video.config import VIDEO_DEFAULTS as D
from specvideo.video.drafters import FrameDrafter, LearnedDrafter, make_drafter
from specvideo.video.pipeline import SpeculativeVideoPipeline


@dataclass
class BenchVideoResults:
    rows: list[VideoMethodResult]
    clips: dict[str, list[str]]  # workload -> clip names
    settings: dict[str, Any]
    machine: dict[str, Any]
    estimate: RuntimeEstimate
    notes: list[str] = field(default_factory=list)
    local_checks: list[LocalCheck] = field(default_factory=list)  # the check on true-context rounds

    @property
    def workloads(self) -> list[str]:
        return list(self.clips)

    def row(self, workload: str, method: str) -> VideoMethodResult | None:
        return next((r for r in self.rows if r.workload == workload and r.method == method), None)

    def reference(self, workload: str) -> VideoMethodResult | None:
        return next(
            (
                r
                for r in self.rows
                if r.workload == workload and r.family == "target" and r.steps == r.reference_steps
            ),
            None,
        )

    def default_row(self, workload: str) -> VideoMethodResult | None:
        return next((r for r in self.rows if r.workload == workload and r.is_default), None)

    def to_dict(self) -> dict[str, Any]:
        from specvideo.bench.video.report import check_targets

        return {
            "settings": self.settings,
            "machine": self.machine,
            "estimate": asdict(self.estimate),
            "notes": self.notes,
            "clips": self.clips,
            "rows": [asdict(r) for r in self.rows],
            "local_checks": [asdict(c) for c in self.local_checks],
            "targets": [asdict(c) for c in check_targets(self)],
        }


def run_benchmark(
    config: BenchVideoConfig = BENCH_VIDEO_DEFAULTS,
    pipe: SpeculativeVideoPipeline | None = None,
    progress: bool = False,
) -> BenchVideoResults:
    """Run every method of ``config`` on every clip (clips outer, methods inner, target-only rows
    first) and aggregate against each workload's reference target.

    pipe: an already-built pipeline (default: loaded from ``config.model`` onto ``config.device``).
    progress: print the runtime estimate and show a progress bar on stderr.
    """
    start = time.perf_counter()
    pipe, model_dir = _load_pipeline(config, pipe)
    machine = machine_info(pipe.device, packages=("diffusers",))  # load average at the start
    P, (size, _) = pipe.verifier.num_context_frames, pipe.verifier.resolution
    workloads = load_workloads(config, P, size)
    if not any(workloads.values()):
        raise ValueError("the workloads hold no clips")
    drafters, notes = _drafters(config, pipe, model_dir)
    pipes = {name: SpeculativeVideoPipeline(pipe.verifier, d) for name, d in drafters.items()}
    methods = build_methods(config, tuple(drafters))
    clips = [(w, clip) for w, cs in workloads.items() for clip in cs]
    estimate = estimate_runtime(config, methods, len(clips), *measure_costs(pipe, drafters, clips[0][1]))
    if progress:
        print(f"bench video: {estimate.line()}", file=sys.stderr)
    records: dict[tuple[str, str], list[ClipResult]] = {}
    bar = progress_bar(len(clips) * len(methods), progress, "bench video")
    targets = [m for m in methods if m.family == "target"]
    outputs: dict[int, dict[int, object]] = {}  # clip index -> N -> target-only frames
    for index, (workload, clip) in enumerate(clips):  # phase 1: target-only at every N
        outputs[index] = {}
        for method in targets:
            out = _run(bar, method, pipe, pipes, clip, config, index, workload)
            outputs[index][method.steps] = out.frames
            records.setdefault((workload, method.name), []).append(score_output(out, clip, outputs[index]))
    steps = {w: config.num_inference_steps or _reference(w, targets, records) for w in workloads}
    for index, (workload, clip) in enumerate(clips):  # phase 2: the rest, corrections at N = steps[w]
        for method in methods:
            if method.family != "target":
                out = _run(bar, method, pipe, pipes, clip, config, index, workload, steps[workload])
                in_place = _in_place(method, pipe, out, clip, steps[workload], config.seed + index)
                records.setdefault((workload, method.name), []).append(
                    score_output(out, clip, outputs[index], in_place)
                )
    bar.close()
    sweep = {d: drafters[d] for d in config.sweep_drafters if d in drafters}
    local = true_context_checks(
        pipe.verifier,
        sweep,
        workloads,
        config.strengths,
        config.metric,
        config.num_draft_frames,
        steps,
        config.seed,
        config.num_refine_steps,
    )
    rows = [row for w in workloads for row in _aggregate_workload(w, methods, records, config.num_frames)]
    settings = _settings(config, pipe, model_dir, time.perf_counter() - start)
    settings["correction_steps"] = steps
    clip_names = {w: [c.name for c in cs] for w, cs in workloads.items()}
    return BenchVideoResults(rows, clip_names, settings, machine, estimate, notes, local)


def _run(bar, method, pipe, pipes, clip, config, index, workload, steps=None):
    bar.set_postfix_str(f"{workload} {clip.name} {method.name}", refresh=False)
    out = run_method(method, pipe, pipes, clip, config, config.seed + index, steps)
    bar.update()
    return out


def _in_place(method: Method, pipe, out, clip, steps: int, seed: int) -> list[float] | None:
    """Speculative rows: SSIM of the target's frame in each scored draft's place (after the timing)."""
    if method.family != "speculative" or out.stats is None:
        return None
    return in_place_ssim(pipe.verifier, out.stats, clip.context, out.frames, clip.truth, steps, seed)


def _reference(workload: str, targets: list[Method], records) -> int:
    runs = {m.steps: records[(workload, m.name)] for m in targets}
    return reference_steps({n: sum(r.ssim_gt for r in rs) / len(rs) for n, rs in runs.items()})


def _aggregate_workload(
    workload: str, methods: list[Method], records, num_frames: int
) -> list[VideoMethodResult]:
    targets = {m.steps: records[(workload, m.name)] for m in methods if m.family == "target"}
    ref_n = _reference(workload, [m for m in methods if m.family == "target"], records)
    _fill_target_to_target(targets)
    return [
        aggregate(workload, m, records[(workload, m.name)], targets[ref_n], ref_n, num_frames)
        for m in methods
    ]


def _fill_target_to_target(targets: dict[int, list[ClipResult]]) -> None:
    """A target row ran before the later target rows of its clip: it lacks their comparisons. The
    relation is symmetric, so take them from the later row."""
    for n, runs in targets.items():
        for i, r in enumerate(runs):
            for m, other in targets.items():
                if m not in r.vs_target and n in other[i].vs_target:
                    r.vs_target[m] = other[i].vs_target[n]


def _load_pipeline(config: BenchVideoConfig, pipe) -> tuple[SpeculativeVideoPipeline, Path | None]:
    if pipe is not None:
        return pipe, Path(config.model) if config.model else None
    model_dir = Path(config.model) if config.model else shipped("video")
    return SpeculativeVideoPipeline.from_pretrained(model_dir, device=config.device), model_dir


def _drafters(
    config: BenchVideoConfig, pipe, model_dir: Path | None
) -> tuple[dict[str, FrameDrafter], list[str]]:
    """Every drafter the run needs, by name; the learned one only where weights exist."""
    pool, notes = {}, []
    for name in dict.fromkeys((*config.drafters, *config.sweep_drafters, D.drafter)):
        if name != "learned":
            pool[name] = make_drafter(name)
            continue
        learned = _learned_drafter(pipe, model_dir)
        if learned is None:
            notes.append("The learned drafter was skipped: the pipeline has no learned drafter weights.")
        else:
            pool[name] = learned
    return pool, notes


def _learned_drafter(pipe, model_dir: Path | None) -> LearnedDrafter | None:
    if isinstance(pipe.drafter, LearnedDrafter):
        return pipe.drafter
    if model_dir is None or not (model_dir / "drafter" / "config.json").is_file():
        return None
    drafter = LearnedDrafter.from_pretrained(model_dir / "drafter")
    drafter.model.to(pipe.device)
    return drafter


def _settings(config: BenchVideoConfig, pipe, model_dir: Path | None, seconds: float) -> dict[str, Any]:
    settings = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()}
    settings.update(
        model_dir=shown_path(model_dir),
        context_frames=pipe.verifier.num_context_frames,
        resolution=list(pipe.verifier.resolution),
        unet_params=sum(p.numel() for p in pipe.unet.parameters()),
        scheduler=type(pipe.scheduler).__name__,
        residual=pipe.verifier.residual,
        hint=pipe.verifier.hint,
        default_setting=asdict(DEFAULT_SETTING),
        wall_minutes=seconds / 60,
    )
    return settings
