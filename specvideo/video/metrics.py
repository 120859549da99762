"""Frame similarity: PSNR and SSIM on batches of float images, one value per image.

Images are (..., C, H, W) float tensors; every function returns a tensor of the leading shape
(...). ``data_range`` is always explicit: 2.0 for the pipeline's [-1, 1] frames, 1.0 for [0, 1],
255.0 for 8-bit values. SSIM follows Wang et al. (2004) with an 11x11 Gaussian window
(sigma = 1.5), K1 = 0.01, K2 = 0.03 and population (not sample) covariances, averaged over the
pixels whose window lies inside the image and over channels: this equals
``skimage.metrics.structural_similarity(..., gaussian_weights=True, sigma=1.5,
use_sample_covariance=False, data_range=..., channel_axis=...)``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import pack, rearrange, unpack

PSNR_CAP_DB = 100.0  # PSNR of identical images (MSE = 0) is reported as this, not +inf
SIMILARITIES = ("ssim", "psnr")  # a draft against its refinement (the refine check)
# the checks a draft can be scored by: "typicality" (the target's denoising error on the draft, over
# the same on the clip's last real frame; no refinement), "features" (the learned check on pretrained
# features, ``specvideo.video.feature_check``; no UNet pass) or a similarity to the draft's refinement
METRICS = ("typicality", "features", *SIMILARITIES)


def psnr(
    x: torch.Tensor, y: torch.Tensor, *, data_range: float, max_db: float | None = PSNR_CAP_DB
) -> torch.Tensor:
    """Peak signal-to-noise ratio in dB per image: 10 log10(data_range^2 / MSE).

    Values are clamped to at most ``max_db`` (100 dB by default) so identical images give a finite
    number that averages and plots; ``max_db=None`` returns +inf for them, like scikit-image.
    """
    x, y = _check_pair(x, y, data_range)
    mse = (x - y).pow(2).mean(dim=(-3, -2, -1))  # (...)
    value = 10.0 * torch.log10(data_range**2 / mse)  # (...), +inf where mse == 0
    return value if max_db is None else value.clamp(max=max_db)


def ssim(
    x: torch.Tensor, y: torch.Tensor, *, data_range: float, window_size: int = 11, sigma: float = 1.5
) -> torch.Tensor:
    """Mean structural similarity per image, in [-1, 1] (1 for identical images)."""
    x, y = _check_pair(x, y, data_range)
    if window_size < 3 or window_size % 2 == 0:
        raise ValueError(f"window_size must be odd and >= 3, got {window_size}")
    if min(x.shape[-2:]) < window_size:
        raise ValueError(
            f"images of size {tuple(x.shape[-2:])} are smaller than the {window_size}px SSIM window"
        )
    xs, packed = pack([x], "* c h w")  # (N, C, H, W)
    ys, _ = pack([y], "* c h w")  # (N, C, H, W)
    value = _ssim_flat(xs, ys, data_range, _gaussian(window_size, sigma, xs))  # (N,)
    return unpack(value, packed, "*")[0]  # (...)


def similarity(x: torch.Tensor, y: torch.Tensor, metric: str = "ssim", *, data_range: float) -> torch.Tensor:
    """Per-image similarity by name: "ssim" (unitless, <= 1) or "psnr" (dB, capped at 100)."""
    if metric == "ssim":
        return ssim(x, y, data_range=data_range)
    if metric == "psnr":
        return psnr(x, y, data_range=data_range)
    raise ValueError(f"unknown similarity {metric!r}; choose one of {SIMILARITIES}")


def _check_pair(x: torch.Tensor, y: torch.Tensor, data_range: float) -> tuple[torch.Tensor, torch.Tensor]:
    if x.shape != y.shape:
        raise ValueError(f"images must have one shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    if x.ndim < 3:
        raise ValueError(f"images must be (..., C, H, W), got shape {tuple(x.shape)}")
    if not (x.is_floating_point() and y.is_floating_point()):
        raise ValueError(f"images must be floating point, got {x.dtype} and {y.dtype}")
    if not (math.isfinite(data_range) and data_range > 0):
        raise ValueError(f"data_range must be a finite number > 0, got {data_range}")
    dtype = torch.promote_types(torch.promote_types(x.dtype, y.dtype), torch.float32)
    return x.to(dtype), y.to(dtype)


def _gaussian(window_size: int, sigma: float, like: torch.Tensor) -> torch.Tensor:
    """Normalised 1-D Gaussian taps (window_size,)."""
    offsets = torch.arange(window_size, dtype=like.dtype, device=like.device) - (window_size - 1) / 2
    taps = torch.exp(-0.5 * (offsets / sigma) ** 2)  # (S,)
    return taps / taps.sum()


def _ssim_flat(x: torch.Tensor, y: torch.Tensor, data_range: float, taps: torch.Tensor) -> torch.Tensor:
    """SSIM of (N, C, H, W) pairs -> (N,), using 'valid' separable Gaussian filtering."""
    n = x.shape[0]
    stack = torch.cat([x, y, x * x, y * y, x * y])  # (5N, C, H, W)
    planes = rearrange(stack, "m c h w -> (m c) 1 h w")
    planes = F.conv2d(planes, rearrange(taps, "s -> 1 1 s 1"))  # (5NC, 1, H', W)
    planes = F.conv2d(planes, rearrange(taps, "s -> 1 1 1 s"))  # (5NC, 1, H', W')
    mu_x, mu_y, e_xx, e_yy, e_xy = rearrange(planes, "(five n c) 1 h w -> five n c h w", five=5, n=n)
    var_x, var_y, cov = e_xx - mu_x**2, e_yy - mu_y**2, e_xy - mu_x * mu_y  # (N, C, H', W')
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    num = (2 * mu_x * mu_y + c1) * (2 * cov + c2)
    den = (mu_x**2 + mu_y**2 + c1) * (var_x + var_y + c2)
    return (num / den).mean(dim=(-3, -2, -1))  # (N,)


def laplacian_energy(x: torch.Tensor) -> torch.Tensor:
    """Mean squared response of the 3x3 Laplacian per image (..., C, H, W) -> (...): how much fine
    detail (edges, texture) an image holds; blur lowers it."""
    xs, packed = pack([x.float()], "* c h w")  # (N, C, H, W)
    kernel = torch.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]], device=xs.device)
    planes = rearrange(xs, "n c h w -> (n c) 1 h w")
    response = F.conv2d(planes, kernel[None, None])  # (NC, 1, H-2, W-2)
    energy = rearrange(response.pow(2).mean(dim=(-2, -1)), "(n c) 1 -> n c", n=xs.shape[0]).mean(-1)
    return unpack(energy, packed, "*")[0]


def sharpness_ratio(x: torch.Tensor, truth: torch.Tensor) -> float:
    """Laplacian energy of frames ``x`` over that of the true frames (1 = as sharp as the truth,
    below 1 = blurrier, above 1 = noisier or over-sharpened), pooled over all frames."""
    return float(laplacian_energy(x).mean() / laplacian_energy(truth).mean().clamp(min=1e-12))
