"""Loading the models of a text generator from local directories: a causal LM, a draft (a full LM or
layers sharing the target's embeddings), the tokenizer, and the check that draft and target share
one tokenizer. Nothing is downloaded."""

from __future__ import annotations

import os

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from specvideo.errors import first_line
from specvideo.text.models.head import is_draft_head, load_head
from specvideo.text.models.shared_draft import is_shared_draft, load_shared_draft


def check_vocab(
    target: PreTrainedModel, draft: PreTrainedModel, tokenizer=None, draft_tokenizer=None
) -> None:
    """One tokenizer for both. Sizes may differ by padding (the embedding rows past the tokenizer's
    last id): accepted when the tokenizer is known, fits both sizes, and the draft's tokenizer (if
    known) has the same vocabulary."""
    t, d = target.config.vocab_size, draft.config.vocab_size
    if t == d:
        return
    padded = tokenizer is not None and len(tokenizer) <= min(t, d)
    if padded and draft_tokenizer is not None:
        padded = draft_tokenizer.get_vocab() == tokenizer.get_vocab()
    if not padded:
        raise ValueError(
            f"draft vocabulary size {d} does not match the target's vocabulary size {t}: "
            "draft and target must share one tokenizer (sizes may differ only by padding past it)"
        )


def check_model_path(path: str) -> None:
    """A clear error for a path that cannot be a model directory or a cached Hub id (cheap: no load)."""
    if os.path.isdir(path):
        return
    if os.path.exists(path):
        raise ValueError(f"cannot load a causal LM from {path!r}: it is a file, not a model directory")
    if os.path.isabs(path) or path.startswith(".") or path.count("/") > 1:
        raise ValueError(
            f"cannot load a causal LM from {path!r}: no such model directory "
            "(a model is smollm2, qwen-coder, a .gguf file, a model directory or a cached Hub id)"
        )


def load_causal_lm(path: str, dtype: torch.dtype = torch.float32) -> PreTrainedModel:
    """Load a causal LM from a local directory (or a Hub id already in the local cache); never downloads."""
    check_model_path(path)
    local = os.path.isdir(path)
    try:
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True)
    except Exception as err:  # transformers raises OSError, ValueError, safetensors errors, ...
        where = "model directory" if local else "model directory or cached Hub model"
        reason = first_line(err)
        if "ignore_mismatched_sizes" in reason:  # transformers points at a report it logged
            reason = "the weights' shapes do not match config.json (a wrong or edited config?)"
        raise ValueError(f"cannot load a causal LM from {where} {path!r}: {reason}") from err


def load_draft(path: str, target: PreTrainedModel, dtype: torch.dtype = torch.float32) -> PreTrainedModel:
    """A draft directory: a full causal LM, layers that share the target's embeddings, or a draft
    head on the target's features."""
    from specvideo.text.models.gguf import is_metadata_dir, load_gguf_target

    if is_metadata_dir(path):  # a GGUF file's config and tables: its blocks run it (TextModels.draft_runner)
        return load_gguf_target(path)
    if is_shared_draft(path) or is_draft_head(path):
        try:
            return (load_head if is_draft_head(path) else load_shared_draft)(path, target)
        except (OSError, KeyError) as err:
            raise ValueError(f"cannot load the draft in {path!r}: {first_line(err)}") from err
    return load_causal_lm(path, dtype)


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def load_tokenizer(path: str):
    """The tokenizer in ``path``; None when there is none (token-id prompts still work)."""
    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as err:
        if any(os.path.isfile(os.path.join(path, name)) for name in TOKENIZER_FILES):
            raise ValueError(f"cannot load the tokenizer in {path!r}: {first_line(err)}") from err
        return None


def check_context(prompt_length: int, max_new_tokens: int, context: int, model: str = "target") -> None:
    """Refuse a generation that would run past a model's positions (they would be clamped silently)."""
    if prompt_length + max_new_tokens > context:
        raise ValueError(
            f"prompt of {prompt_length} tokens + max_new_tokens={max_new_tokens} = "
            f"{prompt_length + max_new_tokens} exceeds the {model}'s context length of {context} tokens"
        )
