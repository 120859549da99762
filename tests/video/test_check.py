"""The typicality check: it says no to drafts the target does not expect, keeps the draft it accepts,
and reproduces target-only generation when it accepts nothing."""

import math

import numpy as np
import pytest
import torch

from specvideo.video import DiffusionVerifier, FlowDrafter, SpeculativeVideoPipeline
from specvideo.video.conditioning import make_residual, widen_for_hint
from specvideo.video.config import VIDEO_DEFAULTS as D
from specvideo.video.config import default_threshold
from specvideo.video.data import moving_shapes
from specvideo.video.drafters import FrameDrafter
from specvideo.video.rounds import typicality
from specvideo.video.verifier import make_scheduler
from tests.video.test_pipeline import SIZE, P, context_uint8, tiny_unet


class Shifted(FrameDrafter):
    """The flow drafter's frames moved by a quarter of the frame: known-bad drafts."""

    context_frames = 2

    def draft(self, context, k):
        return torch.roll(FlowDrafter().draft(context, k), shifts=(SIZE // 4, SIZE // 4), dims=(-2, -1))


def residual_pipe(drafter: FrameDrafter) -> SpeculativeVideoPipeline:
    """A residual flow-hint verifier whose UNet outputs zero: its x0 is the flow extrapolation, so
    its denoising error on a draft is the draft's distance to that extrapolation."""
    unet = make_residual(widen_for_hint(tiny_unet()))
    verifier = DiffusionVerifier(unet, make_scheduler("ddpm", "sample"), hint="flow", residual=True)
    return SpeculativeVideoPipeline(verifier, drafter)


def shapes(frames=3, seed=2_000_100_003):
    return moving_shapes(seed, frames, SIZE)  # (F, H, W, 3) uint8, moving


def test_typicality_is_the_reference_error_over_the_draft_error():
    reference, error = torch.tensor([[2.0, 4.0]]), torch.tensor([[1.0, 8.0], [4.0, 4.0]])
    assert typicality(reference, error).tolist() == [pytest.approx(1.25), pytest.approx(0.75)]
    assert torch.isfinite(typicality(reference, torch.zeros(1, 2))).all()  # a perfect draft


def test_the_fold_scores_drafts_far_easier_than_real_footage_low_as_well():
    reference, error = torch.tensor([[1.0]]), torch.tensor([[2.0], [1.0], [0.5], [0.125]])  # r 0.5, 1, 2, 8
    assert typicality(reference, error).tolist() == [0.5, 1.0, 2.0, 8.0]  # one-sided: r itself
    folded = typicality(reference, error, center=2.0)  # min(r, 4 / r): the band [tau, 4 / tau]
    assert folded.tolist() == [0.5, 1.0, 2.0, 0.5]
    # tau 0.5 keeps r in [0.5, 8]; tau 1 keeps [1, 4]: the draft 8x easier is rejected
    assert (folded >= 1.0).tolist() == [False, True, True, False]


def test_the_two_sided_check_rejects_the_targets_own_hint():
    # the verifier's x0 is the flow extrapolation itself: a flow draft has (almost) no error, r is
    # huge; one-sided it passes, folded it is far outside the band and rejected
    gen = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    pipe = residual_pipe(FlowDrafter())
    one_sided = pipe(shapes(), num_frames=4, threshold=1.0, check_center=math.inf, generator=gen(), progress=False)
    assert one_sided.stats.accepted == one_sided.stats.drafted > 0
    folded = pipe(shapes(), num_frames=4, threshold=1.0, check_center=2.0, generator=gen(), progress=False)
    assert folded.stats.accepted == 0 and folded.stats.drafted > 0
    with pytest.raises(ValueError, match="check_center must be a number > 0"):
        pipe(shapes(), num_frames=1, check_center=0.0, progress=False)


def test_the_check_rejects_known_bad_drafts_and_accepts_the_expected_ones():
    # tau 1, one-sided: as typical of the target as the clip's real frame, or more
    gen = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    kw = dict(num_frames=6, threshold=1.0, check_center=math.inf, progress=False)
    good = residual_pipe(FlowDrafter())(shapes(), generator=gen(), **kw)
    assert good.stats.accepted == good.stats.drafted > 0  # the target expects the flow extrapolation
    bad = residual_pipe(Shifted())(shapes(), generator=gen(), **kw)
    first = [s for s in bad.stats.scored_drafts if s.position == 0]  # drafted from frames it accepted
    assert len(first) >= 3 and not any(s.accepted for s in first)
    assert max(s.score for s in first) < 1 <= min(s.score for s in good.stats.scored_drafts)


def test_an_accepted_frame_is_the_draft_itself():
    pipe = SpeculativeVideoPipeline(DiffusionVerifier(tiny_unet()), FlowDrafter())
    out = pipe(
        context_uint8(), num_frames=5, threshold=-math.inf, generator=torch.Generator().manual_seed(1),
        output_type="pt", progress=False,
    )
    assert all(out.stats.frame_accepted)
    for frame, draft in zip(out.frames, out.drafts):
        torch.testing.assert_close(frame, draft, rtol=0, atol=0)
    # one UNet evaluation per draft at the one default level, plus the reference frame's
    assert out.stats.unet_evals == len(D.check_levels) * (out.stats.drafted + 1)


def test_infinite_threshold_is_target_mode_frame_for_frame():
    pipe = SpeculativeVideoPipeline(DiffusionVerifier(tiny_unet()), FlowDrafter())

    def run(**kwargs):
        return pipe(
            context_uint8(), num_frames=6, num_inference_steps=3, generator=torch.Generator().manual_seed(2),
            output_type="pt", progress=False, **kwargs,
        )

    target, spec = run(mode="target"), run(threshold=math.inf, num_draft_frames=3)
    assert spec.stats.accepted == 0 and spec.stats.drafted > 0
    torch.testing.assert_close(spec.frames, target.frames, rtol=0, atol=0)


def test_the_reference_needs_one_more_frame_and_falls_back_without_it():
    pipe = SpeculativeVideoPipeline(DiffusionVerifier(tiny_unet()), FlowDrafter())
    long, short = context_uint8(frames=5), context_uint8(frames=P)
    for context in (long, short):  # P frames: the oldest repeated to condition the reference frame
        out = pipe(context, num_frames=3, generator=torch.Generator().manual_seed(0), progress=False)
        assert np.isfinite([s.score for s in out.stats.scored_drafts]).all()


def test_each_metric_has_its_default_threshold_and_range():
    assert default_threshold("typicality") == D.tau and default_threshold("ssim") == 0.9
    pipe = SpeculativeVideoPipeline(DiffusionVerifier(tiny_unet()), FlowDrafter())
    with pytest.raises(ValueError, match=r"outside the typicality range \[0, inf\)"):
        pipe(context_uint8(), num_frames=1, threshold=-0.5, progress=False)
    ssim = pipe(context_uint8(), num_frames=2, metric="ssim", progress=False)  # tau 0.9, refined frames
    assert all(-1 <= s.score <= 1 for s in ssim.stats.scored_drafts)


@pytest.mark.parametrize("kind", ["sample", "epsilon", "v_prediction"])
def test_the_denoising_error_reads_every_prediction_type_as_x0(kind):
    # a model that predicts the truth exactly, in each parameterisation, gives back x0 itself
    verifier = DiffusionVerifier(tiny_unet(), make_scheduler("ddpm", kind))
    g = torch.Generator().manual_seed(0)
    x0 = torch.rand(3, 3, SIZE, SIZE, generator=g) * 2 - 1
    noise = torch.randn(3, 3, SIZE, SIZE, generator=g)
    t = torch.tensor([50, 300, 900])
    sample = verifier._noiser.add_noise(x0, noise, t)
    alpha = verifier._noiser.alphas_cumprod[t][:, None, None, None]
    output = {"sample": x0, "epsilon": noise, "v_prediction": alpha.sqrt() * noise - (1 - alpha).sqrt() * x0}
    torch.testing.assert_close(verifier._as_x0(output[kind], sample, t), x0, atol=1e-4, rtol=1e-4)
