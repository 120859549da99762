"""A GGUF target's decoder layers in one C++ call each (``kernels/layer.cpp``), for decode-time blocks.

``LeanLlama(weights="gguf")`` runs a layer as about twenty PyTorch ops around four k-quant
products; on a 2-core CPU those ops cost a few milliseconds of a 1.5B model's step. Where every
projection of every layer is a k-quant weight and the kernel is built, ``build`` makes one
``Layer`` per decoder layer (its weights shared, not copied) and ``run`` passes a block of up to
``invariant.MAX_TILED_ROWS`` tokens through them. Each token is computed by the operations of a
1-token step (the invariant contract) with no padding: the products' rows are their own and each
query attends over its own row's slots 0 .. its slot. A prefill's longer blocks keep the PyTorch
path; both write the same cache.
"""

from __future__ import annotations

import torch

from specvideo.text.runtime import kernels
from specvideo.text.runtime.kquant import KQuantWeight, Stacked


def _parts(weight) -> list[tuple] | None:
    """A projection's k-quant parts as the kernel takes them, None where one is not k-quant."""
    parts = weight.parts if isinstance(weight, Stacked) else [weight]
    if not all(isinstance(p, KQuantWeight) for p in parts):
        return None
    return [(p.codes, p.scales, p.supers, p.bits, p.group, p.S) for p in parts]


def build(lean) -> list | None:
    """One C++ layer per decoder layer of a GGUF ``LeanLlama``; None where the kernel is not built or
    a projection is not a k-quant weight (the PyTorch ops then run every block)."""
    if not kernels.built():
        return None
    layers = []
    for layer in lean.layers:
        parts = [_parts(getattr(layer, name)) for name in ("qkv", "o_proj", "gate_up", "down")]
        norms = (layer.in_norm, layer.post_norm)
        if any(p is None for p in parts) or any(not isinstance(w, torch.Tensor) for w in norms):
            return None
        bias = None if layer.qkv_bias is None else layer.qkv_bias.float()
        layers.append(kernels.module().Layer(
            *parts, layer.in_norm.float(), layer.post_norm.float(), bias, lean.eps, lean.heads, lean.kv_heads, lean.head_dim
        ))
    return layers


def run(layers: list, lean, x: torch.Tensor, position_ids: torch.Tensor, slot: torch.Tensor, cache, states) -> torch.Tensor:
    """x (B, n, d) float32 through every layer; slot (B, n) each token's cache slot (its position;
    -1 where a column holds no real token); ``states`` (a list or None)
    gathers each layer's output as transformers' hidden states do."""
    B, n, d = x.shape
    rows = torch.arange(B).repeat_interleave(n)  # (B n,)
    positions, slot = position_ids.reshape(-1).contiguous(), slot.reshape(-1).contiguous()
    h = x.reshape(B * n, d).contiguous()
    for i, layer in enumerate(layers):
        h = layer.forward(h, cache.kv[i], lean.cos, lean.sin, positions, rows, slot)  # (B n, d)
        if states is not None:
            states.append(h.view(B, n, d))
    return h.view(B, n, d)
