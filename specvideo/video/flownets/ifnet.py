"""RIFE v4.2x's IFNet (Huang et al., "Real-Time Intermediate Flow Estimation for Video Frame
Interpolation", ECCV 2022): the flows from an intermediate time t in [0, 1] to both input frames.

Five IFBlocks, coarse (1/16) to fine, each reading both frames warped by the flows so far, their
encoded features, t and the previous block's mask and features, and adding a flow correction. The
parameter names follow the v4.2x release, so its ``flownet.pkl`` loads as it is.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from specvideo.video.warp import backward_warp

SCALES = (16, 8, 4, 2, 1)
MULTIPLE = 64  # the coarsest block sees 1/16 and halves twice more


def conv(a: int, b: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(a, b, 3, stride, 1), nn.LeakyReLU(0.2))


class Head(nn.Module):
    """(B, 3, H, W) -> (B, 4, H, W) features that every block reads, warped."""

    def __init__(self):
        super().__init__()
        self.cnn0 = nn.Conv2d(3, 16, 3, 2, 1)
        self.cnn1 = nn.Conv2d(16, 16, 3, 1, 1)
        self.cnn2 = nn.Conv2d(16, 16, 3, 1, 1)
        self.cnn3 = nn.ConvTranspose2d(16, 4, 4, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.leaky_relu(self.cnn0(x), 0.2)
        x = F.leaky_relu(self.cnn1(x), 0.2)
        return self.cnn3(F.leaky_relu(self.cnn2(x), 0.2))


class ResConv(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, 1, 1)
        self.beta = nn.Parameter(torch.ones(1, c, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(self.conv(x) * self.beta + x, 0.2)


class IFBlock(nn.Module):
    """Inputs at 1/scale -> (flow (B, 4), mask logit (B, 1), features (B, 8)) at full size."""

    def __init__(self, in_channels: int, c: int):
        super().__init__()
        self.conv0 = nn.Sequential(conv(in_channels, c // 2, 2), conv(c // 2, c, 2))
        self.convblock = nn.Sequential(*[ResConv(c) for _ in range(8)])
        self.lastconv = nn.Sequential(nn.ConvTranspose2d(c, 4 * 13, 4, 2, 1), nn.PixelShuffle(2))

    def forward(self, x: torch.Tensor, flow: torch.Tensor | None, scale: int):
        x = F.interpolate(x, scale_factor=1 / scale, mode="bilinear", align_corners=False)
        if flow is not None:
            flow = F.interpolate(flow, scale_factor=1 / scale, mode="bilinear", align_corners=False) / scale
            x = torch.cat([x, flow], dim=1)
        out = self.lastconv(self.convblock(self.conv0(x)))
        out = F.interpolate(out, scale_factor=scale, mode="bilinear", align_corners=False)  # (B, 13, H, W)
        return out[:, :4] * scale, out[:, 4:5], out[:, 5:]


class IFNet(nn.Module):
    """(B, 3, H, W) frames in [0, 1] at t = 0 and t = 1, H and W multiples of 64, and t ->
    (flow (B, 4, H, W): t->0 in channels 0-1, t->1 in 2-3, pixels; mask (B, 1, H, W) in [0, 1], the
    weight of frame 0's warp in the blend)."""

    def __init__(self):
        super().__init__()
        self.block0 = IFBlock(7 + 8, c=192)
        self.block1 = IFBlock(8 + 4 + 8 + 8, c=128)
        self.block2 = IFBlock(8 + 4 + 8 + 8, c=96)
        self.block3 = IFBlock(8 + 4 + 8 + 8, c=64)
        self.block4 = IFBlock(8 + 4 + 8 + 8, c=32)
        self.encode = Head()

    def forward(self, img0: torch.Tensor, img1: torch.Tensor, timestep: float) -> tuple[torch.Tensor, torch.Tensor]:
        t = img0.new_full((img0.shape[0], 1, *img0.shape[-2:]), float(timestep))  # (B, 1, H, W)
        f0, f1 = self.encode(img0), self.encode(img1)  # (B, 4, H, W) each
        flow, mask, feat = self.block0(torch.cat([img0, img1, f0, f1, t], 1), None, SCALES[0])
        blocks = (self.block1, self.block2, self.block3, self.block4)
        for block, scale in zip(blocks, SCALES[1:]):
            w0, w1 = backward_warp(img0, -flow[:, :2]), backward_warp(img1, -flow[:, 2:4])
            wf0, wf1 = backward_warp(f0, -flow[:, :2]), backward_warp(f1, -flow[:, 2:4])
            delta, mask, feat = block(torch.cat([w0, w1, wf0, wf1, t, mask, feat], 1), flow, scale)
            flow = flow + delta  # (B, 4, H, W)
        return flow, torch.sigmoid(mask)
