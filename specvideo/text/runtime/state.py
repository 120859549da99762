"""A causal LM with its own KV cache over a ragged batch, rolled back to each row's length.

Each row has a length, its count of cached tokens; its next token's position is that length, so
each row sees exactly the positions it would see alone. ``truncate(lengths)`` lowers the lengths:
that is the whole rollback. The cache (``kv_cache.SlotCache``) keeps the keys behind the lengths and
gives each block's attention mask: LeanLlama's stores a row's keys by position, transformers'
``DynamicCache`` is wrapped by an adapter that masks the holes rows leave on its shared slot axis.
While every row stands at one length and every pending token is real (always for batch 1), the
model gets no attention mask at all.

A draft head (``specvideo.text.models.head``) reads a feature beside each token: ``push`` and ``forward``
take them as ``features`` (B, n, d), queued with the tokens. With ``keep_hidden`` set, every
forward leaves the model's final hidden states of the fed block in ``hidden`` (B, n, d), and for
batch 1 each position's in ``past_features`` (T, d): the target's features, which the head drafts from.

Finished rows leave the batch: ``retire`` drops their cache rows, so they cost neither memory nor
compute. Callers keep speaking in the original rows: tokens go in as (B, n), logits come out as
(B, n, V) (zeros for retired rows).

The state feeds the model (a prompt in an invariant model's chunks included) and keeps the rows:
rows join (``admit``) and leave (``retire``, ``compact``, ``split``) a running batch between rounds.
Nothing here depends on the cache's layout.
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from specvideo.text.runtime.contract import context_length, layer_features
from specvideo.text.runtime.invariant import PREFILL_CHUNK
from specvideo.text.runtime.kv_cache import KV, make_slot_cache


class CausalLMState:
    """KV cache, row lengths and not-yet-cached tokens of one model over a batch.

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
        self.cache = make_slot_cache(model, B, self.device)  # a model may bring its own (LeanLlama)
        self.num_tokens = torch.zeros(B, dtype=torch.long, device=self.device)  # (B,) real tokens cached
        self.pending = input_ids  # (B, n) fed at the next forward
        self.pending_valid = attention_mask.bool()  # (B, n)
        self.pending_features = features  # (B, n, d) beside the pending tokens (a draft head's), or None
        self.keep_hidden = False  # leave each forward's final hidden states in ``hidden``
        self.feature_layers: tuple[int, ...] = ()  # or the layers an EAGLE-3 head fuses (``_keep_hidden``)
        self.hidden: torch.Tensor | None = None  # (B', n, d) of the last forward's fed block
        self.past_features: torch.Tensor | None = None  # (T, d) batch 1: the features at each position
        self.max_position = context_length(model) - 1
        self._kwargs = forward_kwargs(model)
        # an invariant model (LeanLlama(invariant=True)) prefills the prompt but its last token alone,
        # so every later position is computed in a decode-sized call, as a 1-token step computes it;
        # the prefill goes in chunks that end at multiples of PREFILL_CHUNK slots, so a prompt cache
        # that restores whole chunks leaves the rest computed in the very calls of a cold prefill
        # (a GGUF runner's calls are invariant whatever was asked; ``exact_prefill`` says whether its
        # caller asked for a prefill as exact as a cold one: a local draft's did not)
        self.invariant = bool(getattr(model, "exact_prefill", getattr(model, "invariant", False)))
        self._prefill = input_ids.shape[1] - 1 if self.invariant else 0
        self.on_prefill = None  # called with this state after its first forward (a prompt cache's store)
        self._hidden_prefix: torch.Tensor | None = None  # (1, r, d) a restored prefix's features

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
        self.pending = torch.cat([self.pending, tokens], dim=1)
        self.pending_valid = torch.cat([self.pending_valid, valid], dim=1)

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
        self.finish_forward()
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
        self.cache, self.num_tokens = joined.cache, joined.num_tokens
        self.pending, self.pending_valid = self.pending[:, n:], self.pending_valid[:, n:]
        self._prefill = 0
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
        self.finish_forward()

    def _feed(self, n: int, num_logits: int):
        """One model call over the first n pending tokens; the model's output."""
        tokens, valid = self.pending[:, :n], self.pending_valid[:, :n]  # (B', n)
        positions = self.num_tokens[:, None] + valid.long().cumsum(1) - 1  # (B', n)
        features = self.pending_features
        if features is not None:
            self.pending_features = features[:, :n]
        out = self.call_model(tokens, self.cache.attention_mask(self.num_tokens, valid), positions, num_logits)
        self.num_tokens = self.num_tokens + valid.sum(1)
        self.pending, self.pending_valid = self.pending[:, n:], self.pending_valid[:, n:]
        if features is not None and n < features.shape[1]:
            self.pending_features = features[:, n:]
        return out

    def call_model(self, tokens: torch.Tensor, attention_mask, positions: torch.Tensor, num_logits: int):
        """One forward of the model over its cache: ``tokens`` (B', n) at ``positions`` (B', n)
        (clamped to the context), ``attention_mask`` as the model takes it (None: causal), the
        pending features and the request for hidden states; the model's output."""
        out = self.model(
            input_ids=tokens,
            attention_mask=attention_mask,
            position_ids=positions.clamp(0, self.max_position),
            use_cache=True,
            **{self._kwargs.cache: self.cache.native},
            **({"logits_to_keep": num_logits} if self._kwargs.logits_to_keep else {}),
            **self._extra_inputs(),
        )
        self._keep_hidden(out)
        return out

    def finish_forward(self) -> None:
        """After a forward: a restored prefix's features go before the block's, and the first
        forward's ``on_prefill`` runs once."""
        if self._hidden_prefix is not None and self.keep_hidden:  # the whole prompt's features
            self.hidden = torch.cat([self._hidden_prefix, self.hidden], dim=1)
        self._hidden_prefix = None
        if self.keep_hidden and self.hidden is not None and self.batch_size == 1 and len(self.live) == 1:
            self._log_features(int(self.num_tokens[0]) - self.hidden.shape[1], self.hidden[0])
        if self.on_prefill is not None:
            callback, self.on_prefill = self.on_prefill, None
            callback(self)

    def _log_features(self, start: int, hidden: torch.Tensor) -> None:
        """Write the fed block's features (n, d) at positions start .. start + n - 1."""
        end, log = start + hidden.shape[0], self.past_features
        if log is None or log.shape[0] < end or log.shape[1] != hidden.shape[1]:
            grown = hidden.new_zeros(max(2 * end, 256), hidden.shape[1])
            if log is not None and log.shape[1] == hidden.shape[1]:
                grown[: log.shape[0]] = log
            self.past_features = log = grown
        log[start:end] = hidden

    def restorable(self, n: int) -> int:
        """How many of n cached prompt tokens a restore may take: whole prefill chunks on an
        invariant model (bit-identical to a cold prefill), all of them otherwise."""
        return n - n % PREFILL_CHUNK if self.invariant else n

    def snapshot(self, n: int) -> KV:
        """Copies of the first n slots of row 0: per layer (keys, values) (1, H_kv, n, D)."""
        return self.cache.snapshot(n)

    def restore(self, layers: KV, n: int, hidden: torch.Tensor | None) -> None:
        """Start a fresh batch-1 state from cached slots of its prompt's first n tokens (``snapshot``'s
        form): they go into the cache, the pending prompt loses them, ``hidden`` (1, n, d) is put
        before the first forward's features."""
        if self.length or self.batch_size != 1 or not self.full or n >= self.pending_width:
            raise ValueError("a prompt prefix is restored into a fresh batch-1 state, before its last token")
        self.cache.restore(layers, n)
        self.num_tokens = torch.full_like(self.num_tokens, n)
        self.pending, self.pending_valid = self.pending[:, n:], self.pending_valid[:, n:]
        if self.invariant:
            self._prefill = self.pending_width - 1
        self._hidden_prefix = hidden

    @property
    def length(self) -> int:
        """The longest row's length."""
        return int(self.num_tokens.max()) if len(self.num_tokens) else 0

    @property
    def pending_width(self) -> int:
        return self.pending.shape[1]

    @property
    def full(self) -> bool:
        """Every row at one length and every pending token real: the rows share slots and calls."""
        lengths = self.num_tokens
        return bool(self.pending_valid.all()) and bool((lengths == lengths[:1]).all())

    def truncate(self, lengths: torch.Tensor) -> None:
        """Rollback by position: row b keeps its first ``lengths[b]`` tokens (B,) (cached, then
        pending) and drops the rest."""
        lengths = self._live_rows(lengths.to(self.device))
        self.num_tokens = torch.minimum(self.num_tokens, lengths)
        if self.pending_width and bool((lengths < self.num_tokens + self.pending_valid.sum(1)).any()):
            raise ValueError("truncate drops cached tokens only; a pending token is never rolled back")
        self.cache.truncate(self.num_tokens)

    def admit(self, other: CausalLMState) -> None:
        """Append ``other``'s rows (a fresh state of the same model after ``prefill``) to this batch
        between rounds, numbered after the last row; the pending blocks are padded with invalid
        columns on the left."""
        if other.model is not self.model or other._prefill or self._prefill:
            raise ValueError("a row joins a batch of the same model, after both have prefilled")
        if other.pending_features is not None or self.pending_features is not None:
            raise ValueError("rows with pending draft-head features cannot join a batch")
        self.cache.admit(other.cache, other.batch_size)
        self.num_tokens = torch.cat([self.num_tokens, other.num_tokens])
        pad = [max(self.pending_width, other.pending_width) - s.pending_width for s in (self, other)]
        self.pending = torch.cat([F.pad(s.pending, (p, 0)) for s, p in zip((self, other), pad)])
        self.pending_valid = torch.cat([F.pad(s.pending_valid, (p, 0)) for s, p in zip((self, other), pad)])
        self.live = torch.cat([self.live, other.live + self.batch_size])
        self.batch_size += other.batch_size
        self.hidden = None

    def split(self, b: int) -> CausalLMState:
        """A batch-1 copy of row b (its cache and pending tokens), for another batch to ``admit``;
        this batch is unchanged (``retire`` drops the row here)."""
        i = int((self.live == b).nonzero()[0, 0])
        if self._prefill or self.pending_features is not None:
            raise ValueError("a row leaves a batch between rounds, after its prefill and without pending features")
        row = copy.copy(self)
        valid = self.pending_valid[i]
        row.cache, row.num_tokens = self.cache.row(i), self.num_tokens[i : i + 1]
        row.cache.truncate(row.num_tokens)
        row.pending, row.pending_valid = self.pending[i : i + 1, valid], self.pending_valid[i : i + 1, valid]
        row.live, row.batch_size, row.hidden = torch.zeros(1, dtype=torch.long, device=self.device), 1, None
        return row

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
        """Drop the rows flagged in ``done`` (B,) from the cache and the pending tokens."""
        keep = ~done.to(self.device)[self.live]  # (B',)
        if bool(keep.all()):
            return
        rows = keep.nonzero()[:, 0]
        self.cache.select_rows(rows)
        self.live, self.num_tokens = self.live[rows], self.num_tokens[rows]
        self.pending, self.pending_valid = self.pending[rows], self.pending_valid[rows]
        if self.pending_features is not None:
            self.pending_features = self.pending_features[rows]
        self.cache.truncate(self.num_tokens)

    def _extra_inputs(self) -> dict:
        """The pending features (taken off the queue) and the request for hidden states."""
        extra = {"output_hidden_states": True} if self.keep_hidden else {}
        if self.pending_features is not None:
            extra["features"], self.pending_features = self.pending_features, None
        return extra

    def _keep_hidden(self, out) -> None:
        """The features a head reads: the final-normed state (B', n, d), or with ``feature_layers``
        (an EAGLE-3 head's) those layers' ``layer_features`` (B', n, len(layers) d)."""
        if self.keep_hidden:
            states = out.hidden_states
            self.hidden = layer_features(states, self.feature_layers) if self.feature_layers else states[-1]

    @property
    def feature_width(self) -> int:
        """The width of ``hidden`` (what a restored prefix's features must have)."""
        return self.model.config.hidden_size * max(1, len(self.feature_layers))

@dataclass(frozen=True)
class ForwardKwargs:
    """The names a model's forward takes: its cache keyword, and whether it takes logits_to_keep."""

    cache: str
    logits_to_keep: bool


def forward_kwargs(model: PreTrainedModel) -> ForwardKwargs:
    """transformers 5 renamed ``past_key_values`` to ``cache``; support both spellings."""
    params = inspect.signature(model.forward).parameters
    return ForwardKwargs("cache" if "cache" in params else "past_key_values", "logits_to_keep" in params)
