"""Drafters that propose token trees (``verify``) instead of one chain, their builders and their check.

``NGramTreeDrafter``: prompt lookup with several candidates. The context's last n tokens often
occurred more than once before (code repeats its identifiers and idioms with variations), and
each occurrence was followed by its own continuation; a chain drafter bets on the latest one only.
This drafter collects the continuations of up to ``branches`` earlier occurrences (the longest
matching suffix first, the latest occurrence first), merges them into a trie (shared prefixes
become one path) and keeps at most ``max_nodes`` nodes, in the order they were found. The target
verifies the whole trie in one forward and keeps the longest path it accepts.

``ModelTreeDrafter``: a draft model's chain with its runner-up tokens beside it.

``HeadTreeDrafter``: EAGLE-2's dynamic tree from the draft head: at each depth the ``width`` nodes
with the highest cumulative draft log-probability are expanded in one head forward (a tree
attention mask over the head's cache), each into its ``width`` most likely children; the
``max_nodes`` best nodes of all make the tree (a child never scores above its parent, so every kept
node's ancestors are kept).

Each proposes a ``TreeDraft`` that the ``TreeVerifier`` checks (``verify``); each is batch 1, and a
run of several rows drafts with its chain (its spec's ``chain``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specvideo.core.types import Draft
from specvideo.text.drafting.base import Drafter, no_draft
from specvideo.text.drafting.drafters import HybridDrafter
from specvideo.text.drafting.head_drafters import HeadDrafter
from specvideo.text.drafting.registry import DraftParts, lean_model, lookup
from specvideo.text.runtime.state import CausalLMState
from specvideo.text.trees.verify import TokenTree, TreeDraft


class NGramTreeDrafter(Drafter):
    """Prompt lookup over several earlier occurrences, proposed as one token tree (batch 1)."""

    batched = False

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1, branches: int = 4, max_nodes: int = 12, rows=None):
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {min_ngram}, {max_ngram}")
        if branches < 1 or max_nodes < 1:
            raise ValueError(f"branches and max_nodes must be >= 1, got {branches} and {max_nodes}")
        self.max_ngram, self.min_ngram = max_ngram, min_ngram
        self.branches, self.max_nodes = branches, max_nodes
        self.rows = rows  # the run's ``RowBook``: the row's history

    def start(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> None:
        if input_ids.shape[0] != 1:
            raise ValueError(
                f"token trees are verified one prompt at a time (batch 1), got a batch of {input_ids.shape[0]}: "
                "use a chain drafter (ngram, model) for batches"
            )
        self.device = input_ids.device

    def propose(self, k: int, keep_drafting: Callable[[torch.Tensor], bool] | None) -> Draft:
        tree = self.tree(self.continuations(k)) if k > 0 else None
        if tree is None:
            return no_draft(1, self.device)
        return TreeDraft.of(TokenTree(tree.tokens.to(self.device), tree.parents.to(self.device)))

    def continuations(self, k: int) -> list[list[int]]:
        """Up to ``branches`` distinct continuations of at most k tokens, best first: the longest
        matching suffix before shorter ones, the latest occurrence before earlier ones."""
        history, found = self.rows.history(0), []
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
            return no_draft(1, device)
        self.inner.sync()
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
        self.inner.seen[0].extend(tokens[i] for i in chain[:-1])  # the chain's tokens 1 .. k-1 were fed
        return TreeDraft.of(TokenTree(torch.tensor(tokens, device=device), torch.tensor(parents, device=device)))


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
        logits = self._root_logits(k)  # (1, V) the root's
        if logits is None:
            return no_draft(1, self.device)
        expansion = _Expansion(self.state, self._log_probs(logits)[0], self.state.hidden[0, -1], self.width)
        for _ in range(k - 1):
            if not expansion.expand(self.head, self._log_probs):
                break
        self.calls += expansion.forwards + 1
        return TreeDraft.of(expansion.best(self.max_nodes))

    def _log_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """(m, V) log q: the warped draft distribution (the raw one when greedy)."""
        if self.sampler.config(0).greedy:
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
        self.features = {-1: root_feature}  # (d,) per expanded node, the root's from the re-sync
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


def check(models, config) -> None:
    """A tree's masked forward is exact only on a target whose k-token calls need no invariance."""
    if models.invariant:
        raise ValueError(
            f"the {config.drafter} drafter checks token trees through an attention mask that the invariant "
            "bf16 target cannot compute as its 1-token steps do, so the output could leave the model's "
            "own decoding: use a chain drafter (head-hybrid, hybrid, ngram) or float32 (dtype='float32')"
        )
    if config.drafter == "ngram-tree":
        NGramTreeDrafter(config.max_ngram, branches=config.tree_branches, max_nodes=config.tree_nodes)  # validates them


def model_tree(p: DraftParts) -> ModelTreeDrafter:
    return ModelTreeDrafter(lean_model(p), p.settings.tree_width)


def ngram_tree(p: DraftParts) -> NGramTreeDrafter:
    s = p.settings
    return NGramTreeDrafter(s.max_ngram, branches=s.tree_branches, max_nodes=s.tree_nodes, rows=p.verifier.rows)


def head_tree(p: DraftParts):
    """The head's EAGLE-2 tree; a batch of prompts drafts by prompt lookup."""
    if p.batch_size > 1:
        return lookup(p)
    return HeadTreeDrafter(p.runner, p.verifier, p.settings.head_tree_width, p.settings.tree_nodes)


def head_hybrid_tree(p: DraftParts):
    return lookup(p) if p.batch_size > 1 else HybridDrafter(head_tree(p), lookup(p, hybrid=True))
