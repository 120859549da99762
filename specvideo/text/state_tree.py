"""Token-tree verification on a ``CausalLMState``: the n nodes of a tree in one forward, each seeing
its ancestors only, then the accepted path's cache slots kept in sequence order."""

from __future__ import annotations

import torch

from specvideo.core.tree import TokenTree, tree_attention_mask


class TreeForward:
    """The tree methods of ``CausalLMState`` (batch 1, no holes)."""

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
