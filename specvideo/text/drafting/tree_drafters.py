"""Drafters that propose token trees (``specvideo.text.tree``) instead of one chain.

``NGramTreeDrafter``: prompt lookup with several candidates. The context's last n tokens often
occurred more than once before (code repeats its identifiers and idioms with variations), and
each occurrence was followed by its own continuation; a chain drafter bets on the latest one only.
This drafter collects the continuations of up to ``branches`` earlier occurrences (the longest
matching suffix first, the latest occurrence first), merges them into a trie (shared prefixes
become one path) and keeps at most ``max_nodes`` nodes, in the order they were found. The target
verifies the whole trie in one forward and keeps the longest path it accepts.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specvideo.core.types import Draft, Verdict
from specvideo.text.drafting.base import Drafter, no_draft
from specvideo.text.tree import TokenTree, TreeDraft


class NGramTreeDrafter(Drafter):
    """Prompt lookup over several earlier occurrences, proposed as one token tree (batch 1)."""

    batched = False

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1, branches: int = 4, max_nodes: int = 12):
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        if branches < 1 or max_nodes < 1:
            raise ValueError(f"branches and max_nodes must be >= 1, got {branches} and {max_nodes}")
        self.max_ngram, self.min_ngram = max_ngram, min_ngram
        self.branches, self.max_nodes = branches, max_nodes

    def start(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        if input_ids.shape[0] != 1:
            raise ValueError(
                f"token trees are verified one prompt at a time (batch 1), got a batch of {input_ids.shape[0]}: "
                "use a chain drafter (ngram, model) for batches"
            )
        self.device = input_ids.device
        self.history = input_ids[0][attention_mask[0].bool()].tolist()

    def propose(self, k: int, keep_drafting: Callable[[torch.Tensor], bool] | None) -> Draft:
        tree = self.tree(self.continuations(k)) if k > 0 else None
        if tree is None:
            return no_draft(1, self.device)
        return TreeDraft.of(TokenTree(tree.tokens.to(self.device), tree.parents.to(self.device)))

    def continuations(self, k: int) -> list[list[int]]:
        """Up to ``branches`` distinct continuations of at most k tokens, best first: the longest
        matching suffix before shorter ones, the latest occurrence before earlier ones."""
        history, found = self.history, []
        for n in range(min(self.max_ngram, len(history) - 1), self.min_ngram - 1, -1):
            pattern = history[-n:]
            for start in range(len(history) - n - 1, -1, -1):
                if history[start : start + n] == pattern:
                    candidate = history[start + n : start + n + k]
                    if candidate and candidate not in found:
                        found.append(candidate)
                        if len(found) == self.branches:
                            return found
        return found

    def tree(self, continuations: list[list[int]]) -> TokenTree | None:
        """The continuations merged into a trie of at most ``max_nodes`` nodes (None when empty)."""
        tokens: list[int] = []
        parents: list[int] = []
        children: dict[tuple[int, int], int] = {}  # (parent node, token) -> node
        for candidate in continuations:
            parent = -1
            for token in candidate:
                node = children.get((parent, token))
                if node is None:
                    if len(tokens) == self.max_nodes:
                        break
                    node = len(tokens)
                    tokens.append(token)
                    parents.append(parent)
                    children[(parent, token)] = node
                parent = node
        if not tokens:
            return None
        return TokenTree(torch.tensor(tokens, dtype=torch.long), torch.tensor(parents, dtype=torch.long))

    def commit(self, draft: Draft, verdict: Verdict) -> None:
        if isinstance(draft, TreeDraft):
            self.history.extend(int(draft.tree.tokens[i]) for i in verdict.path)
        self.history.append(int(verdict.next_item[0]))


class ModelTreeDrafter(Drafter):
    """A draft model's greedy chain of k tokens, and at each depth its next ``width`` most likely
    tokens as leaves beside the chain's token (Medusa's and EAGLE-2's cheapest tree: one draft
    forward per depth, the siblings come from the same logits). The candidates are deterministic,
    and the ``TreeVerifier`` walks them against the target's own tokens at any temperature. Batch 1.

    ``inner`` is a ``ModelDrafter`` (its KV cache, vocabulary fitting and call count are reused).
    """

    batched = False

    def __init__(self, inner, width: int = 1):
        if width < 0:
            raise ValueError(f"width must be >= 0, got {width}")
        self.inner, self.width = inner, width

    @property
    def calls(self) -> int:
        return self.inner.calls

    def start(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        if input_ids.shape[0] != 1:
            raise ValueError(
                f"token trees are verified one prompt at a time (batch 1), got a batch of {input_ids.shape[0]}: "
                "use a chain drafter (model, hybrid) for batches"
            )
        self.inner.start(input_ids, attention_mask)

    def propose(self, k: int, keep_drafting: Callable[[torch.Tensor], bool] | None) -> Draft:
        state, device = self.inner.state, self.inner.state.device
        if k == 0:
            self._chain = []
            return no_draft(1, device)
        state.mark_round()
        logits = self.inner.fit_vocab(state.forward()[:, -1])[0]  # (V,)
        tokens, parents, chain = [], [], []
        for depth in range(k):
            top = logits.topk(1 + self.width).indices.tolist()  # the chain's token, then its siblings
            parent = chain[-1] if chain else -1
            for j, token in enumerate(top):
                tokens.append(token)
                parents.append(parent)
                if j == 0:
                    chain.append(len(tokens) - 1)
            if depth < k - 1:
                logits = self.inner.fit_vocab(state.forward(torch.tensor([[top[0]]], device=device))[:, -1])[0]
        self.inner.calls += k
        self._chain = chain
        return TreeDraft.of(TokenTree(torch.tensor(tokens, device=device), torch.tensor(parents, device=device)))

    def commit(self, draft: Draft, verdict: Verdict) -> None:
        """Keep the chain's slots the path shares, then queue the rest of the path and the next token."""
        state, next_token = self.inner.state, self.inner.feedable(verdict.next_item[:, None])  # (1, 1)
        if not isinstance(draft, TreeDraft):
            state.push(next_token)
            return
        path = verdict.path
        shared = 0  # chain tokens on the path (the path leaves the chain at most once, at its end)
        while shared < len(path) and shared < len(self._chain) and path[shared] == self._chain[shared]:
            shared += 1
        state.keep_round(shared)  # the unseen tokens, then chain tokens 1 .. k-1 were fed (the k-th was not)
        rest = [int(draft.tree.tokens[i]) for i in path[min(shared, len(self._chain) - 1) :]]
        queued = torch.tensor([rest], dtype=torch.long, device=state.device) if rest else None
        if queued is not None:
            state.push(self.inner.feedable(queued))
        state.push(next_token)
