"""The benchmark run: every method on every clip of one split, in one process, then aggregated."""

from __future__ import annotations

import math
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from benchmarks.measure import progress_bar
from benchmarks.report import machine_info
from benchmarks.video.config import (
    BENCH_VIDEO_DEFAULTS,
    DEFAULT_SETTING,
    BenchVideoConfig,
    Method,
    build_methods,
)
from benchmarks.video.generative import (
    GenerativeScore,
    SampleRecord,
    patches_per_clip,
    record_sample,
    reference_steps_by_realism,
    score_generative,
    truth_record,
)
from benchmarks.video.injected import injected_checks
from benchmarks.video.inplace import in_place_ssim
from benchmarks.video.local import true_context_checks
from benchmarks.video.methods import estimate_runtime, measure_costs, run_method
from benchmarks.video.realism_report import pooled_spearman
from benchmarks.video.results import BenchVideoResults
from benchmarks.video.scoring import (
    ClipResult,
    VideoMethodResult,
    aggregate,
    reference_steps,
    score_output,
)
from benchmarks.video.workloads import load_workloads
from specvideo.paths import shipped, shown_path
from specvideo.video.config import VIDEO_DEFAULTS as D
from specvideo.video.config import default_threshold
from specvideo.video.drafters import FrameDrafter, LearnedDrafter, make_drafter
from specvideo.video.feature_check import FeatureCheck
from specvideo.video.pipeline import SpeculativeVideoPipeline


def run_benchmark(
    config: BenchVideoConfig = BENCH_VIDEO_DEFAULTS,
    pipe: SpeculativeVideoPipeline | None = None,
    progress: bool = False,
) -> BenchVideoResults:
    """Run every method of ``config`` on every clip (clips outer, methods inner, target-only rows
    first), each stochastic method with ``num_seeds`` seeds, and aggregate against each workload's
    reference target: the cheapest N whose realism (KID to the truth) is within the best N's
    seed-to-seed spread. Timings and the per-draft check figures come from seed 0.

    pipe: an already-built pipeline (default: loaded from ``config.model`` onto ``config.device``).
    progress: print the runtime estimate and show a progress bar on stderr.
    """
    start = time.perf_counter()
    pipe, model_dir = _load_pipeline(config, pipe)
    if config.feature_check:  # the learned check named on the command line, over the model's own
        pipe.feature_check = FeatureCheck.from_pretrained(Path(config.feature_check))
    machine = machine_info(pipe.device, packages=("diffusers",))  # load average at the start
    P = pipe.verifier.num_context_frames
    workloads = load_workloads(config, P + 1)  # P + 1: the typicality check's reference frame
    if not any(workloads.values()):
        raise ValueError("the workloads hold no clips")
    drafters, notes = _drafters(config, pipe, model_dir)
    pipes = {name: SpeculativeVideoPipeline(pipe.verifier, d, pipe.feature_check) for name, d in drafters.items()}
    methods = build_methods(config, tuple(drafters))
    clips = [(w, clip) for w, cs in workloads.items() for clip in cs]
    estimate = estimate_runtime(config, methods, len(clips), *measure_costs(pipe, drafters, clips[0][1]))
    if progress:
        print(f"bench video: {estimate.line()}", file=sys.stderr)
    run = _Run(
        config, pipe, pipes, workloads, progress_bar(len(clips) * len(methods), progress, "bench video")
    )
    targets = [m for m in methods if m.family == "target"]
    for index, (workload, clip) in enumerate(clips):  # phase 1: target-only at every N
        for method in targets:
            run.method(method, workload, index, clip)
    steps = {w: config.num_inference_steps or run.reference(w, targets) for w in workloads}
    for index, (workload, clip) in enumerate(clips):  # phase 2: the rest, corrections at N = steps[w]
        for method in methods:
            if method.family != "target":
                run.method(method, workload, index, clip, steps[workload])
    run.bar.close()
    # the tables of the UNet's check: under --metric features the typicality check, the learned one
    # has its own AUC column in the injected table
    unet_metric = "typicality" if config.metric == "features" else config.metric
    local = true_context_checks(  # every drafter, each alone and pooled: the check's discrimination
        pipe.verifier,
        drafters,
        workloads,
        config.strengths,
        unet_metric,
        config.num_draft_frames,
        steps,
        config.seed,
        config.num_refine_steps,
        config.check_center,
        config.check_levels,
    )
    injected = injected_checks(
        pipe.verifier,
        workloads,
        unet_metric,
        default_threshold(unet_metric),
        config.num_draft_frames,
        D.strength,
        config.num_refine_steps,
        config.seed,
        config.check_center,
        config.check_levels,
        config.band_center,
        pipe.feature_check,
    )
    rows = [
        row
        for w in workloads
        for row in _aggregate_workload(w, methods, run.records, config.num_frames, steps[w])
    ]
    settings = _settings(config, pipe, model_dir, time.perf_counter() - start)
    settings["correction_steps"] = steps
    clip_names = {w: [c.name for c in cs] for w, cs in workloads.items()}
    generative = run.generative(methods, steps)
    pooled_rows = [
        m.name for m in methods if m.family == "speculative" and m.setting == _at_default(m.setting)
    ]
    pooled = {w: pooled_spearman(run.records, w, pooled_rows) for w in workloads}
    return BenchVideoResults(
        rows, clip_names, settings, machine, estimate, notes, local, generative, pooled, injected
    )


def _at_default(setting):
    """The default setting with this setting's drafter: the rows the pooled check compares."""
    return replace(DEFAULT_SETTING, drafter=setting.drafter) if setting is not None else None


class _Run:
    """The run's state: per (workload, method) the seed-0 clip results and, per seed, the generative
    records of every clip (``benchmarks.video.generative``)."""

    def __init__(self, config: BenchVideoConfig, pipe, pipes, workloads, bar):
        self.config, self.pipe, self.pipes, self.bar = config, pipe, pipes, bar
        self.records: dict[tuple[str, str], list[ClipResult]] = {}
        self.samples: dict[tuple[str, str], list[list[SampleRecord]]] = {}  # [seed][clip]
        self.outputs: dict[int, dict[int, object]] = {}  # clip index -> N -> seed-0 target frames
        self.patches = {w: patches_per_clip(len(cs)) for w, cs in workloads.items()}
        self.truths = {
            w: [truth_record(c.context, c.truth, self.patches[w]) for c in cs] for w, cs in workloads.items()
        }

    def method(self, method: Method, workload: str, index: int, clip, steps: int | None = None) -> None:
        """Run ``method`` on clip ``index`` with every seed; score seed 0 as before, record all."""
        c = self.config
        self.bar.set_postfix_str(f"{workload} {clip.name} {method.name}", refresh=False)
        seeds = 1 if method.family == "draft" else c.num_seeds  # the drafters alone are deterministic
        samples = self.samples.setdefault((workload, method.name), [[] for _ in range(c.num_seeds)])
        for k in range(seeds):
            out = run_method(method, self.pipe, self.pipes, clip, c, _seed(c.seed, index, k), steps)
            truth = self.truths[workload][len(samples[k])]  # this clip's (clips run in order)
            samples[k].append(record_sample(out.frames, clip.context, clip.truth, self.patches[workload], truth.maps))
            if k == 0:
                first = out
        for k in range(seeds, c.num_seeds):
            samples[k].append(samples[0][-1])
        if method.family == "target":
            self.outputs.setdefault(index, {})[method.steps] = first.frames
        in_place = None
        if method.family == "speculative" and first.stats is not None:  # after the timing
            in_place = in_place_ssim(
                self.pipe.verifier, first.stats, clip.context, first.frames, clip.truth, steps, c.seed + index
            )
        result = score_output(first, clip, self.outputs.get(index, {}), in_place)
        self.records.setdefault((workload, method.name), []).append(result)
        self.bar.update()

    def reference(self, workload: str, targets: list[Method]) -> int:
        scores = {
            m.steps: score_generative(self.samples[(workload, m.name)], self.truths[workload])
            for m in targets
        }
        by_realism = reference_steps_by_realism(scores)
        if by_realism is not None:
            return by_realism
        # clips too small for KID: the cheapest N within 1 % of the best N's SSIM
        return reference_steps(
            {m.steps: statistics.fmean(r.ssim_gt for r in self.records[(workload, m.name)]) for m in targets}
        )

    def generative(
        self, methods: list[Method], steps: dict[str, int]
    ) -> dict[tuple[str, str], GenerativeScore]:
        scores = {}
        for w, n in steps.items():
            reference = self.samples.get((w, f"target-N{n}"))
            for m in methods:
                scores[(w, m.name)] = score_generative(self.samples[(w, m.name)], self.truths[w], reference)
        return scores


def _seed(base: int, index: int, k: int) -> int:
    """Seed k of clip ``index``: seed 0 is the run's historical one (base + index)."""
    return base + index + 100_003 * k


def _aggregate_workload(
    workload: str, methods: list[Method], records, num_frames: int, ref_n: int
) -> list[VideoMethodResult]:
    targets = {m.steps: records[(workload, m.name)] for m in methods if m.family == "target"}
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
    pipe = SpeculativeVideoPipeline.from_pretrained(model_dir, device=config.device, autocast=config.autocast)
    return pipe, model_dir


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


def _json_ready(value: Any) -> Any:
    """Tuples as lists and infinite floats as "inf" / "-inf" (JSON has no infinity)."""
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, float) and math.isinf(value):
        return str(value)
    return value


def _settings(config: BenchVideoConfig, pipe, model_dir: Path | None, seconds: float) -> dict[str, Any]:
    settings = {k: _json_ready(v) for k, v in asdict(config).items()}
    settings.update(
        model_dir=shown_path(model_dir),
        context_frames=pipe.verifier.num_context_frames,
        unet_sample_size=list(pipe.verifier.resolution),
        context_noise_level=pipe.verifier.context_noise_level,
        unet_params=sum(p.numel() for p in pipe.unet.parameters()),
        scheduler=type(pipe.scheduler).__name__,
        residual=pipe.verifier.residual,
        hint=pipe.verifier.hint,
        default_setting={k: _json_ready(v) for k, v in asdict(DEFAULT_SETTING).items()},
        check_hint=pipe.verifier.check_hint,
        wall_minutes=seconds / 60,
    )
    return settings
