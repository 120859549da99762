"""Drafters that run the draft head (``specvideo.text.models.head``) on the target's features.

The head's slot j holds token x_j with the target's feature f_{j-1} (zeros for x_0). It can only start once the
target has run over the prompt, so its first round proposes nothing; from then on, each commit
feeds it what the target accepted and the next token, with the target's true features from that
round's verification forward (the verifier's state keeps them: ``CausalLMState.keep_hidden``).
Drafting past the first token feeds the head its own predicted feature.

``HeadDrafter``: a chain of k tokens (its EAGLE-2 tree, ``HeadTreeDrafter``, is with the other tree
drafters in ``tree_drafters``). Batch 1: the target's features of a ragged batch would need a
row-wise bookkeeping this project has not built.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specvideo.core.types import Draft, Verdict
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
        self.target.feature_layers = self.head.feature_layers  # an EAGLE-3 head's: fused in commit
        self.state: CausalLMState | None = None  # starts after the target's prefill (the prompt's features)
        self._block = input_ids[0][attention_mask[0].bool()]  # (w,) what the target feeds before the draft
        self._drafted = False

    def _catch_up(self, k: int) -> torch.Tensor | None:
        """Start a round: feed the caught-up tokens (their slots stay at commit) and return the
        logits (1, V) after them; None when nothing is drafted (k = 0, or before the prefill)."""
        self._drafted = k > 0 and self.state is not None
        if not self._drafted:
            return None
        self.state.mark_round()
        return self.state.forward()[:, -1]

    def propose(self, k: int, keep_drafting: Callable[[torch.Tensor], bool] | None) -> Draft:
        logits = self._catch_up(k)  # (1, V)
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

    def commit(self, draft: Draft, verdict: Verdict) -> None:
        """Drop the slots of this round's drafted tokens, then queue the target's block, the accepted
        tokens and the next token with the target's features (they replace the head's guesses)."""
        if self._drafted:
            self.state.keep_round(0)  # the caught-up block stays, the drafted tokens go
        tokens, features = self._accepted_with_features(draft, verdict)
        if self.state is None:  # the first token has no feature before it: zeros, as in training
            tokens = torch.cat([self._block[:1], tokens])
            features = torch.cat([torch.zeros_like(features[:1]), features])
            self.state = CausalLMState(self.head, tokens[None], torch.ones_like(tokens)[None], features=features[None])
            self.state.keep_hidden = True
        else:
            self.state.push(tokens[None], features=features[None])
        self._block = verdict.next_item[:1]

    catch_up = commit  # a round another drafter proposed (``HybridDrafter``'s lookup): the same

    def _accepted_with_features(self, draft: Draft, verdict: Verdict) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokens x_{j+1} .. and features f_j .. from this round's verification: the target's block
        (w tokens, the prompt at first), then the accepted path and the next token. (n,), (n, d)."""
        hidden = self.target.hidden[0]  # (w + n_draft, d or 3 d) features of the target's fed block
        w = len(self._block)
        accepted, at = self._accepted(draft, verdict)
        at = w + at
        tokens = torch.cat([self._block[1:], accepted, verdict.next_item[:1]])  # (w - 1 + a + 1,)
        rows = torch.cat([torch.arange(w, device=self.device), at])  # features f at the previous token
        return tokens, self.head.fused(hidden[rows])

    def _accepted(self, draft: Draft, verdict: Verdict) -> tuple[torch.Tensor, torch.Tensor]:
        """The accepted tokens (a,) and their places in the drafted block (a,)."""
        a = int(verdict.num_accepted[0])
        return draft.items[0, :a], torch.arange(a, device=self.device)
