"""k-quant weights: llama.cpp's block formats held as they are and multiplied by our own kernel.

One layout holds them all: W[n, k] = d[n, j] * sc[n, g] * u[n, k] - dmin[n, j] * mn[n, g], with
unsigned codes u of 4, 6 or 8 bits, int8 sub-scales sc, mn per group g of ``group`` inputs and scales
d, dmin per super-block j of ``S`` groups. The GGUF block types map onto it without re-rounding
(``specvideo.text.models.gguf_weights``), d and dmin in the file's float16, only the sub-scales the
type has (``C``: both; Q6_K's one, mn = sc; none where both are 1):

| GGUF | codes | group | S | d, sc | dmin, mn | C | bits a weight (file's) |
|---|---|---|---|---|---|---|---|
| Q4_K | 4-bit q | 32 | 8 | d, 6-bit scale | dmin, 6-bit min | 2 | 4.625 (4.5) |
| Q6_K | 6-bit q | 16 | 16 | d, int8 scale | 32 d, = sc | 1 | 6.625 (6.5625) |
| Q4_1 | 4-bit q | 32 | 1 | d, 1 | -m, 1 | 0 | 5 (5) |
| Q5_0 | 5-bit q | 32 | 1 | d, 1 | 16 d, 1 | 0 | 6 (5.5) |
| Q8_0 | 8-bit q + 128 | 32 | 1 | d, 1 | 128 d, 1 | 0 | 9 (8.5) |

so the weights are the file's own, bit for bit (d * sc and dmin * mn are exact in float32; the
tests compare with the gguf package's dequantisation); Q4_K's sub-scales take 8 bits where the
file packs 6. Any dense weight can be rounded to the same layout (``quantize``: 4-bit codes,
min-max per group of 32, sub-scales rounded to int8 per super-block of 8, float32 d and dmin: 4.75
bits a weight).

The product (``qmm.cpp``) rounds activations to int8 per 32 inputs, as llama.cpp's Q8 blocks do, and
multiplies with AVX-512 VNNI; a call's weights are unpacked once for all its rows. Each row's bits
are its own whatever the call's width (the invariant verifier's contract).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specvideo.text.runtime import kernels

TILE = 16  # outputs per kernel tile


@dataclass(frozen=True)
class KQuantWeight:
    """A (N, K) weight in the k-quant layout above, laid out for ``qmm.cpp``."""

    codes: torch.Tensor  # (N / 16, groups, bytes) uint8
    scales: torch.Tensor  # (N / 16, groups, C, 16) int8: sc, mn (C 2), sc = mn (C 1), none (C 0: both 1)
    supers: torch.Tensor  # (N / 16, groups / S, 2, 16) float32 or float16: d, dmin
    bits: int
    group: int
    S: int
    out_features: int
    in_features: int
    source: str = "int4"  # what it came from: a GGUF type name, or "int4" (rounded by us)

    fmt = "kquant"

    @property
    def shape(self) -> torch.Size:
        return torch.Size((self.out_features, self.in_features))

    @property
    def device(self) -> torch.device:
        return self.codes.device

    @property
    def dtype(self) -> str:
        return self.fmt

    @property
    def nbytes(self) -> int:
        return self.codes.nbytes + self.scales.nbytes + self.supers.nbytes

    @property
    def layout(self) -> tuple:
        """What must agree for two weights to be one: codes, group, super-block, sub-scales, scales' dtype."""
        return self.bits, self.group, self.S, self.scales.shape[2], self.supers.dtype

    def linear(self, x: torch.Tensor) -> torch.Tensor:
        """x (M, K) -> (M, N) in x's dtype."""
        y = kernels.module().qmm(
            x.float().contiguous(), self.codes, self.scales, self.supers, self.bits, self.group, self.S
        )  # (M, N) float32
        return y.to(x.dtype)

    def dequantize(self) -> torch.Tensor:
        """The (N, K) float32 weight: d * sc * u - dmin * mn, in the order llama.cpp computes it."""
        u, sc, mn, d, dmin = unpack(self)
        s = (d.repeat_interleave(self.S, 1) * sc.float()).repeat_interleave(self.group, 1)  # (N, K)
        b = (dmin.repeat_interleave(self.S, 1) * mn.float()).repeat_interleave(self.group, 1)  # (N, K)
        return s * u.float() - b

    def concat(self, other: KQuantWeight) -> KQuantWeight:
        """This weight's outputs followed by ``other``'s (same layout): q/k/v or gate/up fused."""
        if (self.layout, self.in_features) != (other.layout, other.in_features):
            raise ValueError("only weights of one k-quant layout and input width concatenate")
        cat = lambda a, b: torch.cat([a, b])  # noqa: E731
        return KQuantWeight(
            cat(self.codes, other.codes), cat(self.scales, other.scales), cat(self.supers, other.supers),
            self.bits, self.group, self.S, self.out_features + other.out_features, self.in_features,
            self.source if self.source == other.source else f"{self.source}+{other.source}",
        )

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows ``ids`` (n,) of the dequantised weight (n, K) float32, unpacking only those: an
        embedding table looked up without a dense copy."""
        tile, lane = ids // TILE, ids % TILE  # (n,) each
        n, groups = len(ids), self.codes.shape[1]
        lanes = self.codes[tile].reshape(n, groups, -1, TILE, 4)[torch.arange(n), :, :, lane]  # (n, groups, zmm, 4)
        u = from_registers(lanes, self.bits)  # (n, groups, quads, 4)
        u = u.reshape(n, groups, self.group).float()  # (n, groups, group)
        sc, mn = _sub_scales(self.scales[tile, :, :, lane].float())  # (n, groups) each
        d, dmin = self.supers[tile, :, :, lane].float().unbind(-1)  # (n, groups / S) each
        s = d.repeat_interleave(self.S, 1) * sc  # (n, groups)
        b = dmin.repeat_interleave(self.S, 1) * mn
        return (s[..., None] * u - b[..., None]).reshape(n, self.in_features)

    def select_rows(self, rows: torch.Tensor) -> KQuantWeight:
        """Output rows ``rows`` (whole tiles' worth, any order): a permuted or restricted weight."""
        u, sc, mn, d, dmin = unpack(self)
        C, half = self.scales.shape[2], self.supers.dtype == torch.float16
        return pack(u[rows], sc[rows], mn[rows], d[rows], dmin[rows], self.bits, self.group, self.S, self.source, C, half)


class Stacked:
    """Weights of different layouts applied as one: their outputs side by side (q/k/v where v is
    Q6_K and q, k are Q4_K)."""

    fmt = "kquant"

    def __init__(self, parts: list):
        self.parts = parts

    @property
    def shape(self) -> torch.Size:
        return torch.Size((sum(p.shape[0] for p in self.parts), self.parts[0].shape[1]))

    @property
    def device(self) -> torch.device:
        return self.parts[0].device

    @property
    def dtype(self) -> str:
        return self.fmt

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.parts)

    def linear(self, x: torch.Tensor) -> torch.Tensor:
        outs = [p.linear(x) if hasattr(p, "linear") else x @ p.T.to(x.dtype) for p in self.parts]  # dense parts too
        return torch.cat(outs, dim=-1)  # (M, sum N)

    def dequantize(self) -> torch.Tensor:
        return torch.cat([p.dequantize() if hasattr(p, "dequantize") else p.float() for p in self.parts])


def fuse(parts: list) -> KQuantWeight | Stacked:
    """Weights sharing an input, outputs concatenated: one weight where the layouts agree."""
    out = [parts[0]]
    for p in parts[1:]:
        last = out[-1]
        same = last.layout == p.layout
        out[-1:] = [last.concat(p)] if same else [last, p]
    return out[0] if len(out) == 1 else Stacked(out)


def pack(u, sc, mn, d, dmin, bits: int, group: int, S: int, source: str, C: int = 2, half: bool = False) -> KQuantWeight:
    """Codes u (N, K) uint8, sub-scales sc, mn (N, groups) int8, scales d, dmin (N, groups / S)
    float32 -> the kernel's layout. N must be a multiple of 16; 6-bit codes go in groups of 16, with
    C 1 (mn = sc); C 0 where sc = mn = 1. half: d and dmin held in float16 (they must be exact)."""
    N, K = u.shape
    if bits not in (4, 5, 6, 8) or (bits == 6) != (group == 16):
        raise ValueError(f"k-quant codes are 4, 5 or 8 bits in groups of 32, or 6 bits in groups of 16; got {bits} bits, group {group}")
    if N % TILE or K % 32 or K % group:
        raise ValueError(f"a k-quant weight needs N a multiple of {TILE} and K of 32; got {N} x {K}")
    groups, quads = K // group, group // 4
    # lane n of zmm j holds the 4 codes u[n, g * group + 4 j : + 4]
    lanes = u.reshape(N // TILE, TILE, groups, quads, 4).permute(0, 2, 3, 1, 4)  # (T, groups, quads, 16, 4)
    lanes = lanes.reshape(N // TILE, groups, quads, 64)
    codes = to_registers(lanes, bits).reshape(N // TILE, groups, -1).contiguous()
    tiles = lambda t: t.reshape(N // TILE, TILE, -1).transpose(1, 2)  # noqa: E731  (N, c) -> (T, c, 16)
    if (bits == 6) != (C == 1) or (C == 1 and not torch.equal(sc, mn)) or (C == 0 and not (sc == 1).all() & (mn == 1).all()):
        raise ValueError(f"{C} sub-scales do not hold these {bits}-bit codes' scales (6 bits: 1, mn = sc; else 0 where all are 1, or 2)")
    scales = torch.stack([tiles(sc), tiles(mn)], dim=2)[:, :, :C].contiguous()  # (T, groups, C, 16)
    supers = torch.stack([tiles(d.float()), tiles(dmin.float())], dim=2)  # (T, groups / S, 2, 16)
    if half and not torch.equal(supers.half().float(), supers):
        raise ValueError("these super-block scales are not exact in float16")
    supers = (supers.half() if half else supers).contiguous()
    return KQuantWeight(codes, scales.to(torch.int8), supers, bits, group, S, N, K, source)


def to_registers(lanes: torch.Tensor, bits: int) -> torch.Tensor:
    """(..., quads, X) codes -> the bytes of the kernel's registers (..., zmm, X). 4 bits: quads j
    and j + quads / 2 share a byte (low, high nibble). 5 bits (8 quads): the low 4 bits so, then one
    register whose bit j is quad j's fifth. 6 bits (4 quads): two registers of low nibbles (quads
    0 | 2, 1 | 3) and one of the 2-bit high parts of all four."""
    if bits == 5:
        high = sum(((lanes[..., j, :] >> 4) & 1) << j for j in range(lanes.shape[-2]))  # (..., X)
        return torch.cat([to_registers(lanes & 0x0F, 4), high.unsqueeze(-2).to(lanes.dtype)], dim=-2)
    if bits == 4:
        half = lanes.shape[-2] // 2
        return lanes[..., :half, :] | (lanes[..., half:, :] << 4)
    if bits == 6:
        q = lanes & 0x0F
        high = lanes >> 4
        top = high[..., 0, :] | (high[..., 1, :] << 2) | (high[..., 2, :] << 4) | (high[..., 3, :] << 6)
        return torch.stack([q[..., 0, :] | (q[..., 2, :] << 4), q[..., 1, :] | (q[..., 3, :] << 4), top], dim=-2)
    return lanes


def from_registers(regs: torch.Tensor, bits: int) -> torch.Tensor:
    """The inverse of ``to_registers``: (..., zmm, X) bytes -> (..., quads, X) codes."""
    if bits == 5:
        low, high = from_registers(regs[..., :-1, :], 4), regs[..., -1:, :]  # (..., 8, X), (..., 1, X)
        return low | (((high >> torch.arange(low.shape[-2])[:, None].to(high.dtype)) & 1) << 4)
    if bits == 4:
        return torch.cat([regs & 0x0F, regs >> 4], dim=-2)
    if bits == 6:
        low0, low1, top = regs.unbind(-2)
        quads = [low0 & 0x0F, low1 & 0x0F, low0 >> 4, low1 >> 4]
        return torch.stack([q | (((top >> (2 * i)) & 3) << 4) for i, q in enumerate(quads)], dim=-2)
    return regs


def unpack(w: KQuantWeight):
    """The inverse of ``pack``: u (N, K) uint8, sc, mn (N, groups) int8, d, dmin (N, groups / S)."""
    T, groups = w.codes.shape[:2]
    quads = w.group // 4
    lanes = from_registers(w.codes.reshape(T, groups, -1, 64), w.bits)  # (T, groups, quads, 64)
    u = lanes.reshape(T, groups, quads, TILE, 4).permute(0, 3, 1, 2, 4).reshape(w.out_features, w.in_features)
    rows = lambda t: t.transpose(1, 2).reshape(w.out_features, -1)  # noqa: E731  (T, c, 16) -> (N, c)
    sc, mn = _sub_scales(w.scales.transpose(2, 3))  # (T, groups, 16) each
    return u, rows(sc), rows(mn), rows(w.supers[:, :, 0].float()), rows(w.supers[:, :, 1].float())


def _sub_scales(scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(..., C) sub-scales -> sc, mn (...) each: as held (C 2), mn = sc (C 1), ones (C 0)."""
    C = scales.shape[-1]
    if C == 0:
        ones = torch.ones(scales.shape[:-1], dtype=scales.dtype)
        return ones, ones
    return scales[..., 0], scales[..., C - 1]


@torch.no_grad()
def quantize(weight: torch.Tensor, group: int = 32, S: int = 8) -> KQuantWeight:
    """Round a dense (N, K) weight to 4-bit codes: min-max per group of ``group`` inputs, the
    groups' scales and minimums rounded to int8 multiples of one float per super-block of S groups
    (as Q4_K, with 8-bit instead of 6-bit sub-scales); codes re-rounded on the final grid."""
    w = weight.float()
    N, K = w.shape
    groups = K // group
    S = S if groups % S == 0 else 1
    g = w.reshape(N, groups, group)  # (N, G, g)
    low, high = g.amin(-1), g.amax(-1)  # (N, G)
    step = ((high - low) / 15).clamp(min=1e-12)  # (N, G)
    sup = lambda t: t.reshape(N, groups // S, S)  # noqa: E731
    d = (sup(step).amax(-1) / 127).clamp(min=1e-12)  # (N, G / S)
    sc = torch.ceil(sup(step) / d[..., None]).clamp(1, 127)  # (N, G / S, S): never a smaller step
    dmin = (sup(low).abs().amax(-1) / 127).clamp(min=1e-12)  # (N, G / S)
    mn = torch.round(-sup(low) / dmin[..., None]).clamp(-127, 127)  # (N, G / S, S)
    s = (d[..., None] * sc).reshape(N, groups, 1)  # (N, G, 1) the exact group scale
    b = (dmin[..., None] * mn).reshape(N, groups, 1)
    u = torch.round((g + b) / s).clamp(0, 15).reshape(N, K).to(torch.uint8)
    return pack(u, sc.reshape(N, groups).to(torch.int8), mn.reshape(N, groups).to(torch.int8), d, dmin, 4, group, S, "int4")
