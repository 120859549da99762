"""What the runtime reads of a model, in one place below the loaders: its context length, the
architectures LeanLlama runs, the target layers a draft head's features come from (their config
key, and ``layer_features``: how they are laid side by side), and the check of a restricted draft
vocabulary. ``specvideo.text.models`` builds on these; nothing here imports it."""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

LEAN_MODEL_TYPES = ("llama", "qwen2")  # qwen2: Llama with q/k/v biases


def context_length(model: PreTrainedModel) -> int:
    """The model's maximum number of positions."""
    config = model.config
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    raise ValueError(
        f"cannot tell the context length of {type(model).__name__}: no max_position_embeddings in its config"
    )


LAYERS_KEY = "specvideo_feature_layers"


def layer_features(hidden_states: tuple[torch.Tensor, ...], layers: tuple[int, ...]) -> torch.Tensor:
    """The target's states ``layers`` (transformers' numbering, each (B, T, d)) side by side, RMS
    normalised without a weight, the final-normed last state as it is: (B, T, len(layers) d)."""
    last = len(hidden_states) - 1
    parts = [hidden_states[i] if i == last else _rms(hidden_states[i]) for i in layers]
    return torch.cat(parts, dim=-1)


def _rms(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype)


def check_vocabulary(vocab: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """A 1-D tensor of distinct token ids in [0, vocab_size), as long ints."""
    vocab = torch.as_tensor(vocab)
    if vocab.ndim != 1 or vocab.numel() == 0 or vocab.dtype.is_floating_point:
        raise ValueError(
            f"a draft vocabulary must be a non-empty 1-D list of token ids, got shape {tuple(vocab.shape)}"
        )
    vocab = vocab.long()
    if int(vocab.min()) < 0 or int(vocab.max()) >= vocab_size:
        raise ValueError(
            f"draft vocabulary ids must lie in [0, {vocab_size}), got {int(vocab.min())}..{int(vocab.max())}"
        )
    if vocab.unique().numel() != vocab.numel():
        raise ValueError("draft vocabulary ids must be distinct")
    return vocab
