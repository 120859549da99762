"""Weight-only int8 and int4 projections for LeanLlama: fewer bytes per weight, the same activations.

Decoding a 1.5B model on a CPU is bound by memory bandwidth: every token reads every weight once,
so the bytes per weight set the speed (bf16: 2 bytes; int8: 1 and a scale per output row; int4:
half a byte and a scale and zero per group of ``group_size`` inputs). The products run on PyTorch's
own weight-only kernels, which read the packed weight and dequantise it inside the product:

- int8: ``torch._weight_int8pack_mm`` (symmetric, one scale per output row);
- int4: specvideo's own kernel where it runs (``kquant``: the k-quant layout, a call's weights
  unpacked once for all its rows, activations rounded per row to int8), else
  ``torch._weight_int4pack_mm_for_cpu`` over a weight packed once by
  ``torch._convert_weight_to_int4pack_for_cpu`` (asymmetric, w = (q - 8) * scale + zero per group
  of 32 inputs: the layout torchao's ``Int4CPULayout`` uses over the same two ops), which unpacks
  the weights again for every row of a call.

Activations stay in the model's dtype (bfloat16 where it is native); only the weights are
quantised, round to nearest, once at load. Why torch's ops and not torchao: torchao's CPU int4
layout calls these same two kernels, and its int8 weight-only path needs ``torch.compile`` to beat
them; a run-time dependency for two calls is not worth it (docs/history/benchmarks.md "Text: weight
formats" has the cost curves per format and row count).

Exactness is the invariant verifier's (``specvideo.text.runtime.invariant``): these kernels quantise no
activation, or each row on its own (ours), so a row's product depends only on that row; every decode call has a fixed row tile,
and ``wide_tile`` probes whether wider calls give the same bits. Speculative greedy output then
equals the same quantised model's own greedy decoding bit for bit (tests/text/test_quant.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specvideo.text.runtime import kernels
from specvideo.text.runtime.kquant import KQuantWeight, Stacked
from specvideo.text.runtime.kquant import quantize as kquantize

WEIGHT_FORMATS = ("int8", "int4")  # besides the dense weights of the model's dtype
# the int4 group size: 32 inputs, as the sub-blocks of llama.cpp's Q4_K (the GGUF files the named
# models come from), so a min-max grid nearly retraces theirs: held-out code perplexity of the
# 1.5B 4.98 at 32 against 5.08 at 64 and 5.42 at 128 (bf16 4.60), for 1,365 MB of weights against
# 1,273 and 1,227 (docs/history/benchmarks.md "Text: weight formats")
INT4_GROUPS = (32,)
INT4_ROWS = 16  # the int4 kernel packs output rows in blocks of this many


@dataclass(frozen=True)
class Int8Weight:
    """A (N, K) weight as int8 with one scale per output row: w = data * scales."""

    data: torch.Tensor  # (N, K) int8
    scales: torch.Tensor  # (N,) the activations' dtype

    fmt = "int8"

    @property
    def shape(self) -> torch.Size:
        return self.data.shape

    @property
    def device(self) -> torch.device:
        return self.data.device

    @property
    def dtype(self) -> str:
        return self.fmt

    @property
    def nbytes(self) -> int:
        return self.data.nbytes + self.scales.nbytes

    def linear(self, x: torch.Tensor) -> torch.Tensor:
        """x (M, K) -> (M, N)."""
        return torch._weight_int8pack_mm(x, self.data, self.scales.to(x.dtype))

    def dequantize(self) -> torch.Tensor:
        return self.data.float() * self.scales.float()[:, None]  # (N, K)


@dataclass(frozen=True)
class Int4Weight:
    """A (N, K) weight as 4-bit codes per group of ``group_size`` inputs, packed for the CPU kernel:
    w = (q - 8) * scale + zero."""

    packed: torch.Tensor  # the kernel's layout of the (N, K) codes
    scales_zeros: torch.Tensor  # (K / group_size, N, 2): scale and zero of each group
    group_size: int
    out_features: int
    in_features: int

    fmt = "int4"

    @property
    def shape(self) -> torch.Size:
        return torch.Size((self.out_features, self.in_features))

    @property
    def device(self) -> torch.device:
        return self.packed.device

    @property
    def dtype(self) -> str:
        return self.fmt

    @property
    def nbytes(self) -> int:
        return self.packed.nbytes + self.scales_zeros.nbytes

    def linear(self, x: torch.Tensor) -> torch.Tensor:
        """x (M, K) -> (M, N)."""
        return torch._weight_int4pack_mm_for_cpu(x, self.packed, self.group_size, self.scales_zeros.to(x.dtype))

    def dequantize(self) -> torch.Tensor:
        """The (N, K) float32 weight the codes stand for (by the kernel itself: identity rows)."""
        eye = torch.eye(self.in_features, dtype=torch.float32, device=self.device)  # (K, K)
        return torch._weight_int4pack_mm_for_cpu(eye, self.packed, self.group_size, self.scales_zeros.float()).T


QuantizedWeight = Int8Weight | Int4Weight | KQuantWeight | Stacked


def is_quantized(weight) -> bool:
    return isinstance(weight, Int8Weight | Int4Weight | KQuantWeight | Stacked)


def linear(x: torch.Tensor, weight) -> torch.Tensor:
    """x (M, K) @ weight^T for a dense (N, K) tensor or a quantised weight -> (M, N)."""
    if is_quantized(weight):
        return weight.linear(x)
    return torch.nn.functional.linear(x, weight)


def check_format(fmt: str, weight: torch.Tensor) -> None:
    """A clear error where ``fmt`` cannot hold ``weight`` on its device."""
    if fmt not in WEIGHT_FORMATS:
        raise ValueError(f"unknown weight format {fmt!r}; choose one of {', '.join(WEIGHT_FORMATS)}")
    if weight.device.type != "cpu":
        raise ValueError(
            f"{fmt} weights run on PyTorch's CPU weight-only kernels; on {weight.device.type} use bfloat16 or float32"
        )
    N, K = weight.shape
    if fmt == "int4" and (N % INT4_ROWS or not any(K % g == 0 for g in INT4_GROUPS)):
        raise ValueError(
            f"int4 needs a weight whose output rows are a multiple of {INT4_ROWS} and whose input width "
            f"is a multiple of {INT4_GROUPS[-1]}; got {N} x {K}"
        )


@torch.no_grad()
def quantize(weight: torch.Tensor, fmt: str, dtype: torch.dtype | None = None) -> QuantizedWeight:
    """Round ``weight`` (N, K) to ``fmt`` ("int8" or "int4"); scales kept in ``dtype`` (default the
    weight's own dtype: the activations' dtype)."""
    check_format(fmt, weight)
    dtype = dtype or weight.dtype
    w = weight.float()  # (N, K)
    if fmt == "int8":
        scales = (w.abs().amax(dim=1) / 127).clamp(min=1e-12)  # (N,)
        data = torch.round(w / scales[:, None]).clamp(-128, 127).to(torch.int8)  # (N, K)
        return Int8Weight(data.contiguous(), scales.to(dtype))
    if kernels.built():  # our kernel: one pass over the weights for all rows (kquant)
        return kquantize(weight)
    N, K = w.shape
    group = next(g for g in INT4_GROUPS if K % g == 0)
    groups = w.reshape(N, K // group, group)  # (N, G, g)
    low, high = groups.amin(-1), groups.amax(-1)  # (N, G) each
    scales = ((high - low) / 15).clamp(min=1e-12)  # (N, G)
    codes = torch.round((groups - low[..., None]) / scales[..., None]).clamp(0, 15)  # (N, G, g)
    zeros = low + 8 * scales  # (N, G): w = (q - 8) * scale + zero
    packed = torch._convert_weight_to_int4pack_for_cpu(codes.reshape(N, K).to(torch.int32), 1)
    scales_zeros = torch.stack([scales, zeros], dim=-1).transpose(0, 1).contiguous()  # (G, N, 2)
    return Int4Weight(packed, scales_zeros.to(dtype), group, N, K)


def release_layers(model: torch.nn.Module, embed: torch.Tensor) -> None:
    """Free a transformers causal LM's dense weights once quantised copies run it: every weight moves
    to the meta device but its embeddings, which become ``embed`` (the runner's own copy), so
    nothing keeps the loaded file's pages (safetensors maps the file; one view keeps it all). Where
    ``embed`` is the model's own table (a GGUF runner reads it as it is), that very parameter stays,
    so a draft or head sharing it keeps sharing it. Its config and embeddings stay; its own forward
    no longer runs."""
    if getattr(model, "specvideo_released", False):  # never loaded (gguf.load_gguf_target) or freed already
        return
    model.register_forward_pre_hook(_released_forward)  # calling it says what runs it
    table = model.get_input_embeddings().weight
    if embed.data_ptr() == table.data_ptr():
        for module in model.modules():
            for name, p in list(module._parameters.items()):
                if p is not None and p is not table:
                    module._parameters[name] = torch.nn.Parameter(torch.empty_like(p, device="meta"), requires_grad=False)
        model.specvideo_released = True
        return
    tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
    model.to("meta")
    model.get_input_embeddings().weight = torch.nn.Parameter(embed, requires_grad=False)
    if tied:
        model.get_output_embeddings().weight = model.get_input_embeddings().weight
    model.specvideo_released = True  # transformers' generate() on it would fail: say so where asked


def _released_forward(module, args):
    raise ValueError(
        f"this {type(module).__name__}'s dense weights were freed once quantised copies ran it: its forwards "
        "run in specvideo's runner (TextModels.target_runner, a LeanLlama); for a transformers model load it "
        "with dtype float32 or bfloat16"
    )
