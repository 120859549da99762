"""A causal LM with its own KV cache over a ragged batch, and rollback by cropping.

Layout: every row shares the cache's slot axis; a (B, L) bool ``mask`` says which slots hold a real
token. Rows that accept fewer tokens than others leave masked *holes*; position ids count only real
tokens, so each row sees exactly the positions it would see alone. Rollback masks the rejected
slots and crops the slots that no row uses any more (for batch 1 this is a plain crop).

While every slot and every pending token is real (always for batch 1), the model gets no
attention mask at all: it is plain causal attention, and transformers skips building one (on this
project's CPU that saved 3-13 % of the shipped target's single-token step in two measurements).

A draft head (``specvideo.text.models.head``) reads a feature beside each token: ``push`` and ``forward``
take them as ``features`` (B, n, d), queued with the tokens. With ``keep_hidden`` set, every
forward leaves the model's final hidden states of the fed block in ``hidden`` (B, n, d): the
target's features, which the head drafts from.

Finished rows leave the batch: ``retire`` drops their cache rows, so they cost neither memory nor
compute. Callers keep speaking in the original rows: tokens go in as (B, n), logits come out as
(B, n, V) (zeros for retired rows). When holes make up a large part of the cache, ``rollback``
repacks every row's real slots to the left, so a ragged batch's cache stays near the longest row.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import DynamicCache, PreTrainedModel

from specvideo.text.models.loading import context_length
from specvideo.text.runtime.invariant import PREFILL_CHUNK
from specvideo.text.tree import TokenTree, tree_attention_mask


class CausalLMState:
    """KV cache, validity mask, positions and not-yet-cached tokens of one model over a batch.

    input_ids:      (B, T) left-padded prompt tokens (they become the first pending block).
    attention_mask: (B, T) 1 for real tokens, 0 for padding.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        features: torch.Tensor | None = None,
    ):
        self.model = model
        self.device = input_ids.device
        B = input_ids.shape[0]
        self.batch_size = B  # rows as callers count them; ``live`` are the ones still in the cache
        self.live = torch.arange(B, device=self.device)  # (B',) original row of each cached row
        make_cache = getattr(model, "make_cache", None)  # a model may bring its own cache (LeanLlama)
        self.cache = make_cache(B) if make_cache else DynamicCache()
        self.mask = torch.zeros(B, 0, dtype=torch.bool, device=self.device)  # (B, L) real slots
        self.num_tokens = torch.zeros(B, dtype=torch.long, device=self.device)  # (B,) real tokens cached
        self.pending = input_ids  # (B, n) fed at the next forward
        self.pending_valid = attention_mask.bool()  # (B, n)
        self.pending_features = features  # (B, n, d) beside the pending tokens (a draft head's), or None
        self.keep_hidden = False  # leave each forward's final hidden states in ``hidden``
        self.hidden: torch.Tensor | None = None  # (B', n, d) of the last forward's fed block
        self.full = bool(self.pending_valid.all())  # no hole anywhere: no attention mask needed
        self.max_position = context_length(model) - 1
        self.round_start = 0
        self._kwargs = forward_kwargs(model)
        # an invariant model (LeanLlama(invariant=True)) prefills the prompt but its last token alone,
        # so every later position is computed in a decode-sized call, as a 1-token step computes it;
        # the prefill goes in chunks that end at multiples of PREFILL_CHUNK slots, so a prompt cache
        # that restores whole chunks leaves the rest computed in the very calls of a cold prefill
        self.invariant = bool(getattr(model, "invariant", False))
        self._prefill = input_ids.shape[1] - 1 if self.invariant else 0
        self.on_prefill = None  # called with this state after its first forward (a prompt cache's store)
        self._hidden_prefix: torch.Tensor | None = None  # (1, r, d) a restored prefix's features

    @property
    def length(self) -> int:
        return self.mask.shape[1]

    @property
    def pending_width(self) -> int:
        return self.pending.shape[1]

    def push(
        self, tokens: torch.Tensor, valid: torch.Tensor | None = None, features: torch.Tensor | None = None
    ) -> None:
        """Queue tokens (B, n) (and their features (B, n, d)) for the next forward; the last pushed
        column must be real in every row."""
        if valid is None:
            valid = torch.ones_like(tokens, dtype=torch.bool)
        tokens, valid = self._live_rows(tokens), self._live_rows(valid)
        if features is not None:
            features = self._live_rows(features)
            queued = self.pending_features
            self.pending_features = features if queued is None else torch.cat([queued, features], dim=1)
        if self.full:
            self.full = bool(valid.all())
        self.pending = torch.cat([self.pending, tokens], dim=1)
        self.pending_valid = torch.cat([self.pending_valid, valid], dim=1)

    def mark_round(self) -> None:
        """Remember where this round's slots start, for ``rollback``."""
        self.round_start = self.length

    @torch.inference_mode()
    def forward(
        self, tokens: torch.Tensor | None = None, num_logits: int = 1, features: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Feed pending tokens then ``tokens`` (B, n) (with ``features``); return logits
        (B, num_logits, V) of the last ones."""
        if tokens is not None:
            self.push(tokens, features=features)
        if self.pending.shape[0] == 0:  # every row retired
            return torch.zeros(self.batch_size, num_logits, 1, device=self.device)
        if 0 < self._prefill < self.pending_width:  # the prompt but its last token, in calls of its own
            rest = self.pending_width - self._prefill
            need = max(0, num_logits - rest)
            ragged = self.batch_size > 1 and not self.keep_hidden and not bool(self.pending_valid[:, : self._prefill].all())
            logits, hidden = self._prefill_rows(need) if ragged else self._feed_chunks(need)
            out = self._feed(rest, num_logits)
            logits = torch.cat([*logits, out.logits], dim=1)[:, -num_logits:] if need else out.logits[:, -num_logits:]
            if self.keep_hidden:
                self.hidden = torch.cat([*hidden, self.hidden], dim=1)  # (B', n, d) of the whole block
        else:
            logits = self._feed(self.pending_width, num_logits).logits[:, -num_logits:]
        self._prefill = 0
        self._prefilled()
        logits = logits.float()  # (B', num_logits, V)
        if len(self.live) == self.batch_size:
            return logits
        full = logits.new_zeros(self.batch_size, *logits.shape[1:])  # (B, num_logits, V)
        return full.index_copy_(0, self.live, logits)

    def _feed_chunks(self, need: int = 0) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
        """Feed the ``_prefill`` tokens in calls that end at multiples of PREFILL_CHUNK slots (a
        restored prefix splits no chunk); their logits (the last ``need`` kept) and hidden states."""
        logits, hidden = [], []
        while self._prefill:
            n = min(self._prefill, PREFILL_CHUNK - self.length % PREFILL_CHUNK)
            self._prefill -= n
            logits.append(self._feed(n, max(1, min(n, need))).logits)
            hidden.append(self.hidden)
        return logits, hidden

    def _prefill_rows(self, need: int = 0) -> tuple[list[torch.Tensor], list[None]]:
        """An invariant model's left-padded batch: each row's prompt in its own chunks, as it goes
        alone (chunks end at multiples of PREFILL_CHUNK of its own slots, not the padded batch's),
        the rows then joined (``admit``); their logits (B, need, V), zeros where a row has fewer."""
        n, joined, logits = self._prefill, None, []
        for b in range(self.batch_size):
            tokens = self.pending[b : b + 1, :n][:, self.pending_valid[b, :n]]  # (1, n_b) its real tokens
            row = CausalLMState(self.model, tokens, torch.ones_like(tokens))
            row._prefill = tokens.shape[1]
            fed = row._feed_chunks(need)[0]
            last = torch.cat(fed, dim=1)[:, -need:] if need and fed else None  # (1, <= need, V)
            logits.append(last)
            if joined is None:
                joined = row
            else:
                joined.admit(row)
        self.cache, self.mask, self.num_tokens = joined.cache, joined.mask, joined.num_tokens
        self.pending, self.pending_valid = self.pending[:, n:], self.pending_valid[:, n:]
        self._prefill, self.full = 0, False
        if not need:
            return [], [None]
        like = next(x for x in logits if x is not None)  # (1, <= need, V)
        rows = [F.pad(x, (0, 0, need - x.shape[1], 0)) if x is not None else like.new_zeros(1, need, like.shape[-1]) for x in logits]
        return [torch.cat(rows)], [None]

    @torch.inference_mode()
    def prefill(self) -> None:
        """Feed the pending prompt but its last token now (a row about to join a running batch,
        ``admit``): in an invariant model's chunks, in one call otherwise."""
        if self.batch_size != 1:
            raise ValueError(f"prefill() readies one row to join a batch, got a batch of {self.batch_size}")
        if self.pending_width < 2:
            return
        if not self.invariant:
            self._prefill = self.pending_width - 1
        self._feed_chunks()
        self._prefilled()

    def _feed(self, n: int, num_logits: int):
        """One model call over the first n pending tokens; the model's output."""
        tokens, valid = self.pending[:, :n], self.pending_valid[:, :n]  # (B', n)
        positions = (self.num_tokens[:, None] + valid.long().cumsum(1) - 1).clamp(
            0, self.max_position
        )  # (B', n)
        mask = torch.cat([self.mask, valid], dim=1)  # (B', L + n)
        features = self.pending_features
        if features is not None:
            self.pending_features = features[:, :n]
        full = self.full and bool(valid.all())
        out = self.model(
            input_ids=tokens,
            attention_mask=None if full else mask.long(),
            position_ids=positions,
            use_cache=True,
            **{self._kwargs.cache: self.cache},
            **({"logits_to_keep": num_logits} if self._kwargs.logits_to_keep else {}),
            **self._extra_inputs(),
        )
        self._keep_hidden(out)
        self.mask = mask
        self.num_tokens = self.num_tokens + valid.sum(1)
        self.pending, self.pending_valid = self.pending[:, n:], self.pending_valid[:, n:]
        if features is not None and n < features.shape[1]:
            self.pending_features = features[:, n:]
        return out

    def _prefilled(self) -> None:
        """After a forward: a restored prefix's features go before the block's, and the first
        forward's ``on_prefill`` runs once."""
        if self._hidden_prefix is not None and self.keep_hidden:  # the whole prompt's features
            self.hidden = torch.cat([self._hidden_prefix, self.hidden], dim=1)
        self._hidden_prefix = None
        if self.on_prefill is not None:
            callback, self.on_prefill = self.on_prefill, None
            callback(self)

    def restorable(self, n: int) -> int:
        """How many of n cached prompt tokens a restore may take: whole prefill chunks on an
        invariant model (bit-identical to a cold prefill), all of them otherwise."""
        return n - n % PREFILL_CHUNK if self.invariant else n

    def snapshot(self, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Copies of the first n slots of row 0: per layer (keys, values) (1, H_kv, n, D)."""
        kv = getattr(self.cache, "kv", None)
        if kv is not None:  # LeanCache: (layers, 2, B, H_kv, capacity, D)
            return [(kv[i, 0, :1, :, :n].clone(), kv[i, 1, :1, :, :n].clone()) for i in range(kv.shape[0])]
        return [(layer.keys[:1, :, :n].clone(), layer.values[:1, :, :n].clone()) for layer in self.cache.layers]

    def restore(self, layers: list[tuple[torch.Tensor, torch.Tensor]], n: int, hidden: torch.Tensor | None) -> None:
        """Start a fresh batch-1 state from cached slots of its prompt's first n tokens (``snapshot``'s
        form): they go into the cache, the pending prompt loses them, ``hidden`` (1, n, d) is put
        before the first forward's features."""
        if self.length or self.batch_size != 1 or not self.full or n >= self.pending_width:
            raise ValueError("a prompt prefix is restored into a fresh batch-1 state, before its last token")
        kv = getattr(self.cache, "kv", None)
        if kv is not None:
            self.cache.reserve(n)
            for i, (keys, values) in enumerate(layers):
                self.cache.kv[i, 0, :, :, :n] = keys[:, :, :n]
                self.cache.kv[i, 1, :, :, :n] = values[:, :, :n]
            self.cache.length = n
        else:
            for i, (keys, values) in enumerate(layers):
                self.cache.update(keys[:, :, :n].clone(), values[:, :, :n].clone(), i)
        self.mask = torch.ones(1, n, dtype=torch.bool, device=self.device)
        self.num_tokens = torch.full_like(self.num_tokens, n)
        self.pending, self.pending_valid = self.pending[:, n:], self.pending_valid[:, n:]
        if self.invariant:
            self._prefill = self.pending_width - 1
        self._hidden_prefix = hidden

    # token trees (batch 1, no holes): the n nodes of a tree in one forward, each seeing its
    # ancestors only, then the accepted path's cache slots kept in sequence order
    @torch.inference_mode()
    def forward_tree(self, tree: TokenTree) -> torch.Tensor:
        """Feed the pending tokens (the last of them is the tree's root) then the tree's n nodes in
        one forward: each node sees the cache, the pending tokens and its own ancestors, at position
        root + depth. Returns logits (1, n + 1, V) after the root and after each node. Batch 1 with
        no holes only: a ragged batch's rows would need a tree each (``keep_tree_path`` compacts)."""
        if self.batch_size != 1 or not self.full or len(self.live) != 1:
            raise ValueError("token trees are verified one sequence at a time (batch 1): use a chain for batches")
        w, n = self.pending_width, tree.size
        L = self.length
        # (w + n, L + w + n): causal over the cache and the pending block, then the tree's own mask
        mask = torch.ones(w + n, L + w + n, dtype=torch.bool, device=self.device)
        mask[:w, L:] = torch.ones(w, w + n, dtype=torch.bool, device=self.device).tril()
        mask[w:, L + w :] = tree_attention_mask(tree.parents).to(self.device)
        positions = self.num_tokens[:, None] + torch.cat(
            [torch.arange(w, device=self.device), w - 1 + tree.depths.to(self.device)]
        )[None]  # (1, w + n)
        tokens = torch.cat([self.pending, tree.tokens.to(self.device)[None]], dim=1)  # (1, w + n)
        additive = torch.zeros(mask.shape, dtype=self.model.dtype, device=self.device).masked_fill(
            ~mask, torch.finfo(self.model.dtype).min
        )  # added to the attention scores: transformers' eager and SDPA paths and LeanLlama alike
        out = self.model(
            input_ids=tokens,
            attention_mask=additive[None, None],
            position_ids=positions.clamp(0, self.max_position),
            use_cache=True,
            **{self._kwargs.cache: self.cache},
            **({"logits_to_keep": n + 1} if self._kwargs.logits_to_keep else {}),
            **self._extra_inputs(),
        )
        self._keep_hidden(out)
        self.mask = torch.ones(1, L + w + n, dtype=torch.bool, device=self.device)
        self.num_tokens = self.num_tokens + w + n
        self.pending, self.pending_valid = tokens[:, :0], self.pending_valid[:, :0]
        self._tree_start = L + w  # the first tree slot
        self._prefilled()
        return out.logits[:, -(n + 1) :].float()  # (1, n + 1, V)

    @torch.inference_mode()
    def keep_tree_path(self, path: list[int]) -> None:
        """After ``forward_tree``: keep the cache up to the root and the slots of ``path`` (node
        indices, root first), in that order; the other nodes' slots go. Keys carry their rotary
        positions (root + depth), which are the positions the path's tokens have in sequence."""
        start = self._tree_start
        source = start + torch.tensor(path, dtype=torch.long, device=self.device)  # (m,) the path's slots
        move = getattr(self.cache, "move_slots", None)
        if move is not None:
            move(source, start)
        else:  # transformers' DynamicCache: keys, values (1, H, L, D); only the path's slots move
            for layer in self.cache.layers:
                layer.keys[:, :, start : start + len(path)] = layer.keys[:, :, source]
                layer.values[:, :, start : start + len(path)] = layer.values[:, :, source]
        width = start + len(path)
        self.cache.crop(width - self.cache.get_seq_length())
        self.round_start = min(self.round_start, width)
        self.mask = torch.ones(1, width, dtype=torch.bool, device=self.device)
        self.num_tokens = torch.full_like(self.num_tokens, width)

    def _extra_inputs(self) -> dict:
        """The pending features (taken off the queue) and the request for hidden states."""
        extra = {"output_hidden_states": True} if self.keep_hidden else {}
        if self.pending_features is not None:
            extra["features"], self.pending_features = self.pending_features, None
        return extra

    def _keep_hidden(self, out) -> None:
        if self.keep_hidden:
            self.hidden = out.hidden_states[-1]  # (B', n, d) final-normed

    def admit(self, other: CausalLMState) -> None:
        """Append ``other``'s rows (a fresh state of the same model after ``prefill``) to this batch
        between rounds, numbered after the last row. Every row keeps its slots from slot 0 on; the
        shorter side is padded with holes, the pending blocks with invalid columns on the left."""
        if other.model is not self.model or other._prefill or self._prefill:
            raise ValueError("a row joins a batch of the same model, after both have prefilled")
        if other.pending_features is not None or self.pending_features is not None:
            raise ValueError("rows with pending draft-head features cannot join a batch")
        width = max(self.length, other.length)
        join = getattr(self.cache, "admit", None)
        if join is not None:  # LeanCache
            join(other.cache)
        else:  # transformers' DynamicCache: keys, values (B, H, L, D) per layer
            theirs = list(other.cache.layers) if other.length else []  # none: a 1-token prompt, nothing fed yet
            for i, mine in enumerate(self.cache.layers):
                for name in ("keys", "values"):
                    ours = getattr(mine, name)
                    new = getattr(theirs[i], name) if theirs else ours.new_zeros(other.batch_size, *ours.shape[1:])
                    setattr(mine, name, torch.cat([_pad_slots(ours, width), _pad_slots(new, width)]))
        self.mask = torch.cat([F.pad(self.mask, (0, width - self.length)), F.pad(other.mask, (0, width - other.length))])
        self.num_tokens = torch.cat([self.num_tokens, other.num_tokens])
        pad = [max(self.pending_width, other.pending_width) - s.pending_width for s in (self, other)]
        self.pending = torch.cat([F.pad(s.pending, (p, 0)) for s, p in zip((self, other), pad)])
        self.pending_valid = torch.cat([F.pad(s.pending_valid, (p, 0)) for s, p in zip((self, other), pad)])
        self.live = torch.cat([self.live, other.live + self.batch_size])
        self.batch_size += other.batch_size
        self.full = bool(self.mask.all()) and bool(self.pending_valid.all())
        self.hidden = None

    def compact(self) -> torch.Tensor:
        """Number the rows still in the batch 0 .. B' - 1 (retired rows leave the callers' numbering
        too); returns their former numbers (B',)."""
        kept = self.live
        self.batch_size = len(kept)
        self.live = torch.arange(len(kept), device=self.device)
        return kept

    def _live_rows(self, x: torch.Tensor) -> torch.Tensor:
        return x if x.shape[0] == len(self.live) else x[self.live]

    def retire(self, done: torch.Tensor) -> None:
        """Drop the rows flagged in ``done`` (B,) from the cache, the mask and the pending tokens."""
        keep = ~done.to(self.device)[self.live]  # (B',)
        if bool(keep.all()):
            return
        rows = keep.nonzero()[:, 0]
        self.cache.batch_select_indices(rows)
        self.live, self.mask, self.num_tokens = self.live[rows], self.mask[rows], self.num_tokens[rows]
        self.pending, self.pending_valid = self.pending[rows], self.pending_valid[rows]
        if self.pending_features is not None:
            self.pending_features = self.pending_features[rows]
        self._crop_unused(0)
        self.full = bool(self.mask.all()) and bool(self.pending_valid.all())
        self._repack_if_sparse()

    def rollback(self, keep: torch.Tensor) -> None:
        """Keep the first ``keep[b]`` slots written since ``mark_round`` in row b; drop the rest."""
        keep = self._live_rows(keep)
        cols = torch.arange(self.length - self.round_start, device=self.device)  # (n,)
        drop = (cols[None, :] >= keep[:, None]) & self.mask[:, self.round_start :]  # (B', n)
        if bool(drop.any()):
            self._drop(drop)
        self._repack_if_sparse()

    def _drop(self, drop: torch.Tensor) -> None:
        self.num_tokens = self.num_tokens - drop.sum(1)
        self.mask = torch.cat(
            [self.mask[:, : self.round_start], self.mask[:, self.round_start :] & ~drop], dim=1
        )
        self._crop_unused(self.round_start)
        self.full = self.full and bool(self.mask.all())  # rows that keep different counts leave holes

    def _repack_if_sparse(self) -> None:
        if not self.full and len(self.live) and self.length > 2 * int(self.num_tokens.max()) + 16:
            self._repack()

    def _crop_unused(self, floor: int) -> None:
        """Remove trailing slots no row uses (never below ``floor``)."""
        used = self.mask.any(dim=0).nonzero()
        new_length = max(int(used[-1]) + 1 if len(used) else 0, floor)
        if new_length < self.length:
            self.cache.crop(new_length - self.length)  # a negative count removes that many slots
            self.mask = self.mask[:, :new_length]

    def _repack(self) -> None:
        """Move every row's real slots to the right end of a cache as wide as the longest row
        (left padding). Keys carry their rotary positions, so attention is unchanged."""
        width = int(self.num_tokens.max())
        order = torch.sort(self.mask.long(), dim=1, stable=True).indices[:, -width:]  # (B', W) holes first
        self.mask = torch.gather(self.mask, 1, order)
        self._gather_slots(order)

    def _gather_slots(self, order: torch.Tensor) -> None:
        """Row b's cache slots become its slots ``order[b]`` (B', W), in that order."""
        gather = getattr(self.cache, "gather_slots", None)
        if gather is not None:
            gather(order)
        else:
            for layer in self.cache.layers:  # transformers' DynamicCache: keys, values (B', H, L, D)
                index = order[:, None, :, None].expand(-1, layer.keys.shape[1], -1, layer.keys.shape[3])
                layer.keys = torch.gather(layer.keys, 2, index)
                layer.values = torch.gather(layer.values, 2, index)
        self.round_start = min(self.round_start, order.shape[1])


def _pad_slots(x: torch.Tensor, width: int) -> torch.Tensor:
    """(B, H, L, D) keys or values -> (B, H, width, D), zero slots after the last."""
    return F.pad(x, (0, 0, 0, width - x.shape[2]))


@dataclass(frozen=True)
class ForwardKwargs:
    """The names a model's forward takes: its cache keyword, and whether it takes logits_to_keep."""

    cache: str
    logits_to_keep: bool


def forward_kwargs(model: PreTrainedModel) -> ForwardKwargs:
    """transformers 5 renamed ``past_key_values`` to ``cache``; support both spellings."""
    params = inspect.signature(model.forward).parameters
    return ForwardKwargs("cache" if "cache" in params else "past_key_values", "logits_to_keep" in params)
