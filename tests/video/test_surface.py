"""The video pipeline's edges: low precision, reproducible stochastic schedulers, batches of videos,
threshold ranges, the refused confidence schedule, dtype on load."""

import math

import diffusers
import numpy as np
import pytest
import torch

from specvideo.video import DiffusionVerifier, FlowDrafter, LinearDrafter, SpeculativeVideoPipeline
from specvideo.video.config import VIDEO_DEFAULTS as D
from specvideo.video.history import FrameNoise
from specvideo.video.verifier import default_scheduler
from tests.video.test_pipeline import SIZE, context_uint8, tiny_unet

STOCHASTIC = {
    "DDPMScheduler": {},
    "EulerAncestralDiscreteScheduler": {},
    "DPMSolverMultistepScheduler": {"algorithm_type": "sde-dpmsolver++"},
}


def pipe_with(scheduler=None, dtype=torch.float32, drafter=None) -> SpeculativeVideoPipeline:
    verifier = DiffusionVerifier(tiny_unet().to(dtype), scheduler)
    return SpeculativeVideoPipeline(verifier, drafter or LinearDrafter())


def call(pipe, seed=0, context=None, **kwargs):
    kwargs.setdefault("num_inference_steps", 3)
    kwargs.setdefault("progress", False)
    kwargs.setdefault("output_type", "pt")
    context = context_uint8() if context is None else context
    return pipe(context, generator=torch.Generator().manual_seed(seed), **kwargs)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_unet_runs_with_right_shapes_counters_and_stop(dtype):
    pipe = pipe_with(dtype=dtype)
    out = call(
        pipe, num_frames=6, num_draft_frames=3, schedule="constant", threshold=0.0, strength=0.7, metric="ssim"
    )
    assert out.frames.shape == (6, 3, SIZE, SIZE) and out.frames.dtype == torch.float32
    assert torch.isfinite(out.frames).all()
    stats = out.stats
    assert stats.emitted == 6 and len(stats.frame_accepted) == 6
    corrections = sum(1 for s, a in zip(stats.frame_scores, stats.frame_accepted) if not a)
    m = D.num_refine_steps  # the default m per draft, N = 3 per correction
    assert stats.unet_evals == stats.drafted * m + corrections * 3
    assert all(-1 <= s.score <= 1 for s in stats.scored_drafts)  # scores computed in fp32
    target = call(pipe, num_frames=4, mode="target")
    assert target.stats.unet_evals == 4 * 3 and target.stats.unet_passes == 4 * 3


@pytest.mark.parametrize("name", list(STOCHASTIC))
def test_stochastic_schedulers_are_reproducible_and_inf_threshold_is_target_mode(name):
    # linear betas: the squared-cosine schedule's last alpha_bar is ~0, an infinite sigma for Euler
    config = dict(default_scheduler("epsilon").config, beta_schedule="linear", **STOCHASTIC[name])
    pipe = pipe_with(getattr(diffusers, name).from_config(config))
    spec = dict(
        num_frames=5, num_draft_frames=2, schedule="constant", strength=0.8, num_refine_steps=2, metric="ssim"
    )
    a, b = call(pipe, threshold=0.2, **spec), call(pipe, threshold=0.2, **spec)
    assert torch.equal(a.frames, b.frames)
    assert [s.score for s in a.stats.scored_drafts] == [s.score for s in b.stats.scored_drafts]
    assert not torch.equal(a.frames, call(pipe, seed=1, threshold=0.2, **spec).frames)
    rejected = call(pipe, threshold=math.inf, **spec)
    target = call(pipe, mode="target", num_frames=5)
    assert torch.equal(rejected.frames, target.frames)


@pytest.mark.parametrize(
    "schedule, check",
    [
        ("constant", {}),  # the default check (typicality, the draft kept): nothing is refined
        ("heuristic", {}),
        ("constant", {"metric": "ssim", "threshold": 0.1, "num_refine_steps": 1}),
        ("heuristic", {"metric": "ssim", "threshold": 0.1, "num_refine_steps": 1}),
    ],
)
def test_a_batch_of_videos_equals_each_video_alone(schedule, check):
    pipe = pipe_with(drafter=FlowDrafter())
    contexts = [context_uint8(seed=s) for s in range(3)]
    # the refine check at m = 1: every further stochastic refinement step amplifies the
    # batched-convolution rounding (below) through the flow drafter's 8-bit input; m > 1 is held to
    # bit-identical reruns of one video (the stochastic-scheduler test above), not to batching. The
    # default check refines nothing, so its default m does not enter.
    settings = dict(num_frames=7, num_draft_frames=2, schedule=schedule, strength=0.6, **check)
    generators = [torch.Generator().manual_seed(10 + b) for b in range(3)]
    batch = pipe(
        contexts, generator=generators, num_inference_steps=2, output_type="pt", progress=False, **settings
    )
    assert batch.frames.shape == (3, 7, 3, SIZE, SIZE) and len(batch.row_stats) == 3
    alone_passes = 0
    for b, context in enumerate(contexts):
        g = torch.Generator().manual_seed(10 + b)
        alone = pipe(
            context, generator=g, num_inference_steps=2, output_type="pt", progress=False, **settings
        )
        # Equal up to float rounding: a batched convolution rounds differently from a single one
        # (~1e-6), and the flow drafter's 8-bit grey input can turn that into ~1e-3 a few frames on.
        torch.testing.assert_close(batch.frames[b], alone.frames, atol=1e-2, rtol=0)
        torch.testing.assert_close(batch.frames[b, :2], alone.frames[:2], atol=1e-5, rtol=0)
        row = batch.row_stats[b]
        assert row.frame_accepted == alone.stats.frame_accepted
        assert (row.drafted, row.accepted, row.unet_evals) == (
            alone.stats.drafted,
            alone.stats.accepted,
            alone.stats.unet_evals,
        )
        alone_passes += alone.stats.unet_passes
    totals = batch.stats
    assert totals.emitted == 21 and totals.drafted == sum(r.drafted for r in batch.row_stats)
    assert totals.unet_evals == sum(r.unet_evals for r in batch.row_stats)
    assert totals.unet_passes < alone_passes  # the rows' UNet calls were batched
    assert {d.row for d in totals.scored_drafts} == {0, 1, 2}
    np_out = pipe(contexts[:2], num_inference_steps=2, progress=False, **settings)
    assert np_out.frames.shape == (2, 7, SIZE, SIZE, 3) and np_out.frames.dtype == np.uint8
    pil = pipe(np.stack(contexts[:2]), num_inference_steps=2, progress=False, output_type="pil", **settings)
    assert len(pil.frames) == 2 and len(pil.frames[0]) == 7


def test_batch_rows_accept_their_own_number_of_drafts():
    pipe = pipe_with(drafter=FlowDrafter())
    contexts = [context_uint8(seed=3), context_uint8(seed=4)]
    settings = dict(
        num_frames=4, num_draft_frames=2, schedule="constant", strength=0.5, num_inference_steps=2
    )

    def gens():  # the same refinement noise in both calls (m > 1 DDPM steps are stochastic)
        return [torch.Generator().manual_seed(20 + b) for b in range(2)]

    scored = pipe(contexts, threshold=-math.inf, generator=gens(), progress=False, **settings).row_stats
    first = [r.scored_drafts[0].score for r in scored]  # each row's first draft
    assert first[0] != first[1]
    out = pipe(contexts, threshold=sum(first) / 2, generator=gens(), progress=False, **settings)
    high = int(first[1] > first[0])
    assert out.row_stats[high].frame_accepted[0] and not out.row_stats[1 - high].frame_accepted[0]
    assert all(r.emitted == 4 for r in out.row_stats)


def test_bad_batches_and_generators_are_refused():
    pipe = pipe_with()
    with pytest.raises(ValueError, match="2 generators for a batch of 3"):
        pipe([context_uint8()] * 3, generator=[torch.Generator()] * 2, progress=False)
    mixed = [context_uint8(), context_uint8(h=24)]  # each would be generated at its own size
    with pytest.raises(
        ValueError, match=r"the contexts of a batch must share one frame size, got \[\(16, 16\), \(24, 16\)\]"
    ):
        pipe(mixed, num_frames=1, progress=False)


def test_threshold_must_be_in_its_metric_range_and_confidence_is_refused():
    pipe = pipe_with()
    with pytest.raises(ValueError, match=r"0.8 dB with metric 'psnr' looks like an SSIM threshold"):
        call(pipe, num_frames=1, metric="psnr", threshold=0.8)
    with pytest.raises(ValueError, match=r"outside the psnr range \[0, 100\] dB"):
        call(pipe, num_frames=1, metric="psnr", threshold=-3.0)
    with pytest.raises(ValueError, match="outside the ssim range"):
        call(pipe, num_frames=1, metric="ssim", threshold=25.0)
    assert call(pipe, num_frames=2, metric="psnr", threshold=20.0).frames.shape[0] == 2
    assert call(pipe, num_frames=2, metric="psnr", threshold=math.inf).stats.accepted == 0
    with pytest.raises(ValueError, match="confidence schedule needs draft probabilities"):
        call(pipe, num_frames=2, schedule="confidence")


def test_from_pretrained_takes_dtype_and_device(tmp_path):
    pipe_with().save_pretrained(tmp_path / "pipe")
    loaded = SpeculativeVideoPipeline.from_pretrained(
        tmp_path / "pipe", torch_dtype=torch.bfloat16, device="cpu"
    )
    assert loaded.dtype == torch.bfloat16 and loaded.device.type == "cpu"
    assert call(loaded, num_frames=2).frames.dtype == torch.float32
    assert SpeculativeVideoPipeline.from_pretrained(tmp_path / "pipe").dtype == torch.float32
    with pytest.raises(ValueError, match="torch_dtype must be a floating torch.dtype"):
        SpeculativeVideoPipeline.from_pretrained(tmp_path / "pipe", torch_dtype="half")


def test_frame_noise_draws_on_the_generators_device():
    g = torch.Generator(device="cpu").manual_seed(0)
    noise = FrameNoise(g, (3, 4, 4), torch.device("cpu"))
    assert noise.generator(5, 2).device == g.device == noise.generator_device
    assert torch.equal(noise.full(5), noise.full(5)) and not torch.equal(noise.full(5), noise.refine(5))
