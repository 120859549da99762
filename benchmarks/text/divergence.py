"""Where two greedy continuations part, and whether that is a near tie: the benchmark's and the
tests' reading of a greedy row that differs from another runner's."""

from __future__ import annotations

import torch

# Two candidates whose logits lie within this of each other are a near tie: bf16 products computed
# by different kernels (transformers against LeanLlama, a tree's one call against chain steps) were
# measured up to 0.5-1.0 apart on SmolLM2-135M's logits, so either may win.
NEAR_TIE = 1.0


@torch.inference_mode()
def divergence(model, prompt: list[int], a: list[int], b: list[int]) -> tuple[int, float] | None:
    """Where two greedy continuations of ``prompt`` first differ and the margin there: the gap
    between the two chosen tokens' logits under ``model`` (a transformers causal LM, run in float32
    on a copy of the prefix); None when one is a prefix of the other."""
    i = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if i is None:
        return None
    ids = torch.tensor([prompt + a[:i]], device=model.device)
    logits = model(input_ids=ids).logits[0, -1].float()  # (V,)
    return i, float((logits[a[i]] - logits[b[i]]).abs())
