"""A lean Llama for CPU decoding: the weights of a transformers ``LlamaForCausalLM`` (or Qwen2: biases
on q, k, v) run by a few plain PyTorch ops per layer over a preallocated KV cache (``LeanCache``:
a row's keys at slots equal to their positions). It runs drafts, and optionally the target
(``TextModels(lean_target=True)``), answering the transformers call ``CausalLMState`` makes
(input_ids, attention_mask, position_ids, cache, logits_to_keep). q/k/v and gate/up are fused with
the RMSNorm weights folded in, rotary cos/sin are looked up in tables, and a fully valid 1-token step
gets no mask. Its logits equal transformers' up to float rounding (tested, with greedy identity).

``vocab`` (token ids, ``specvideo.text.models.vocab``): only those rows of the output projection are
computed, the other logits are -inf (FR-Spec).

``invariant=True`` (the bf16 targets' precision policy, ``specvideo.text.models.precision``): every
position of a block is computed with the operations of a 1-token step (``invariant``: each query
over its own key prefix in canonical calls, linear layers in fixed row tiles), and ``CausalLMState``
stops the prompt's prefill one token short; a block's logits equal the 1-token steps' bit for bit.
Over GGUF blocks a decode block runs each layer in one C++ call (``fused_layer``).

The draft head (``specvideo.text.models.head``): with ``fc`` each token's input is ``fc([embedding,
feature])``, ``output_hidden_states=True`` returns transformers' hidden states of every fed position,
and with ``fuse`` (EAGLE-3) ``fused`` maps the target's ``layer_features`` to the head's input.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from specvideo.text.runtime import fused_layer, invariant
from specvideo.text.runtime.contract import LAYERS_KEY, LEAN_MODEL_TYPES, check_vocabulary
from specvideo.text.runtime.invariant import row_unit, wide_tile
from specvideo.text.runtime.lean_cache import LeanCache
from specvideo.text.runtime.quant import is_quantized, quantize


@dataclass(frozen=True)
class _Canonical:
    """Invariant mode's attention: the block's calls (``specvideo.text.runtime.invariant``), shared by every
    row (no hole, every row at the same position), or each row's own (``rows``)."""

    plan: list
    rows: bool = False


@dataclass(frozen=True)
class _ByPosition:
    """Rows at different lengths (not invariant): each real token's key goes to the slot of its
    position, and a query sees its row's slots up to its own position."""

    rows: torch.Tensor  # (m,) the row of each real token of the block
    columns: torch.Tensor  # (m,) its column
    slots: torch.Tensor  # (m,) its position
    width: int  # slots the block's queries attend over
    mask: torch.Tensor  # (B, 1, n, width) bool

    @staticmethod
    def of(position_ids: torch.Tensor, valid: torch.Tensor) -> _ByPosition:
        rows, columns = valid.nonzero(as_tuple=True)
        slots = position_ids[rows, columns]
        width = int(slots.max()) + 1
        # a padding column's query sees up to its row's last cached slot (its output is ignored)
        mask = torch.arange(width, device=valid.device) <= position_ids.clamp(min=0)[:, :, None]  # (B, n, W)
        return _ByPosition(rows, columns, slots, width, mask[:, None])


def _rows_end(position_ids: torch.Tensor, valid: torch.Tensor) -> int:
    """The slots in use after a block of rows apart: one past the last real token's position."""
    return int(position_ids[valid.bool()].max()) + 1


class LeanLlama(nn.Module):
    """Inference-only Llama decoder over the weights of a transformers Llama model.

    Per layer: RMSNorm (its weight folded into the projection after it), one q/k/v projection, RoPE
    on all heads at once from per-head tables (cos 1, sin 0 on the value heads, which pass through),
    one cache write, SDPA, the output projection, RMSNorm, one gate/up projection, SiLU, down.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        vocab: torch.Tensor | list[int] | None = None,
        fc: nn.Linear | None = None,
        invariant: bool = False,
        fuse: nn.Linear | None = None,
        weights: str | None = None,
        gguf: object | None = None,
        tables: LeanLlama | None = None,
    ):
        """weights: None keeps the model's dense weights; "int8" or "int4" quantises every projection
        and the output head (weight-only, ``specvideo.text.runtime.quant``; the embedding table stays dense);
        "gguf" runs ``gguf``, a GGUF file's blocks in their own formats, unrounded (the model's source
        read by ``specvideo.text.models.gguf_weights.load_layers``): norms unfolded, activations in
        float32 as llama.cpp's.
        tables: a GGUF target runner whose token table and output rows this model reads (a draft
        head on a target whose dense tables were never made: ``gguf.load_gguf_target``)."""
        super().__init__()
        config = model.config
        if getattr(config, "model_type", None) not in LEAN_MODEL_TYPES:
            raise ValueError(
                f"LeanLlama runs {' and '.join(LEAN_MODEL_TYPES)} architectures, got model_type={config.model_type!r}"
            )
        if getattr(config, "use_sliding_window", False):
            raise ValueError("LeanLlama does not run sliding-window attention (use_sliding_window=True)")
        self.config = config
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        if (weights == "gguf") != (gguf is not None):
            raise ValueError('weights="gguf" and a gguf file go together')
        # GGUF weights: the token table in its blocks (else self.embed), float32 activations (else
        # the embeddings' dtype), each layer in one C++ call for decode blocks (``fused_layer``)
        self.embed_table, self.act_dtype, self._fused = None, None, None
        with torch.no_grad():
            self.embed = model.model.embed_tokens.weight.detach()
            if gguf is not None:  # the file's own weights; no dense copy is made
                self.weights = weights
                self._init_gguf(model, gguf, vocab, fc)
                self.exact_prefill = invariant  # its calls are invariant; a state need not prefill as if cold
                return
            if tables is not None:  # the target runner's block table: rows unpacked on lookup
                self.embed_table = table = tables.embed_table
                self.embed = table[:1] if isinstance(table, torch.Tensor) else table.rows(torch.zeros(1, dtype=torch.long))
            self.layers = [_fuse(layer) for layer in model.model.layers]
            self.head_norm = None  # folded into lm_head
            head = model.lm_head.weight.detach()  # (V, d)
            self.vocab_size = head.shape[0]
            self.vocab = None if vocab is None else check_vocabulary(vocab, self.vocab_size).to(self.embed.device)
            if tables is not None:  # (V', d) float32 de-quantised from the runner's output blocks
                rows = _block_rows(tables.lm_head, self.vocab)
            else:
                rows = head if self.vocab is None else head[self.vocab]  # (V', d): only the rows it proposes
            self.lm_head = (rows * model.model.norm.weight).contiguous()  # the final norm folded in
            self.norm_weight = model.model.norm.weight.detach()  # (d,) for the hidden states
            # a draft head's input projection (2d -> d) over [token embedding, feature]
            self.fc = None if fc is None else (fc.weight.detach(), None if fc.bias is None else fc.bias.detach())
            # an EAGLE-3 head's fusion of the target's lower layers ((n - 1) d -> d, ``fused``) and which they are
            self.fuse = None if fuse is None else fuse.weight.detach()
            self.feature_layers = tuple(getattr(config, LAYERS_KEY, None) or ())
            self.cos, self.sin = self._rope_tables(model)  # (T, D) each
            self.weights = weights
            if weights:
                self._quantize(weights)
                # its own copies: nothing keeps the loaded file's pages (``quant.release_layers``)
                self.embed, self.norm_weight = self.embed.clone(), self.norm_weight.clone()
                for layer in self.layers:
                    layer.qkv_bias = None if layer.qkv_bias is None else layer.qkv_bias.clone()
        self.invariant = invariant
        # invariant: the rows one linear call may take per weight (``invariant.wide_tile``)
        # and the row multiple it is padded to (``invariant.row_unit``: 1 for quantised weights)
        self._tiles = {id(w): (wide_tile(w, self.dtype), row_unit(w, self.dtype)) for w in self._weights()} if invariant else {}

    def _init_gguf(self, model: PreTrainedModel, loaded, vocab, fc) -> None:
        if vocab is not None or fc is not None:
            raise ValueError('weights="gguf" runs a whole target: no restricted vocabulary, no draft head input')
        self.layers, self.lm_head, self.head_norm = loaded.layers, loaded.lm_head, loaded.norm
        self.embed_table, self.norm_weight = loaded.embed, loaded.norm
        # self.embed stays the model's own table (no copy): what shares it (a draft, a head) keeps
        # it when the model's other weights are released (quant.release_layers); a model read from
        # its file as it is has none (gguf.load_gguf_target): one row of the blocks gives device and dtype
        if self.embed.is_meta:
            self.embed = _block_rows(loaded.embed, torch.zeros(1, dtype=torch.long))
        self.act_dtype = torch.float32  # llama.cpp's activations
        self.vocab_size, self.vocab, self.fc, self.fuse, self.feature_layers = loaded.embed.shape[0], None, None, None, ()
        self.cos, self.sin = self._rope_tables(model)
        self.invariant = True
        self._tiles = {id(w): (wide_tile(w, self.dtype), row_unit(w, self.dtype)) for w in self._weights()}
        self._fused = fused_layer.build(self)

    def _quantize(self, fmt: str) -> None:
        """Every projection and the output head in ``fmt``, the dense copies dropped."""
        for layer in self.layers:
            for name in ("qkv", "o_proj", "gate_up", "down"):
                setattr(layer, name, quantize(getattr(layer, name), fmt))
        self.lm_head = quantize(self.lm_head, fmt)

    def weight_bytes(self) -> int:
        """The bytes this model reads besides its cache: projections, output head, embeddings."""
        matrices = [w for w in self._weights() if isinstance(w, torch.Tensor) or is_quantized(w)]
        table = self.embed if self.embed_table is None else self.embed_table  # what lookups read
        return table.nbytes + sum(w.nbytes for w in matrices if w is not table) + self.norm_weight.nbytes

    def _weights(self) -> list[torch.Tensor]:
        """Every projection matrix, the output head first (biases excluded)."""
        matrices = [w for layer in self.layers for name, w in vars(layer).items() if name in PROJECTIONS]
        return [self.lm_head, *matrices]

    def _rope_tables(self, model: PreTrainedModel) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sign-folded sin of every position (T, D), from the model's own rotary module: one
        row per position, shared by the q and k heads (a 131k-context draft costs 2 x 33 MB, not
        gigabytes). rotate_half(x) = roll(x, D/2) * sign."""
        T, D = self.config.max_position_embeddings, self.head_dim
        positions = torch.arange(T, device=self.device)[None]
        cos, sin = model.model.rotary_emb(self.embed[None, :1].to(self.dtype), positions)  # (1, T, D) each
        sign = torch.cat([-torch.ones(D // 2), torch.ones(D - D // 2)]).to(sin)  # (D,)
        return cos[0].contiguous(), (sin[0] * sign).contiguous()  # (T, D) each

    def _rope(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, n) positions -> cos, sin (B, H + 2 H_kv, n, D): the position's row for the q and k
        heads, cos = 1 and sin = 0 for the v heads (which pass through unrotated)."""
        B, n = position_ids.shape
        rotated, D = self.heads + self.kv_heads, self.head_dim
        cos = self.cos[position_ids][:, None].expand(B, rotated, n, D)  # (B, H + H_kv, n, D)
        sin = self.sin[position_ids][:, None].expand(B, rotated, n, D)
        keep = cos.new_ones(B, self.kv_heads, n, D)
        return torch.cat([cos, keep], 1), torch.cat([sin, torch.zeros_like(keep)], 1)

    @property
    def device(self) -> torch.device:
        return self.embed.device

    @property
    def dtype(self) -> torch.dtype:
        """The activations' dtype (the embeddings', whatever format the projections hold; float32
        over GGUF blocks)."""
        return self.act_dtype or self.embed.dtype

    def make_cache(self, batch_size: int) -> LeanCache:
        like = self.embed.new_empty(0, dtype=self.dtype)
        return LeanCache(len(self.layers), batch_size, self.kv_heads, self.head_dim, like)

    @torch.inference_mode()
    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor,
        cache: LeanCache,
        logits_to_keep: int = 0,
        features: torch.Tensor | None = None,
        output_hidden_states: bool = False,
        **unused,
    ) -> SimpleNamespace:
        """input_ids (B, n); position_ids (B, n), which are the new keys' slots; attention_mask
        (B, n) the block's real columns (``LeanCache.attention_mask``), None when every row stands at
        ``cache.length`` with a full block, or a ready (B, 1, n, L + n) additive float mask over the
        slots from slot 0 (a token tree's); features (B, n, d) beside the tokens when the model has
        ``fc``."""
        B, n = input_ids.shape
        start = cache.length
        cache.reserve(n)
        x = self._embed(input_ids)  # (B, n, d)
        if self.fc is not None:
            if features is None or features.shape[:2] != (B, n):
                raise ValueError(f"a draft head needs a feature beside each of its {n} tokens")
            x = F.linear(torch.cat([x, features.to(x.dtype)], dim=-1), *self.fc)  # (B, n, d)
        if self.invariant and attention_mask is None:
            mask = _Canonical(invariant.attention_plan(start, n, input_ids.device))
            cache.reserve(mask.plan[-1].width - start)
        elif self.invariant and attention_mask.ndim == 2:  # rows apart: each in its own slots and calls
            plans = invariant.row_plans(position_ids, attention_mask.bool())
            mask = _Canonical(plans, rows=True)
            cache.reserve(max((p.calls[-1].width for p in plans if p.calls), default=0) - start)
        elif attention_mask is not None and attention_mask.ndim == 2:  # rows apart: keys by position
            mask = _ByPosition.of(position_ids, attention_mask.bool())
        else:
            mask = _attention_mask(attention_mask, start, n, input_ids.device)  # (B, 1, n, L + n) or None
        states = [x] if output_hidden_states else None  # transformers' hidden_states, (B, n, d) each
        if fast := self._fused and isinstance(mask, _Canonical) and n <= invariant.MAX_TILED_ROWS:
            slot = position_ids if attention_mask is None else position_ids.masked_fill(~attention_mask.bool(), -1)  # (B, n)
            x = fused_layer.run(self._fused, self, x, position_ids, slot, cache, states)
        else:
            cos, sin = self._rope(position_ids)  # (B, H + 2 H_kv, n, D) each
        for i, layer in enumerate([] if fast else self.layers):
            x = x + self._attend(i, layer, self._norm(x, layer.in_norm), cos, sin, mask, cache)
            gate, up = self._linear(self._norm(x, layer.post_norm), layer.gate_up).chunk(2, -1)  # (B, n, I) each
            x = x + self._linear(F.silu(gate) * up, layer.down)  # (B, n, d)
            if states is not None:
                states.append(x)
        cache.length = start + n if attention_mask is None or attention_mask.ndim == 4 else _rows_end(position_ids, attention_mask)
        hidden = (*states[:-1], self._norm(x) * self.norm_weight) if output_hidden_states else None
        x = self._norm(x[:, -logits_to_keep:] if logits_to_keep else x, self.head_norm)
        logits = self._linear(x, self.lm_head)  # (B, n_keep, V')
        if self.vocab is not None:  # back to the full vocabulary, -inf outside the draft's
            full = logits.new_full((*logits.shape[:-1], self.vocab_size), float("-inf"))  # (B, n_keep, V)
            logits = full.index_copy_(-1, self.vocab, logits)
        return SimpleNamespace(logits=logits, hidden_states=hidden)  # (B, n_keep, V)

    def fused(self, features: torch.Tensor) -> torch.Tensor:
        """(.., n d) the target's ``layer_features`` -> (.., d) f + fuse(lower layers) (``DraftHead.fused``)."""
        f, d = features[..., -self.config.hidden_size :], self.config.hidden_size
        return f if self.fuse is None else f.to(self.fuse.dtype) + F.linear(features[..., :-d].to(self.fuse.dtype), self.fuse)

    def _norm(self, x: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
        """RMSNorm; its weight folded into the next projection unless given (GGUF weights)."""
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True).add_(self.eps))
        return x if weight is None else x * weight

    def _embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, n) -> (B, n, d): rows of the dense table, or unpacked from a GGUF block table."""
        table = self.embed_table
        if table is None:
            return F.embedding(input_ids, self.embed)
        if isinstance(table, torch.Tensor):
            return F.embedding(input_ids, table)
        return table.rows(input_ids.reshape(-1)).reshape(*input_ids.shape, -1)

    def _attend(self, i, layer, h, cos, sin, mask, cache: LeanCache) -> torch.Tensor:
        B, n, _ = h.shape
        H, D = self.heads, self.head_dim
        qkv = self._linear(h, layer.qkv)  # (B, n, (H + 2 H_kv) D)
        if layer.qkv_bias is not None:
            qkv = qkv + layer.qkv_bias
        qkv = qkv.view(B, n, -1, D).transpose(1, 2)  # (B, H + 2 H_kv, n, D)
        qkv = qkv * cos + qkv.roll(D // 2, dims=-1) * sin  # RoPE on q and k, v unchanged
        new = qkv[:, H:].unflatten(1, (2, -1)).transpose(0, 1)  # (2, B, H_kv, n, D) keys, values
        if isinstance(mask, _Canonical) and mask.rows:
            out = invariant.attend_rows(qkv[:, :H], new, cache.kv[i], mask.plan, H != self.kv_heads)
        elif isinstance(mask, _Canonical):
            cache.kv[i, :, :, :, cache.length : cache.length + n] = new
            out = invariant.attend(qkv[:, :H], cache.kv[i], mask.plan, H != self.kv_heads)
        elif isinstance(mask, _ByPosition):
            cache.kv[i][:, mask.rows, :, mask.slots] = new[:, mask.rows, :, mask.columns]
            keys, values = cache.kv[i, :, :, :, : mask.width]  # (B, H_kv, W, D) each
            out = F.scaled_dot_product_attention(qkv[:, :H], keys, values, attn_mask=mask.mask, enable_gqa=H != self.kv_heads)
        else:
            end = cache.length + n
            cache.kv[i, :, :, :, cache.length : end] = new
            keys, values = cache.kv[i, :, :, :, :end]  # (B, H_kv, L + n, D) each
            out = F.scaled_dot_product_attention(
                qkv[:, :H], keys, values, attn_mask=mask, enable_gqa=H != self.kv_heads
            )  # (B, H, n, D)
        return self._linear(out.transpose(1, 2).reshape(B, n, -1), layer.o_proj)  # (B, n, d)

    def _linear(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """x (..., d_in) @ weight^T."""
        if self.invariant:  # one kernel path for every decode position
            return invariant.tiled_linear(x, weight, *self._tiles[id(weight)])
        if is_quantized(weight):
            return weight.linear(x.reshape(-1, x.shape[-1])).reshape(*x.shape[:-1], weight.shape[0])
        return _linear(x, weight)


PROJECTIONS = ("qkv", "o_proj", "gate_up", "down")  # a layer's matrices
SMALL_M = range(2, 7)  # rows for which W @ x^T beats x @ W^T on this project's CPU (MKL)


def _linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x (..., d_in) @ weight (d_out, d_in)^T. For 2-6 rows (a verification block of k + 1 tokens)
    on a CPU it is computed as weight @ x^T, the faster of the two products for so few rows under
    MKL; on CUDA, F.linear."""
    rows = x.numel() // x.shape[-1]
    if rows in SMALL_M and x.device.type == "cpu":
        return (weight @ x.reshape(rows, -1).T).T.reshape(*x.shape[:-1], weight.shape[0])
    return F.linear(x, weight)


def _fuse(layer) -> SimpleNamespace:
    """One layer's weights: q/k/v and gate/up concatenated, the RMSNorm weights folded in; the
    q/k/v biases (Qwen2) concatenated too."""
    attn, mlp = layer.self_attn, layer.mlp
    if getattr(attn.o_proj, "bias", None) is not None or getattr(mlp.gate_proj, "bias", None) is not None:
        raise ValueError("LeanLlama supports biases on the q, k and v projections only")
    biases = [getattr(attn, name).bias for name in ("q_proj", "k_proj", "v_proj")]
    if any(b is None for b in biases) and not all(b is None for b in biases):
        raise ValueError("LeanLlama needs biases on all of q, k and v or on none")
    qkv = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
    gate_up = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])
    return SimpleNamespace(
        in_norm=None,  # folded into qkv
        post_norm=None,  # folded into gate_up
        qkv_bias=None if biases[0] is None else torch.cat(biases).detach(),
        qkv=(qkv * layer.input_layernorm.weight).detach(),
        o_proj=attn.o_proj.weight.detach(),
        gate_up=(gate_up * layer.post_attention_layernorm.weight).detach(),
        down=mlp.down_proj.weight.detach(),
    )


def _attention_mask(attention_mask: torch.Tensor | None, start: int, n: int, device: torch.device) -> torch.Tensor | None:
    """Causal over slots 0 .. start + n - 1 (every row at ``start``); a ready 4-D mask (a token
    tree's) as given; None when one token is decoded: it sees every slot."""
    if attention_mask is not None:
        return attention_mask
    if n == 1:
        return None
    slots = torch.arange(start + n, device=device)  # (L + n,)
    query = start + torch.arange(n, device=device)  # (n,)
    return (slots[None, :] <= query[:, None])[None, None]  # (1, 1, n, L + n)


def _block_rows(weight, vocab: torch.Tensor | None) -> torch.Tensor:
    """Rows ``vocab`` (all where None) of a block weight (V, d), de-quantised (V', d) float32."""
    if isinstance(weight, torch.Tensor):
        return weight if vocab is None else weight[vocab]
    if vocab is None:
        return weight.dequantize()
    return weight.rows(vocab) if hasattr(weight, "rows") else weight.dequantize()[vocab]
