"""Video benchmark: speculative frame generation against its baselines, side by side.

Workloads (DESIGN section 7): held-out synthetic moving-shapes sequences (seeds never trained on)
and crops from the held-out 30% of the real sample videos, or any video files instead. A clip is P
context frames and the ``num_frames`` ground-truth frames after them. Every method continues the
same context with the same generator seed (one seed per clip), in one process:

    target                 every frame by the full sampler (mode="target"): the reference
    draft-<d>              the drafter alone (mode="draft"), for each drafter
    first-target+<d>       frame 1 by the full sampler, the rest drafted on top of it, all kept
    spec-<d>-s<s>-t<tau>   speculative, for each sweep drafter x strength s x threshold tau
    default                VIDEO_DEFAULTS' speculative setting, when the sweep does not contain it

Per workload and method: median seconds per frame, UNet evaluations per frame, speedup (median over
clips of the per-clip time ratio target / method), PSNR and SSIM against the ground truth and
against the target-only output, acceptance (overall and per draft position), and for speculative
settings the verifier's discrimination (DESIGN section 5) over every scored draft: the Spearman
correlation of its score with its true SSIM to the ground-truth frame, and the ROC-AUC of the score
as a detector of drafts worse than target-only ("draft SSIM-to-truth below target-only's").
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch

from specvideo.bench.report import atomic_write, fmt_load, machine_info, replace_section
from specvideo.paths import shipped
from specvideo.video.config import VIDEO_DEFAULTS as D
from specvideo.video.data import HELDOUT_SEEDS, heldout_real, heldout_synthetic
from specvideo.video.drafters import DRAFTERS, FrameDrafter, LearnedDrafter, make_drafter
from specvideo.video.io import frames_to_tensor, read_video
from specvideo.video.metrics import METRICS, PSNR_CAP_DB, psnr, ssim
from specvideo.video.pipeline import SpeculativeVideoPipeline
from specvideo.video.rounds import VideoSpecStats

FAMILIES = ("target", "draft", "first-target", "speculative")
SWEEP_DRAFTERS = ("flow", "learned")
THRESHOLDS = (0.6, 0.7, 0.8, 0.85, 0.9, 0.95)  # the flow-hinted verifier scores drafts higher
STRENGTHS = (0.6, 0.8)
VIDEO_SCHEDULES = ("constant", "heuristic")
REPORT_PLOT_NAME = "video_pareto.png"
DEFAULT_SPEEDUP, DEFAULT_QUALITY = 3.0, 0.98  # the targets for the default setting


def _check_int(name: str, value, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _check_sweep(thresholds: Sequence[float], strengths: Sequence[float]) -> None:
    if not thresholds or not strengths:
        raise ValueError("give at least one threshold and one strength")
    for t in thresholds:
        if not isinstance(t, (int, float)) or not math.isfinite(t):
            raise ValueError(f"thresholds must be finite numbers, got {t!r}")
    for s in strengths:
        if not isinstance(s, (int, float)) or not 0 < s <= 1:
            raise ValueError(f"strengths must be in (0, 1], got {s!r}")


@dataclass(frozen=True)
class BenchVideoConfig:
    """Defaults of ``specvideo bench video`` (the CLI reads them from here).

    model: pipeline directory (None: the shipped models/video). clips: video files to use instead
    of the held-out workloads (centre square crop, resized, cut into P + num_frames windows).
    drafters: the draft-only baselines; sweep_drafters: the drafters of the tau x s sweep and of
    the first-frame-by-target routing. The learned drafter runs only where the pipeline has weights.
    """

    model: str | None = None
    num_synthetic: int = 16
    num_real: int = 8
    num_frames: int = 16
    clips: tuple[str, ...] = ()
    drafters: tuple[str, ...] = DRAFTERS
    sweep_drafters: tuple[str, ...] = SWEEP_DRAFTERS
    thresholds: tuple[float, ...] = THRESHOLDS
    strengths: tuple[float, ...] = STRENGTHS
    metric: str = D.metric
    num_draft_frames: int = D.num_draft_frames
    num_refine_steps: int = D.num_refine_steps
    schedule: str = D.schedule
    num_inference_steps: int = D.num_inference_steps
    seed: int = 0
    device: str = "cpu"
    report: str = "docs/BENCHMARKS.md"

    def __post_init__(self) -> None:
        for name in ("clips", "drafters", "sweep_drafters", "thresholds", "strengths"):
            object.__setattr__(self, name, tuple(dict.fromkeys(getattr(self, name))))
        for name in ("num_frames", "num_draft_frames", "num_refine_steps", "num_inference_steps"):
            _check_int(name, getattr(self, name), 1)
        _check_int("num_synthetic", self.num_synthetic, 0)
        _check_int("num_real", self.num_real, 0)
        if not self.clips and self.num_synthetic < 1:
            raise ValueError(
                "num_synthetic must be >= 1 (the targets are checked on the synthetic workload), or give clips"
            )
        for d in (*self.drafters, *self.sweep_drafters):
            if d not in DRAFTERS:
                raise ValueError(f"unknown drafter {d!r}; choose from {', '.join(DRAFTERS)}")
        _check_sweep(self.thresholds, self.strengths)
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {self.metric!r}")
        if self.schedule not in VIDEO_SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(VIDEO_SCHEDULES)}, got {self.schedule!r}")
        try:
            torch.device(self.device)
        except RuntimeError:
            raise ValueError(f"unknown device {self.device!r}") from None


BENCH_VIDEO_DEFAULTS = BenchVideoConfig()


# ---------------------------------------------------------------------------------------------
# Methods and workloads


@dataclass(frozen=True)
class SpecSetting:
    """One speculative setting: drafter, tau, s and the knobs the sweep keeps fixed."""

    drafter: str
    threshold: float
    strength: float
    metric: str = D.metric
    num_draft_frames: int = D.num_draft_frames
    num_refine_steps: int = D.num_refine_steps
    schedule: str = D.schedule


DEFAULT_SETTING = SpecSetting(D.drafter, D.threshold, D.strength)


@dataclass(frozen=True)
class Method:
    name: str
    family: str  # one of FAMILIES
    drafter: str | None = None
    setting: SpecSetting | None = None
    is_default: bool = False


def build_methods(config: BenchVideoConfig, available: Sequence[str]) -> list[Method]:
    """Every method of the run, target-only first; the default setting always among them."""
    methods = [Method("target", "target")]
    methods += [Method(f"draft-{d}", "draft", d) for d in config.drafters if d in available]
    sweep = [d for d in config.sweep_drafters if d in available]
    methods += [Method(f"first-target+{d}", "first-target", d) for d in sweep]
    for d in sweep:
        for s in config.strengths:
            for t in config.thresholds:
                setting = SpecSetting(
                    d, t, s, config.metric, config.num_draft_frames, config.num_refine_steps, config.schedule
                )
                name = f"spec-{d}-s{s:g}-t{t:g}"
                methods.append(Method(name, "speculative", d, setting, setting == DEFAULT_SETTING))
    if not any(m.is_default for m in methods):
        methods.append(Method("default", "speculative", D.drafter, DEFAULT_SETTING, True))
    return methods


@dataclass
class BenchClip:
    name: str
    context: torch.Tensor  # (P, 3, H, W) in [-1, 1]
    truth: torch.Tensor  # (F, 3, H, W) in [-1, 1], the frames after the context


def load_workloads(config: BenchVideoConfig, P: int, size: int) -> dict[str, list[BenchClip]]:
    """{"synthetic": ..., "real": ...} from the held-out data, or {"clips": ...} from config.clips."""
    total = P + config.num_frames
    if config.clips:
        return {"clips": [c for path in config.clips for c in _file_clips(path, P, config.num_frames, size)]}
    synthetic = heldout_synthetic(config.num_synthetic, total, size)
    workloads = {"synthetic": [_clip(f"seed {HELDOUT_SEEDS[i]}", v, P) for i, v in enumerate(synthetic)]}
    if config.num_real:
        real = heldout_real(config.num_real, total, size)
        workloads["real"] = [_clip(f"held-out crop {i}", v, P) for i, v in enumerate(real)]
    return workloads


def _clip(name: str, frames: np.ndarray, P: int) -> BenchClip:
    x = frames_to_tensor(frames)  # (P + F, 3, H, W)
    return BenchClip(name, x[:P], x[P:])


def _file_clips(path: str, P: int, num_frames: int, size: int) -> list[BenchClip]:
    """Consecutive P + num_frames windows of a video file, centre square crop resized to size."""
    frames = read_video(path).frames  # (F, H, W, 3)
    total = P + num_frames
    if len(frames) < total:
        raise ValueError(
            f"{path} has {len(frames)} frames; a clip needs {P} context + {num_frames} frames = {total}"
        )
    H, W = frames.shape[1:3]
    side = min(H, W)
    y, x = (H - side) // 2, (W - side) // 2
    interpolation = cv2.INTER_AREA if side >= size else cv2.INTER_LINEAR
    square = np.stack(
        [cv2.resize(f[y : y + side, x : x + side], (size, size), interpolation=interpolation) for f in frames]
    )
    name = Path(path).name
    return [
        _clip(f"{name} [{i * total}:{(i + 1) * total}]", square[i * total : (i + 1) * total], P)
        for i in range(len(frames) // total)
    ]


# ---------------------------------------------------------------------------------------------
# Results


@dataclass
class ClipResult:
    """One method on one clip. Scored drafts (speculative only): their score, true SSIM to the
    ground-truth frame at their position, and target-only's SSIM to that frame."""

    seconds: float
    unet_evals: int
    psnr_gt: float
    ssim_gt: float
    psnr_target: float
    ssim_target: float
    drafted: int | None = None
    accepted: int | None = None
    position_drafted: list[int] = field(default_factory=list)
    position_accepted: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    draft_ssim: list[float] = field(default_factory=list)
    target_ssim: list[float] = field(default_factory=list)


@dataclass
class VideoMethodResult:
    """One method on one workload, aggregated over its clips (per-clip lists kept)."""

    workload: str
    method: str
    family: str
    drafter: str | None
    threshold: float | None
    strength: float | None
    is_default: bool
    seconds_per_frame: float  # median over clips
    unet_evals_per_frame: float  # mean over clips
    speedup: float | None  # median over clips of time(target) / time(method)
    psnr_gt: float  # means over clips of the per-clip mean over frames
    ssim_gt: float
    psnr_target: float
    ssim_target: float
    acceptance_rate: float | None  # accepted / drafted over all clips (speculative only)
    per_position_acceptance: list[float] | None
    spearman: float | None  # score vs true SSIM to the ground truth, over every scored draft
    auc: float | None  # ROC-AUC of the score for "draft SSIM-to-truth below target-only's"
    num_scored: int
    seconds: list[float] = field(default_factory=list)
    unet_evals: list[int] = field(default_factory=list)
    ssim_gt_clips: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class RuntimeEstimate:
    """Predicted wall time from a measured UNet evaluation (batch 1) and per-frame drafter times."""

    unet_eval_s: float
    draft_frame_s: dict[str, float]
    runs: int
    baselines_s: float  # target-only, draft-only and first-frame-by-target runs
    sweep_low_s: float  # speculative runs if every draft is accepted
    sweep_high_s: float  # ... if every draft is rejected

    def line(self) -> str:
        drafts = ", ".join(f"{k} {v * 1e3:.1f}" for k, v in self.draft_frame_s.items())
        low, high = (self.baselines_s + self.sweep_low_s) / 60, (self.baselines_s + self.sweep_high_s) / 60
        return (
            f"{self.runs} runs; one UNet evaluation {self.unet_eval_s * 1e3:.0f} ms, one drafted frame (ms): "
            f"{drafts}; estimated {low:.1f} min (every draft accepted) to {high:.1f} min (every draft "
            f"rejected), of which {self.baselines_s / 60:.1f} min for the baselines"
        )


@dataclass(frozen=True)
class VideoTargetCheck:
    workload: str
    description: str
    passed: bool | None
    detail: str

    def line(self) -> str:
        verdict = "not measured" if self.passed is None else "reached" if self.passed else "NOT reached"
        return f"[{self.workload}] {self.description}: {verdict} ({self.detail})"


@dataclass
class BenchVideoResults:
    rows: list[VideoMethodResult]
    clips: dict[str, list[str]]  # workload -> clip names
    settings: dict[str, Any]
    machine: dict[str, Any]
    estimate: RuntimeEstimate
    notes: list[str] = field(default_factory=list)

    @property
    def workloads(self) -> list[str]:
        return list(self.clips)

    def row(self, workload: str, method: str) -> VideoMethodResult | None:
        return next((r for r in self.rows if r.workload == workload and r.method == method), None)

    def default_row(self, workload: str) -> VideoMethodResult | None:
        return next((r for r in self.rows if r.workload == workload and r.is_default), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "machine": self.machine,
            "estimate": asdict(self.estimate),
            "notes": self.notes,
            "clips": self.clips,
            "rows": [asdict(r) for r in self.rows],
            "targets": [asdict(c) for c in check_targets(self)],
        }


# ---------------------------------------------------------------------------------------------
# Running


def run_benchmark(
    config: BenchVideoConfig = BENCH_VIDEO_DEFAULTS,
    pipe: SpeculativeVideoPipeline | None = None,
    progress: bool = False,
) -> BenchVideoResults:
    """Run every method of ``config`` on every clip (clips outer, methods inner) and aggregate.

    pipe: an already-built pipeline (default: loaded from ``config.model`` onto ``config.device``).
    progress: print the runtime estimate and show a progress bar on stderr.
    """
    start = time.perf_counter()
    pipe, model_dir = _load_pipeline(config, pipe)
    machine = machine_info(pipe.verifier.device, packages=("diffusers",))  # load average at the start
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
    bar = _progress_bar(len(clips) * len(methods), progress)
    for index, (workload, clip) in enumerate(clips):
        reference = None  # target-only frames of this clip (methods[0] is target-only)
        for method in methods:
            bar.set_postfix_str(f"{workload} {clip.name} {method.name}", refresh=False)
            out = run_method(method, pipe, pipes, clip, config, config.seed + index)
            reference = out.frames if reference is None else reference
            records.setdefault((workload, method.name), []).append(score_output(out, clip, reference))
            bar.update()
    bar.close()
    rows = [_aggregate(w, m, records, config.num_frames) for w in workloads for m in methods]
    settings = _settings(config, pipe, model_dir, time.perf_counter() - start)
    clip_names = {w: [c.name for c in cs] for w, cs in workloads.items()}
    return BenchVideoResults(rows, clip_names, settings, machine, estimate, notes)


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
    drafter.model.to(pipe.verifier.device)
    return drafter


@dataclass
class MethodOutput:
    """What one method produced on one clip, before scoring."""

    frames: torch.Tensor  # (F, 3, H, W) in [-1, 1], on the CPU
    seconds: float
    unet_evals: int
    stats: VideoSpecStats | None = None  # speculative runs only


def run_method(
    method: Method, pipe, pipes: dict, clip: BenchClip, config: BenchVideoConfig, seed: int
) -> MethodOutput:
    """Run one method on one clip, timed; ``pipes`` holds one pipeline per drafter name."""
    F = config.num_frames

    def call(p, context, **kwargs):
        generator = torch.Generator().manual_seed(seed)  # the same seed for every method
        return p(
            context,
            num_inference_steps=config.num_inference_steps,
            generator=generator,
            output_type="pt",
            progress=False,
            **kwargs,
        )

    _sync(pipe.verifier.device)
    start = time.perf_counter()
    if method.family == "target":
        outs = [call(pipe, clip.context, num_frames=F, mode="target")]
    elif method.family == "draft":
        outs = [call(pipes[method.drafter], clip.context, num_frames=F, mode="draft")]
    elif method.family == "first-target":
        outs = [call(pipe, clip.context, num_frames=1, mode="target")]
        if F > 1:
            context = torch.cat([clip.context, outs[0].frames])  # (P + 1, 3, H, W)
            outs.append(call(pipes[method.drafter], context, num_frames=F - 1, mode="draft"))
    else:
        s = method.setting
        kwargs = dict(num_draft_frames=s.num_draft_frames, threshold=s.threshold, metric=s.metric)
        kwargs.update(strength=s.strength, num_refine_steps=s.num_refine_steps, schedule=s.schedule)
        outs = [call(pipes[method.drafter], clip.context, num_frames=F, mode="speculative", **kwargs)]
    _sync(pipe.verifier.device)
    seconds = time.perf_counter() - start
    frames = torch.cat([o.frames for o in outs]).float().cpu()  # (F, 3, H, W)
    stats = outs[0].stats if method.family == "speculative" else None
    return MethodOutput(frames, seconds, sum(o.stats.unet_evals for o in outs), stats)


def score_output(out: MethodOutput, clip: BenchClip, reference: torch.Tensor) -> ClipResult:
    """Quality against the ground truth and target-only's frames ``reference`` (F, 3, H, W); for
    speculative runs also acceptance and every scored draft's true SSIM."""
    result = ClipResult(
        seconds=out.seconds,
        unet_evals=out.unet_evals,
        psnr_gt=float(psnr(out.frames, clip.truth, data_range=2.0).mean()),
        ssim_gt=float(ssim(out.frames, clip.truth, data_range=2.0).mean()),
        psnr_target=float(psnr(out.frames, reference, data_range=2.0).mean()),
        ssim_target=float(ssim(out.frames, reference, data_range=2.0).mean()),
    )
    stats = out.stats
    if stats is None:
        return result
    result.drafted, result.accepted = stats.drafted, stats.accepted
    result.position_drafted, result.position_accepted = (
        list(stats.position_drafted),
        list(stats.position_accepted),
    )
    if stats.scored_drafts:
        index = torch.tensor([r.index for r in stats.scored_drafts])  # (n,)
        drafts = torch.stack([r.draft.float().cpu() for r in stats.scored_drafts])  # (n, 3, H, W)
        result.scores = [r.score for r in stats.scored_drafts]
        result.draft_ssim = ssim(drafts, clip.truth[index], data_range=2.0).tolist()
        result.target_ssim = ssim(reference[index], clip.truth[index], data_range=2.0).tolist()
    return result


def measure_costs(pipe, drafters: dict[str, FrameDrafter], clip: BenchClip, repeats: int = 3):
    """Median seconds of one UNet evaluation (batch 1) and of one drafted frame per drafter; also
    the untimed warm-up of both."""
    unet, device = pipe.unet, pipe.verifier.device
    C, (H, W) = unet.config.in_channels, pipe.verifier.resolution
    x = torch.randn(1, C, H, W, generator=torch.Generator().manual_seed(0)).to(device, unet.dtype)
    t = torch.tensor([500], device=device)
    with torch.inference_mode():
        unet_s = _median_time(lambda: unet(x, t), repeats, device)
    context = clip.context[None].to(device)  # (1, P, 3, H, W)
    k = 4
    draft_s = {
        name: _median_time(lambda d=d: d.propose(context, k), repeats, device) / k
        for name, d in drafters.items()
    }
    return unet_s, draft_s


def _median_time(fn, repeats: int, device) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def estimate_runtime(
    config: BenchVideoConfig, methods: list[Method], num_clips: int, unet_s: float, draft_s: dict[str, float]
) -> RuntimeEstimate:
    """Bounds on the run's wall time: every speculative draft accepted (m evaluations per frame)
    or every one rejected (m + N per frame); drafting F frames either way."""
    F, N = config.num_frames, config.num_inference_steps
    baselines, low, high = 0.0, 0.0, 0.0
    for m in methods:
        drafting = F * draft_s.get(m.drafter, 0.0)
        if m.family == "target":
            baselines += F * N * unet_s
        elif m.family == "draft":
            baselines += drafting
        elif m.family == "first-target":
            baselines += N * unet_s + drafting
        else:
            low += F * m.setting.num_refine_steps * unet_s + drafting
            high += F * (m.setting.num_refine_steps + N) * unet_s + drafting
    n = num_clips
    return RuntimeEstimate(unet_s, draft_s, n * len(methods), n * baselines, n * low, n * high)


def _progress_bar(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="bench video", unit="run", file=sys.stderr, disable=not enabled)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _settings(config: BenchVideoConfig, pipe, model_dir: Path | None, seconds: float) -> dict[str, Any]:
    settings = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()}
    settings.update(
        model_dir=str(model_dir) if model_dir is not None else None,
        context_frames=pipe.verifier.num_context_frames,
        resolution=list(pipe.verifier.resolution),
        unet_params=sum(p.numel() for p in pipe.unet.parameters()),
        scheduler=type(pipe.scheduler).__name__,
        default_setting=asdict(DEFAULT_SETTING),
        wall_minutes=seconds / 60,
    )
    return settings


# ---------------------------------------------------------------------------------------------
# Aggregation and discrimination


def _aggregate(workload: str, method: Method, records, num_frames: int) -> VideoMethodResult:
    runs = records[(workload, method.name)]
    reference = records[(workload, "target")]
    spec = method.family == "speculative"
    scores = [s for r in runs for s in r.scores]
    truth = [s for r in runs for s in r.draft_ssim]
    worse = [d < t for r in runs for d, t in zip(r.draft_ssim, r.target_ssim)]
    return VideoMethodResult(
        workload=workload,
        method=method.name,
        family=method.family,
        drafter=method.drafter,
        threshold=method.setting.threshold if spec else None,
        strength=method.setting.strength if spec else None,
        is_default=method.is_default,
        seconds_per_frame=statistics.median(r.seconds / num_frames for r in runs),
        unet_evals_per_frame=sum(r.unet_evals for r in runs) / (num_frames * len(runs)),
        speedup=statistics.median(t.seconds / r.seconds for t, r in zip(reference, runs)),
        psnr_gt=statistics.fmean(r.psnr_gt for r in runs),
        ssim_gt=statistics.fmean(r.ssim_gt for r in runs),
        psnr_target=statistics.fmean(r.psnr_target for r in runs),
        ssim_target=statistics.fmean(r.ssim_target for r in runs),
        acceptance_rate=_ratio(sum(r.accepted for r in runs), sum(r.drafted for r in runs)) if spec else None,
        per_position_acceptance=_per_position(runs) if spec else None,
        spearman=spearman(scores, truth) if spec else None,
        auc=roc_auc(worse, [-s for s in scores]) if spec else None,
        num_scored=len(scores),
        seconds=[r.seconds for r in runs],
        unet_evals=[r.unet_evals for r in runs],
        ssim_gt_clips=[r.ssim_gt for r in runs],
    )


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _per_position(runs: list[ClipResult]) -> list[float]:
    size = max((len(r.position_drafted) for r in runs), default=0)
    drafted, accepted = np.zeros(size), np.zeros(size)
    for r in runs:
        drafted[: len(r.position_drafted)] += r.position_drafted
        accepted[: len(r.position_accepted)] += r.position_accepted
    return [float(a / d) if d else 0.0 for a, d in zip(accepted, drafted)]


def _ranks(values: Sequence[float]) -> np.ndarray:
    """1-based ranks, ties sharing their average rank."""
    x = np.asarray(values, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    _, inverse = np.unique(x, return_inverse=True)
    return (np.bincount(inverse, weights=ranks) / np.bincount(inverse))[inverse]


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman rank correlation (ties averaged); None for fewer than 2 points or a constant side."""
    if len(x) < 2:
        return None
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def roc_auc(labels: Sequence[bool], scores: Sequence[float]) -> float | None:
    """Area under the ROC curve of ``scores`` for the positive ``labels`` (Mann-Whitney, ties 1/2);
    None when a class is empty."""
    labels = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = _ranks(scores)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


# ---------------------------------------------------------------------------------------------
# Targets, tables, plot, report


def check_targets(results: BenchVideoResults) -> list[VideoTargetCheck]:
    """(a) on synthetic: target-only beats the best draft-only on SSIM to the ground truth; (b) on
    every workload: the default setting is >= 3x faster than target-only, keeps >= 98% of its SSIM
    to the ground truth and beats every draft-only method on it."""
    checks = [_check_target_beats_drafts(results)]
    for workload in results.workloads:
        checks += _check_default(results, workload)
    return checks


def _drafts_and_target(results: BenchVideoResults, workload: str):
    target = results.row(workload, "target")
    drafts = [r for r in results.rows if r.workload == workload and r.family == "draft"]
    best = max(drafts, key=lambda r: r.ssim_gt, default=None)
    return target, best


def _check_target_beats_drafts(results: BenchVideoResults) -> VideoTargetCheck:
    description = "target-only beats the best draft-only method on SSIM to the ground truth"
    target, best = _drafts_and_target(results, "synthetic")
    if target is None or best is None:
        return VideoTargetCheck(
            "synthetic", description, None, "no synthetic workload or no draft-only method"
        )
    detail = f"target-only {target.ssim_gt:.4f}, best draft-only ({best.method}) {best.ssim_gt:.4f}"
    return VideoTargetCheck("synthetic", description, target.ssim_gt > best.ssim_gt, detail)


def _check_default(results: BenchVideoResults, workload: str) -> list[VideoTargetCheck]:
    target, best = _drafts_and_target(results, workload)
    default = results.default_row(workload)
    speed = f"the default setting is >= {DEFAULT_SPEEDUP:g}x faster than target-only"
    quality = f"the default setting keeps >= {DEFAULT_QUALITY:.0%} of target-only's SSIM to the ground truth"
    beats = "the default setting beats every draft-only method on SSIM to the ground truth"
    if default is None or target is None:
        return [VideoTargetCheck(workload, d, None, "not run") for d in (speed, quality, beats)]
    name = f"{default.method}: {default.drafter}, tau {default.threshold:g}, s {default.strength:g}"
    ratio = default.ssim_gt / target.ssim_gt if target.ssim_gt > 0 else None
    kept = f"{default.ssim_gt:.4f} vs {target.ssim_gt:.4f}"
    kept += " (target-only's SSIM <= 0: no ratio)" if ratio is None else f" = {ratio:.1%}"
    checks = [
        VideoTargetCheck(
            workload, speed, default.speedup >= DEFAULT_SPEEDUP, f"{default.speedup:.2f}x, {name}"
        ),
        VideoTargetCheck(workload, quality, None if ratio is None else ratio >= DEFAULT_QUALITY, kept),
    ]
    if best is None:
        checks.append(VideoTargetCheck(workload, beats, None, "no draft-only method run"))
    else:
        detail = f"{default.ssim_gt:.4f} vs best draft-only ({best.method}) {best.ssim_gt:.4f}"
        checks.append(VideoTargetCheck(workload, beats, default.ssim_gt > best.ssim_gt, detail))
    return checks


def format_targets(results: BenchVideoResults) -> str:
    return "\n".join(f"- {c.line()}" for c in check_targets(results))


WORKLOAD_TITLES = {
    "synthetic": "Synthetic (held-out moving-shapes sequences)",
    "real": "Real (crops from the held-out 30% of the sample videos)",
    "clips": "Clips (the given video files)",
}


def to_markdown(results: BenchVideoResults) -> str:
    """One table per workload; '-' where a number does not apply."""
    out = []
    for workload in results.workloads:
        n = len(results.clips[workload])
        out += [
            f"### {WORKLOAD_TITLES.get(workload, workload)}, {n} clip{'s' * (n != 1)}",
            "",
            "| method | s / frame | UNet evals / frame | × target-only | PSNR↔GT | SSIM↔GT | PSNR↔target | SSIM↔target | acceptance | acceptance by position | Spearman | AUC |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
        ]
        out += [_table_row(r) for r in results.rows if r.workload == workload]
        out.append("")
    return "\n".join(out)


def _table_row(r: VideoMethodResult) -> str:
    reference = r.family == "target"
    cells = [
        f"**{r.method}** (default)" if r.is_default else r.method,
        f"{r.seconds_per_frame:.3f}",
        f"{r.unet_evals_per_frame:.1f}",
        _fmt(r.speedup, "{:.2f}×"),
        f"{r.psnr_gt:.2f}",
        f"{r.ssim_gt:.4f}",
        "ref" if reference else f"{r.psnr_target:.2f}",
        "ref" if reference else f"{r.ssim_target:.4f}",
        _fmt(r.acceptance_rate, "{:.3f}"),
        " ".join(f"{a:.2f}" for a in r.per_position_acceptance[:6]) if r.per_position_acceptance else "-",
        _fmt(r.spearman, "{:.3f}"),
        _fmt(r.auc, "{:.3f}"),
    ]
    return "| " + " | ".join(cells) + " |"


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else spec.format(value)


_COLOURS = {"flow": "tab:blue", "learned": "tab:orange", "linear": "tab:green", "copy": "tab:purple"}
_STYLES = ("-", "--", ":", "-.")


def plot_pareto(results: BenchVideoResults, path: str | os.PathLike) -> Path:
    """PNG: speedup over target-only (log x) against SSIM to the ground truth, one panel per
    workload; one line per sweep drafter x strength through its thresholds, baselines as points."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    workloads = results.workloads
    fig = Figure(figsize=(6.2 * len(workloads), 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(workloads), squeeze=False)[0]
    for ax, workload in zip(axes, workloads):
        rows = [r for r in results.rows if r.workload == workload]
        _plot_sweep(ax, rows)
        _plot_baselines(ax, rows)
        ax.set_xscale("log")
        ax.set_title(WORKLOAD_TITLES.get(workload, workload).split(" (")[0].lower())
        ax.set_xlabel("speedup over target-only (median per-clip time ratio, log scale)")
        ax.set_ylabel("SSIM to ground truth (mean over clips)")
        ax.grid(True, which="both", linewidth=0.3)
        ax.legend(fontsize=7)
    path = Path(path)
    atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=110), binary=True)
    return path


def _plot_sweep(ax, rows: list[VideoMethodResult]) -> None:
    curves: dict[tuple[str, float], list[VideoMethodResult]] = {}
    for r in rows:
        if r.family == "speculative" and r.method != "default":
            curves.setdefault((r.drafter, r.strength), []).append(r)
    strengths = sorted({s for _, s in curves})
    for (drafter, strength), points in curves.items():
        points.sort(key=lambda r: r.threshold)
        ax.plot(
            [p.speedup for p in points],
            [p.ssim_gt for p in points],
            marker="o",
            markersize=3.5,
            color=_COLOURS.get(drafter),
            linestyle=_STYLES[strengths.index(strength) % len(_STYLES)],
            label=f"speculative {drafter}, s={strength:g} (τ sweep)",
        )
        for p in points:
            ax.annotate(
                f"{p.threshold:g}",
                (p.speedup, p.ssim_gt),
                fontsize=5.5,
                xytext=(2, 2),
                textcoords="offset points",
            )


def _plot_baselines(ax, rows: list[VideoMethodResult]) -> None:
    for r in rows:
        if r.family == "target":
            ax.plot([r.speedup], [r.ssim_gt], "k*", markersize=11, label="target-only")
        elif r.family == "draft":
            ax.plot(
                [r.speedup], [r.ssim_gt], "x", color=_COLOURS.get(r.drafter), markersize=8, label=r.method
            )
        elif r.family == "first-target":
            ax.plot([r.speedup], [r.ssim_gt], "s", color=_COLOURS.get(r.drafter), mfc="none", label=r.method)
        if r.is_default:
            label = f"default ({r.drafter}, τ={r.threshold:g}, s={r.strength:g})"
            ax.plot([r.speedup], [r.ssim_gt], "o", mfc="none", mec="red", markersize=12, mew=1.5, label=label)


def write_report(
    results: BenchVideoResults, command: str, path: str | os.PathLike = "docs/BENCHMARKS.md"
) -> Path:
    """Write (or replace) the "## Video" section of the report, and the Pareto plot next to it."""
    path = Path(path)
    plot = plot_pareto(results, path.parent / REPORT_PLOT_NAME)
    section = video_section(results, command, os.path.relpath(plot, path.parent))
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    atomic_write(path, lambda f: f.write(replace_section(old, "## Video", section)))
    return path


def video_section(results: BenchVideoResults, command: str, plot_link: str) -> str:
    lines = ["## Video", "", "Command:", "", "```bash", command, "```", "", *_notes(results), ""]
    lines += [to_markdown(results).rstrip(), "", "Targets:", "", format_targets(results), ""]
    lines += [f"![speedup against SSIM to the ground truth]({Path(plot_link).as_posix()})", ""]
    return "\n".join(lines)


def _notes(results: BenchVideoResults) -> list[str]:
    m, s, e = results.machine, results.settings, results.estimate
    d = s["default_setting"]
    workloads = ", ".join(f"{len(names)} {w}" for w, names in results.clips.items())
    notes = [
        f"- Machine: {m['processor']}, {m['cpu_count']} cores (torch threads: {m['torch_threads']}), "
        f"{m['platform']}, device {m['device']}{', ' + m['gpu'] if 'gpu' in m else ''}; Python {m['python']}, "
        f"torch {m['torch']}, diffusers {m['diffusers']}; load average at start {fmt_load(m.get('load_average'))}; "
        f"run {m['date_utc']} UTC, {s['wall_minutes']:.1f} min in all.",
        f"- Model: {s['model_dir'] or 'the given pipeline'} (UNet {s['unet_params'] / 1e6:.2f}M parameters, "
        f"{s['resolution'][0]}x{s['resolution'][1]}, {s['context_frames']} context frames, {s['scheduler']} with "
        f"N = {s['num_inference_steps']} steps).",
        f"- Clips: {workloads}; each is {s['context_frames']} context frames then {s['num_frames']} generated frames, "
        "compared with the ground-truth frames that follow the context. Synthetic: held-out seeds "
        f"{HELDOUT_SEEDS.start}.. (never trained on); real: crops of the held-out last 30% of the sample videos. "
        f"Clip i uses generator seed {s['seed']} + i for every method.",
        f"- Speculative: k = {s['num_draft_frames']} ({s['schedule']} schedule), m = {s['num_refine_steps']} "
        f"refinement step(s), metric {s['metric']}; sweep τ ∈ {{{', '.join(f'{t:g}' for t in s['thresholds'])}}} × "
        f"s ∈ {{{', '.join(f'{x:g}' for x in s['strengths'])}}}. Default setting (VIDEO_DEFAULTS): {d['drafter']}, "
        f"τ = {d['threshold']:g}, s = {d['strength']:g}, k = {d['num_draft_frames']}, {d['schedule']}, "
        f"m = {d['num_refine_steps']}, {d['metric']}. first-target+d: frame 1 by the full sampler, the rest "
        "drafted by d on top of it, all kept.",
        "- s / frame: median over clips. UNet evals / frame: mean. × target-only: median over clips of the "
        "per-clip time ratio. PSNR/SSIM (dB / unitless): per-clip mean over frames, then mean over clips, against "
        "the ground truth (GT) and against target-only's output with the same seed (PSNR of identical frames "
        f"is capped at {PSNR_CAP_DB:g} dB). Acceptance: accepted / "
        "drafted over all clips; by position: draft positions 1, 2, ... (first 6).",
        "- Discrimination, over every draft the verifier scored (rejected ones included): Spearman = rank "
        "correlation of the score with the draft's SSIM to the ground-truth frame at its position; AUC = ROC-AUC "
        "of 'score < τ' as a detector of drafts whose SSIM to the truth is below target-only's at that frame.",
        f"- Estimated before the run: {e.line()}.",
    ]
    return notes + [f"- {n}" for n in results.notes]
