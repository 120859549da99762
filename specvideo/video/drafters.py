"""Frame drafters: cheap guesses of the next k frames, to be checked by the diffusion verifier.

Every drafter has ``propose(context, k)``: ``context`` is (B, P, 3, H, W) float in [-1, 1], the
most recent P frames, oldest first; the result is (B, k, 3, H, W) in [-1, 1], frame i drafted
from the context and the drafter's own frames before it. Drafters hold no state between calls
and use no randomness.

A drafter needs ``context_frames`` frames. Given fewer, it makes do with what it has: the linear
and flow drafters fall back to copying the last frame when P = 1, the learned drafter repeats the
oldest frame to fill its window. Given more, it uses the most recent ones.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from diffusers import ConfigMixin, ModelMixin
from diffusers.configuration_utils import register_to_config
from einops import rearrange, repeat
from torch import nn

from specvideo.video.flownets import FLOW_NETS, load_flow_net
from specvideo.video.warp import backward_warp, forward_splat

# "flow:<net>": the flow drafter along a pretrained network's flow (FlowConfig.flow_model)
DRAFTERS = ("copy", "linear", "flow", "learned", *(f"flow:{net}" for net in FLOW_NETS))


class FrameDrafter(ABC):
    """The shared interface: validate, then draft k frames."""

    context_frames: int = 1

    def propose(self, context: torch.Tensor, k: int, skip: int = 0) -> torch.Tensor:
        """(B, P, 3, H, W) context in [-1, 1] -> (B, k, 3, H, W) drafts in [-1, 1]: the frames
        skip + 1 .. skip + k after the context (``skip`` frames already emitted since it ends)."""
        check_context(context)
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"draft length k must be an int >= 1, got {k!r}")
        if not isinstance(skip, int) or skip < 0:
            raise ValueError(f"skip must be an int >= 0, got {skip!r}")
        with torch.no_grad():
            return self.draft_ahead(context[:, -self.context_frames :], k, skip)

    @abstractmethod
    def draft(self, context: torch.Tensor, k: int) -> torch.Tensor:
        """Draft k frames from a validated context of at most ``context_frames`` frames."""

    def draft_ahead(self, context: torch.Tensor, k: int, skip: int) -> torch.Tensor:
        """Frames skip + 1 .. skip + k after the context (a drafter that extrapolates in closed form
        computes only those)."""
        return self.draft(context, skip + k)[:, skip:] if skip else self.draft(context, k)


def check_context(context: torch.Tensor) -> None:
    if not isinstance(context, torch.Tensor):
        raise ValueError(f"context must be a torch.Tensor (B, P, 3, H, W), got {type(context).__name__}")
    if context.ndim != 5 or context.shape[2] != 3 or min(context.shape) < 1:
        raise ValueError(f"context must be (B, P, 3, H, W) with P >= 1, got shape {tuple(context.shape)}")
    if not context.is_floating_point():
        raise ValueError(
            f"context must be a float tensor in [-1, 1], got {context.dtype} of shape {tuple(context.shape)}"
        )


def autoregress(step: Callable[[torch.Tensor], torch.Tensor], context: torch.Tensor, k: int) -> torch.Tensor:
    """Apply ``step`` (window (B, P, 3, H, W) -> next frame (B, 3, H, W)) k times, sliding the window."""
    window, frames = context, []
    for _ in range(k):
        frame = step(window).clamp(-1.0, 1.0)  # (B, 3, H, W)
        frames.append(frame)
        window = torch.cat([window[:, 1:], frame[:, None]], dim=1)  # (B, P, 3, H, W)
    return torch.stack(frames, dim=1)  # (B, k, 3, H, W)


class CopyLastDrafter(FrameDrafter):
    """Repeats the last frame: the zero-motion baseline."""

    def draft(self, context: torch.Tensor, k: int) -> torch.Tensor:
        return repeat(context[:, -1], "b c h w -> b k c h w", k=k).clone()  # (B, k, 3, H, W)


class LinearDrafter(FrameDrafter):
    """Per-pixel linear extrapolation x_{t+1} = clamp(2 x_t - x_{t-1}) on its own outputs.

    Exact for pixels whose intensity changes at a constant rate (fades); for moving edges it
    doubles the last change, so it is a baseline, not a motion model. Copies when P = 1.
    """

    context_frames = 2

    def draft(self, context: torch.Tensor, k: int) -> torch.Tensor:
        if context.shape[1] < 2:
            return CopyLastDrafter().draft(context, k)
        return autoregress(lambda w: 2 * w[:, -1] - w[:, -2], context, k)  # (B, k, 3, H, W)


@dataclass(frozen=True)
class FlowConfig:
    """Optical-flow drafter settings.

    flow_model: where the motion comes from: OpenCV's "dis" (cv2.DISOpticalFlow) or "farneback"
               (cv2.calcOpticalFlowFarneback), or a pretrained network (``flownets.FLOW_NETS``):
               "spynet", "rife" or "gmflow", run on the context's device.
    preset:    DIS preset: "ultrafast", "fast" or "medium".
    finest_scale: DIS pyramid level where refinement stops; 0 = full resolution. OpenCV's presets
               stop at 1 or 2 (faster), which is too coarse for the small frames we draft.
    sharpness: softmax-splatting weight per pixel of motion. Where several source pixels land on
               one target pixel, each counts exp(sharpness * |v|): faster pixels win, a stand-in
               for depth (nearer things move faster under camera motion; moving objects occlude a
               static background). 0 gives the plain average.
    """

    flow_model: str = "dis"
    preset: str = "medium"
    finest_scale: int = 0
    sharpness: float = 4.0

    def __post_init__(self) -> None:
        if self.flow_model not in FLOW_MODELS:
            raise ValueError(f"flow_model must be one of {FLOW_MODELS}, got {self.flow_model!r}")
        if self.preset not in _DIS_PRESETS:
            raise ValueError(f"DIS preset must be one of {tuple(_DIS_PRESETS)}, got {self.preset!r}")
        if self.finest_scale < 0:
            raise ValueError(f"finest_scale must be >= 0, got {self.finest_scale}")
        if not (math.isfinite(self.sharpness) and self.sharpness >= 0):
            raise ValueError(f"sharpness must be finite and >= 0, got {self.sharpness}")


FLOW_MODELS = ("dis", "farneback", *FLOW_NETS)
_DIS_PRESETS = {
    "ultrafast": cv2.DISOPTICAL_FLOW_PRESET_ULTRAFAST,
    "fast": cv2.DISOPTICAL_FLOW_PRESET_FAST,
    "medium": cv2.DISOPTICAL_FLOW_PRESET_MEDIUM,
}


class FlowDrafter(FrameDrafter):
    """Constant-velocity extrapolation along dense optical flow.

    The velocity v of every pixel of the last frame x_t is the negated flow from x_t back to
    x_{t-1} (flow on x_t's own grid). Draft i moves each pixel of x_t to p + i v(p) by bilinear
    forward splatting (softmax-weighted, see FlowConfig.sharpness), so pixels keep their velocity
    from draft to draft: the drafter's own previous output moved once more, without re-sampling
    it, so sub-pixel motion does not blur or drift over k. Pixels that nothing lands on (disoccluded
    background) are filled from the backward warp x_t(p - i v(p)), which samples the texture just
    behind a moving object. Copies when P = 1.
    """

    context_frames = 2

    def __init__(self, config: FlowConfig | None = None):
        self.config = config or FlowConfig()

    def draft(self, context: torch.Tensor, k: int) -> torch.Tensor:
        return self.draft_ahead(context, k, 0)

    def draft_ahead(self, context: torch.Tensor, k: int, skip: int) -> torch.Tensor:
        """Frames skip + 1 .. skip + k: the last frame moved by (skip + i) times its velocity."""
        if context.shape[1] < 2:
            return CopyLastDrafter().draft(context, k)
        last = context[:, -1].float()  # (B, 3, H, W)
        velocity = self.velocity(context[:, -2], context[:, -1]).to(last.device)  # (B, 2, H, W)
        weight = self.splat_weight(velocity)  # (B, 1, H, W)
        frames = [self.extrapolate(last, velocity * i, weight) for i in range(skip + 1, skip + k + 1)]
        return torch.stack(frames, dim=1).to(context.dtype)  # (B, k, 3, H, W)

    def velocity(self, previous: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) frames -> (B, 2, H, W) per-pixel (dx, dy) motion of ``last``, in pixels."""
        if self.config.flow_model in FLOW_NETS:
            return -load_flow_net(self.config.flow_model, last.device).backward_flow(last, previous)
        flows = [self._flow(_gray_u8(a), _gray_u8(b)) for a, b in zip(last, previous)]
        return -torch.from_numpy(np.stack(flows)).permute(0, 3, 1, 2)  # (B, 2, H, W)

    def _flow(self, source: np.ndarray, target: np.ndarray) -> np.ndarray:
        """(H, W) uint8 pair -> (H, W, 2) flow f with source(p) ~ target(p + f(p))."""
        if self.config.flow_model == "farneback":
            # pyramid scale 0.5, 3 levels, 9 px window, 3 iterations, poly_n 5, poly_sigma 1.1
            return cv2.calcOpticalFlowFarneback(source, target, None, 0.5, 3, 9, 3, 5, 1.1, 0)
        dis = cv2.DISOpticalFlow_create(_DIS_PRESETS[self.config.preset])
        dis.setFinestScale(self.config.finest_scale)
        return dis.calc(source, target, None)

    def splat_weight(self, velocity: torch.Tensor) -> torch.Tensor:
        """(B, 2, H, W) -> (B, 1, H, W) softmax-splatting weights exp(sharpness |v|), max 1, min e^-50."""
        speed = velocity.norm(dim=1, keepdim=True)  # (B, 1, H, W)
        top = speed.amax(dim=(-2, -1), keepdim=True)  # (B, 1, 1, 1)
        return torch.exp((self.config.sharpness * (speed - top)).clamp(min=-50.0))

    def confidence(
        self, previous: torch.Tensor, last: torch.Tensor, velocity: torch.Tensor, weight: torch.Tensor
    ) -> torch.Tensor:
        """(B, 1, H, W) in [0, 1]: how far to trust ``extrapolate(last, velocity, weight)``, per pixel
        of the extrapolated frame. A pixel p of ``last`` moving by v(p) came from p - v(p) in
        ``previous``; the forward flow f (``previous`` -> ``last``) there should be v(p) again. The
        forward-backward test of occlusion-aware flow (Meister et al., UnFlow, 2018), made soft:
        exp(-|f(p - v) - v|^2 / (0.01 (|v|^2 + |f|^2) + 0.5)) per source pixel, splatted along v
        like the pixels themselves, times the splat's coverage (0 where nothing lands: disocclusion).
        A velocity scaled away from the true motion (a copy, a doubled step) scores low where things move."""
        forward = -self.velocity(last, previous).to(velocity.device)  # (B, 2, H, W) on previous's grid
        back = backward_warp(forward, velocity)  # (B, 2, H, W): f(p - v(p))
        error = (back - velocity).pow(2).sum(dim=1, keepdim=True)  # (B, 1, H, W)
        scale = 0.01 * (velocity.pow(2).sum(dim=1, keepdim=True) + back.pow(2).sum(dim=1, keepdim=True)) + 0.5
        agree = torch.exp(-error / scale)  # (B, 1, H, W) on last's grid
        landed, coverage = forward_splat(agree, velocity, weight)  # (B, 1, H, W) each, on the next frame's grid
        return (landed * coverage.clamp(max=1.0)).clamp(0.0, 1.0)

    def extrapolate(
        self, frame: torch.Tensor, displacement: torch.Tensor, weight: torch.Tensor
    ) -> torch.Tensor:
        """Move (B, 3, H, W) pixels by (B, 2, H, W) displacements; fill holes by backward warping."""
        splat, coverage = forward_splat(frame, displacement, weight)  # (B, 3, H, W), (B, 1, H, W)
        fill = backward_warp(frame, displacement)  # (B, 3, H, W)
        alpha = coverage.clamp(max=1.0)  # (B, 1, H, W)
        return (alpha * splat + (1 - alpha) * fill).clamp(-1.0, 1.0)  # (B, 3, H, W)


def _gray_u8(frame: torch.Tensor) -> np.ndarray:
    """(3, H, W) in [-1, 1] -> (H, W) uint8 luma for OpenCV."""
    rgb = ((frame.float().clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)  # (3, H, W)
    return cv2.cvtColor(
        np.ascontiguousarray(rearrange(rgb, "c h w -> h w c").cpu().numpy()), cv2.COLOR_RGB2GRAY
    )


class FramePredictor(ModelMixin, ConfigMixin):
    """Small next-frame predictor: the last P frames stacked on channels -> residual over the last.

    A stem conv, residual blocks of two 3x3 convs with growing dilation (a wide receptive field at
    full resolution, for motion), and an output conv initialised to zero, so an untrained model
    predicts "copy the last frame" and training starts from that baseline. ``forward`` returns the
    unclamped prediction; the drafter clamps.
    """

    @register_to_config
    def __init__(
        self,
        context_frames: int = 2,
        channels: int = 3,
        hidden: int = 32,
        dilations: tuple[int, ...] = (1, 2, 4, 8),
    ):
        super().__init__()
        self.stem = nn.Conv2d(context_frames * channels, hidden, 3, padding=1)
        self.blocks = nn.ModuleList([_ResidualBlock(hidden, d) for d in dilations])
        self.head = nn.Conv2d(hidden, channels, 3, padding=1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, context: torch.Tensor) -> torch.Tensor:
        """(B, P, C, H, W) with P = context_frames -> (B, C, H, W)."""
        h = self.stem(rearrange(context, "b p c h w -> b (p c) h w"))  # (B, hidden, H, W)
        for block in self.blocks:
            h = block(h)
        return context[:, -1] + self.head(F.silu(h))  # (B, C, H, W)


class _ResidualBlock(nn.Module):
    def __init__(self, hidden: int, dilation: int):
        super().__init__()
        self.conv1 = nn.Conv2d(hidden, hidden, 3, padding=dilation, dilation=dilation)
        self.conv2 = nn.Conv2d(hidden, hidden, 3, padding=1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.conv2(F.silu(self.conv1(F.silu(h))))  # (B, hidden, H, W)


class LearnedDrafter(FrameDrafter):
    """Drafts with a FramePredictor, autoregressively on its own (clamped) outputs.

    With fewer than ``context_frames`` frames the oldest one is repeated to fill the window.
    """

    def __init__(self, model: FramePredictor | None = None):
        self.model = model if model is not None else FramePredictor()
        self.context_frames = self.model.config.context_frames

    @classmethod
    def from_pretrained(cls, path: str | Path, **kwargs) -> LearnedDrafter:
        """Load a FramePredictor saved with ``save_pretrained`` (config.json + model.safetensors)."""
        return cls(FramePredictor.from_pretrained(path, **kwargs))

    def save_pretrained(self, path: str | Path) -> None:
        self.model.save_pretrained(path)

    def draft(self, context: torch.Tensor, k: int) -> torch.Tensor:
        missing = self.context_frames - context.shape[1]
        if missing > 0:
            context = torch.cat([repeat(context[:, 0], "b c h w -> b m c h w", m=missing), context], dim=1)
        window = context.to(self.model.device, self.model.dtype)  # (B, P, 3, H, W)
        return autoregress(self.model, window, k).to(context.device, context.dtype)  # (B, k, 3, H, W)


def make_drafter(name: str, **kwargs) -> FrameDrafter:
    """Build a drafter by name (one of DRAFTERS).

    "flow" takes FlowConfig fields ("flow:spynet" is "flow" with flow_model="spynet"); "learned" takes ``pretrained=<dir>`` to load weights, a
    ``model=`` FramePredictor, or FramePredictor config fields for a fresh (untrained) one.
    """
    if name == "copy":
        return CopyLastDrafter(**kwargs)
    if name == "linear":
        return LinearDrafter(**kwargs)
    if name == "flow" or (name in DRAFTERS and name.startswith("flow:")):
        flow_model = name.partition(":")[2]
        return FlowDrafter(FlowConfig(**({"flow_model": flow_model} if flow_model else {}), **kwargs))
    if name == "learned":
        return _make_learned(**kwargs)
    raise ValueError(f"unknown drafter {name!r}; choose one of {DRAFTERS}")


def _make_learned(
    pretrained: str | Path | None = None, model: FramePredictor | None = None, **config
) -> LearnedDrafter:
    if pretrained is not None:
        return LearnedDrafter.from_pretrained(pretrained)
    return LearnedDrafter(model if model is not None else FramePredictor(**config))
