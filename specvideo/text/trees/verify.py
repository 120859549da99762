"""Token trees: several draft candidates per depth, verified by the target in one forward.

A tree of n drafted nodes hangs below the *root*, the last committed token (the one whose logits
predict depth 1). ``parents[i]`` is node i's parent: -1 for the root, else an earlier node (nodes
are in topological order: a parent comes before its children). The target scores the n nodes in one
forward in which node i attends to the committed context, the root and its own ancestors only
(``tree_attention_mask``), at position root + depth (``tree_depths``): SpecInfer (Miao et al. 2024),
Medusa and EAGLE-2 verify trees this way. A chain of k tokens is the tree parents = (-1, 0, .., k-2).

Acceptance walks down from the root (``tree_walk``): at each node the target's token is compared
with the node's children, and the walk follows the child that carries it. The target's token after
a node of depth d is drawn at output position root + d (``RowSampler``: the argmax, or the
Gumbel-max sample of that position's noise), so the path and the token after it are exactly the
target's own decoding, greedy or sampled, whatever the candidates are.

Trees are an extension: drafters that propose a ``TreeDraft`` run with the ``TreeVerifier`` (their
spec's ``verifier``); the chain drafters, the state, the cache contract and the core know nothing
of trees.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from specvideo.core.types import Draft, Verdict
from specvideo.text.verifier import TargetVerifier


@dataclass(frozen=True)
class TokenTree:
    """tokens: (n,) drafted token ids; parents: (n,) parent node of each (-1 = the root); depths:
    (n,) each node's depth (derived, 1 for the root's children)."""

    tokens: torch.Tensor
    parents: torch.Tensor
    depths: torch.Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.tokens)
        if self.tokens.shape != (n,) or self.parents.shape != (n,):
            raise ValueError(f"tokens and parents must be (n,) each, got {tuple(self.tokens.shape)} and {tuple(self.parents.shape)}")
        index = torch.arange(n)
        if bool(((self.parents < -1) | (self.parents >= index)).any()):
            raise ValueError("every parent must be -1 (the root) or an earlier node")
        object.__setattr__(self, "depths", tree_depths(self.parents))

    @property
    def size(self) -> int:
        return len(self.tokens)

    @property
    def depth(self) -> int:
        return int(self.depths.max()) if self.size else 0

    @classmethod
    def chain(cls, tokens: torch.Tensor) -> TokenTree:
        return cls(tokens, torch.arange(len(tokens)) - 1)

    def children(self, node: int) -> list[int]:
        """Node indices whose parent is ``node`` (-1: the root's), in order."""
        return (self.parents == node).nonzero()[:, 0].tolist()


def tree_depths(parents: torch.Tensor) -> torch.Tensor:
    """(n,) depth of each node: 1 for the root's children."""
    depth = torch.zeros(len(parents), dtype=torch.long)
    for i, p in enumerate(parents.tolist()):
        depth[i] = 1 if p < 0 else depth[p] + 1
    return depth


def tree_attention_mask(parents: torch.Tensor) -> torch.Tensor:
    """(n, n) bool: [i, j] is True when node j is node i or one of its ancestors."""
    n = len(parents)
    mask = torch.eye(n, dtype=torch.bool)
    for i, p in enumerate(parents.tolist()):
        if p >= 0:
            mask[i] |= mask[p]
    return mask


def tree_walk(target_tokens: torch.Tensor, tree: TokenTree) -> tuple[list[int], int]:
    """target_tokens: (n + 1,) the target's token after the root (index 0) and after each node
    (index i + 1). Returns (the accepted path as node indices, root first, and the next token:
    the target's token at the path's end)."""
    path, node = [], -1
    while True:
        choice = int(target_tokens[node + 1])
        child = next((c for c in tree.children(node) if int(tree.tokens[c]) == choice), None)
        if child is None:
            return path, choice
        path.append(child)
        node = child


@dataclass
class TreeDraft(Draft):
    """A draft whose items (1, n) are the nodes of ``tree``; ``lengths`` is (tree.depth,): what one
    path can accept (its n nodes cost one forward of n tokens, not n chances)."""

    tree: TokenTree | None = None

    @classmethod
    def of(cls, tree: TokenTree) -> TreeDraft:
        device = tree.tokens.device
        return cls(items=tree.tokens[None], lengths=torch.tensor([tree.depth], device=device), tree=tree)

    @property
    def depth(self) -> int:
        return self.tree.depth


@dataclass
class TreeVerdict(Verdict):
    """path: the accepted nodes (indices, from the root down); its length is num_accepted[0]."""

    path: list[int] = field(default_factory=list)


class TreeVerifier(TargetVerifier):
    """The verifier of the tree drafters (batch 1): a ``TreeDraft``'s n nodes in one forward, each
    seeing its ancestors only; the target's token after every node, drawn at the node's output
    position (root + depth) by the run's sampler; the walk down the tree; the path's slots kept.
    A round that proposes a chain (nothing, or prompt lookup's) is the chain verifier's."""

    def verify(self, draft: Draft) -> torch.Tensor:
        if not isinstance(draft, TreeDraft):
            return super().verify(draft)
        logits = self.timed_forward(lambda: forward_tree(self.state, draft.tree))  # (1, n+1, V)
        depths = torch.cat([torch.zeros(1, dtype=torch.long), draft.tree.depths.cpu()])  # (n+1,)
        return self.sampler.tokens(logits, depths=depths)  # (1, n+1)

    def accept(self, draft: Draft, target_tokens: torch.Tensor) -> Verdict:
        if not isinstance(draft, TreeDraft):
            return super().accept(draft, target_tokens)
        path, nxt = tree_walk(target_tokens[0], draft.tree)
        device = target_tokens.device
        return TreeVerdict(torch.tensor([len(path)], device=device), torch.tensor([nxt], device=device), path=path)

    def commit(self, draft: Draft, verdict: Verdict) -> list[list[int]]:
        """The accepted path and the next token; the cache keeps the path's slots only."""
        if not isinstance(draft, TreeDraft):
            return super().commit(draft, verdict)
        new = [int(draft.tree.tokens[i]) for i in verdict.path] + [int(verdict.next_item[0])]
        emitted = [self.rows.emit(0, new) if bool(self.rows.active[0]) else []]
        keep_tree_path(self.state, draft.tree, verdict.path)
        self.state.push(verdict.next_item[:, None])
        self._retire()
        return emitted


# a tree in a run's state (batch 1, no holes): the n nodes in one forward, each seeing its
# ancestors only, then the accepted path's cache slots kept in sequence order


@torch.inference_mode()
def forward_tree(state, tree: TokenTree) -> torch.Tensor:
    """Feed ``state``'s pending tokens (the last of them is the tree's root) then the tree's n nodes
    in one forward: each node sees the cache, the pending tokens and its own ancestors, at position
    root + depth. Returns logits (1, n + 1, V) after the root and after each node. Batch 1 with no
    holes only: a ragged batch's rows would need a tree each (``keep_tree_path`` compacts)."""
    if state.batch_size != 1 or not state.full or len(state.live) != 1:
        raise ValueError("token trees are verified one sequence at a time (batch 1): use a chain for batches")
    w, n, L, device = state.pending_width, tree.size, state.length, state.device
    # (w + n, L + w + n): causal over the cache and the pending block, then the tree's own mask
    mask = torch.ones(w + n, L + w + n, dtype=torch.bool, device=device)
    mask[:w, L:] = torch.ones(w, w + n, dtype=torch.bool, device=device).tril()
    mask[w:, L + w :] = tree_attention_mask(tree.parents).to(device)
    positions = state.num_tokens[:, None] + torch.cat(
        [torch.arange(w, device=device), w - 1 + tree.depths.to(device)]
    )[None]  # (1, w + n)
    tokens = torch.cat([state.pending, tree.tokens.to(device)[None]], dim=1)  # (1, w + n)
    dtype = state.model.dtype
    additive = torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill(
        ~mask, torch.finfo(dtype).min
    )  # added to the attention scores: transformers' eager and SDPA paths and LeanLlama alike
    out = state.call_model(tokens, additive[None, None], positions, n + 1)
    state.num_tokens = state.num_tokens + w + n
    state.pending, state.pending_valid = tokens[:, :0], state.pending_valid[:, :0]
    state.finish_forward()
    return out.logits[:, -(n + 1) :].float()  # (1, n + 1, V)


@torch.inference_mode()
def keep_tree_path(state, tree: TokenTree, path: list[int]) -> None:
    """After ``forward_tree(state, tree)``: keep the cache up to the root and the slots of ``path``
    (node indices, root first), in that order; the other nodes' slots go. Keys carry their rotary
    positions (root + depth), which are the positions the path's tokens have in sequence."""
    start = state.length - tree.size  # the first tree slot
    source = start + torch.tensor(path, dtype=torch.long, device=state.device)  # (m,) the path's slots
    order = torch.cat([torch.arange(start, device=state.device), source])[None]  # (1, start + m)
    state.cache.gather_slots(order)
    width = start + len(path)
    if state.past_features is not None:  # the path's features move to its positions as its slots did
        rows = state.hidden.shape[1] - tree.size + torch.tensor(path, dtype=torch.long, device=state.device)
        state.past_features[start:width] = state.hidden[0, rows]
    state.num_tokens = torch.full_like(state.num_tokens, width)
