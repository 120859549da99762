"""Pretrained features in the sampler stage's loss: representation alignment and a perceptual term.

- **REPA** (Yu et al., ICLR 2025, "Representation Alignment for Generation"): a small projection
  h_phi of the UNet's mid-block features (B, 128, S/8, S/8), computed on the *noisy* frame, is
  regressed onto the encoder's features y* of the *clean* frame by negative cosine similarity per
  cell: L_REPA = -mean_cells cos(h_phi(h_t), y*). The projection is trained with the UNet and
  dropped at export.
- **Perceptual**: the encoder's features of the model's x0 estimate against the clean frame's,
  each cell's channel vector unit-normalised (LPIPS's normalisation, without its learned weights):
  L_perc = mean_cells |n(phi(x0_hat)) - n(phi(x0))|^2, weighted per sample by alpha_bar(t), so the
  near-clean levels, where the detail is determined, count most.

The encoder is EfficientNet-Lite0 with its ImageNet weights (``specvideo.video.pretrained``),
frozen, eval mode, run up to block ``ENCODER_BLOCK`` (112 channels, stride 16) on the frame
upsampled 2x: a grid of S/8 cells, the UNet mid-block's. The yardstick that judges the outputs
(``specvideo.video.pretrained``) reads the same network's *last* convolution (1,280 channels,
stride 32, at a 224 px short side): a different layer, so the loss is not the judge's own measure,
though it shares its network. Say so beside any figure.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from specvideo.video.pretrained import network

ENCODER_BLOCK = 10  # the last 112-channel block of EfficientNet-Lite0 (stride 16)
ENCODER_CHANNELS = 112
UPSAMPLE = 2  # the encoder sees the frame at 2x, so its stride-16 grid is the mid-block's S/8


def encoder_features(frames: torch.Tensor) -> torch.Tensor:
    """(B, 3, S, S) in [-1, 1] -> (B, 112, S/8, S/8): EfficientNet-Lite0 up to ``ENCODER_BLOCK``,
    differentiable in ``frames`` (the network's own weights stay frozen)."""
    net = network().to(frames.device)
    x = F.interpolate(frames, scale_factor=UPSAMPLE, mode="bilinear", align_corners=False)
    x = ((x + 1) * 127.5 - 127) / 128  # the network's inputs: (pixel - 127) / 128
    h = net._swish(net._bn0(net._conv_stem(x)))
    for block in net._blocks[: ENCODER_BLOCK + 1]:
        h = block(h)  # eval mode: no drop-connect
    return h


class Alignment(nn.Module):
    """The REPA projection h_phi (1x1 convolutions, 128 -> 256 -> 256 -> 112) and the two losses."""

    def __init__(self, unet_channels: int = 128, hidden: int = 256):
        super().__init__()
        self.projector = nn.Sequential(
            nn.Conv2d(unet_channels, hidden, 1),
            nn.SiLU(),
            nn.Conv2d(hidden, hidden, 1),
            nn.SiLU(),
            nn.Conv2d(hidden, ENCODER_CHANNELS, 1),
        )

    @contextlib.contextmanager
    def capture(self, unet):
        """Within the block, ``self.captured`` holds the UNet mid-block's last output."""
        handle = unet.mid_block.register_forward_hook(lambda _m, _i, out: setattr(self, "captured", out))
        try:
            yield self
        finally:
            handle.remove()
            self.captured = None

    def repa_loss(self, hidden: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """-mean cosine similarity between h_phi(hidden) (B, 128, s, s) and target (B, 112, s', s')."""
        projected = self.projector(hidden)  # (B, 112, s, s)
        if projected.shape[-2:] != target.shape[-2:]:
            target = F.adaptive_avg_pool2d(target, projected.shape[-2:])
        return -F.cosine_similarity(projected, target, dim=1).mean()


def perceptual_loss(pred: torch.Tensor, clean_features: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """sum_b weight_b * mean_cells |n(phi(pred_b)) - n(phi(x0_b))|^2 / B, n = unit channel vectors;
    pred (B, 3, S, S), clean_features (B, 112, S/8, S/8), weight (B,)."""
    a = F.normalize(encoder_features(pred), dim=1)
    b = F.normalize(clean_features, dim=1)
    per_sample = (a - b).pow(2).sum(dim=1).mean(dim=(1, 2))  # (B,)
    return (weight * per_sample).mean()


def feature_loss(
    alignment: Alignment,
    hidden: torch.Tensor,
    pred: torch.Tensor,
    x0: torch.Tensor,
    alpha_bar: torch.Tensor,
    repa_weight: float,
    perceptual_weight: float,
) -> torch.Tensor:
    """repa_weight * L_REPA + perceptual_weight * L_perc for the x0 estimate ``pred`` of clean frames
    ``x0`` (B, 3, S, S), ``hidden`` the mid-block output of the forward that made ``pred``; a term
    whose weight is 0 costs nothing."""
    with torch.no_grad():
        clean = encoder_features(x0)  # (B, 112, S/8, S/8), y*
    loss = pred.new_zeros(())
    if repa_weight:
        loss = loss + repa_weight * alignment.repa_loss(hidden, clean)
    if perceptual_weight:
        loss = loss + perceptual_weight * perceptual_loss(pred, clean, alpha_bar)
    return loss
