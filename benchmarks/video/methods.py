"""Running one method on one clip, timed, and the cost model behind the run's time estimate."""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field

import torch

from benchmarks.measure import median_time, sync
from benchmarks.video.config import BenchVideoConfig, Method
from benchmarks.video.workloads import BenchClip
from specvideo.video.drafters import FrameDrafter
from specvideo.video.rounds import VideoSpecStats


@dataclass
class MethodOutput:
    """What one method produced on one clip, before scoring."""

    frames: torch.Tensor  # (F, 3, H, W) in [-1, 1], on the CPU
    seconds: float
    unet_evals: int
    unet_passes: int  # sequential UNet calls: a batched call counts once
    stats: VideoSpecStats | None = None  # speculative and refine-all runs only


def run_method(
    method: Method,
    pipe,
    pipes: dict,
    clip: BenchClip,
    config: BenchVideoConfig,
    seed: int,
    steps: int | None = None,
) -> MethodOutput:
    """Run one method on one clip, timed; ``pipes`` holds one pipeline per drafter name; ``steps`` is
    N of the full sampler for corrections and first-frame routing (default: the config's)."""
    F = config.num_frames
    default_steps = steps or config.num_inference_steps
    if default_steps is None:
        if method.family not in ("target", "draft"):  # the drafter alone never samples
            raise ValueError(
                f"{method.name} needs the full sampler's N: pass steps= or set num_inference_steps"
            )
        default_steps = 1

    def call(p, context, steps=default_steps, **kwargs):
        generator = torch.Generator().manual_seed(seed)  # the same seed for every method
        return p(
            context,
            num_inference_steps=steps,
            generator=generator,
            output_type="pt",
            progress=False,
            **kwargs,
        )

    sync(pipe.device)
    start = time.perf_counter()
    if method.family == "target":
        outs = [call(pipe, clip.context, steps=method.steps, num_frames=F, mode="target")]
    elif method.family == "draft":
        outs = [call(pipes[method.drafter], clip.context, num_frames=F, mode="draft")]
    elif method.family == "first-target":
        outs = [call(pipe, clip.context, num_frames=1, mode="target")]
        if F > 1:
            context = torch.cat([clip.context, outs[0].frames])  # (P + 1, 3, H, W)
            outs.append(call(pipes[method.drafter], context, num_frames=F - 1, mode="draft"))
    else:  # speculative, refine-all (tau = -inf)
        s = method.setting
        kwargs = dict(num_draft_frames=s.num_draft_frames, threshold=s.threshold, metric=s.metric)
        kwargs.update(strength=s.strength, num_refine_steps=s.num_refine_steps, schedule=s.schedule)
        kwargs.update(check_center=s.check_center, check_levels=s.check_levels, fallback=s.fallback)
        outs = [call(pipes[method.drafter], clip.context, num_frames=F, mode="speculative", **kwargs)]
    sync(pipe.device)
    seconds = time.perf_counter() - start
    frames = torch.cat([o.frames for o in outs]).float().cpu()  # (F, 3, H, W)
    stats = outs[0].stats if method.setting is not None else None
    evals, passes = sum(o.stats.unet_evals for o in outs), sum(o.stats.unet_passes for o in outs)
    return MethodOutput(frames, seconds, evals, passes, stats)


BATCH_SIZES = (1, 2, 4, 8, 16)  # the batch-cost curve: one UNet pass over n frames


@dataclass(frozen=True)
class RuntimeEstimate:
    """Predicted wall time from a measured UNet evaluation (batch 1) and per-frame drafter times,
    and the measured batch-cost curve ``pass_s`` ({n: seconds of one UNet pass over n frames})
    behind the UNet-time ratio."""

    unet_eval_s: float
    draft_frame_s: dict[str, float]
    runs: int
    baselines_s: float  # target-only, draft-only and first-frame-by-target runs
    sweep_low_s: float  # speculative and refine-all runs if every draft is accepted
    sweep_high_s: float  # ... if every draft is rejected
    pass_s: dict[int, float] = field(default_factory=dict)

    def pass_time(self, n: float) -> float | None:
        """Seconds of one UNet pass over n frames, linear between the measured batch sizes (and
        along the last segment beyond them)."""
        sizes = sorted(self.pass_s)
        if len(sizes) < 2:
            return None
        i = max(1, min(len(sizes) - 1, bisect.bisect_left(sizes, n)))  # the segment sizes[i - 1] .. sizes[i]
        lo, hi = sizes[i - 1], sizes[i]
        t_lo, t_hi = self.pass_s[lo], self.pass_s[hi]
        return t_lo + (n - lo) * (t_hi - t_lo) / (hi - lo)

    def unet_time_ratio(
        self, reference_steps: int, passes_per_frame: float, evals_per_frame: float
    ) -> float | None:
        """The CPU wall-clock speed-up over target-only at N = ``reference_steps`` that a row's UNet
        passes alone allow: N t(1) per frame against passes/frame x t(b), b = evaluations per pass
        (the row's mean batch). Drafting, scoring and Python overhead are left out."""
        if not passes_per_frame or 1 not in self.pass_s:
            return None
        batch_s = self.pass_time(evals_per_frame / passes_per_frame)
        return None if not batch_s else reference_steps * self.pass_s[1] / (passes_per_frame * batch_s)

    def line(self) -> str:
        drafts = ", ".join(f"{k} {v * 1e3:.1f}" for k, v in self.draft_frame_s.items())
        low, high = (self.baselines_s + self.sweep_low_s) / 60, (self.baselines_s + self.sweep_high_s) / 60
        curve = ""
        if 1 in self.pass_s:
            costs = ", ".join(
                f"{n}: {t / self.pass_s[1]:.2f}" for n, t in sorted(self.pass_s.items()) if n > 1
            )
            curve = f" (one pass over n frames costs, in single passes, {costs})"
        return (
            f"{self.runs} runs; one UNet evaluation {self.unet_eval_s * 1e3:.0f} ms{curve}, one drafted frame "
            f"(ms): {drafts}; estimated {low:.1f} min (every draft accepted) to {high:.1f} min (every draft "
            f"rejected), of which {self.baselines_s / 60:.1f} min for the baselines"
        )


def measure_costs(pipe, drafters: dict[str, FrameDrafter], clip: BenchClip, repeats: int = 3):
    """Median seconds of one UNet evaluation (batch 1), of one UNet pass over each batch size in
    BATCH_SIZES, and of one drafted frame per drafter (k = 4); also the untimed warm-up of each."""
    unet, device = pipe.unet, pipe.device
    m = pipe.verifier.size_multiple
    C, (H, W) = unet.config.in_channels, (-(-side // m) * m for side in clip.context.shape[-2:])
    x = torch.randn(max(BATCH_SIZES), C, H, W, generator=torch.Generator().manual_seed(0))
    x = x.to(device, unet.dtype)
    t = torch.tensor([500], device=device)
    # a UNet told its context's noise level takes it as class labels, as the verifier gives them
    labels = pipe.verifier.class_labels(max(BATCH_SIZES), None)  # (n,) or None
    with torch.inference_mode():
        # a curve of ratios to n = 1: more repeats, since the machine's timing noise enters twice
        pass_s = {
            n: median_time(
                lambda n=n: unet(x[:n], t.expand(n), class_labels=None if labels is None else labels[:n]),
                3 * repeats,
                device,
            )
            for n in BATCH_SIZES
        }
    context = clip.context[None].to(device)  # (1, P, 3, H, W)
    k = 4
    draft_s = {
        name: median_time(lambda d=d: d.propose(context, k), repeats, device) / k
        for name, d in drafters.items()
    }
    return pass_s[1], draft_s, pass_s


def estimate_runtime(
    config: BenchVideoConfig,
    methods: list[Method],
    num_clips: int,
    unet_s: float,
    draft_s: dict[str, float],
    pass_s: dict[int, float] | None = None,
) -> RuntimeEstimate:
    """Bounds on the run's wall time: every speculative draft accepted (m evaluations per frame)
    or every one rejected (m + N per frame); drafting F frames either way; every stochastic method
    ``num_seeds`` times. The UNet time is measured at the first clip's size."""
    F, N = config.num_frames, config.num_inference_steps or min(config.target_steps)
    baselines, low, high = 0.0, 0.0, 0.0
    for m in methods:
        drafting = F * draft_s.get(m.drafter, 0.0)
        if m.family == "target":
            baselines += F * m.steps * unet_s
        elif m.family == "draft":
            baselines += drafting / config.num_seeds  # deterministic: run once
        elif m.family == "first-target":
            baselines += N * unet_s + drafting
        else:
            # speculative rows also run the untimed in-place check: N per scored draft, >= F drafts
            in_place = F * N * unet_s if m.family == "speculative" else 0.0
            low += F * m.setting.num_refine_steps * unet_s + drafting + in_place
            high += F * (m.setting.num_refine_steps + N) * unet_s + drafting + in_place
    n, K = num_clips, config.num_seeds
    return RuntimeEstimate(
        unet_s,
        draft_s,
        n * sum(1 if m.family == "draft" else K for m in methods),
        n * K * baselines,
        n * K * low,
        n * K * high,
        dict(pass_s or {}),
    )
