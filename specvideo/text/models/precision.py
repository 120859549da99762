"""Which number format a text model runs in, and what "exact" means in it.

``dtype="auto"`` (the default of the API, the CLI, the server and the app) picks bfloat16 where the
hardware computes it natively and float32 elsewhere:

- CPU: bfloat16 when the processor has bf16 dot-product instructions, else float32; CUDA:
  bfloat16 where the GPU supports it, else float32; other devices: float32 (``specvideo.device``,
  the one probe of the hardware, which the video side's autocast reads too).

Exactness. In float32 a k-token check and a 1-token step round almost alike, so greedy speculative
output equals the target's own greedy decoding (measured, not guaranteed). In bfloat16 they do not:
a product's rounding depends on the kernel, and argmax flips at near ties. So a bf16 target runs on
``LeanLlama(invariant=True)``: every position of a verification block is computed with exactly the
operations of a 1-token step (each query attends over its own key prefix in its own call; linear
layers in calls of a fixed row tile, or of any number of rows where a probe at load finds each
row's bits independent of it: ``specvideo.text.runtime.invariant``). Speculative output then equals the same
model's own greedy decoding bit for bit. It differs from another implementation's bf16 decoding
(transformers' ``generate()``) at near ties only: both round the same model differently.
``exact=True`` (``--exact``) runs float32 for users who need the float32 model's own tokens.

``dtype="gguf"``: a target converted from a GGUF file runs that file's own quantised blocks (Q4_K,
Q6_K, Q4_1, Q8_0), not re-rounded, on specvideo's own VNNI kernel, float32 activations
(``specvideo.text.runtime.kquant``); exact in the same sense against its own greedy decoding.

``dtype="int8"`` / ``"int4"``: weight-only quantised projections and output head (fewer bytes per
weight, for a memory-bound model), activations in the dtype "auto" would pick; exact in the same
sense against the quantised model's own decoding. Not lossless against bf16: the quality cost is
measured in docs/history/benchmarks.md "Text: weight formats".
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from specvideo.device import native_bf16
from specvideo.text.runtime.contract import LEAN_MODEL_TYPES

DTYPES = ("auto", "float32", "bfloat16", "float16", "int8", "int4", "gguf")
# weight-only formats (``specvideo.text.runtime.quant``): projections in int8 / int4, activations in the
# dtype "auto" picks; LeanLlama runs them, invariantly (their greedy speculative output equals the
# same quantised model's own greedy decoding bit for bit)
WEIGHT_ONLY = ("int8", "int4", "gguf")  # gguf: a GGUF-sourced target in its file's own block formats
# LEAN_MODEL_TYPES (runtime.contract): the architectures LeanLlama runs, so the only ones whose bf16
# checks can be made invariant


def resolve_dtype(
    dtype: str | torch.dtype | None = "auto",
    device: torch.device | str | None = "cpu",
    exact: bool = False,
    architecture: str | None = None,
    flags: frozenset[str] | None = None,
) -> torch.dtype:
    """The torch dtype for ``dtype`` ("auto", a name from ``DTYPES`` or a torch dtype) on ``device``;
    ``exact`` asks for float32 and refuses any other explicit dtype. "auto" keeps float32 for a
    model ``architecture`` (its config's model_type) that LeanLlama cannot run invariantly."""
    if isinstance(dtype, torch.dtype):
        name = str(dtype).removeprefix("torch.")
    else:
        name = "auto" if dtype is None else str(dtype)
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    if exact:
        if name not in ("auto", "float32"):
            raise ValueError(f"exact=True runs float32; it cannot be combined with dtype={name!r}")
        return torch.float32
    if name in WEIGHT_ONLY and architecture is not None and architecture not in LEAN_MODEL_TYPES:
        raise ValueError(
            f"dtype={name!r} runs on LeanLlama ({', '.join(LEAN_MODEL_TYPES)} models), not model_type={architecture!r}"
        )
    if name == "gguf":  # the file's blocks run with float32 activations, as llama.cpp's do
        return torch.float32
    if name == "auto" or name in WEIGHT_ONLY:  # weight-only formats: activations as auto picks them
        lean = architecture is None or architecture in LEAN_MODEL_TYPES
        return torch.bfloat16 if lean and native_bf16(device or "cpu", flags) else torch.float32
    return getattr(torch, name)


def weight_format(dtype: str | torch.dtype | None) -> str | None:
    """"int8", "int4" or "gguf" where ``dtype`` names a weight-only format, else None (dense weights)."""
    return dtype if isinstance(dtype, str) and dtype in WEIGHT_ONLY else None


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def model_type(path: str | Path) -> str | None:
    """The model_type in a model directory's config.json, or a GGUF file's architecture; None when
    neither can be read (a Hub id: transformers reads it later)."""
    path = Path(path)
    try:
        if path.suffix == ".gguf":
            from specvideo.text.models.gguf_weights import open_reader

            return open_reader(path).metadata["general.architecture"]
        return json.loads((path / "config.json").read_text()).get("model_type")
    except (OSError, ValueError, KeyError, ImportError):
        return None
