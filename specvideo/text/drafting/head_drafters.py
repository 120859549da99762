"""Drafters that run the draft head (``specvideo.text.models.head``) on the target's features.

The head's slot j holds token x_j with the target's feature f_{j-1} (zeros for x_0). It can only start once the
target has run over the prompt, so its first round proposes nothing; from then on, each round
re-syncs it to the row's history: the tokens it drafted leave its cache, and what the target
accepted and its next token go in with the target's true features (the verifier's state keeps
each position's: ``CausalLMState.past_features``). Drafting past the first token feeds the head
its own predicted feature.

``HeadDrafter``: a chain of k tokens (its EAGLE-2 tree, ``HeadTreeDrafter``, is in the token-tree
extension, ``specvideo.text.trees``). Batch 1: the target's features of a ragged batch would need a
row-wise bookkeeping this project has not built.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specvideo.core.types import Draft
from specvideo.text.drafting.base import Drafter, no_draft
from specvideo.text.runtime.state import CausalLMState


class HeadDrafter(Drafter):
    """A chain drafted by the head; ``verifier`` is the ``TargetVerifier`` whose features it reads."""

    batched = False  # it reads one row's features: a continuous batch drafts by prompt lookup

    def __init__(self, head, verifier):
        if getattr(head, "fc", None) is None:
            raise ValueError("the head drafter runs a draft head (LeanLlama with its fc), not a plain draft model")
        self.head, self.verifier = head, verifier
        self.calls = 0

    @property
    def sampler(self):
        """The verifier's: the head draws as the target does, with the row's settings and noise."""
        return self.verifier.sampler

    def start(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        if input_ids.shape[0] != 1:
            raise ValueError(
                f"the draft head reads the target's features one prompt at a time (batch 1), got a batch of "
                f"{input_ids.shape[0]}: use a chain drafter without a head (lean, hybrid, ngram) for batches"
            )
        self.device = input_ids.device
        self.target = self.verifier.state
        self.target.keep_hidden = True
        self.target.feature_layers = self.head.feature_layers  # an EAGLE-3 head's: fused in ``sync``
        self.state: CausalLMState | None = None  # starts after the target's prefill (the prompt's features)
        self.seen: list[int] = []  # the history its cache holds with the target's features

    def sync(self) -> bool:
        """Bring the head's cache to the row's history: its own drafts leave, the rest of the history
        goes in, each token x_j with the target's feature f_{j-1}. False before the target has run."""
        if self.target.past_features is None:
            return False
        n = len(self.seen)  # what it synced last: a prefix of the history, which only grows
        new = self.verifier.rows.tail(0, n)  # the history past it
        if self.state is not None:
            self.state.truncate(torch.tensor([n]))  # its own drafts go
        features = self.head.fused(self.target.past_features[max(n - 1, 0) : n + len(new) - 1])  # (m, d)
        if n == 0:  # the first token has no feature before it: zeros, as in training
            features = torch.cat([torch.zeros_like(features[:1]), features])
        tokens = torch.tensor([new], device=self.device)  # (1, m)
        if self.state is None:
            self.state = CausalLMState(self.head, tokens, torch.ones_like(tokens), features=features[None])
            self.state.keep_hidden = True
        else:
            self.state.push(tokens, features=features[None])
        self.seen.extend(new)
        return True

    def _root_logits(self, k: int) -> torch.Tensor | None:
        """Start a round: re-sync and return the logits (1, V) after the history; None when
        nothing is drafted (k = 0, or before the target's first forward)."""
        if k == 0 or not self.sync():
            return None
        return self.state.forward()[:, -1]

    def propose(self, k: int, keep_drafting: Callable[[torch.Tensor], bool] | None) -> Draft:
        logits = self._root_logits(k)  # (1, V)
        if logits is None:
            return no_draft(1, self.device)
        tokens, qs = [], []
        for i in range(k):
            token, q = self.sampler.draft(logits, step=i)  # (1,), q (1, V) under rejection sampling
            tokens.append(token)
            qs.append(q)
            if i == k - 1 or (keep_drafting is not None and not keep_drafting(torch.softmax(logits, -1).max(dim=-1).values)):
                break
            feature = self.state.hidden[:, -1:]  # (1, 1, d) the head's own prediction of f
            logits = self.state.forward(tokens[-1][:, None], features=feature)[:, -1]
        self.calls += len(tokens)
        items = torch.stack(tokens, dim=1)  # (1, m)
        q = None if qs[0] is None else torch.stack(qs, dim=1)  # (1, m, V)
        return Draft(items=items, lengths=torch.tensor([items.shape[1]], device=self.device), q=q)
