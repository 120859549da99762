"""SpyNet (Ranjan & Black, "Optical Flow Estimation using a Spatial Pyramid Network", CVPR 2017).

Six levels of a 2x image pyramid; at each level a five-layer 7x7 conv net reads the first frame,
the second frame warped by the upsampled coarser flow, and that flow, and adds a correction. The
parameter names follow BasicVSR's copy, so its weights (``params.spynet.*``) load as they are.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from specvideo.video.warp import backward_warp

LEVELS = 6


class BasicModule(nn.Module):
    """One pyramid level: (first, warped second, flow) 8 channels -> (B, 2, h, w) flow correction."""

    def __init__(self):
        super().__init__()
        widths = (8, 32, 64, 32, 16, 2)
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(widths, widths[1:])):
            layers.append(nn.Conv2d(a, b, 7, padding=3))
            if i < len(widths) - 2:
                layers.append(nn.ReLU())
        self.basic_module = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.basic_module(x)


class SpyNet(nn.Module):
    """(B, 3, H, W) RGB pair in [0, 1] -> flow on the first frame's grid into the second, in pixels."""

    def __init__(self):
        super().__init__()
        self.basic_module = nn.ModuleList([BasicModule() for _ in range(LEVELS)])
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))

    def forward(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        H, W = first.shape[-2:]
        # 5 halvings need multiples of 32, and the coarsest level at least 2 px (64 at full size)
        Hs, Ws = (max(64, math.ceil(n / 32) * 32) for n in (H, W))
        first, second = (F.interpolate(x, size=(Hs, Ws), mode="bilinear", align_corners=False) for x in (first, second))
        flow = F.interpolate(self._pyramid_flow(first, second), size=(H, W), mode="bilinear", align_corners=False)
        return flow * torch.tensor([W / Ws, H / Hs], device=flow.device, dtype=flow.dtype).view(1, 2, 1, 1)

    def _pyramid_flow(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        a, b = [(first - self.mean) / self.std], [(second - self.mean) / self.std]
        for _ in range(LEVELS - 1):
            a.insert(0, F.avg_pool2d(a[0], 2, 2, count_include_pad=False))
            b.insert(0, F.avg_pool2d(b[0], 2, 2, count_include_pad=False))
        B, _, h, w = a[0].shape
        flow = a[0].new_zeros(B, 2, h // 2, w // 2)  # (B, 2, h/2, w/2)
        for level, module in enumerate(self.basic_module):
            up = F.interpolate(flow, scale_factor=2, mode="bilinear", align_corners=True) * 2.0
            h, w = a[level].shape[-2:]
            up = F.pad(up, (0, w - up.shape[-1], 0, h - up.shape[-2]), mode="replicate")  # odd sizes
            warped = backward_warp(b[level], -up)  # the second frame sampled at p + flow
            flow = module(torch.cat([a[level], warped, up], dim=1)) + up  # (B, 2, h_l, w_l)
        return flow


def spynet_state_dict(checkpoint: dict) -> dict[str, torch.Tensor]:
    """BasicVSR's checkpoint {"params": {"spynet.*": ...}} -> SpyNet's own state dict."""
    params = checkpoint.get("params", checkpoint)
    state = {k.removeprefix("spynet."): v for k, v in params.items() if k.startswith("spynet.")}
    if not state:
        raise ValueError("the checkpoint holds no spynet.* parameters")
    return state
