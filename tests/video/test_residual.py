"""The residual verifier: x0 = flow warp + UNet(...), output layer zero-initialised."""

import numpy as np
import pytest
import torch

from specvideo.video.conditioning import make_residual, widen_for_hint
from specvideo.video.drafters import FlowDrafter
from specvideo.video.pipeline import SpeculativeVideoPipeline
from specvideo.video.verifier import DiffusionVerifier, default_scheduler
from tests import helpers
from tests.video.test_hint import SIZE, P, moving_square


def residual_verifier(seed: int = 0) -> DiffusionVerifier:
    unet = make_residual(widen_for_hint(helpers.tiny_unet(SIZE, P, seed, norm_num_groups=4)))
    return DiffusionVerifier(unet, hint="flow", residual=True)


def window() -> torch.Tensor:
    from specvideo.video.io import frames_to_tensor

    return frames_to_tensor(moving_square(P))[None]  # (1, P, 3, H, W)


def test_untrained_residual_verifier_is_the_flow_extrapolation():
    verifier = residual_verifier()
    flow = FlowDrafter().propose(window(), 1)[:, 0]  # (1, 3, H, W)
    cond = verifier.condition(window())
    g = torch.Generator().manual_seed(0)
    generated = verifier.generate(cond, 3, torch.randn(1, 3, SIZE, SIZE, generator=g))
    torch.testing.assert_close(generated, flow)
    refined = verifier.refine(
        cond, torch.zeros_like(flow), 0.5, 1, torch.randn(1, 3, SIZE, SIZE, generator=g)
    )
    torch.testing.assert_close(refined, flow)  # whatever is drafted, the untrained model returns the warp


def test_residual_output_is_added_to_the_hint():
    verifier = residual_verifier()
    with torch.no_grad():
        verifier.unet.conv_out.bias.fill_(0.25)
    plain = DiffusionVerifier(verifier.unet, hint="flow")
    cond = verifier.condition(window())
    noise = torch.randn(1, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(1))
    with_hint = verifier.generate(cond, 1, noise)
    without = plain.generate(cond, 1, noise)
    torch.testing.assert_close(with_hint, (without + cond[:, -3:]).clamp(-1, 1))


def test_residual_needs_a_hint_and_x0_prediction():
    unet = widen_for_hint(helpers.tiny_unet(SIZE, P, 0, norm_num_groups=4))
    with pytest.raises(ValueError, match="residual verifier"):
        DiffusionVerifier(helpers.tiny_unet(SIZE, P, 0, norm_num_groups=4), residual=True)
    with pytest.raises(ValueError, match="prediction_type='sample'"):
        DiffusionVerifier(unet, default_scheduler("epsilon"), hint="flow", residual=True)


def test_residual_pipeline_round_trips(tmp_path):
    pipe = SpeculativeVideoPipeline(residual_verifier(), FlowDrafter())
    pipe.save_pretrained(tmp_path / "pipe")
    loaded = SpeculativeVideoPipeline.from_pretrained(tmp_path / "pipe")
    assert loaded.verifier.residual
    run = dict(num_frames=3, num_inference_steps=2, progress=False)
    target = loaded(moving_square(), mode="target", generator=torch.Generator().manual_seed(0), **run)
    draft = loaded(moving_square(), mode="draft", **run)
    # Untrained, the residual model's first frame from noise is the flow drafter's first frame.
    np.testing.assert_array_equal(target.frames[0], draft.frames[0])
    spec = loaded(moving_square(), generator=torch.Generator().manual_seed(0), metric="ssim", **run)
    assert spec.stats.acceptance_rate == 1.0  # and the first draft of every round needs no correction


def test_true_context_check_accepts_the_warp_and_flags_a_copy():
    """An untrained residual verifier returns the flow warp: on a round drafted from the true context
    it scores the flow drafter's first draft 1 and a copy of the last frame (the square moves) lower."""
    from benchmarks.video.local import score_round
    from specvideo.video.drafters import CopyLastDrafter

    verifier, context = residual_verifier(), window()[0]  # (P, 3, H, W)
    flow = FlowDrafter().propose(context[None], 2)[0]  # (2, 3, H, W)
    copy = CopyLastDrafter().propose(context[None], 2)[0]
    flow_scores = score_round(verifier, context, flow, 0.6, "ssim", seed=0)
    copy_scores = score_round(verifier, context, copy, 0.6, "ssim", seed=0)
    assert flow_scores[0] == pytest.approx(1.0, abs=1e-5)
    assert copy_scores[0] < flow_scores[0] - 0.05
