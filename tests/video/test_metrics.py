"""PSNR / SSIM against scikit-image's reference implementations."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from specvideo.video.metrics import PSNR_CAP_DB, psnr, similarity, ssim


def random_pair(
    shape, seed: int = 0, noise: float = 0.2, dtype=torch.float64
) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=generator, dtype=dtype) * 2 - 1
    y = (x + noise * torch.randn(shape, generator=generator, dtype=dtype)).clamp(-1, 1)
    return x, y


def structured_pair(height: int = 40, width: int = 52) -> tuple[torch.Tensor, torch.Tensor]:
    """(2, 3, H, W) gradients / checkerboards / rings and distorted copies (shift, blur, contrast)."""
    ys, xs = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    ys, xs = ys.double(), xs.double()
    rings = torch.sin(((xs - width / 2) ** 2 + (ys - height / 2) ** 2).sqrt() / 2)
    checker = ((xs // 6 + ys // 6) % 2) * 1.6 - 0.8
    ramp = xs / (width - 1) * 2 - 1
    x = torch.stack(
        [torch.stack([rings, checker, ramp]), torch.stack([checker, ramp, rings])]
    )  # (2, 3, H, W)
    shifted = torch.roll(x[0], shifts=(1, 2), dims=(-2, -1))
    blurred = torch.nn.functional.avg_pool2d(x[1][None], 3, stride=1, padding=1, count_include_pad=False)[0]
    y = torch.stack([shifted, 0.6 * blurred + 0.1])
    return x, y


def reference_ssim(x: torch.Tensor, y: torch.Tensor, data_range: float, sigma: float = 1.5) -> np.ndarray:
    xs, ys = x.double().reshape(-1, *x.shape[-3:]).numpy(), y.double().reshape(-1, *y.shape[-3:]).numpy()
    values = [
        structural_similarity(
            a,
            b,
            data_range=data_range,
            gaussian_weights=True,
            sigma=sigma,
            use_sample_covariance=False,
            channel_axis=0,
        )
        for a, b in zip(xs, ys)
    ]
    return np.array(values).reshape(x.shape[:-3])


def reference_psnr(x: torch.Tensor, y: torch.Tensor, data_range: float) -> np.ndarray:
    xs, ys = x.double().reshape(-1, *x.shape[-3:]).numpy(), y.double().reshape(-1, *y.shape[-3:]).numpy()
    values = [peak_signal_noise_ratio(a, b, data_range=data_range) for a, b in zip(xs, ys)]
    return np.array(values).reshape(x.shape[:-3])


@pytest.mark.parametrize("shape", [(3, 24, 30), (4, 3, 24, 30), (2, 3, 1, 20, 25)])
def test_psnr_matches_skimage(shape):
    x, y = random_pair(shape)
    value = psnr(x, y, data_range=2.0)
    assert value.shape == shape[:-3]
    np.testing.assert_allclose(value.numpy(), reference_psnr(x, y, 2.0), rtol=1e-10)


def test_psnr_matches_skimage_in_float32_and_other_ranges():
    x, y = random_pair((3, 3, 16, 16), dtype=torch.float32)
    for scale in (0.5, 127.5):  # [-1, 1] -> [-0.5, 0.5] (range 1) and [-127.5, 127.5] (range 255)
        value = psnr(x * scale, y * scale, data_range=2 * scale)
        np.testing.assert_allclose(value.numpy(), reference_psnr(x * scale, y * scale, 2 * scale), atol=1e-4)


@pytest.mark.parametrize("noise", [0.05, 0.3, 1.0])
def test_ssim_matches_skimage_on_random_images(noise):
    x, y = random_pair((2, 3, 3, 33, 41), noise=noise)
    value = ssim(x, y, data_range=2.0)
    assert value.shape == (2, 3)
    np.testing.assert_allclose(value.numpy(), reference_ssim(x, y, 2.0), atol=1e-10)


def test_ssim_matches_skimage_on_structured_images():
    x, y = structured_pair()
    np.testing.assert_allclose(ssim(x, y, data_range=2.0).numpy(), reference_ssim(x, y, 2.0), atol=1e-10)
    value32 = ssim(x.float(), y.float(), data_range=2.0)
    assert value32.dtype == torch.float32
    np.testing.assert_allclose(value32.numpy(), reference_ssim(x, y, 2.0), atol=1e-5)


def test_ssim_with_another_window_and_range():
    # skimage sizes its window as 2 * int(3.5 sigma + 0.5) + 1: sigma = 0.8 gives 7
    x, y = random_pair((2, 1, 20, 20), seed=3)
    x, y = (x + 1) / 2, (y + 1) / 2  # [0, 1]
    value = ssim(x, y, data_range=1.0, window_size=7, sigma=0.8)
    np.testing.assert_allclose(value.numpy(), reference_ssim(x, y, 1.0, sigma=0.8), atol=1e-10)


def test_identical_images():
    x, _ = random_pair((2, 3, 16, 16), dtype=torch.float32)
    torch.testing.assert_close(ssim(x, x, data_range=2.0), torch.ones(2))
    assert torch.equal(psnr(x, x, data_range=2.0), torch.full((2,), PSNR_CAP_DB))
    assert torch.isinf(psnr(x, x, data_range=2.0, max_db=None)).all()


def test_similarity_dispatches_by_name():
    x, y = random_pair((2, 3, 16, 16))
    assert torch.equal(similarity(x, y, data_range=2.0), ssim(x, y, data_range=2.0))
    assert torch.equal(similarity(x, y, "psnr", data_range=2.0), psnr(x, y, data_range=2.0))
    with pytest.raises(ValueError, match="unknown similarity 'lpips'"):
        similarity(x, y, "lpips", data_range=2.0)


def test_bad_inputs():
    x, y = random_pair((2, 3, 16, 16))
    with pytest.raises(ValueError, match=r"\(2, 3, 16, 16\) and \(2, 3, 16, 15\)"):
        ssim(x, y[..., :15], data_range=2.0)
    with pytest.raises(ValueError, match=r"\(\.\.\., C, H, W\)"):
        psnr(x[0, 0], y[0, 0], data_range=2.0)
    with pytest.raises(ValueError, match="floating point"):
        psnr(x.to(torch.uint8), y.to(torch.uint8), data_range=255.0)
    with pytest.raises(ValueError, match="data_range"):
        ssim(x, y, data_range=0.0)
    with pytest.raises(ValueError, match="smaller than the 11px SSIM window"):
        ssim(x[..., :8, :8], y[..., :8, :8], data_range=2.0)
    with pytest.raises(ValueError, match="window_size must be odd"):
        ssim(x, y, data_range=2.0, window_size=8)
