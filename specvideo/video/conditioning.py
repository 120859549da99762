"""What the verifier's UNet is conditioned on, and how a UNet is widened for it.

A condition is the P context frames on channels, then, with a hint, the flow drafter's
extrapolation of them one frame ahead (``"flow"``: OpenCV DIS; ``"flow:<net>"``: a pretrained
network's flow, so the target's motion is not the drafter's own), and with ``confidence`` that
extrapolation's confidence map on one channel before it (``FlowDrafter.confidence``). The widening
helpers add those channels to a trained UNet with zero first-layer weights, so it computes what it
did until training teaches it to use them.
"""

from __future__ import annotations

import torch
from diffusers import UNet2DModel
from einops import rearrange

from specvideo.video.drafters import FlowConfig, FlowDrafter
from specvideo.video.flownets import FLOW_NETS

# "flow": the flow drafter's extrapolation (OpenCV DIS); "flow:<net>": the same along a pretrained
# network's flow (specvideo.video.flownets), so the target's motion is not the drafter's own
HINTS = (None, "flow", *(f"flow:{net}" for net in FLOW_NETS))


def hint_free(cond: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
    """(N, C, H, W) conditions with the hint's channels (the last 3) zeroed: the hint-free branch of
    a UNet trained with hint dropout; ``rows`` (N,) bool: only those rows (default all)."""
    keep = torch.zeros(len(cond), dtype=torch.bool, device=cond.device) if rows is None else ~rows
    return torch.cat([cond[:, :-3], cond[:, -3:] * keep[:, None, None, None]], dim=1)


def make_residual(unet: UNet2DModel) -> UNet2DModel:
    """Zero the UNet's output convolution in place: as a residual verifier it then predicts exactly the
    hint (x0 = hint + 0) until training teaches it the corrections."""
    with torch.no_grad():
        unet.conv_out.weight.zero_()
        unet.conv_out.bias.zero_()
    return unet


def condition(window: torch.Tensor, hint: str | None, confidence: bool = False) -> torch.Tensor:
    """(N, P, 3, H, W) context windows, oldest first -> (N, 3P [+ 1] [+ 3], H, W): the frames on
    channels, then the hint's confidence map if asked (``FlowDrafter.confidence``), then the hint
    (``"flow"``: the flow drafter's extrapolation of the window one frame ahead; ``"flow:spynet"``,
    ``"flow:rife"``, ``"flow:gmflow"``: the same along that pretrained network's flow)."""
    cond = rearrange(window, "n p c h w -> n (p c) h w")  # (N, 3P, H, W)
    if hint is None:
        return cond
    if hint not in HINTS:
        raise ValueError(f"hint must be one of {HINTS}, got {hint!r}")
    if not confidence:
        extrapolated = hint_drafter(hint).propose(window, 1)[:, 0]  # (N, 3, H, W)
        return torch.cat([cond, extrapolated.to(cond.dtype)], dim=1)  # (N, 3P + 3, H, W)
    if window.shape[1] < 2:
        raise ValueError(f"a confidence map needs two context frames, got {window.shape[1]}")
    return torch.cat([cond, *hint_with_confidence(hint_drafter(hint), window)], dim=1)  # (N, 3P + 4, H, W)


def hint_with_confidence(
    flow: FlowDrafter, window: torch.Tensor, scale: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, P, 3, H, W) -> the confidence (N, 1, H, W) and the hint (N, 3, H, W): the last frame moved one
    step along ``flow``'s velocity, times ``scale`` (N,) if given (training's hint augmentation)."""
    with torch.no_grad():
        previous, last = window[:, -2].float(), window[:, -1].float()
        velocity = flow.velocity(previous, last).to(last.device)  # (N, 2, H, W)
        if scale is not None:
            velocity = velocity * scale.to(last.device)[:, None, None, None]
        weight = flow.splat_weight(velocity)  # (N, 1, H, W)
        hint = flow.extrapolate(last, velocity, weight)  # (N, 3, H, W)
        confidence = flow.confidence(previous, last, velocity, weight)  # (N, 1, H, W)
    return confidence.to(window.dtype), hint.to(window.dtype)


def hint_drafter(hint: str) -> FlowDrafter:
    """The flow drafter that makes the hint ``hint`` ("flow" or "flow:<net>")."""
    return FlowDrafter(FlowConfig(flow_model=hint.partition(":")[2] or "dis"))


def widen_for_confidence(unet: UNet2DModel) -> UNet2DModel:
    """A copy of a residual hint UNet with one more input channel, the confidence map's, just before
    the hint's three, its first-layer weights zero: the UNet computes what ``unet`` computes (the
    gate (1 - c) in ``predict_x0`` is what changes)."""
    return _with_zero_inputs(unet, 1, at=unet.config.in_channels - 3)


def widen_for_hint(unet: UNet2DModel) -> UNet2DModel:
    """A copy of a hint-less verifier UNet with 3 more input channels whose first-layer weights are
    zero: it computes exactly what ``unet`` computes until training teaches it to use the hint."""
    return _with_zero_inputs(unet, 3, at=unet.config.in_channels)


def _with_zero_inputs(unet: UNet2DModel, count: int, at: int) -> UNet2DModel:
    """A copy of ``unet`` with ``count`` input channels inserted before channel ``at``, their
    first-layer weights zero."""
    # without the private keys: "_use_default_values" would reset what the config names to defaults
    config = {k: v for k, v in unet.config.items() if not k.startswith("_")}
    wide = UNet2DModel.from_config({**config, "in_channels": unet.config.in_channels + count})
    wide = wide.to(unet.device, unet.dtype)
    state = unet.state_dict()
    weight = state["conv_in.weight"]  # (C_out, C_in, 3, 3)
    zero = weight.new_zeros(weight.shape[0], count, *weight.shape[2:])
    state["conv_in.weight"] = torch.cat([weight[:, :at], zero, weight[:, at:]], dim=1)
    wide.load_state_dict(state)
    return wide
