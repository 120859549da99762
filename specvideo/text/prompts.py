"""Prompt normalisation: str / chat messages / lists of either / token-id lists / (B, T) tensor ->
left-padded batch. Chat messages ({"role", "content"} dicts) go through the tokenizer's chat
template, ending with the assistant's turn opened (``add_generation_prompt``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class EncodedPrompt:
    input_ids: torch.Tensor  # (B, T) left-padded with 0
    attention_mask: torch.Tensor  # (B, T) 1 for real tokens
    is_batch: bool

    @property
    def batch_size(self) -> int:
        return self.input_ids.shape[0]

    @property
    def max_length(self) -> int:
        return int(self.attention_mask.sum(dim=1).max())

    def rows(self) -> list[list[int]]:
        """Each row's token ids without its padding."""
        return unpadded_rows(self.input_ids, self.attention_mask)


def unpadded_rows(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[list[int]]:
    """Each row's real token ids of a padded batch (B, T) and its mask (B, T)."""
    return [row[mask.bool()].tolist() for row, mask in zip(input_ids.cpu(), attention_mask.cpu())]


def encode_prompt(
    prompt, tokenizer, vocab_size: int, device: torch.device, attention_mask: torch.Tensor | None = None
) -> EncodedPrompt:
    """Tokenise (when needed), validate and left-pad a prompt or a batch of prompts; a tensor
    prompt's ``attention_mask`` (1 = real token) drops its padding first."""
    rows, is_batch = _token_rows(prompt, tokenizer)
    if attention_mask is not None:
        rows = _unpad(prompt, rows, attention_mask)
    if not rows:
        raise ValueError("the batch of prompts is empty")
    for i, row in enumerate(rows):
        where = f"prompt {i}" if is_batch else "prompt"
        if len(row) == 0:
            raise ValueError(f"{where} is empty: give at least one token")
        bad = [t for t in row if not 0 <= t < vocab_size]
        if bad:
            raise ValueError(f"{where} has token id {bad[0]} outside the vocabulary [0, {vocab_size})")
    width = max(len(row) for row in rows)
    input_ids = torch.zeros(len(rows), width, dtype=torch.long)
    attention_mask = torch.zeros(len(rows), width, dtype=torch.long)
    for b, row in enumerate(rows):
        input_ids[b, width - len(row) :] = torch.tensor(row, dtype=torch.long)
        attention_mask[b, width - len(row) :] = 1
    return EncodedPrompt(input_ids.to(device), attention_mask.to(device), is_batch)


def _unpad(prompt, rows: list[list[int]], attention_mask) -> list[list[int]]:
    """The real tokens of each row: one contiguous run of 1s (padding left, right or both)."""
    if not isinstance(prompt, torch.Tensor):
        raise ValueError("attention_mask goes with a (B, T) or (T,) tensor prompt")
    mask = torch.as_tensor(attention_mask)
    if tuple(mask.shape) != tuple(prompt.shape):
        raise ValueError(f"attention_mask has shape {tuple(mask.shape)}, the prompt {tuple(prompt.shape)}")
    if not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError("attention_mask must hold only 0 and 1")
    out = []
    for b, (row, keep) in enumerate(zip(rows, mask.reshape(len(rows), -1).tolist())):
        real = [i for i, k in enumerate(keep) if k]
        if real and real[-1] - real[0] + 1 != len(real):
            raise ValueError(
                f"attention_mask row {b} has padding between real tokens; pad on the left or right only"
            )
        out.append([row[i] for i in real])
    return out


def _token_rows(prompt, tokenizer) -> tuple[list[list[int]], bool]:
    if isinstance(prompt, torch.Tensor):
        if prompt.dtype.is_floating_point or prompt.dtype == torch.bool:
            raise ValueError(f"a prompt tensor must hold integer token ids, got dtype {prompt.dtype}")
        if prompt.ndim == 1:
            return [prompt.tolist()], False
        if prompt.ndim == 2:
            return prompt.tolist(), True
        raise ValueError(f"a prompt tensor must have shape (B, T) or (T,), got {tuple(prompt.shape)}")
    if isinstance(prompt, (str, bytes)):
        return [_tokenize(prompt, tokenizer)], False
    if is_messages(prompt):
        return [chat_ids(prompt, tokenizer)], False
    if isinstance(prompt, (list, tuple)):
        if prompt and all(is_messages(p) for p in prompt):
            return [chat_ids(p, tokenizer) for p in prompt], True
        if all(isinstance(p, (str, bytes)) for p in prompt):
            return [_tokenize(p, tokenizer) for p in prompt], True
        if all(isinstance(t, int) and not isinstance(t, bool) for t in prompt) and prompt:
            return [list(prompt)], False
        if all(isinstance(p, (list, tuple)) and all(isinstance(t, int) for t in p) for p in prompt):
            return [list(p) for p in prompt], True
    raise ValueError(
        "prompt must be a str, chat messages (a list of {'role', 'content'} dicts), a list of either, "
        f"a list of token-id lists or a (B, T) tensor, got {type(prompt).__name__}"
    )


def is_messages(prompt) -> bool:
    """A conversation: a non-empty list of dicts (each is checked by ``chat_ids``)."""
    return isinstance(prompt, (list, tuple)) and bool(prompt) and all(isinstance(m, dict) for m in prompt)


def chat_ids(messages, tokenizer) -> list[int]:
    """The conversation through the tokenizer's chat template, the assistant's reply opened."""
    if tokenizer is None:
        raise ValueError("chat messages need a tokenizer with a chat template")
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError("this model's tokenizer has no chat template: give plain text to continue instead")
    for i, m in enumerate(messages):
        if not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise ValueError(f"chat message {i} must have a str 'role' and a str 'content', got {sorted(m)}")
        if m["role"] not in ("system", "user", "assistant"):
            raise ValueError(f"chat message {i} has role {m['role']!r}; use system, user or assistant")
    if messages[-1]["role"] == "assistant":
        raise ValueError("the last chat message is the assistant's: end with a user message to reply to")
    text = tokenizer.apply_chat_template(
        [{"role": m["role"], "content": _utf8_text(m["content"])} for m in messages],
        add_generation_prompt=True,
        tokenize=False,
    )
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


FIM_TOKENS = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")  # Qwen2.5-Coder, StarCoder-style


def fim_ids(tokenizer, prompt: str, suffix: str) -> list[int] | None:
    """Fill in the middle: prefix and suffix laid out with the model's FIM tokens, or None when its
    tokenizer has none."""
    vocab = tokenizer.get_vocab()
    if not all(t in vocab for t in FIM_TOKENS):
        return None
    pre, suf, mid = FIM_TOKENS
    return list(tokenizer(f"{pre}{prompt}{suf}{suffix}{mid}", add_special_tokens=False)["input_ids"])


REPO_TOKENS = ("<|repo_name|>", "<|file_sep|>")  # Qwen2.5-Coder's repository-level FIM


def infill_ids(
    tokenizer, prefix: str, suffix: str, extra: list[tuple[str, str]] = (), middle: str = "", budget: int | None = None
) -> list[int] | None:
    """llama.cpp's /infill layout: chunks of other files (``extra``: (filename, text)), then
    <|fim_prefix|> prefix <|fim_suffix|> suffix <|fim_middle|> middle. With the model's
    repository tokens the chunks go as ``<|repo_name|>myproject\n<|file_sep|>name\ntext``... and a
    last ``<|file_sep|>filename\n``, else as plain text. Past ``budget`` tokens the oldest chunks go
    first, then the suffix's end and the prefix's start (the suffix keeps a quarter of the room). None
    when the tokenizer has no FIM tokens."""
    vocab = tokenizer.get_vocab()
    if not all(t in vocab for t in FIM_TOKENS):
        return None
    encode = lambda text: list(tokenizer(text, add_special_tokens=False)["input_ids"])  # noqa: E731
    pre, suf, mid = (vocab[t] for t in FIM_TOKENS)
    repo = all(t in vocab for t in REPO_TOKENS)
    chunks = [encode(f"{REPO_TOKENS[1]}{name}\n{text}" if repo else text) for name, text in extra]
    head = encode(f"{REPO_TOKENS[0]}myproject\n") if repo and chunks else []
    tail = encode(f"{REPO_TOKENS[1]}filename\n") if repo and chunks else []
    p_ids, s_ids, m_ids = encode(prefix), encode(suffix), encode(middle)
    if budget is not None:
        room = budget - len(m_ids) - 3
        while chunks and len(head) + len(tail) + sum(map(len, chunks)) + len(p_ids) + len(s_ids) > room:
            chunks.pop(0)  # the oldest chunk first
        if not chunks:
            head, tail = [], []
        room -= len(head) + len(tail) + sum(map(len, chunks))
        s_ids = s_ids[: max(room // 4, room - len(p_ids))]
        p_ids = p_ids[max(0, len(p_ids) - max(0, room - len(s_ids))) :]
    context = head + [t for c in chunks for t in c] + tail
    return context + [pre, *p_ids, suf, *s_ids, mid, *m_ids]


def _tokenize(text: str | bytes, tokenizer) -> list[int]:
    if tokenizer is None:
        raise ValueError("a text prompt needs a tokenizer: pass tokenizer=... or give token ids")
    if not text:
        raise ValueError("prompt is empty: give some text to continue")
    return list(tokenizer(_utf8_text(text))["input_ids"])


def _utf8_text(text: str | bytes) -> str:
    """bytes must be UTF-8; so must a str's bytes (Python hands over the undecodable bytes of a
    command-line argument as lone surrogates, which ``surrogateescape`` turns back into bytes)."""
    try:
        raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")
        return raw.decode("utf-8")
    except UnicodeError as err:
        bad = err.object[err.start : err.end]
        raise ValueError(
            f"prompt is not valid UTF-8: {bad!r} at position {err.start} ({err.reason})"
        ) from err


def fim_prompt(tokenizer, prompt, suffix):
    """Token ids of fill-in-the-middle prompts (a str, or a list of str with a list of suffixes)."""
    if tokenizer is None:
        raise ValueError("suffix= fills in the middle with the model's FIM tokens and needs a tokenizer")
    prompts, suffixes = ([prompt], [suffix]) if isinstance(prompt, str) else (prompt, suffix)
    if not (isinstance(prompts, list) and isinstance(suffixes, list) and len(prompts) == len(suffixes)
            and all(isinstance(t, str) for t in prompts + suffixes)):
        raise ValueError("suffix= takes a str prompt with a str suffix, or a list of str prompts with as many suffixes")
    rows = [fim_ids(tokenizer, p, s) for p, s in zip(prompts, suffixes)]
    if any(r is None for r in rows):
        raise ValueError(f"the model has no fill-in-the-middle tokens {list(FIM_TOKENS)}: drop suffix=")
    return rows[0] if isinstance(prompt, str) else rows
