"""The hint's confidence map and the gated residual: x0 = hint + (1 - c) * UNet(...)."""

import numpy as np
import pytest
import torch

from specvideo.video.conditioning import condition, make_residual, widen_for_confidence, widen_for_hint
from specvideo.video.drafters import FlowDrafter
from specvideo.video.io import frames_to_tensor
from specvideo.video.pipeline import SpeculativeVideoPipeline
from specvideo.video.verifier import DiffusionVerifier
from tests import helpers
from tests.video.test_hint import SIZE, P, moving_square


def gated_verifier(bias: float = 0.0) -> DiffusionVerifier:
    unet = make_residual(widen_for_confidence(widen_for_hint(helpers.tiny_unet(SIZE, P, 0, norm_num_groups=4))))
    with torch.no_grad():
        unet.conv_out.bias.fill_(bias)
    return DiffusionVerifier(unet, hint="flow", residual=True, confidence=True)


def window() -> torch.Tensor:
    return frames_to_tensor(moving_square(P))[None]  # (1, P, 3, H, W)


def test_rigid_motion_is_trusted_and_a_wrong_velocity_is_not():
    """A square moving 2 px a frame on black: along its own velocity the confidence is high on the
    square's new place; a velocity of zero (a copy) or twice the motion disagrees with the forward flow
    where the square is, and the background (no motion, nothing to disagree with) stays trusted."""
    flow, w = FlowDrafter(), window()
    previous, last = w[:, -2], w[:, -1]
    velocity = flow.velocity(previous, last)  # (1, 2, H, W)
    weight = flow.splat_weight(velocity)
    square = (slice(6, 9), slice(6, 9))  # inside the square at the next frame (x 6..10)
    true = flow.confidence(previous, last, velocity, weight)[0, 0]  # (H, W)
    assert true.shape == (SIZE, SIZE) and 0 <= true.min() and true.max() <= 1
    assert true[square].mean() > 0.8
    for scale in (0.0, 2.0):
        wrong = flow.confidence(previous, last, velocity * scale, flow.splat_weight(velocity * scale))[0, 0]
        assert wrong[square].mean() < true[square].mean() - 0.3
    assert true[12:, 2:-2].mean() > 0.9  # the still background below the square, off the frame edge


def test_condition_puts_the_confidence_before_the_hint():
    w = window()
    plain = condition(w, "flow")
    gated = condition(w, "flow", confidence=True)
    assert gated.shape[1] == plain.shape[1] + 1 == 3 * (P + 1) + 1  # the UNet adds the sample
    torch.testing.assert_close(gated[:, : 3 * P], plain[:, : 3 * P])
    torch.testing.assert_close(gated[:, -3:], plain[:, -3:])  # the hint is still the last three
    confidence = gated[:, 3 * P]
    assert 0 <= confidence.min() and confidence.max() <= 1
    with pytest.raises(ValueError, match="two context frames"):
        condition(w[:, -1:], "flow", confidence=True)


def test_widening_keeps_the_function_and_the_gate_keeps_the_warp_where_sure():
    hinted = make_residual(widen_for_hint(helpers.tiny_unet(SIZE, P, 0, norm_num_groups=4)))
    wide = widen_for_confidence(hinted)
    assert wide.config.in_channels == hinted.config.in_channels + 1
    x, c = torch.randn(2, 3 * (P + 1), SIZE, SIZE), torch.rand(2, 1, SIZE, SIZE)
    hint = torch.randn(2, 3, SIZE, SIZE)
    with torch.no_grad():
        expected = hinted(torch.cat([x, hint], dim=1), 400).sample
        got = wide(torch.cat([x, c, hint], dim=1), 400).sample
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    verifier = gated_verifier(bias=0.25)
    cond = verifier.condition(window())  # (1, 3P + 4, H, W)
    confidence, warp = cond[:, -4:-3], cond[:, -3:]
    frame = verifier.generate(cond, 1, torch.randn(1, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(0)))
    torch.testing.assert_close(frame, (warp + 0.25 * (1 - confidence)).clamp(-1, 1))


def test_the_verifier_refuses_a_gate_without_a_residual_or_the_channel():
    unet = widen_for_hint(helpers.tiny_unet(SIZE, P, 0, norm_num_groups=4))
    with pytest.raises(ValueError, match="residual"):
        DiffusionVerifier(widen_for_confidence(unet), hint="flow", confidence=True)
    with pytest.raises(ValueError, match=r"3 \* \(P \+ 2\) \+ 1"):
        DiffusionVerifier(unet, hint="flow", residual=True, confidence=True)


def test_gated_pipeline_round_trips(tmp_path):
    pipe = SpeculativeVideoPipeline(gated_verifier(), FlowDrafter())
    pipe.save_pretrained(tmp_path / "pipe")
    loaded = SpeculativeVideoPipeline.from_pretrained(tmp_path / "pipe")
    assert loaded.verifier.confidence and loaded.verifier.residual
    run = dict(num_frames=3, num_inference_steps=2, progress=False)
    target = loaded(moving_square(), mode="target", generator=torch.Generator().manual_seed(0), **run)
    draft = loaded(moving_square(), mode="draft", **run)
    np.testing.assert_array_equal(target.frames[0], draft.frames[0])  # untrained: the warp
