"""Token trees: several draft candidates per depth, verified by the target in one forward.

A tree of n drafted nodes hangs below the *root*, the last committed token (the one whose logits
predict depth 1). ``parents[i]`` is node i's parent: -1 for the root, else an earlier node (nodes
are in topological order: a parent comes before its children). The target scores the n nodes in one
forward in which node i attends to the committed context, the root and its own ancestors only
(``tree_attention_mask``), at position root + depth (``tree_depths``): SpecInfer (Miao et al. 2024),
Medusa and EAGLE-2 verify trees this way. A chain of k tokens is the tree parents = (-1, 0, .., k-2).

Acceptance walks down from the root: at each node the target's choice is compared with the node's
children, and the walk follows the child it accepts.

- Greedy (``greedy_tree_accept``): the child whose token is the target's argmax; the output equals
  the target's own greedy decoding.
- Sampling (``sampled_tree_accept``): children are deterministic candidates (the draft's top
  tokens, lookup continuations), so each is a one-hot proposal; SpecInfer's multi-candidate rule
  then reads: accept candidate x with probability p(x); on rejection set p(x) = 0, renormalise
  and try the next candidate; when all are rejected, sample from what is left. Each step is a
  draw from p (a sequential sample with the candidates looked at first), so the output is
  distributed exactly as the target's p, whatever the candidates are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from specvideo.core.types import Draft, Verdict


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


def greedy_tree_accept(target_tokens: torch.Tensor, tree: TokenTree) -> tuple[list[int], int]:
    """target_tokens: (n + 1,) the target's argmax after the root (index 0) and after each node
    (index i + 1). Returns (the accepted path as node indices, root first, and the next token:
    the target's argmax at the path's end)."""
    path, node = [], -1
    while True:
        choice = int(target_tokens[node + 1])
        child = next((c for c in tree.children(node) if int(tree.tokens[c]) == choice), None)
        if child is None:
            return path, choice
        path.append(child)
        node = child


def sampled_tree_accept(
    p: torch.Tensor, tree: TokenTree, generator: torch.Generator | None = None
) -> tuple[list[int], int]:
    """p: (n + 1, V) the target's (processed) distribution after the root and after each node.
    Returns (the accepted path, the next token), distributed as sampling from p step by step."""
    path, node = [], -1
    while True:
        probs = p[node + 1].clone()  # (V,)
        accepted = None
        for child in tree.children(node):
            x = int(tree.tokens[child])
            mass = float(probs[x])
            if mass <= 0:
                continue  # already rejected (a duplicate candidate) or impossible under p
            if float(torch.rand((), generator=generator, device=p.device)) < mass:
                accepted = child
                break
            probs[x] = 0
            probs = probs / probs.sum()
        if accepted is None:
            return path, int(torch.multinomial(probs, 1, generator=generator))
        path.append(accepted)
        node = accepted


def tree_verdict(draft: Draft, evidence: torch.Tensor, generator: torch.Generator | None = None) -> Verdict:
    """The Verdict of a tree draft (batch 1): evidence is the target's (1, n + 1) argmax (greedy)
    or its (1, n + 1, V) distribution (sampling)."""
    if evidence.ndim == 2:
        path, nxt = greedy_tree_accept(evidence[0], draft.tree)
    else:
        path, nxt = sampled_tree_accept(evidence[0], draft.tree, generator)
    device = evidence.device
    return Verdict(
        num_accepted=torch.tensor([len(path)], device=device), next_item=torch.tensor([nxt], device=device), path=path
    )


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
    state.mask = torch.ones(1, L + w + n, dtype=torch.bool, device=device)
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
    state.cache.move_slots(source, start)
    width = start + len(path)
    state.cache.crop_to(width)
    state.round_start = min(state.round_start, width)
    state.mask = torch.ones(1, width, dtype=torch.bool, device=state.device)
    state.num_tokens = torch.full_like(state.num_tokens, width)
