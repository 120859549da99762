"""The realism and temporal measures are validated before they are trusted: KID ranks other true
frames of a clip ahead of blurred, noised and frozen (copy-last-frame) versions of them, on shapes
and on a real held-out clip; the warp error ranks the truth ahead of a time-shuffled copy."""

import cv2
import numpy as np
import pytest
import torch

from specvideo.video.data import VALIDATION_SEEDS, moving_shapes
from specvideo.video.io import frames_to_tensor
from specvideo.video.metrics import laplacian_energy, sharpness_ratio
from specvideo.video.real import evaluation_frames
from specvideo.video.realism import KIDConfig, kid, kid_features, standardise, warp_error

FAST = KIDConfig(max_patches=2048, subsets=10, subset_size=500)


def clips():
    real = evaluation_frames("validation", 24, max_side=128, opencv=False)[0].frames  # bikes, held out
    return {"shapes": moving_shapes(VALIDATION_SEEDS[0], 24, 64), "real": real}


def degraded(frames: np.ndarray) -> dict[str, torch.Tensor]:
    x = frames_to_tensor(frames)
    g = torch.Generator().manual_seed(0)
    blurred = np.stack([cv2.GaussianBlur(f, (0, 0), 1.5) for f in frames])
    return {
        "blurred": frames_to_tensor(blurred),
        "noised": (x + 0.1 * torch.randn(x.shape, generator=g)).clamp(-1, 1),
        "frozen": x[:1].expand_as(x),
    }


@pytest.mark.parametrize("name", ["shapes", "real"])
def test_kid_ranks_other_true_frames_ahead_of_degraded_copies(name):
    frames = clips()[name]
    reference, other = frames[0::2], frames[1::2]  # interleaved: the same content, other frames
    truth = kid([frames_to_tensor(other)], [frames_to_tensor(reference)], FAST)
    for how, video in degraded(other).items():
        worse = kid([video], [frames_to_tensor(reference)], FAST)
        assert worse > truth + 50, f"{name}: {how} {worse:.1f} vs truth {truth:.1f}"


def test_warp_error_ranks_the_truth_ahead_of_a_shuffled_copy():
    for name, frames in clips().items():
        x = frames_to_tensor(frames)
        shuffled = x[torch.randperm(len(x), generator=torch.Generator().manual_seed(0))]
        assert warp_error(x) < 0.8 * warp_error(shuffled), name
        assert warp_error(x[:1].expand_as(x)) == 0.0  # a frozen video is perfectly consistent


def test_kid_of_a_set_with_itself_is_near_zero_and_checks_its_input():
    x = torch.randn(400, 8, generator=torch.Generator().manual_seed(0))
    y = torch.randn(400, 8, generator=torch.Generator().manual_seed(1))
    assert abs(kid_features(x, y, FAST)) < 0.05 < kid_features(x + 1.0, y, FAST)
    with pytest.raises(ValueError, match="must be \\(F >= 2, 3, H, W\\)"):
        kid([torch.zeros(1, 3, 32, 32)], [torch.zeros(2, 3, 32, 32)])
    with pytest.raises(ValueError, match="smaller than the 16px patches"):
        kid([torch.zeros(2, 3, 8, 32)], [torch.zeros(2, 3, 32, 32)])


def test_sharpness_falls_with_blur():
    x = frames_to_tensor(clips()["shapes"])
    blurred = degraded(clips()["shapes"])["blurred"]
    assert sharpness_ratio(x, x) == pytest.approx(1.0)
    assert sharpness_ratio(blurred, x) < 0.6
    assert laplacian_energy(x).shape == (len(x),)


def test_a_feature_the_reference_barely_uses_cannot_blow_kid_up():
    g = torch.Generator().manual_seed(0)
    y = torch.randn(500, 8, generator=g)
    y[:, 3] = 1e-8 * torch.randn(500, generator=g)  # a ReLU a static reference (almost) never fires
    x = torch.randn(500, 8, generator=g)
    x[:, 3] = 0.01
    xs, ys = standardise(x, y, std_floor=0.1)
    assert xs[:, 3].abs().max() < 0.2  # 0.01 over a floored spread of ~0.1, not over 1e-8
    assert torch.allclose(xs[:, 0], (x[:, 0] - y[:, 0].mean()) / y[:, 0].std())  # others untouched
