"""oneDNN pre-packed weights for any transformers model's ``nn.Linear`` layers (CPU, float32).

``F.linear`` re-lays out its weight for every call: a k-token check of a memory-bound model then
costs several times a 1-token forward (the bench's decode table, ``target_packed@n`` against
``target@n``, measures it). A weight converted once to oneDNN's blocked layout (``Tensor.to_mkldnn``) is
read as it is, so k rows cost little more than one. ``PackedLinears(model)`` holds those copies
(as much memory again as the linear weights) and, inside ``with``, routes every ``nn.Linear`` of
the model through them; outside, the model is untouched, so one set of dense weights serves both
the packed verifier and transformers' own ``generate()``. The packed product sums in another order than ``F.linear``: logits
differ in the last bits, and a greedy run is compared token by token with the target's own.
"""

from __future__ import annotations

import weakref

import torch
from torch import nn

from specvideo.device import packs_float32

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def packed_linears(model: nn.Module) -> PackedLinears:
    """The model's one PackedLinears (made on first use): a 1.5B model's packed copies are 6 GB."""
    if model not in _CACHE:
        _CACHE[model] = PackedLinears(model)
    return _CACHE[model]


class PackedLinears:
    """Pre-packed copies of ``model``'s linear layers, swapped in within a ``with`` block."""

    def __init__(self, model: nn.Module):
        layers = [m for m in model.modules() if isinstance(m, nn.Linear)]
        if not layers:
            raise ValueError(f"{type(model).__name__} has no nn.Linear layers to pack")
        weight = layers[0].weight
        if not packs_float32(weight.device, weight.dtype):
            raise ValueError(
                "packed linears need float32 weights on a CPU with oneDNN (torch.backends.mkldnn), "
                f"got {weight.dtype} on {weight.device}"
            )
        with torch.no_grad():
            self.layers = [(m, *_packed(m)) for m in layers]
        self.depth = 0

    def __enter__(self) -> PackedLinears:
        if self.depth == 0:
            for module, weight, bias in self.layers:
                module.forward = _forward(weight, bias, module.out_features)  # an instance attribute
        self.depth += 1
        return self

    def __exit__(self, *exc) -> None:
        self.depth -= 1
        if self.depth == 0:
            for module, _, _ in self.layers:
                del module.forward  # back to nn.Linear.forward


def _packed(module: nn.Linear) -> tuple[torch.Tensor, torch.Tensor]:
    bias = module.bias if module.bias is not None else torch.zeros(module.out_features)
    return module.weight.detach().to_mkldnn(), bias.detach().float().to_mkldnn()


def _forward(weight: torch.Tensor, bias: torch.Tensor, out_features: int):
    def forward(x: torch.Tensor) -> torch.Tensor:
        """x (..., d_in) -> (..., d_out) through the pre-packed weight."""
        rows = x.reshape(-1, x.shape[-1]).float().to_mkldnn()
        out = torch._C._nn.mkldnn_linear(rows, weight, bias).to_dense()
        return out.reshape(*x.shape[:-1], out_features).to(x.dtype)

    return forward
