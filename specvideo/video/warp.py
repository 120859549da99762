"""Moving pixels by per-pixel displacements: forward splatting and backward warping.

Displacements are (B, 2, H, W) pixels (dx, dy) on the source's grid. The flow drafter, the pretrained
flow networks and the target's hint all move frames with these two functions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange, repeat


def forward_splat(
    frame: torch.Tensor, displacement: torch.Tensor, weight: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Bilinear forward warp of (B, C, H, W) by (B, 2, H, W) pixel displacements (dx, dy).

    Each source pixel spreads over the 4 target pixels around p + d(p) with bilinear weights times
    ``weight`` (B, 1, H, W); a target is the weighted average of what lands on it (no z-buffer).
    Returns the average (B, C, H, W) (0 where nothing lands) and the unweighted bilinear coverage
    (B, 1, H, W) (1 inside a rigidly moved region, < 1 at holes and edges).
    """
    B, C, H, W = frame.shape
    ys, xs = torch.meshgrid(
        torch.arange(H, device=frame.device), torch.arange(W, device=frame.device), indexing="ij"
    )
    tx, ty = xs + displacement[:, 0], ys + displacement[:, 1]  # (B, H, W) target coordinates
    x0, y0 = tx.floor(), ty.floor()
    colour = torch.zeros(B, C + 2, H * W, dtype=frame.dtype, device=frame.device)
    values = torch.cat([frame * weight, weight, torch.ones_like(weight)], dim=1)  # (B, C + 2, H, W)
    values = rearrange(values, "b c h w -> b c (h w)")
    for cx, cy in ((x0, y0), (x0 + 1, y0), (x0, y0 + 1), (x0 + 1, y0 + 1)):
        bilinear = (1 - (tx - cx).abs()) * (1 - (ty - cy).abs())  # (B, H, W)
        inside = (cx >= 0) & (cx < W) & (cy >= 0) & (cy < H)
        index = (cy.clamp(0, H - 1) * W + cx.clamp(0, W - 1)).long()  # (B, H, W)
        contribution = values * rearrange(bilinear * inside, "b h w -> b 1 (h w)")  # (B, C + 2, HW)
        colour.scatter_add_(2, repeat(index, "b h w -> b c (h w)", c=C + 2), contribution)
    colour = rearrange(colour, "b c (h w) -> b c h w", h=H)
    total, coverage = colour[:, C : C + 1], colour[:, C + 1 :]  # (B, 1, H, W) each
    return colour[:, :C] / total.clamp(min=1e-30), coverage


def backward_warp(frame: torch.Tensor, displacement: torch.Tensor) -> torch.Tensor:
    """Sample (B, C, H, W) at p - d(p) (bilinear, border-clamped)."""
    B, C, H, W = frame.shape
    ys, xs = torch.meshgrid(
        torch.arange(H, dtype=frame.dtype, device=frame.device),
        torch.arange(W, dtype=frame.dtype, device=frame.device),
        indexing="ij",
    )
    sx, sy = xs - displacement[:, 0], ys - displacement[:, 1]  # (B, H, W) source coordinates
    grid = torch.stack([2 * sx / max(W - 1, 1) - 1, 2 * sy / max(H - 1, 1) - 1], dim=-1)  # (B, H, W, 2)
    return F.grid_sample(frame, grid, mode="bilinear", padding_mode="border", align_corners=True)
