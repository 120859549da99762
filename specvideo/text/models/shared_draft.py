"""A draft that shares its target's token embeddings and (tied) output projection.

The SmolLM2 draft is a few Llama layers of the target's width. Its embedding matrix (49,152 x 576,
57 MB in fp16) is the target's, so the shipped directory holds only the layers and the final norm;
``config.json`` marks it with ``"specvideo_shared_embeddings": true`` and loading puts the
target's embedding tensor back (one tensor in memory for both models). The assembled draft is an
ordinary ``LlamaForCausalLM``: our drafters and transformers' assisted generation both run it.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel

from specvideo.files import atomic_dir

MARKER = "specvideo_shared_embeddings"
INIT_KEY = "specvideo_init_layers"


def is_shared_draft(path: str | os.PathLike) -> bool:
    config = Path(path) / "config.json"
    try:
        return bool(json.loads(config.read_text()).get(MARKER))
    except (OSError, ValueError):
        return False


def shared_draft_from_target(target: PreTrainedModel, layers: tuple[int, ...]) -> LlamaForCausalLM:
    """A draft with copies of the target's ``layers`` (in that order) and final norm, sharing its
    embeddings (and tied head)."""
    n = target.config.num_hidden_layers
    if not layers or any(not 0 <= i < n for i in layers):
        raise ValueError(f"draft layers must be indices into the target's {n} layers, got {layers}")
    config = copy.deepcopy(target.config)
    config.num_hidden_layers = len(layers)
    draft = LlamaForCausalLM(config).to(target.dtype)
    with torch.no_grad():
        for mine, theirs in zip(draft.model.layers, (target.model.layers[i] for i in layers)):
            mine.load_state_dict(theirs.state_dict())
        draft.model.norm.load_state_dict(target.model.norm.state_dict())
    _share(draft, target)
    setattr(draft.config, INIT_KEY, list(layers))
    return draft


def save_shared_draft(draft: LlamaForCausalLM, out: str | os.PathLike) -> Path:
    """config.json + model.safetensors (fp16, no embeddings) into ``out``, by temp dir and rename."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    state = {
        k: v.detach().to(torch.float16).contiguous()
        for k, v in draft.state_dict().items()
        if "embed_tokens" not in k and "lm_head" not in k
    }
    config = draft.config.to_dict()
    config[MARKER] = True
    return write_weights(out, state, config)


def write_weights(out: Path, state: dict[str, torch.Tensor], config: dict) -> Path:
    """model.safetensors (the fp16 ``state``) and config.json into ``out`` by temp dir and rename;
    files in ``out`` that are not these two (a README, a token ranking) stay."""
    config = {**config, "dtype": "float16"}
    with atomic_dir(out) as tmp:  # files that are not ours (README, token ranking) stay
        save_file(state, tmp / "model.safetensors", metadata={"format": "pt"})
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        for name in ("model.safetensors", "config.json"):
            (tmp / name).chmod(0o644)
    return out


def load_shared_draft(path: str | os.PathLike, target: PreTrainedModel) -> LlamaForCausalLM:
    """The draft in ``path`` with the target's embeddings; a clear error for a mismatched target."""
    path = Path(path)
    config = LlamaConfig.from_pretrained(path)
    for name in ("hidden_size", "vocab_size", "num_attention_heads", "num_key_value_heads"):
        if getattr(config, name) != getattr(target.config, name, None):
            raise ValueError(
                f"the draft in {path} shares its target's embeddings and needs a target with "
                f"{name}={getattr(config, name)}, got {getattr(target.config, name, None)}"
            )
    draft = LlamaForCausalLM(config)
    state = load_file(path / "model.safetensors")
    missing, unexpected = draft.load_state_dict(state, strict=False)
    missing = [k for k in missing if "embed_tokens" not in k and "lm_head" not in k]
    if missing or unexpected:
        raise ValueError(f"the draft weights in {path} do not match its config: missing {missing[:3]}, unexpected {unexpected[:3]}")
    draft = draft.to(target.dtype)
    _share(draft, target)
    return draft.eval()


def _share(draft: LlamaForCausalLM, target: PreTrainedModel) -> None:
    draft.model.embed_tokens.weight = target.get_input_embeddings().weight
    draft.lm_head.weight = target.get_output_embeddings().weight  # the same tensor when tied
