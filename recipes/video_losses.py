"""Losses and tuning-split evaluations of the video verifier's training stages (``training/video.py``).

``x0_loss`` is the one-frame x0 loss of every stage; ``rollout_loss`` is the rollout stage's: the
one-step generator (t = T - 1, the N = 1 target and the s = 1 check) unrolled on its own frames,
so training sees the context it meets in a generated clip. ``augmented_condition`` is the residual
stage's perturbed hint and context. The evaluations compare generation from noise with the copy and
flow drafters, one frame and an autoregressive rollout.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from diffusers import UNet2DModel
from einops import rearrange

from specvideo.video.drafters import FlowDrafter
from specvideo.video.metrics import ssim
from specvideo.video.verifier import DiffusionVerifier, condition, default_scheduler, predict_x0

EVAL_TIMESTEPS = (100, 300, 500, 700, 900)


def x0_loss(
    unet: UNet2DModel,
    scheduler,
    clips: torch.Tensor,
    t: torch.Tensor,
    noise: torch.Tensor,
    hint: str | None = None,
    residual: bool = False,
    ssim_weight: float = 0.0,
    cond: torch.Tensor | None = None,
):
    """MSE (+ ssim_weight * (1 - SSIM)) of the x0 estimate of the last frame given the P frames before
    it (or the given (B, C, H, W) ``cond``). clips: (B, P+1, 3, H, W)."""
    x0 = clips[:, -1]  # (B, 3, H, W)
    if cond is None:
        cond = condition(clips[:, :-1], hint)  # (B, C, H, W)
    noisy = scheduler.add_noise(x0, noise, t)  # (B, 3, H, W)
    pred = predict_x0(unet, noisy, cond, t, residual)  # (B, 3, H, W)
    loss = F.mse_loss(pred, x0)
    if ssim_weight:
        loss = loss + ssim_weight * (1 - ssim(pred, x0, data_range=2.0).mean())
    return loss


@torch.inference_mode()
def verifier_heldout_loss(
    unet: UNet2DModel, scheduler, clips: torch.Tensor, hint: str | None = None, residual: bool = False
) -> float:
    """Mean x0 MSE over the evaluation clips at fixed timesteps with fixed noise."""
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(clips[:, -1].shape, generator=g).to(clips.device)
    losses = [
        x0_loss(
            unet, scheduler, clips, torch.full((len(clips),), t, device=clips.device), noise, hint, residual
        ).item()
        for t in EVAL_TIMESTEPS
    ]
    return float(np.mean(losses))


@torch.inference_mode()
def generation_ssim(
    unet: UNet2DModel, clips: torch.Tensor, steps: int = 25, hint: str | None = None, residual: bool = False
) -> dict:
    """One frame from noise (DDIM, ``steps``) given true context, SSIM to the truth, against copying
    the last frame and the flow drafter. clips: (N, P+1, 3, H, W)."""
    verifier = DiffusionVerifier(unet, default_scheduler(), hint=hint, residual=residual)
    P = verifier.num_context_frames
    cond = verifier.condition(clips[:, :P])  # (N, C, H, W)
    noise = torch.randn(clips[:, P].shape, generator=torch.Generator().manual_seed(0)).to(clips.device)
    truth = clips[:, P]
    generated = verifier.generate(cond, steps, noise)
    flow = FlowDrafter().propose(clips[:, :P].cpu(), 1)[:, 0].to(clips.device)
    return {
        "ssim_generated": ssim(generated, truth, data_range=2.0).mean().item(),
        "ssim_copy": ssim(clips[:, P - 1], truth, data_range=2.0).mean().item(),
        "ssim_flow": ssim(flow, truth, data_range=2.0).mean().item(),
    }


@torch.inference_mode()
def rollout_ssim(
    unet: UNet2DModel, clips: torch.Tensor, steps: int = 1, hint: str | None = None, residual: bool = False
) -> dict:
    """Mean SSIM to the truth of F - P frames generated autoregressively (each from noise with
    ``steps`` DDIM steps, conditioned on the generated frames before it), against the flow drafter's
    rollout. clips: (N, F, 3, H, W). This is what target-only generation does in the pipeline."""
    verifier = DiffusionVerifier(unet, default_scheduler(), hint=hint, residual=residual)
    P = verifier.num_context_frames
    g = torch.Generator().manual_seed(0)
    window, frames = clips[:, :P], []
    for _ in range(clips.shape[1] - P):
        noise = torch.randn(clips[:, 0].shape, generator=g).to(clips.device)  # (N, 3, H, W)
        frame = verifier.generate(verifier.condition(window), steps, noise)  # (N, 3, H, W)
        frames.append(frame)
        window = torch.cat([window[:, 1:], frame[:, None]], dim=1)  # (N, P, 3, H, W)
    truth = rearrange(clips[:, P:], "n f c h w -> (n f) c h w")
    generated = rearrange(torch.stack(frames, dim=1), "n f c h w -> (n f) c h w")
    flow = rearrange(
        FlowDrafter().propose(clips[:, :P].cpu(), clips.shape[1] - P), "n f c h w -> (n f) c h w"
    )
    return {
        "rollout_generated": ssim(generated, truth, data_range=2.0).mean().item(),
        "rollout_flow": ssim(flow.to(truth.device), truth, data_range=2.0).mean().item(),
    }


def augmented_condition(window: torch.Tensor, rng: np.random.Generator, cfg) -> torch.Tensor:
    """(B, P, 3, H, W) true context -> (B, 3P + 3, H, W) flow-hint conditions, a share with noisy
    context frames and a share with a velocity-scaled hint (``residual_*`` in the config). With both
    shares 0 it is exactly ``condition(window, "flow")``."""
    B = len(window)
    noisy = rng.random(B) < cfg.residual_context_noise_share
    sigma = torch.from_numpy((rng.uniform(0, cfg.residual_context_noise_max, B) * noisy).astype(np.float32))
    noise = torch.from_numpy(rng.standard_normal(window.shape, dtype=np.float32)).to(window.device)
    window = (window + sigma.to(window.device)[:, None, None, None, None] * noise).clamp(-1, 1)
    perturbed = rng.random(B) < cfg.residual_hint_aug_share
    scale = np.where(perturbed, rng.uniform(*cfg.residual_hint_scale, B), 1.0).astype(np.float32)
    flow = FlowDrafter()
    velocity = flow.velocity(window[:, -2], window[:, -1]).to(window.device)  # (B, 2, H, W)
    velocity = velocity * torch.from_numpy(scale).to(window.device)[:, None, None, None]
    hint = flow.extrapolate(window[:, -1].float(), velocity, flow.splat_weight(velocity))  # (B, 3, H, W)
    frames = rearrange(window, "b p c h w -> b (p c) h w")  # (B, 3P, H, W)
    return torch.cat([frames, hint.to(frames.dtype)], dim=1)


def rollout_loss(
    unet: UNet2DModel, scheduler, clips: torch.Tensor, rng: np.random.Generator, ssim_weight: float = 0.0
) -> torch.Tensor:
    """Mean over the U = F - P frames of clips (B, F, 3, H, W) of the one-step x0 loss at t = T - 1
    (flow hint, residual), each frame conditioned on the model's own previous outputs (detached)
    after the first P true frames: the exposure the N = 1 target has in a generated clip."""
    P = unet.config.in_channels // 3 - 2
    T = scheduler.config.num_train_timesteps
    window, losses = clips[:, :P], []
    t = torch.full((len(clips),), T - 1, device=clips.device)
    for u in range(clips.shape[1] - P):
        noise = torch.from_numpy(rng.standard_normal(clips[:, 0].shape, dtype=np.float32)).to(clips.device)
        truth = clips[:, P + u]  # (B, 3, H, W)
        pred = predict_x0(unet, scheduler.add_noise(truth, noise, t), condition(window, "flow"), t, True)
        loss = F.mse_loss(pred, truth)
        if ssim_weight:
            loss = loss + ssim_weight * (1 - ssim(pred, truth, data_range=2.0).mean())
        losses.append(loss)
        window = torch.cat([window[:, 1:], pred.detach().clamp(-1, 1)[:, None]], dim=1)  # (B, P, 3, H, W)
    return torch.stack(losses).mean()
