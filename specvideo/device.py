"""What the device computes natively, probed in one place for the text and the video side.

Decided from the hardware's flags, not from a timing: a timing at load would cost seconds and vary
with load. docs/history/benchmarks.md "Text: decode cost per dtype" has the measured curve behind the bf16
rule: on this project's CPUs a bf16 product over 1-16 tokens costs less than a float32 one over 1.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags of bf16 dot products


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (Linux ``/proc/cpuinfo``); empty where they cannot be read."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def native_bf16(device: torch.device | str = "cpu", flags: frozenset[str] | None = None) -> bool:
    """Whether bfloat16 products run natively on ``device``: a CPU with bf16 dot-product
    instructions (``avx512_bf16`` or the AMX tiles ``amx_bf16``, which oneDNN uses; elsewhere oneDNN
    emulates bf16, slower than float32), a CUDA GPU that supports it; no other device."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type != "cpu":
        return False
    flags = cpu_flags() if flags is None else flags
    return any(flag in flags for flag in NATIVE_BF16_FLAGS) and onednn()


def onednn() -> bool:
    """Whether torch's CPU build has oneDNN (pre-packed float32 linears, bf16 matrix products)."""
    return torch.backends.mkldnn.is_available()


def packs_float32(device: torch.device | str, dtype: torch.dtype) -> bool:
    """Whether linear layers of ``dtype`` on ``device`` can run on oneDNN pre-packed weights:
    float32 on a CPU with oneDNN (``specvideo.text.runtime.packing``)."""
    return torch.device(device).type == "cpu" and dtype == torch.float32 and onednn()
