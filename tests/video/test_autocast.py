"""bf16 autocast of the verifier's UNet: chosen by name, off by default, float32 frames out."""

import pytest
import torch

from specvideo.video.conditioning import condition
from specvideo.video.pipeline import SpeculativeVideoPipeline, resolve_autocast
from specvideo.video.verifier import DiffusionVerifier
from tests.helpers import tiny_unet


def test_autocast_names():
    assert resolve_autocast(None) is None and resolve_autocast("off") is None
    assert resolve_autocast("bf16") == torch.bfloat16 == resolve_autocast(torch.bfloat16)
    assert resolve_autocast("auto", "meta") is None  # no native bf16 there
    with pytest.raises(ValueError, match="autocast must be one of off, bf16, auto"):
        resolve_autocast("fp8")


def test_the_unet_runs_under_bf16_autocast_and_frames_stay_float32():
    verifier = DiffusionVerifier(tiny_unet(16, context_frames=2))
    cond = condition(torch.rand(2, 2, 3, 16, 16) * 2 - 1, None)  # (N, 3P, H, W)
    noise = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    seen = []
    verifier.unet.register_forward_hook(lambda m, a, out: seen.append(out.sample.dtype))
    full = verifier.generate(cond, 2, noise)
    verifier.autocast = torch.bfloat16
    low = verifier.generate(cond, 2, noise)
    assert seen == [torch.float32, torch.float32, torch.bfloat16, torch.bfloat16]
    assert low.dtype == torch.float32 and low.shape == full.shape
    assert 0 < (low - full).abs().max() < 0.25  # bf16 rounding, not another sample


def test_the_shipped_pipeline_takes_autocast():
    from specvideo.device import native_bf16

    assert SpeculativeVideoPipeline.from_pretrained(autocast="bf16").verifier.autocast == torch.bfloat16
    assert SpeculativeVideoPipeline.from_pretrained(autocast="off").verifier.autocast is None
    default = SpeculativeVideoPipeline.from_pretrained().verifier.autocast  # "auto": by the CPU
    assert default == (torch.bfloat16 if native_bf16("cpu") else None)
    # an explicit half dtype is what the UNet runs in: "auto" adds no autocast on top
    assert SpeculativeVideoPipeline.from_pretrained(torch_dtype=torch.bfloat16).verifier.autocast is None
