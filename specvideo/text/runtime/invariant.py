"""Batch-invariant kernels for a bf16 target: a token's logits do not depend on how many tokens share
its forward, so a k-token check computes each position exactly as a 1-token step does.

A bf16 product's rounding depends on the kernel, and the kernel on the call's shape: a 1-row
product takes another path than a 4-row one, and an attention call's key length and query count
change how it splits and sums. Measured on SmolLM2-135M in bf16: a 4-token block's logits differ
from four 1-token steps' by up to 1.0 (transformers and LeanLlama alike), enough to flip argmax at
near ties. Here every decode-time call has one canonical shape:

- linear layers run on tiles of exactly ``ROW_TILE`` rows (zero-padded): every row of every call
  goes through the same kernel; where a probe finds that calls of 8 .. ``WIDE_TILE`` rows give each
  row the bits of a ``ROW_TILE``-row call (``wide_tile``; true of bf16 on an Intel CPU with AMX
  tiles), up to ``WIDE_TILE`` rows go in one call, zero-padded to a multiple of ``ROW_TILE``;
- attention runs ``ROW_TILE`` query rows at a time over the key slots up to the next multiple of
  ``KEY_TILE`` past each query (slots beyond the query masked; the cache is zero-initialised so a
  masked slot is finite): a query's call has the same shape whether it is alone or in a block. The
  queries of a block that fall on both sides of a ``KEY_TILE`` boundary go in two calls.

A prefill runs in calls that end at multiples of ``PREFILL_CHUNK`` slots (a call of more than
``MAX_TILED_ROWS`` rows untiled): every run computes a prompt alike, a prompt cache that restores
whole chunks included, and ``CausalLMState`` feeds the prompt's last token with the first decode
block. In bf16 a 4-row
product costs about what a 1-row one does (docs/history/benchmarks.md "Text: decode cost per dtype").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from specvideo.text.runtime.quant import is_quantized, linear

ROW_TILE = 4  # rows of every decode-time linear and attention call
WIDE_TILE = 32  # rows of a decode-time linear call where the weight's kernel allows (wide_tile)
KEY_TILE = 64  # attention calls see key slots up to a multiple of this
MAX_TILED_ROWS = 64  # a block of more rows is a prefill: one call
PREFILL_CHUNK = 128  # a prefill goes in calls that end at multiples of this many slots


def key_width(end: int) -> int:
    """The canonical key length for a query whose last visible slot is ``end - 1``."""
    return -(-end // KEY_TILE) * KEY_TILE


def tiled_linear(x: torch.Tensor, weight, tile: int = ROW_TILE, unit: int = ROW_TILE) -> torch.Tensor:
    """x (..., d_in) @ weight (d_out, d_in)^T in calls of a multiple of ``unit`` rows, ``tile`` at
    most (``wide_tile``: more than ROW_TILE only where the weight's products give every row the
    bits of a ROW_TILE-row call; ``row_unit``: 1 where every row's bits are the same in a call of
    any number of rows). weight: a dense tensor or an int8 / int4 one (``quant``)."""
    rows = x.reshape(-1, x.shape[-1])  # (M, d_in)
    if x.dim() > 1 and x.shape[-2] > MAX_TILED_ROWS:  # a prefill's tokens
        return linear(rows, weight).reshape(*x.shape[:-1], weight.shape[0])
    M = rows.shape[0]
    padded = rows if M % unit == 0 else F.pad(rows, (0, 0, 0, -M % unit))  # (M', d_in), M' a multiple of unit
    if padded.shape[0] <= tile:
        out = linear(padded, weight)[:M]  # (M, d_out)
    else:
        out = torch.cat([linear(part, weight) for part in padded.split(tile)])[:M]  # (M, d_out)
    return out.reshape(*x.shape[:-1], weight.shape[0])


_WIDE: dict[tuple, bool] = {}  # (shape, dtype, device) -> calls up to WIDE_TILE rows keep the bits


def _probe(weight, rows: int, dtype: torch.dtype) -> bool:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(rows, weight.shape[1], generator=generator).to(dtype=dtype, device=weight.device)
    reference = linear(x[:ROW_TILE], weight)  # (ROW_TILE, d_out)
    return all(
        torch.equal(linear(x[:m], weight)[:ROW_TILE], reference) for m in range(2 * ROW_TILE, rows + 1, ROW_TILE)
    )


def wide_tile(weight, dtype: torch.dtype | None = None) -> int:
    """The widest call (rows) a product with this weight may take: WIDE_TILE where calls of 8, 12
    .. WIDE_TILE rows gave the first ROW_TILE rows the very bits of a ROW_TILE-row call (probed
    once per shape, dtype and device on random rows: the kernel's choice, not the data's),
    else ROW_TILE. A wide call lets a batch of rows, or a longer draft, share one pass over the
    weight (on an AMX CPU a 16-row bf16 product costs about what a 4-row one does). dtype: the
    activations' (a quantised weight's products take the model's dtype; default the weight's)."""
    dtype = dtype or weight.dtype
    key = (tuple(weight.shape), weight.dtype, dtype, str(weight.device))
    if key not in _WIDE:
        with torch.inference_mode():
            _WIDE[key] = _probe(weight, WIDE_TILE, dtype)
    return WIDE_TILE if _WIDE[key] else ROW_TILE


_ANY_ROWS: dict[tuple, bool] = {}  # (shape, format, dtype, device) -> any row count keeps the bits


def row_unit(weight, dtype: torch.dtype) -> int:
    """The row multiple a decode-time call with this weight is padded to: 1 for a weight-only
    quantised weight whose kernel gives each row the same bits in calls of 1 .. WIDE_TILE rows
    (probed once per shape on random rows; true of torch's int8 and int4 CPU kernels, which quantise
    no activation and are linear in the rows, and of specvideo's k-quant kernel, which rounds each
    row on its own, so padding a 1-token step to ROW_TILE rows would cost
    up to 4x), else ROW_TILE (dense products, whose kernels change with the row count and whose
    cost is nearly flat in it)."""
    if not is_quantized(weight):
        return ROW_TILE
    key = (tuple(weight.shape), weight.dtype, dtype, str(weight.device))
    if key not in _ANY_ROWS:
        with torch.inference_mode():
            x = torch.randn(WIDE_TILE, weight.shape[1], generator=torch.Generator().manual_seed(0)).to(dtype)
            alone = torch.cat([linear(x[i : i + 1], weight) for i in range(WIDE_TILE)])  # (R, d_out)
            _ANY_ROWS[key] = all(torch.equal(linear(x[:m], weight), alone[:m]) for m in range(2, WIDE_TILE + 1))
    return 1 if _ANY_ROWS[key] else ROW_TILE


@dataclass(frozen=True)
class Call:
    """One attention call: queries first .. stop - 1 of the block over ``width`` key slots."""

    first: int
    stop: int
    width: int
    mask: torch.Tensor  # (B|1, 1, rows, width) bool


def attention_plan(start: int, n: int, device: torch.device) -> list[Call]:
    """The calls that attend a block of n queries at slots start .. start + n - 1 of one row whose
    slots 0 .. start + n - 1 all hold its tokens (built once per forward, shared by every layer)."""
    end = start + n
    if n > MAX_TILED_ROWS:  # a prefill: one causal call
        return [Call(0, n, end, _mask(torch.arange(start, end, device=device), end))]
    calls, j = [], 0
    while j < n:
        width = key_width(start + j + 1)
        stop = min(j + ROW_TILE, n, width - start)  # queries that share this key width, one tile at most
        query = (start + j + torch.arange(ROW_TILE, device=device)).clamp(max=start + stop - 1)  # padding rows repeat the last
        calls.append(Call(j, stop, width, _mask(query, width)))
        j = stop
    return calls


@dataclass(frozen=True)
class RowPlan:
    """One row of a batch whose rows stand at different positions: its real columns of the block
    and their calls. The row's keys lie at slots = their positions (its own contiguous slots, as
    alone), so its calls are the very calls it makes alone."""

    columns: torch.Tensor  # (m,) the block's columns that hold the row's real tokens
    start: int  # the position (= slot) of its first real token in the block
    calls: list[Call]


def row_plans(position_ids: torch.Tensor, valid: torch.Tensor) -> list[RowPlan]:
    """position_ids, valid (B, n): each row's plan (``attend_rows``)."""
    plans = []
    for positions, real in zip(position_ids, valid):
        columns = real.nonzero()[:, 0]  # (m,)
        start = int(positions[columns[0]]) if len(columns) else 0
        plans.append(RowPlan(columns, start, attention_plan(start, len(columns), position_ids.device)))
    return plans


def attend(q: torch.Tensor, kv: torch.Tensor, plan: list[Call], gqa: bool) -> torch.Tensor:
    """q (B, H, n, D) the block's queries; kv (2, B, H_kv, capacity, D) one layer's cache with the
    block's keys written, capacity >= every call's width. Returns (B, H, n, D)."""
    outs = []
    for call in plan:
        rows = q[:, :, call.first : call.stop]  # (B, H, r, D)
        padded = F.pad(rows, (0, 0, 0, call.mask.shape[2] - rows.shape[2]))  # (B, H, rows, D)
        out = F.scaled_dot_product_attention(
            padded, kv[0, :, :, : call.width], kv[1, :, :, : call.width], attn_mask=call.mask, enable_gqa=gqa
        )  # (B, H, rows, D)
        outs.append(out[:, :, : call.stop - call.first])
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)  # (B, H, n, D)


def attend_rows(q: torch.Tensor, kv_new: torch.Tensor, kv: torch.Tensor, plans: list[RowPlan], gqa: bool) -> torch.Tensor:
    """Each row on its own: its real columns' keys and values kv_new (2, B, H_kv, n, D) go to its
    slots start .. start + m - 1 of kv (2, B, H_kv, capacity, D), its queries q (B, H, n, D) attend
    in its own calls. Returns (B, H, n, D), zeros at the columns that hold no real token."""
    out = torch.zeros_like(q)
    for b, plan in enumerate(plans):
        m = len(plan.columns)
        if not m:
            continue
        kv[:, b, :, plan.start : plan.start + m] = kv_new[:, b, :, plan.columns]
        out[b, :, plan.columns] = attend(q[b : b + 1, :, plan.columns], kv[:, b : b + 1], plan.calls, gqa)[0]
    return out


def _mask(query: torch.Tensor, width: int) -> torch.Tensor:
    """(1, 1, rows, width) bool: the query at slot ``query[r]`` sees slots 0 .. query[r]."""
    slots = torch.arange(width, device=query.device)  # (width,)
    return (slots[None] <= query[:, None])[None, None]
