"""Frame drafters: shapes, ranges, validation, and that flow beats copying on real motion."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from specvideo.video.drafters import (
    DRAFTERS,
    CopyLastDrafter,
    FlowConfig,
    FlowDrafter,
    FramePredictor,
    LearnedDrafter,
    LinearDrafter,
    make_drafter,
)
from specvideo.video.metrics import psnr
from specvideo.video.warp import backward_warp, forward_splat


def moving_square(num_frames: int = 8, size: int = 64, speed: int = 2, seed: int = 0) -> torch.Tensor:
    """(F, 3, H, W) in [-1, 1]: a bright 16 px square moving right by ``speed`` px per frame over a
    smooth random texture."""
    generator = torch.Generator().manual_seed(seed)
    texture = torch.rand(1, 3, size // 4, size // 4, generator=generator) * 1.2 - 0.6
    background = F.interpolate(texture, size=(size, size), mode="bilinear", align_corners=False)[0]
    colour = torch.tensor([1.0, 0.9, 0.8])[:, None, None]
    frames = []
    for t in range(num_frames):
        frame = background.clone()
        left = 8 + speed * t
        frame[:, 20:36, left : left + 16] = colour
        frames.append(frame)
    return torch.stack(frames)  # (F, 3, H, W)


def random_context(shape=(2, 3, 3, 32, 32), seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=generator) * 2 - 1


def randomised_learned(seed: int = 0, **config) -> LearnedDrafter:
    """An untrained predictor outputs exactly the last frame (zero head); perturb every weight."""
    model = FramePredictor(**config)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(0.05 * torch.randn(parameter.shape, generator=generator))
    return LearnedDrafter(model)


def all_drafters() -> list:
    return [CopyLastDrafter(), LinearDrafter(), FlowDrafter(), randomised_learned(hidden=8)]


@pytest.mark.parametrize("index", range(4))
def test_output_shape_range_and_dtype(index):
    drafter = all_drafters()[index]
    context = random_context()
    before = context.clone()
    out = drafter.propose(context, 3)
    assert out.shape == (2, 3, 3, 32, 32) and out.dtype == torch.float32
    assert out.min() >= -1 and out.max() <= 1 and torch.isfinite(out).all()
    assert torch.equal(context, before)  # the context is not modified


def test_copy_repeats_the_last_frame():
    context = random_context()
    out = CopyLastDrafter().propose(context, 4)
    assert torch.equal(out, context[:, -1:].expand(-1, 4, -1, -1, -1))


def test_linear_extrapolates_a_fade_exactly_and_clamps():
    base = torch.linspace(-0.9, 0.6, 4 * 4).reshape(1, 1, 1, 4, 4).expand(1, 1, 3, 4, 4)
    context = torch.cat([base, base + 0.1, base + 0.2], dim=1)  # (1, 3, 3, 4, 4) brightening by 0.1
    out = LinearDrafter().propose(context, 4)
    expected = torch.stack([(base[:, 0] + 0.1 * (2 + i)).clamp(-1, 1) for i in range(1, 5)], dim=1)
    torch.testing.assert_close(out, expected)
    assert out.max() == 1.0  # the brightest pixels ran into the clamp
    steep = LinearDrafter().propose(torch.tensor([-1.0, 0.5]).reshape(1, 2, 1, 1, 1).expand(1, 2, 3, 1, 1), 2)
    torch.testing.assert_close(steep, torch.ones(1, 2, 3, 1, 1))


@pytest.mark.parametrize("drafter", [LinearDrafter(), FlowDrafter()], ids=["linear", "flow"])
def test_one_frame_of_context_falls_back_to_copy(drafter):
    context = random_context((2, 1, 3, 16, 16))
    assert torch.equal(drafter.propose(context, 3), CopyLastDrafter().propose(context, 3))


def test_flow_beats_copy_on_a_moving_square():
    videos = torch.stack([moving_square(seed=0), moving_square(seed=1)])  # (2, 8, 3, 64, 64)
    context, future = videos[:, :4], videos[:, 4:]
    copy = psnr(CopyLastDrafter().propose(context, 4), future, data_range=2.0).mean()
    for config, margin in ((FlowConfig(), 3.0), (FlowConfig(flow_model="farneback"), 2.0)):
        flow = psnr(FlowDrafter(config).propose(context, 4), future, data_range=2.0).mean()
        assert flow > copy + margin, (config, float(flow), float(copy))


def test_flow_keeps_a_static_scene_and_moves_a_pan():
    still = moving_square(seed=2, speed=0)[None]  # (1, 8, 3, 64, 64)
    out = FlowDrafter().propose(still[:, :2], 3)
    assert psnr(out, still[:, 2:5], data_range=2.0).min() > 40.0
    first = still[0, 0]  # (3, 64, 64)
    pan = torch.stack([torch.roll(first, shifts=2 * t, dims=-1) for t in range(6)])  # (6, 3, 64, 64)
    pan = pan[None]  # (1, 6, 3, 64, 64): the whole picture moves 2 px right per frame
    out = FlowDrafter().propose(pan[:, :2], 4)
    interior = (..., slice(8, 56), slice(16, 48))  # away from the wrapped border
    copy = CopyLastDrafter().propose(pan[:, :2], 4)
    flow_error = (out - pan[:, 2:])[interior].abs().mean()
    copy_error = (copy - pan[:, 2:])[interior].abs().mean()
    assert flow_error < 0.25 * copy_error


def test_forward_splat_of_an_integer_shift_is_exact():
    frame = random_context((1, 1, 3, 8, 10))[:, 0]  # (1, 3, 8, 10)
    displacement = torch.zeros(1, 2, 8, 10)
    displacement[:, 0] = 2.0  # every pixel moves 2 px right
    splat, coverage = forward_splat(frame, displacement, torch.ones(1, 1, 8, 10))
    torch.testing.assert_close(splat[..., 2:], frame[..., :-2])
    assert torch.equal(coverage[..., 2:], torch.ones(1, 1, 8, 8)) and torch.equal(
        coverage[..., :2], torch.zeros(1, 1, 8, 2)
    )
    torch.testing.assert_close(backward_warp(frame, displacement)[..., 2:], frame[..., :-2])
    torch.testing.assert_close(backward_warp(frame, torch.zeros_like(displacement)), frame)


def test_learned_predictor_is_small_and_starts_as_copy():
    model = FramePredictor(context_frames=3)
    assert sum(p.numel() for p in model.parameters()) <= 500_000
    context = random_context()
    assert torch.equal(LearnedDrafter(model).propose(context, 2), CopyLastDrafter().propose(context, 2))


def test_learned_pads_a_short_context_and_uses_the_latest_frames():
    drafter = randomised_learned(hidden=8, context_frames=3)
    context = random_context((1, 5, 3, 16, 16))
    torch.testing.assert_close(drafter.propose(context, 2), drafter.propose(context[:, 2:], 2))
    short = drafter.propose(context[:, -1:], 2)
    padded = drafter.propose(context[:, -1:].expand(-1, 3, -1, -1, -1), 2)
    torch.testing.assert_close(short, padded)


def test_learned_drafts_autoregressively_on_its_own_outputs():
    drafter = randomised_learned(hidden=8)
    context = random_context((1, 2, 3, 16, 16))
    two = drafter.propose(context, 2)
    first = drafter.propose(context, 1)
    second = drafter.propose(torch.cat([context[:, -1:], first], dim=1), 1)
    torch.testing.assert_close(two, torch.cat([first, second], dim=1))


def test_learned_save_load_round_trip(tmp_path):
    drafter = randomised_learned(seed=4, hidden=8, context_frames=3, dilations=(1, 2))
    drafter.save_pretrained(tmp_path)
    # diffusers' own file names, so FramePredictor.from_pretrained and any diffusers tooling load it
    assert {p.name for p in tmp_path.iterdir()} == {"config.json", "diffusion_pytorch_model.safetensors"}
    config = json.loads((tmp_path / "config.json").read_text())
    assert (
        config["_class_name"] == "FramePredictor" and config["hidden"] == 8 and config["context_frames"] == 3
    )
    loaded = make_drafter("learned", pretrained=tmp_path)
    context = random_context((2, 3, 3, 16, 16), seed=5)
    expected = drafter.propose(context, 3)
    assert not torch.equal(expected, CopyLastDrafter().propose(context, 3))
    assert torch.equal(loaded.propose(context, 3), expected)


def test_make_drafter_builds_every_name():
    kinds = {name: type(make_drafter(name)) for name in DRAFTERS}
    assert kinds == {
        "copy": CopyLastDrafter,
        "linear": LinearDrafter,
        "flow": FlowDrafter,
        "learned": LearnedDrafter,
        "flow:spynet": FlowDrafter,
        "flow:rife": FlowDrafter,
        "flow:gmflow": FlowDrafter,
    }
    assert make_drafter("flow:rife").config.flow_model == "rife"
    assert make_drafter("flow", flow_model="farneback", preset="fast").config == FlowConfig("farneback", "fast")
    assert make_drafter("learned", hidden=8).model.config.hidden == 8
    for name in ("optical", "flow:raft"):
        with pytest.raises(ValueError, match=f"unknown drafter '{name}'"):
            make_drafter(name)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"flow_model": "lucas"}, "flow_model must be one of"),
        ({"preset": "slow"}, "DIS preset"),
        ({"sharpness": -1.0}, "sharpness"),
    ],
)
def test_flow_config_validates(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FlowConfig(**kwargs)


@pytest.mark.parametrize("index", range(4))
@pytest.mark.parametrize(
    ("context", "message"),
    [
        (torch.zeros(2, 3, 32, 32), r"\(2, 3, 32, 32\)"),
        (torch.zeros(2, 2, 4, 32, 32), r"\(2, 2, 4, 32, 32\)"),
        (torch.zeros(2, 0, 3, 32, 32), r"P >= 1.*\(2, 0, 3, 32, 32\)"),
        (torch.zeros(2, 2, 3, 32, 32, dtype=torch.uint8), r"float.*torch.uint8.*\(2, 2, 3, 32, 32\)"),
        ([[0.0]], "torch.Tensor"),
    ],
)
def test_bad_context_is_rejected(index, context, message):
    with pytest.raises(ValueError, match=message):
        all_drafters()[index].propose(context, 2)


@pytest.mark.parametrize("k", [0, -1, 1.5])
def test_bad_draft_length_is_rejected(k):
    for drafter in all_drafters():
        with pytest.raises(ValueError, match="draft length k"):
            drafter.propose(random_context(), k)
