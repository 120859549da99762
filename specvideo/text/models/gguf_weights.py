"""A GGUF file's quantised tensors as k-quant weights, without re-rounding (``runtime.kquant``).

Each block type is decoded from its bytes into codes and scales (numpy, vectorised over blocks):
Q4_K (d, dmin and 6-bit scales and minimums of 8 sub-blocks of 32), Q6_K (d and int8 scales of
16 sub-blocks of 16, 6-bit codes split into 4 low and 2 high bits), Q4_1 (d and m per 32), Q5_0
(d per 32, 4 low bits and 1 high bit a code: 5-bit codes, 6 bits a weight with d and 16 d in
float16, in place of the file's 5.5) and Q8_0 (d per 32). ``dequantize()`` of the result equals the gguf package's dequantisation bit for bit
(tests/text/test_gguf_weights.py). A float tensor (F32/F16/BF16) comes back dense.

llama's q and k projections are stored with their rows permuted for llama.cpp's rotary layout;
``load_tensor(..., permute_heads=n)`` undoes it as transformers does (rows move, blocks stay whole).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import torch

from specvideo.text.models.gguf_file import GGUFFile
from specvideo.text.runtime.kquant import TILE, KQuantWeight, Stacked, fuse, pack

SUPPORTED = ("Q4_K", "Q6_K", "Q4_1", "Q5_0", "Q8_0")


def _f16(raw: np.ndarray) -> np.ndarray:
    """(..., 2) uint8 -> (...) float32."""
    return np.ascontiguousarray(raw).view(np.float16)[..., 0].astype(np.float32)


def _q4_k(blocks: np.ndarray):
    """(N, B, 144) -> u (N, B*256), sc, mn (N, B*8), d, dmin (N, B)."""
    d, dmin = _f16(blocks[..., 0:2]), _f16(blocks[..., 2:4])
    s = blocks[..., 4:16].astype(np.uint8)  # (N, B, 12)
    sc = np.concatenate([s[..., 0:4] & 63, (s[..., 8:12] & 0xF) | ((s[..., 0:4] >> 6) << 4)], -1)  # (N, B, 8)
    mn = np.concatenate([s[..., 4:8] & 63, (s[..., 8:12] >> 4) | ((s[..., 4:8] >> 6) << 4)], -1)
    qs = blocks[..., 16:].reshape(*blocks.shape[:2], 4, 32)  # 4 chunks of 64 values
    u = np.stack([qs & 0xF, qs >> 4], axis=-2)  # (N, B, 4, 2, 32): sub-block 2i low, 2i+1 high
    N = blocks.shape[0]
    return u.reshape(N, -1), sc.reshape(N, -1), mn.reshape(N, -1), d, dmin


def _q6_k(blocks: np.ndarray):
    """(N, B, 210) -> u (N, B*256) in 0..63, sc (N, B*16) int8, d (N, B)."""
    N, B = blocks.shape[:2]
    ql = blocks[..., 0:128].reshape(N, B, 2, 64)
    qh = blocks[..., 128:192].reshape(N, B, 2, 32)
    sc = blocks[..., 192:208].view(np.int8)  # (N, B, 16)
    d = _f16(blocks[..., 208:210])
    low = np.stack([ql[..., :32] & 0xF, ql[..., 32:] & 0xF, ql[..., :32] >> 4, ql[..., 32:] >> 4], axis=-2)
    high = np.stack([(qh >> s) & 3 for s in (0, 2, 4, 6)], axis=-2)  # (N, B, 2, 4, 32)
    u = low | (high << 4)  # (N, B, 2 halves, 4 quarters, 32)
    return u.reshape(N, -1), sc.reshape(N, -1), d


def decode(data: np.ndarray, type_name: str, K: int) -> KQuantWeight:
    """A tensor's raw blocks (N, bytes per row) uint8 -> its k-quant weight (N, K)."""
    N = data.shape[0]
    ones = lambda n: np.ones((N, n), np.int8)  # noqa: E731
    if type_name == "Q4_K":
        u, sc, mn, d, dmin = _q4_k(data.reshape(N, K // 256, 144))
        parts = (u, sc, mn, d, dmin, 4, 32, 8, 2)
    elif type_name == "Q6_K":
        u, sc, d = _q6_k(data.reshape(N, K // 256, 210))
        parts = (u, sc, sc, d, 32 * d, 6, 16, 16, 1)  # d sc (u - 32) = d sc u - 32 d sc
    elif type_name == "Q4_1":
        blocks = data.reshape(N, K // 32, 20)
        d, m = _f16(blocks[..., 0:2]), _f16(blocks[..., 2:4])
        qs = blocks[..., 4:]
        u = np.concatenate([qs & 0xF, qs >> 4], -1).reshape(N, K)
        parts = (u, ones(K // 32), ones(K // 32), d, -m, 4, 32, 1, 0)  # d u + m
    elif type_name == "Q5_0":
        blocks = data.reshape(N, K // 32, 22)
        d = _f16(blocks[..., 0:2])
        qh = blocks[..., 2:6].copy().view(np.uint32)  # (N, B, 1) bit j: value j's fifth bit
        high = ((qh >> np.arange(32, dtype=np.uint32)) & 1).astype(np.uint8)  # (N, B, 32)
        qs = blocks[..., 6:]  # (N, B, 16): values j (low nibble) and j + 16 (high nibble)
        u = (np.concatenate([qs & 0xF, qs >> 4], -1) | (high << 4)).reshape(N, K)
        parts = (u, ones(K // 32), ones(K // 32), d, 16 * d, 5, 32, 1, 0)  # d (u - 16)
    elif type_name == "Q8_0":
        blocks = data.reshape(N, K // 32, 34)
        d = _f16(blocks[..., 0:2])
        u = (blocks[..., 2:].view(np.int8).astype(np.int16) + 128).astype(np.uint8).reshape(N, K)
        parts = (u, ones(K // 32), ones(K // 32), d, 128 * d, 8, 32, 1, 0)  # d (u - 128)
    else:
        raise ValueError(f"no k-quant mapping for GGUF type {type_name}; supported: {', '.join(SUPPORTED)}")
    u, sc, mn, d, dmin, bits, group, S, C = parts
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    half = _exact_half(d) and _exact_half(dmin)  # the file's float16 (x 16, 32 or 128: exact unless it overflows)
    return pack(t(u.astype(np.uint8)), t(sc.astype(np.int8)), t(mn.astype(np.int8)), t(d), t(dmin), bits, group, S, type_name, C, half)


def _exact_half(a: np.ndarray) -> bool:
    return bool(np.array_equal(a.astype(np.float16).astype(np.float32), a))


def open_reader(path) -> GGUFFile:
    """The index of the GGUF file at ``path`` (``gguf_file.GGUFFile``), shared by every reader of one
    loading (its pages are dropped once decoded, so a kept map costs address space, not memory)."""
    stat = os.stat(path)
    return _reader(os.path.realpath(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _reader(path: str, size: int, mtime_ns: int) -> GGUFFile:
    return GGUFFile(path)



DECODE_ROWS = 8192  # a large table (the token table, the output projection) is decoded this many rows at a time


def decode_rows(data: np.ndarray, type_name: str, K: int) -> KQuantWeight:
    """``decode`` in chunks of ``DECODE_ROWS`` rows (whole tiles), the parts joined once: the
    intermediates of a 151,936-row table stay a chunk's, not the table's."""
    if data.shape[0] <= DECODE_ROWS:
        return decode(data, type_name, K)
    parts = [decode(data[i : i + DECODE_ROWS], type_name, K) for i in range(0, data.shape[0], DECODE_ROWS)]
    first = parts[0]
    return KQuantWeight(
        *(torch.cat([getattr(p, f) for p in parts]) for f in ("codes", "scales", "supers")),
        first.bits, first.group, first.S, data.shape[0], K, first.source,
    )


def reverse_permute_rows(N: int, heads: int) -> torch.Tensor:
    """Row order that undoes llama.cpp's q/k permutation (as transformers' GGUF loader does)."""
    rows = torch.arange(N).reshape(heads, N // heads // 2, 2)  # llama.cpp's row (head, dim, half)
    return rows.transpose(1, 2).reshape(N)  # for each row (head, half, dim)


def load_tensor(reader, name: str, permute_heads: int | None = None):
    """Tensor ``name`` of an open ``GGUFFile``: a KQuantWeight for a supported quantised type, a
    dense float32 tensor for a float type; its pages of the file are released once copied."""
    tensor = next((t for t in reader.tensors if t.name == name), None)
    if tensor is None:
        raise KeyError(f"the GGUF file has no tensor {name}")
    type_name = tensor.tensor_type.name
    K = int(tensor.shape[0])
    if type_name in ("F32", "F16", "BF16"):
        dense = torch.from_numpy(np.array(tensor.data, dtype=np.float32)).reshape(-1, K)
        if permute_heads:
            dense = dense[reverse_permute_rows(dense.shape[0], permute_heads)]
        reader.release(tensor)
        return dense.squeeze(0) if dense.shape[0] == 1 else dense
    weight = decode_rows(np.asarray(tensor.data), type_name, K)
    reader.release(tensor)
    if permute_heads:
        weight = weight.select_rows(reverse_permute_rows(weight.out_features, permute_heads))
    return weight


@dataclass
class GGUFLayers:
    """What ``LeanLlama(weights="gguf")`` runs: per layer its norms, projections and biases."""

    layers: list  # SimpleNamespace(in_norm, post_norm, qkv, qkv_bias, o_proj, gate_up, down)
    lm_head: object  # (V, d) k-quant
    norm: torch.Tensor  # (d,) the final norm's weight
    embed: object  # (V, d) the token table: k-quant (rows unpacked on lookup) or dense


def load_layers(path, config) -> GGUFLayers:
    """Every tensor of the GGUF file at ``path`` for a llama / qwen2 ``config``, in its own format."""
    reader = open_reader(path)
    names = {t.name for t in reader.tensors}
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    llama = config.model_type == "llama"  # q and k rows stored permuted for llama.cpp's rotary layout
    get = lambda name, permute=None: load_tensor(reader, name, permute)  # noqa: E731
    layers = []
    for i in range(config.num_hidden_layers):
        b = f"blk.{i}."
        qkv = [get(b + "attn_q.weight", heads if llama else None), get(b + "attn_k.weight", kv_heads if llama else None),
               get(b + "attn_v.weight")]
        bias = None
        if b + "attn_q.bias" in names:
            bias = torch.cat([get(b + "attn_q.bias"), get(b + "attn_k.bias"), get(b + "attn_v.bias")])
        layers.append(SimpleNamespace(
            in_norm=get(b + "attn_norm.weight"),
            post_norm=get(b + "ffn_norm.weight"),
            qkv=_fused(qkv),
            qkv_bias=bias,
            o_proj=get(b + "attn_output.weight"),
            gate_up=_fused([get(b + "ffn_gate.weight"), get(b + "ffn_up.weight")]),
            down=get(b + "ffn_down.weight"),
        ))
    embed = get("token_embd.weight")
    head = get("output.weight") if "output.weight" in names else embed  # tied: the table is the head
    return GGUFLayers(layers, head, get("output_norm.weight"), embed)


TABLE_CHUNK = 8192  # rows de-quantised at a time


def dense_tables(path, config, limit: int):
    """The token table (V, d) and the output projection (V, d) of the GGUF file at ``path``, de-quantised
    to float32 (the output None where it is tied to the table); both None where they would pass
    ``limit`` bytes (a draft head then reads the target runner's block tables, ``LeanLlama(tables=)``).
    The file is read memory-mapped; only these tensors are decoded."""
    from gguf.quants import dequantize

    reader = open_reader(path)
    names = {t.name for t in reader.tensors}
    untied = "output.weight" in names
    if (2 if untied else 1) * config.vocab_size * config.hidden_size * 4 > limit:
        return None, None
    dtype = torch.float32

    def dense(name: str) -> torch.Tensor:
        tensor = next(t for t in reader.tensors if t.name == name)
        rows, K = int(tensor.shape[1]), int(tensor.shape[0])
        raw = np.asarray(tensor.data).reshape(rows, -1)  # (V, bytes per row), or (V, d) floats
        table = torch.empty(rows, K, dtype=dtype)
        for start in range(0, rows, TABLE_CHUNK):  # chunks: no float32 copy of the whole table
            part = raw[start : start + TABLE_CHUNK]
            values = part if tensor.tensor_type.name in FLOATS else dequantize(part, tensor.tensor_type)
            table[start : start + len(part)] = torch.from_numpy(np.asarray(values, dtype=np.float32).reshape(-1, K))
        reader.release(tensor)
        return table

    return dense("token_embd.weight"), dense("output.weight") if untied else None


def _fused(parts: list):
    """Projections sharing an input as one weight: concatenated floats, or k-quants fused by layout."""
    if all(isinstance(p, torch.Tensor) for p in parts):
        return torch.cat(parts)
    if any(isinstance(p, torch.Tensor) for p in parts):
        return Stacked(parts)
    return fuse(parts)


FLOATS = ("F32", "F16", "BF16")


def runs_blocks(path) -> bool:
    """Whether every tensor of the GGUF file at ``path`` is of a type and shape ``load_layers`` holds."""
    return not unheld(path)


def unheld(path) -> list[str]:
    """What keeps the kernel from running the GGUF file at ``path`` as it is: the tensor types it has
    no mapping for (a quantised matrix also needs whole 16-row tiles), or why the file cannot be read."""

    def held(t) -> bool:
        kind = t.tensor_type.name
        return kind in FLOATS or (kind in SUPPORTED and len(t.shape) == 2 and int(t.shape[1]) % TILE == 0)

    try:
        tensors = open_reader(path).tensors
    except (OSError, ValueError) as err:
        return [str(err)]
    return sorted(
        {t.tensor_type.name if t.tensor_type.name not in SUPPORTED else f"{t.tensor_type.name} in rows not whole tiles"
         for t in tensors if not held(t)}
    )
