"""The pretrained yardstick is validated before it is trusted: on a real held-out clip and on moving
shapes the truth ranks ahead of frozen, blurred, shifted and noised copies, each on the measure
meant to see it; and the network is ImageNet's (it names a real photograph)."""

import cv2
import numpy as np
import pytest
import torch

from specvideo.video import pretrained
from specvideo.video.data import VALIDATION_SEEDS, moving_shapes
from specvideo.video.io import frames_to_tensor
from specvideo.video.real import evaluation_frames

torch.set_num_threads(1)


def clips() -> dict[str, np.ndarray]:
    real = evaluation_frames("validation", 11, max_side=128, opencv=False)[0].frames  # bikes, held out
    return {"real": real, "shapes": moving_shapes(VALIDATION_SEEDS[0], 11, 64)}


def copies(frames: np.ndarray) -> dict[str, torch.Tensor]:
    x = frames_to_tensor(frames)
    g = torch.Generator().manual_seed(0)
    return {
        "frozen": x[:1].expand_as(x),
        "blurred": frames_to_tensor(np.stack([cv2.GaussianBlur(f, (0, 0), 2.0) for f in frames])),
        "shifted": torch.roll(x, shifts=(x.shape[-2] // 8, x.shape[-1] // 8), dims=(-2, -1)),
        "noised": (x + 0.15 * torch.randn(x.shape, generator=g)).clamp(-1, 1),
    }


@pytest.mark.parametrize("name", ["real", "shapes"])
def test_the_truth_ranks_ahead_of_every_damaged_copy(name):
    frames = clips()[name]
    truth = pretrained.PretrainedRecord.of(frames_to_tensor(frames[1:]))  # frames 1..10
    reference = pretrained.PretrainedRecord.of(frames_to_tensor(frames[:-1]))  # other true frames
    own = pretrained.score(truth, truth, reference)
    assert own.fidelity == 0 and own.motion == 0
    worse = {how: pretrained.score(pretrained.PretrainedRecord.of(v), truth, reference) for how, v in copies(frames[1:]).items()}
    assert worse["frozen"].kid_time > own.kid_time + 1, (worse["frozen"], own)
    assert worse["frozen"].motion > 0.5 * truth.magnitudes.mean()  # it lacks all the truth's motion
    for how in ("blurred", "noised"):  # unreal frame by frame
        assert worse[how].kid_frames > 1.5 * own.kid_frames + 1, (how, worse[how], own)
    for how, s in worse.items():  # every copy is farther from the true frames than they are
        assert s.fidelity > 0.1, (how, s)
    assert worse["shifted"].fidelity > 0.3


def test_the_network_is_imagenets():
    from skimage import data

    cat = torch.from_numpy(data.chelsea()).permute(2, 0, 1)[None].float() / 127.5 - 1  # skimage's cat
    x = torch.nn.functional.interpolate(cat, size=(224, 224), mode="bilinear", antialias=True)
    with torch.inference_mode():
        top = pretrained.network()(((x + 1) * 127.5 - 127) / 128).argmax(1).item()
    assert 281 <= top <= 287  # ImageNet's domestic cats (tabby 281 ... Egyptian cat 285)


def test_measures_check_their_inputs():
    with pytest.raises(ValueError, match="frames must be \\(F, 3, H, W\\)"):
        pretrained.feature_maps(torch.zeros(2, 1, 32, 32))
    with pytest.raises(ValueError, match="motion needs at least 2 frames"):
        pretrained.flow_magnitudes(torch.zeros(1, 3, 32, 32))
    with pytest.raises(ValueError, match="maps of one shape"):
        pretrained.fidelity(torch.zeros(2, 7, 7, 4), torch.zeros(3, 7, 7, 4))
