"""Drafters that run the draft head (``specvideo.text.models.head``) on the target's features.

The head's slot j holds token x_j with the target's feature f_{j-1} (zeros for x_0). It can only start once the
target has run over the prompt, so its first round proposes nothing; from then on, each commit
feeds it what the target accepted and the next token, with the target's true features from that
round's verification forward (the verifier's state keeps them: ``CausalLMState.keep_hidden``).
Drafting past the first token feeds the head its own predicted feature.

``HeadDrafter``: a chain of k tokens. ``HeadTreeDrafter``: EAGLE-2's dynamic tree: at each depth the
``width`` nodes with the highest cumulative draft log-probability are expanded in one head forward
(a tree attention mask over the head's cache), each into its ``width`` most likely children; the
``max_nodes`` best nodes of all make the tree (a child never scores above its parent, so every
kept node's ancestors are kept). Both are batch 1: the target's features of a ragged batch would
need a row-wise bookkeeping this project has not built.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specvideo.core.types import Draft, Verdict
from specvideo.text.drafting.base import Drafter, no_draft
from specvideo.text.runtime.state import CausalLMState
from specvideo.text.tree import TokenTree, TreeDraft


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
        tokens = []
        for i in range(k):
            tokens.append(self.sampler.tokens(logits[:, None], step=i)[:, 0])  # (1,)
            if i == k - 1 or (keep_drafting is not None and not keep_drafting(torch.softmax(logits, -1).max(dim=-1).values)):
                break
            feature = self.state.hidden[:, -1:]  # (1, 1, d) the head's own prediction of f
            logits = self.state.forward(tokens[-1][:, None], features=feature)[:, -1]
        self.calls += len(tokens)
        items = torch.stack(tokens, dim=1)  # (1, m)
        return Draft(items=items, lengths=torch.tensor([items.shape[1]], device=self.device))

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
        hidden = self.target.hidden[0]  # (w + n_draft, d) features of the target's fed block
        w = len(self._block)
        accepted, at = self._accepted(draft, verdict)
        at = w + at
        tokens = torch.cat([self._block[1:], accepted, verdict.next_item[:1]])  # (w - 1 + a + 1,)
        rows = torch.cat([torch.arange(w, device=self.device), at])  # features f at the previous token
        return tokens, hidden[rows]

    def _accepted(self, draft: Draft, verdict: Verdict) -> tuple[torch.Tensor, torch.Tensor]:
        """The accepted tokens (a,) and their places in the drafted block (a,)."""
        a = int(verdict.num_accepted[0])
        return draft.items[0, :a], torch.arange(a, device=self.device)


class HeadTreeDrafter(HeadDrafter):
    """EAGLE-2's dynamic draft tree from the head: depth k, ``width`` nodes expanded per depth with
    ``width`` children each, the ``max_nodes`` most likely nodes kept (its ``TreeDraft`` runs with
    the ``TreeVerifier``)."""

    def __init__(self, head, verifier, width: int = 2, max_nodes: int = 12):
        super().__init__(head, verifier)
        if width < 1 or max_nodes < 1:
            raise ValueError(f"width and max_nodes must be >= 1, got {width} and {max_nodes}")
        self.width, self.max_nodes = width, max_nodes

    def propose(self, k: int, keep_drafting: Callable[[torch.Tensor], bool] | None) -> Draft:
        logits = self._catch_up(k)  # (1, V) the root's
        if logits is None:
            return no_draft(1, self.device)
        expansion = _Expansion(self.state, self._log_probs(logits)[0], self.state.hidden[0, -1], self.width)
        for _ in range(k - 1):
            if not expansion.expand(self.head, self._log_probs):
                break
        self.calls += expansion.forwards + 1
        return TreeDraft.of(expansion.best(self.max_nodes))

    def _accepted(self, draft: Draft, verdict: Verdict) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(draft, TreeDraft):
            return super()._accepted(draft, verdict)
        path = torch.tensor(verdict.path, dtype=torch.long, device=self.device)
        return draft.tree.tokens[path], path

    def _log_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """(m, V) log q: the warped draft distribution (the raw one when greedy)."""
        if self.sampler.configs[0].greedy:
            return torch.log_softmax(logits, dim=-1)
        return self.sampler.probs(logits, 0).clamp_min(1e-30).log()


class _Expansion:
    """The growing candidate tree of one round: every node's token, parent, cumulative log q and,
    once expanded, its head slot and predicted feature. Expanded nodes occupy extra slots of the
    head's cache; ``best`` drops them again."""

    def __init__(self, state: CausalLMState, root_logq: torch.Tensor, root_feature: torch.Tensor, width: int):
        self.state, self.cache, self.width = state, state.cache, width
        self.base = self.cache.length  # (slots) the committed context, root included
        self.root_position = int(state.num_tokens[0]) - 1
        self.tokens: list[int] = []
        self.parents: list[int] = []
        self.scores: list[float] = []
        self.depths: list[int] = []
        self.slot: dict[int, int] = {}  # expanded node -> its tree slot (0-based after base)
        self.features = {-1: root_feature}  # (d,) per expanded node, the root's from the catch-up
        self.frontier = self._children(-1, root_logq, 0.0, 0)
        self.forwards = 0

    def _children(self, parent: int, logq: torch.Tensor, score: float, depth: int) -> list[int]:
        top = logq.topk(self.width)
        new = []
        for value, token in zip(top.values.tolist(), top.indices.tolist()):
            if value == float("-inf"):
                continue
            new.append(len(self.tokens))
            self.tokens.append(token)
            self.parents.append(parent)
            self.scores.append(score + value)
            self.depths.append(depth + 1)
        return new

    @torch.inference_mode()
    def expand(self, head, log_probs) -> bool:
        """Feed the frontier's ``width`` best nodes to the head in one forward; their children
        become the next frontier. False when nothing is left to expand."""
        chosen = sorted(self.frontier, key=lambda i: -self.scores[i])[: self.width]
        if not chosen:
            return False
        first = len(self.slot)
        for j, node in enumerate(chosen):
            self.slot[node] = first + j
        m, device = len(chosen), self.state.device
        tree_slots = first + m
        # each fed node sees the committed context, its expanded ancestors and itself
        visible = torch.zeros(m, tree_slots, dtype=torch.bool, device=device)
        for j, node in enumerate(chosen):
            ancestor = node
            while ancestor >= 0:
                visible[j, self.slot[ancestor]] = True
                ancestor = self.parents[ancestor]
        mask = torch.cat([torch.ones(m, self.base, dtype=torch.bool, device=device), visible], dim=1)
        dtype = head.dtype
        additive = torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill(~mask, torch.finfo(dtype).min)
        out = head(
            input_ids=torch.tensor([[self.tokens[i] for i in chosen]], device=device),
            attention_mask=additive[None, None],  # (1, 1, m, base + tree slots)
            position_ids=torch.tensor([[self.root_position + self.depths[i] for i in chosen]], device=device),
            cache=self.cache.native,
            logits_to_keep=m,
            features=torch.stack([self.features[self.parents[i]] for i in chosen])[None],  # (1, m, d)
            output_hidden_states=True,
        )
        self.forwards += 1
        logq = log_probs(out.logits[0].float())  # (m, V)
        self.frontier = []
        for j, node in enumerate(chosen):
            self.features[node] = out.hidden_states[-1][0, j]
            self.frontier += self._children(node, logq[j], self.scores[node], self.depths[node])
        return True

    def best(self, max_nodes: int) -> TokenTree:
        """The ``max_nodes`` highest-scoring nodes (ties: the shallower first, so a parent precedes
        its child), in topological order; the tree slots leave the head's cache."""
        self.cache.crop_to(self.base)
        keep = sorted(range(len(self.tokens)), key=lambda i: (-self.scores[i], self.depths[i]))[:max_nodes]
        keep = sorted(keep, key=lambda i: (self.depths[i], i))
        index = {node: j for j, node in enumerate(keep)}
        device = self.state.device
        tokens = torch.tensor([self.tokens[i] for i in keep], dtype=torch.long, device=device)
        parents = torch.tensor([index[self.parents[i]] if self.parents[i] >= 0 else -1 for i in keep], device=device)
        return TokenTree(tokens, parents)

