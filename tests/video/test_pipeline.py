"""The speculative video pipeline on a tiny random UNet built in the test."""

import math

import numpy as np
import pytest
import torch
from diffusers import UNet2DModel
from PIL import Image

from specvideo.video.config import VIDEO_DEFAULTS as D
from specvideo.video.drafters import CopyLastDrafter, LinearDrafter
from specvideo.video.io import tensor_to_frames
from specvideo.video.pipeline import SpeculativeVideoPipeline
from specvideo.video.verifier import DiffusionVerifier
from tests import helpers

P, SIZE, N = 2, 16, 4  # context frames, resolution, full-sampler steps


def tiny_unet(seed: int = 0) -> UNet2DModel:
    return helpers.tiny_unet(SIZE, P, seed, norm_num_groups=4)


@pytest.fixture(scope="module")
def pipe():
    return SpeculativeVideoPipeline(DiffusionVerifier(tiny_unet()), LinearDrafter())


def context_uint8(frames=3, h=SIZE, w=SIZE, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (frames, h, w, 3), dtype=np.uint8)


def run(pipe, seed=0, **kwargs):
    kwargs.setdefault("num_inference_steps", N)
    kwargs.setdefault("progress", False)
    return pipe(context_uint8(), generator=torch.Generator().manual_seed(seed), **kwargs)


@pytest.mark.parametrize("mode", ["speculative", "target", "draft"])
def test_output_shapes_for_every_mode(pipe, mode):
    out = run(pipe, mode=mode, num_frames=5)
    assert out.frames.shape == (5, SIZE, SIZE, 3) and out.frames.dtype == np.uint8
    assert len(out.stats.frame_accepted) == 5 and len(out.drafts) == 5


def test_input_forms_and_output_types(pipe):
    frames = context_uint8(h=24, w=20)  # generated at 24 x 20, not at the UNet's 16 x 16
    as_list = pipe(
        list(frames),
        num_frames=3,
        num_inference_steps=N,
        generator=torch.Generator().manual_seed(1),
        progress=False,
    )
    as_tensor = pipe(
        torch.from_numpy(frames).permute(0, 3, 1, 2).float() / 127.5 - 1,
        num_frames=3,
        num_inference_steps=N,
        generator=torch.Generator().manual_seed(1),
        output_type="pt",
        progress=False,
    )
    assert as_list.frames.shape == (3, 24, 20, 3)
    assert as_tensor.frames.shape == (3, 3, 24, 20) and as_tensor.frames.min() >= -1
    np.testing.assert_array_equal(as_list.frames, tensor_to_frames(as_tensor.frames))
    pil = run(pipe, num_frames=2, output_type="pil")
    assert len(pil.frames) == 2 and isinstance(pil.frames[0], Image.Image)


@pytest.mark.parametrize("size", [(16, 16), (40, 56), (23, 37)])
def test_generation_at_the_context_resolution(pipe, size):
    """The fully convolutional UNet runs at the context's own size; a side that is not a multiple of
    the UNet's (here 2) is padded for the model and cropped back."""
    out = run_at(pipe, context_uint8(h=size[0], w=size[1]), num_frames=3)
    assert out.frames.shape == (3, *size, 3)
    assert out.stats.scored_drafts  # the drafts the check scored come back at the output's size too
    assert {tuple(d.draft.shape) for d in out.stats.scored_drafts} == {(3, *size)}
    for mode in ("target", "draft"):
        assert run_at(pipe, context_uint8(h=size[0], w=size[1]), mode=mode, num_frames=2).frames.shape[1:3] == size


def test_the_target_at_two_resolutions_sees_the_whole_frame(pipe):
    """A frame generated at 32 x 32 is not four 16 x 16 generations: the model sees the whole frame
    (its receptive field crosses the quadrant borders), and the top-left quadrant differs."""
    big = run_at(pipe, context_uint8(h=32, w=32), mode="target", num_frames=1, output_type="pt").frames
    small = run_at(pipe, context_uint8(h=32, w=32)[:, :16, :16], mode="target", num_frames=1, output_type="pt")
    assert big.shape == (1, 3, 32, 32) and small.frames.shape == (1, 3, 16, 16)
    assert not torch.allclose(big[..., :16, :16], small.frames)


def run_at(pipe, context, **kwargs):
    kwargs.setdefault("num_inference_steps", N)
    return pipe(context, generator=torch.Generator().manual_seed(0), progress=False, **kwargs)


@pytest.mark.parametrize("metric", ["typicality", "ssim"])
def test_same_generator_same_frames(pipe, metric):
    a, b = run(pipe, seed=3, num_frames=6, metric=metric), run(pipe, seed=3, num_frames=6, metric=metric)
    np.testing.assert_array_equal(a.frames, b.frames)
    other = run(pipe, seed=4, num_frames=6, metric=metric)
    if metric == "ssim" or other.stats.accepted < other.stats.emitted:  # refined or regenerated frames
        assert not np.array_equal(a.frames, other.frames)
    else:  # every frame is an accepted draft: the deterministic drafter's, whatever the seed
        np.testing.assert_array_equal(a.frames, other.frames)


def test_rejecting_every_draft_reproduces_target_mode(pipe):
    target = run(pipe, mode="target", num_frames=6, output_type="pt")
    spec = run(
        pipe,
        threshold=math.inf,
        num_frames=6,
        num_draft_frames=3,
        schedule="constant",
        output_type="pt",
        metric="ssim",
    )
    torch.testing.assert_close(spec.frames, target.frames, rtol=0, atol=0)
    assert target.stats.unet_evals == 6 * N == target.stats.target_only_calls
    assert spec.stats.accepted == 0 and not any(spec.stats.frame_accepted)
    # the same full-sampler evaluations, plus m refinement steps per drafted frame
    assert spec.stats.unet_evals == 6 * N + spec.stats.drafted * D.num_refine_steps


def test_accepting_every_draft_costs_only_the_refinement(pipe):
    out = run(pipe, threshold=-math.inf, num_frames=7, num_refine_steps=2, num_draft_frames=3, metric="ssim")
    assert all(out.stats.frame_accepted)
    assert out.stats.unet_evals == 7 * 2
    assert out.stats.estimated_call_speedup == pytest.approx(N / 2)


def test_draft_mode_costs_no_unet_evaluation():
    pipe = SpeculativeVideoPipeline(DiffusionVerifier(tiny_unet()), CopyLastDrafter())
    out = run(pipe, mode="draft", num_frames=4)
    assert out.stats.unet_evals == 0
    ctx = context_uint8()
    assert all(np.array_equal(f, ctx[-1]) for f in out.frames)  # copy-last drafts, emitted as they are


def test_threshold_splits_accepted_and_regenerated(pipe):
    out = run(pipe, threshold=0.0, metric="ssim", num_frames=8, num_draft_frames=4, strength=0.5)
    scores = [s for s in out.stats.frame_scores if s is not None]
    assert scores and all(-1 <= s <= 1 for s in scores)
    accepted = [a for a in out.stats.frame_accepted]
    assert out.stats.accepted == sum(accepted)
    assert out.stats.emitted == 8


def test_callback_follows_the_diffusers_contract_once_per_round(pipe):
    calls = []

    def callback(p, step, timestep, kwargs):
        calls.append((p, step, timestep, kwargs["frames"].shape[0], kwargs["stats"].emitted, set(kwargs)))
        return kwargs

    out = run(pipe, num_frames=5, num_draft_frames=2, schedule="constant", callback_on_step_end=callback)
    assert [c[1] for c in calls] == list(range(out.stats.rounds))  # step = the round
    assert all(c[0] is pipe and c[2] is None and c[5] == {"frames", "stats"} for c in calls)
    assert [c[3] for c in calls] == [c[4] for c in calls]  # the frames emitted so far
    assert calls[-1][3] == 5 and all(a < b for a, b in zip([c[3] for c in calls], [c[3] for c in calls][1:]))
    only_stats = []
    run(
        pipe,
        num_frames=2,
        callback_on_step_end=lambda p, s, t, kw: only_stats.append(set(kw)),
        callback_on_step_end_tensor_inputs=["stats"],
    )
    assert only_stats and all(k == {"stats"} for k in only_stats)
    with pytest.raises(ValueError, match="callback_on_step_end_tensor_inputs"):
        run(pipe, num_frames=2, callback_on_step_end=callback, callback_on_step_end_tensor_inputs=["latents"])


def test_save_and_load_round_trip(pipe, tmp_path):
    pipe.save_pretrained(tmp_path / "pipe")
    loaded = SpeculativeVideoPipeline.from_pretrained(tmp_path / "pipe", autocast="off")  # as built: float32
    assert loaded.drafter_name == "linear" and loaded.verifier.num_context_frames == P
    np.testing.assert_array_equal(run(loaded, num_frames=4).frames, run(pipe, num_frames=4).frames)
    assert SpeculativeVideoPipeline.from_pretrained(tmp_path / "pipe", drafter="copy").drafter_name == "copy"


def test_saving_over_a_pipeline_keeps_the_files_beside_it(pipe, tmp_path):
    pipe.save_pretrained(tmp_path / "pipe")
    (tmp_path / "pipe" / "README.md").write_text("how these weights were made")
    pipe.save_pretrained(tmp_path / "pipe")
    assert (tmp_path / "pipe" / "README.md").read_text() == "how these weights were made"
    assert sorted(p.name for p in (tmp_path / "pipe").iterdir()) == [
        "README.md", "drafter", "model_index.json", "scheduler", "unet"
    ]


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(num_frames=0), "num_frames must be an integer >= 1"),
        (dict(num_draft_frames=0), "num_draft_frames must be an integer >= 1"),
        (dict(threshold=float("nan")), "threshold must be a number"),
        (dict(strength=0.0), r"strength must be in \(0, 1\]"),
        (dict(strength=1.5), r"strength must be in \(0, 1\]"),
        (dict(num_refine_steps=0), "num_refine_steps must be an integer >= 1"),
        (dict(num_inference_steps=0), "num_inference_steps must be an integer >= 1"),
        (dict(mode="fast"), "mode must be one of"),
        (dict(metric="lpips"), "metric must be one of"),
        (dict(output_type="gif"), "output_type must be one of"),
    ],
)
def test_bad_parameters(pipe, kwargs, message):
    with pytest.raises(ValueError, match=message):
        run(pipe, **kwargs)


def test_bad_context(pipe):
    with pytest.raises(ValueError, match="conditions on 2 context frames, got 1"):
        pipe(context_uint8(frames=1), progress=False)
    with pytest.raises(ValueError, match=r"must be \(F, H, W, 3\) uint8"):
        pipe(context_uint8().astype(np.float32), progress=False)
    bad = torch.zeros(3, 3, SIZE, SIZE)
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN or infinite"):
        pipe(bad, progress=False)


def test_verifier_checks_the_unet():
    with pytest.raises(ValueError, match="does not match the UNet"):
        DiffusionVerifier(tiny_unet(), num_context_frames=3)


def test_missing_pipeline_directory(tmp_path):
    with pytest.raises(ValueError, match="not a specvideo pipeline directory"):
        SpeculativeVideoPipeline.from_pretrained(tmp_path)


def test_cli_video_end_to_end(pipe, tmp_path, capsys):
    import json

    from specvideo.cli import main
    from specvideo.video.io import probe_video, read_video, write_video

    pipe.save_pretrained(tmp_path / "model")
    src = tmp_path / "in.mp4"
    write_video(context_uint8(frames=5, h=32, w=48), src, fps=10)
    out, sbs = tmp_path / "out.mp4", tmp_path / "sbs.mp4"
    argv = [
        "video",
        str(src),
        "--out",
        str(out),
        "--model",
        str(tmp_path / "model"),
        "--num-frames",
        "5",
        "--steps",
        "3",
        "--threshold",
        "0.2",
        "--side-by-side",
        str(sbs),
        "--json",
    ]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["stats"]["emitted"] == 5
    assert read_video(out).frames.shape == (5, 32, 48, 3)  # the input's resolution
    assert read_video(sbs).frames.shape == (5, 32, 3 * 48, 3)
    assert probe_video(out).codec == "h264"


def test_cli_video_errors_leave_no_output(pipe, tmp_path, capsys):
    from specvideo.cli import main

    pipe.save_pretrained(tmp_path / "model")
    fake = tmp_path / "fake.mp4"
    fake.write_text("not a video")
    out = tmp_path / "out.mp4"
    out.write_bytes(b"keep me")
    code = main(["video", str(fake), "--out", str(out), "--model", str(tmp_path / "model")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "fake.mp4" in err
    assert out.read_bytes() == b"keep me"
    code = main(
        ["video", str(fake), "--out", str(out), "--model", str(tmp_path / "model"), "--strength", "0"]
    )
    assert code == 2 and out.read_bytes() == b"keep me"


def test_cli_video_demo_needs_no_input(pipe, tmp_path, capsys):
    from specvideo.cli import main
    from specvideo.cli.video import DEMO_SIZE
    from specvideo.video.io import read_video

    pipe.save_pretrained(tmp_path / "model")
    out = tmp_path / "demo.mp4"
    argv = [
        "video",
        "--demo",
        str(out),
        "--model",
        str(tmp_path / "model"),
        "--num-frames",
        "3",
        "--steps",
        "2",
    ]
    assert main(argv) == 0
    assert read_video(out).frames.shape == (3, DEMO_SIZE, DEMO_SIZE, 3)
    assert main(["video", "--model", str(tmp_path / "model")]) == 2  # neither input nor --demo
    assert "either an input video or --demo" in capsys.readouterr().err
    assert main(["video", "--demo", str(out), "--out", str(tmp_path / "other.mp4")]) == 2
    assert "drop --out" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["DDPMScheduler", "EulerDiscreteScheduler", "DPMSolverMultistepScheduler"])
def test_other_diffusers_schedulers_via_from_config(name):
    import diffusers

    from specvideo.video.verifier import default_scheduler

    scheduler = getattr(diffusers, name).from_config(default_scheduler("epsilon").config)
    verifier = DiffusionVerifier(tiny_unet(), scheduler)
    cond = torch.zeros(2, 3 * P, SIZE, SIZE)
    noise = torch.randn(2, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(0))
    refined = verifier.refine(
        cond, torch.zeros(2, 3, SIZE, SIZE), strength=0.8, num_refine_steps=2, noise=noise
    )
    generated = verifier.generate(cond, 3, noise, generator=torch.Generator().manual_seed(1))
    assert refined.shape == generated.shape == (2, 3, SIZE, SIZE)
    assert torch.isfinite(refined).all() and torch.isfinite(generated).all()
    assert verifier.unet_evals == 2 * 2 + 2 * 3
