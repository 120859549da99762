"""A lean Llama for drafting on CPU: the same weights as a transformers ``LlamaForCausalLM``, run by
a few plain PyTorch ops per layer with a preallocated KV cache.

For a 1-layer draft the transformers forward is dominated by per-call Python overhead (module
hooks, mask construction, cache bookkeeping). This module fuses q/k/v and gate/up projections and
keeps its cache in preallocated buffers; it answers the same call as the transformers model inside
``CausalLMState`` (input_ids, attention_mask, position_ids, cache, logits_to_keep), so the
``ModelDrafter`` runs it unchanged. Verification stays with the target, so exactness never depends
on this re-implementation; the tests check its logits against transformers anyway.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn
from transformers import PreTrainedModel


class LeanCache:
    """Preallocated keys/values (layers, B, H_kv, capacity, D); ``crop(-n)`` drops the last n slots."""

    def __init__(
        self, layers: int, batch: int, heads: int, head_dim: int, like: torch.Tensor, capacity: int = 256
    ):
        shape = (layers, batch, heads, capacity, head_dim)
        self.keys = torch.empty(shape, dtype=like.dtype, device=like.device)
        self.values = torch.empty_like(self.keys)
        self.length = 0

    def reserve(self, n: int) -> None:
        capacity = self.keys.shape[3]
        if self.length + n > capacity:
            grow = max(capacity, self.length + n - capacity)
            pad = list(self.keys.shape)
            pad[3] = grow
            self.keys = torch.cat([self.keys, self.keys.new_empty(pad)], dim=3)
            self.values = torch.cat([self.values, self.values.new_empty(pad)], dim=3)

    def crop(self, tokens_to_remove: int) -> None:
        self.length += tokens_to_remove  # negative: remove that many slots

    def get_seq_length(self) -> int:
        return self.length


class LeanLlama(nn.Module):
    """Inference-only Llama decoder over the weights of a transformers Llama model."""

    def __init__(self, model: PreTrainedModel):
        super().__init__()
        config = model.config
        if getattr(config, "model_type", None) != "llama":
            raise ValueError(
                f"the lean drafter runs Llama-architecture drafts, got model_type={config.model_type!r}"
            )
        self.config = config
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.embed = model.model.embed_tokens
        self.rotary = model.model.rotary_emb
        self.eps = config.rms_norm_eps
        self.layers = [_fuse(layer) for layer in model.model.layers]
        self.norm = model.model.norm.weight
        self.lm_head = model.lm_head.weight

    @property
    def device(self) -> torch.device:
        return self.lm_head.device

    def make_cache(self, batch_size: int) -> LeanCache:
        return LeanCache(len(self.layers), batch_size, self.kv_heads, self.head_dim, self.lm_head)

    @torch.inference_mode()
    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        cache: LeanCache,
        logits_to_keep: int = 0,
        **unused,
    ) -> SimpleNamespace:
        """input_ids (B, n); attention_mask (B, L + n) over cached + new slots; position_ids (B, n)."""
        n, start = input_ids.shape[1], cache.length
        cache.reserve(n)
        x = self.embed(input_ids)  # (B, n, d)
        cos, sin = self.rotary(x, position_ids)  # (B, n, D)
        mask = _attention_mask(attention_mask.bool(), start, n)  # (B, 1, n, L + n)
        for i, layer in enumerate(self.layers):
            x = x + self._attend(
                i, layer, F.rms_norm(x, x.shape[-1:], layer.attn_norm, self.eps), cos, sin, mask, cache
            )
            h = F.rms_norm(x, x.shape[-1:], layer.mlp_norm, self.eps)
            gate, up = (h @ layer.gate_up.T).chunk(2, dim=-1)  # (B, n, I) each
            x = x + (F.silu(gate) * up) @ layer.down.T
        cache.length = start + n
        x = F.rms_norm(x[:, -logits_to_keep:] if logits_to_keep else x, x.shape[-1:], self.norm, self.eps)
        return SimpleNamespace(logits=x @ self.lm_head.T)  # (B, n_keep, V)

    def _attend(self, i, layer, h, cos, sin, mask, cache: LeanCache) -> torch.Tensor:
        qkv = h @ layer.qkv.T  # (B, n, (H + 2 H_kv) D)
        q, k, v = qkv.split(
            [self.heads * self.head_dim, self.kv_heads * self.head_dim, self.kv_heads * self.head_dim], -1
        )
        q = rearrange(q, "b n (h d) -> b h n d", d=self.head_dim)
        k = rearrange(k, "b n (h d) -> b h n d", d=self.head_dim)
        v = rearrange(v, "b n (h d) -> b h n d", d=self.head_dim)
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        start, end = cache.length, cache.length + q.shape[2]
        cache.keys[i, :, :, start:end] = k
        cache.values[i, :, :, start:end] = v
        keys, values = cache.keys[i, :, :, :end], cache.values[i, :, :, :end]  # (B, H_kv, L + n, D)
        out = F.scaled_dot_product_attention(
            q, keys, values, attn_mask=mask, enable_gqa=self.heads != self.kv_heads
        )
        return rearrange(out, "b h n d -> b n (h d)") @ layer.o_proj.T


def _fuse(layer) -> SimpleNamespace:
    attn, mlp = layer.self_attn, layer.mlp
    if attn.q_proj.bias is not None or getattr(mlp.gate_proj, "bias", None) is not None:
        raise ValueError("the lean drafter supports Llama drafts without projection biases")
    return SimpleNamespace(
        attn_norm=layer.input_layernorm.weight,
        qkv=torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]).detach(),
        o_proj=attn.o_proj.weight.detach(),
        mlp_norm=layer.post_attention_layernorm.weight,
        gate_up=torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).detach(),
        down=mlp.down_proj.weight.detach(),
    )


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding as transformers' Llama applies it (rotate_half convention)."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos[:, None] + torch.cat([-x2, x1], dim=-1) * sin[:, None]  # (B, H, n, D)


def _attention_mask(valid: torch.Tensor, start: int, n: int) -> torch.Tensor:
    """Causal over slots, masked where a slot holds no real token; a query always sees itself so a
    padding query never has an empty row (its output is ignored, but must stay finite)."""
    total = valid.shape[1]
    slots = torch.arange(total, device=valid.device)  # (L + n,)
    query = start + torch.arange(n, device=valid.device)  # (n,)
    causal = slots[None, :] <= query[:, None]  # (n, L + n)
    return ((causal[None] & valid[:, None, :]) | (slots[None, :] == query[:, None])[None])[
        :, None
    ]  # (B, 1, n, L + n)
