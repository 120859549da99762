"""The flow hint: the verifier also conditioned on the flow drafter's extrapolation of its context."""

import math

import numpy as np
import pytest
import torch
from diffusers import UNet2DModel

from specvideo.video.conditioning import condition, widen_for_hint
from specvideo.video.drafters import FlowDrafter
from specvideo.video.pipeline import SpeculativeVideoPipeline
from specvideo.video.verifier import DiffusionVerifier
from tests import helpers

P, SIZE, N = 2, 16, 3


def moving_square(frames: int = 3) -> np.ndarray:
    """A white square moving right by 2 px per frame on black, (F, H, W, 3) uint8."""
    clip = np.zeros((frames, SIZE, SIZE, 3), np.uint8)
    for i in range(frames):
        clip[i, 5:10, 2 + 2 * i : 7 + 2 * i] = 255
    return clip


def hinted_unet(seed: int = 0) -> UNet2DModel:
    return widen_for_hint(helpers.tiny_unet(SIZE, P, seed, norm_num_groups=4))


def test_widening_keeps_the_function_until_trained():
    unet = helpers.tiny_unet(SIZE, P, 0, norm_num_groups=4)
    wide = widen_for_hint(unet)
    assert wide.config.in_channels == unet.config.in_channels + 3
    x, hint = torch.randn(2, 3 * (P + 1), SIZE, SIZE), torch.randn(2, 3, SIZE, SIZE)
    with torch.no_grad():
        expected = unet(x, 400).sample
        got = wide(torch.cat([x, hint], dim=1), 400).sample
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_condition_appends_the_flow_extrapolation():
    window = torch.from_numpy(moving_square(P)).permute(0, 3, 1, 2)[None].float() / 127.5 - 1  # (1, P, 3, H, W)
    plain, hinted = condition(window, None), condition(window, "flow")
    assert plain.shape == (1, 3 * P, SIZE, SIZE) and hinted.shape == (1, 3 * P + 3, SIZE, SIZE)
    torch.testing.assert_close(hinted[:, : 3 * P], plain)
    torch.testing.assert_close(hinted[:, 3 * P :], FlowDrafter().propose(window, 1)[:, 0])
    # The hint moved the square on: it differs from the last context frame where the square moved.
    assert (hinted[:, 3 * P :] - window[:, -1]).abs().amax() > 1.0


def test_channels_and_hint_must_agree():
    assert DiffusionVerifier(hinted_unet(), hint="flow").num_context_frames == P
    assert DiffusionVerifier(hinted_unet()).num_context_frames == P + 1  # read as 3 frames, no hint
    with pytest.raises(ValueError, match="num_context_frames=2 does not match the UNet"):
        DiffusionVerifier(helpers.tiny_unet(SIZE, P, 0, norm_num_groups=4), num_context_frames=P, hint="flow")
    with pytest.raises(ValueError, match="hint must be one of"):
        DiffusionVerifier(hinted_unet(), hint="depth")
    with pytest.raises(ValueError, match="hint must be one of"):
        condition(torch.zeros(1, P, 3, SIZE, SIZE), "depth")


def test_hinted_pipeline_rejecting_every_draft_is_target_mode(tmp_path):
    pipe = SpeculativeVideoPipeline(DiffusionVerifier(hinted_unet(), hint="flow"), FlowDrafter())

    def run(**kwargs):
        g = torch.Generator().manual_seed(0)
        return pipe(moving_square(), num_frames=5, num_inference_steps=N, generator=g, progress=False, **kwargs)

    target = run(mode="target", output_type="pt")
    rejected = run(threshold=math.inf, num_draft_frames=2, schedule="constant", output_type="pt")
    torch.testing.assert_close(rejected.frames, target.frames)
    assert rejected.stats.unet_evals > target.stats.unet_evals  # the scoring passes came on top
    spec = run()
    assert spec.frames.shape == (5, SIZE, SIZE, 3)
    pipe.save_pretrained(tmp_path / "pipe")
    loaded = SpeculativeVideoPipeline.from_pretrained(tmp_path / "pipe", autocast="off")  # as built: float32
    assert loaded.verifier.hint == "flow" and loaded.verifier.num_context_frames == P
    g = torch.Generator().manual_seed(0)
    again = loaded(moving_square(), num_frames=5, num_inference_steps=N, generator=g, progress=False)
    # the reloaded UNet computes the same function up to float rounding (~3e-6 here), which can flip
    # one uint8 level
    assert np.abs(again.frames.astype(int) - spec.frames.astype(int)).max() <= 1
