"""Training rows for the code pair's draft head (``specvideo train qwen-coder-head-data``).

Real Python source, cut into rows of token ids for the target's tokenizer:

- the files of the fill-in-the-middle workload's packages (``FIM_PACKAGES``) that hold none of its
  benchmark candidates, tuning or held-out;
- the standard library's train split (``benchmarks.text.corpus``; its held-out modules are the
  code workload's prompts);
- a few other installed pure-Python packages (``EXTRA_PACKAGES``), none of them a benchmark source.

Every ``fim_every``-th row is laid out for fill-in-the-middle (prefix, suffix, then the middle the
model writes, with the model's FIM tokens), so the head sees the features the FIM workload meets.
A row's ``start`` is where drafting begins at evaluation (the middle of a FIM row, a quarter into a
plain row). Files are split by path hash: one in ``valid_every`` is validation, never trained on.
Prose (``prose_rows``): the long descriptions the installed distributions ship in their metadata
(READMEs: explanations, how-tos, change logs), the test split's packages excluded, split by the
distribution's name hash. The target's own replies to chat prompts (``chat_rows``) can be added:
they cost a generation each.
"""

from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from specvideo.text.prompts import FIM_TOKENS

EXTRA_PACKAGES = ("requests", "rich", "httpx", "pydantic", "networkx", "typer", "anyio", "pygments", "fsspec")


@dataclass(frozen=True)
class CodeDataConfig:
    work: str = "runs/qwen-coder-head"  # data/ goes here (the shards ``load_shards`` reads)
    row_tokens: int = 384
    rows_per_file: int = 2
    train_rows: int = 320
    valid_rows: int = 32
    fim_every: int = 3
    valid_every: int = 16
    seed: int = 0


def benchmark_files() -> set[str]:
    """'package-version/relative/path.py' of every file a FIM benchmark candidate is cut from."""
    from benchmarks.text.fim import FIM_PACKAGES, _package_prompts

    return {p.source.split(":")[0] for pkg in FIM_PACKAGES for p in _package_prompts(pkg)}


def source_files() -> list[tuple[str, Path]]:
    """(name, path) of every training-eligible source file, sorted by name."""
    import importlib.metadata

    from benchmarks.text.corpus import corpus_files, stdlib_root
    from benchmarks.text.fim import FIM_PACKAGES

    excluded = benchmark_files()
    out = [(f"stdlib/{p.relative_to(stdlib_root()).as_posix()}", p) for p in corpus_files("train")]
    for package in FIM_PACKAGES + EXTRA_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            continue
        root, version = Path(spec.origin).parent, importlib.metadata.version(package)
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            name = f"{package}-{version}/{rel}"
            if "test" not in rel and name not in excluded:
                out.append((name, path))
    return sorted(out)


def is_valid(name: str, every: int) -> bool:
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % every == 0


def file_rows(text: str, tokenizer, config: CodeDataConfig, fim: bool, rng: random.Random) -> list[dict]:
    """Up to ``rows_per_file`` rows of ``row_tokens`` ids from one file, plain or FIM-laid-out."""
    lines = text.splitlines(keepends=True)
    if len(lines) < 12:
        return []
    out = []
    for _ in range(config.rows_per_file):
        at = rng.randrange(0, max(1, len(lines) - 8))
        chunk = lines[at : at + 60]
        if fim:
            a = rng.randrange(1, max(2, len(chunk) - 6))
            b = a + rng.randint(1, 5)
            ids, start = fim_row(tokenizer, chunk[:a], chunk[a:b], chunk[b:], config.row_tokens)
        else:
            ids = tokenizer("".join(chunk), add_special_tokens=False)["input_ids"]
            start = len(ids[: config.row_tokens]) // 4
        ids = ids[: config.row_tokens]
        if len(ids) >= 48 and start < len(ids) - 4:
            out.append({"ids": torch.tensor(ids, dtype=torch.int32), "start": start})
    return out


def fim_row(tokenizer, prefix: list[str], middle: list[str], suffix: list[str], size: int) -> tuple[list[int], int]:
    """<|fim_prefix|> prefix <|fim_suffix|> suffix <|fim_middle|> middle in at most ``size`` ids (the
    prefix cut at its start, the suffix at its end), and where the middle starts."""
    pre, suf, mid = tokenizer.convert_tokens_to_ids(list(FIM_TOKENS))
    encode = lambda lines: tokenizer("".join(lines), add_special_tokens=False)["input_ids"]  # noqa: E731
    body = encode(middle)[: size // 4]
    room = size - len(body) - 3
    p_ids, s_ids = encode(prefix), encode(suffix)
    s_ids = s_ids[: max(room // 3, room - len(p_ids))]
    p_ids = p_ids[max(0, len(p_ids) - (room - len(s_ids))) :]
    head = [pre, *p_ids, suf, *s_ids, mid]
    return head + body, len(head)


def code_rows(tokenizer, config: CodeDataConfig) -> dict[str, list[dict]]:
    rng = random.Random(config.seed)
    files = source_files()
    rng.shuffle(files)
    rows = {"train": [], "valid": []}
    want = {"train": config.train_rows, "valid": config.valid_rows}
    count = 0
    for name, path in files:
        split = "valid" if is_valid(name, config.valid_every) else "train"
        if len(rows[split]) >= want[split]:
            if all(len(rows[s]) >= want[s] for s in rows):
                break
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for row in file_rows(text, tokenizer, config, fim=count % config.fim_every == 0, rng=rng):
            row["source"] = name
            rows[split].append(row)
        count += 1
    return {s: r[: want[s]] for s, r in rows.items()}


def prose_texts() -> list[tuple[str, str]]:
    """(distribution name, its metadata's long description) of every installed distribution with
    one of 2,000 characters or more, the chat and FIM test split's packages excluded; sorted."""
    import importlib.metadata

    from benchmarks.text.fim import TEST_PACKAGES

    out = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        text = dist.read_text("METADATA") or ""
        body = text.split("\n\n", 1)[1] if "\n\n" in text else ""
        if name and name not in TEST_PACKAGES and len(body) >= 2000:
            out[name] = body
    return sorted(out.items())


def prose_rows(tokenizer, config: CodeDataConfig, want: dict[str, int], windows: int = 4) -> dict[str, list[dict]]:
    """Rows of ``row_tokens`` ids from the distributions' descriptions (``prose_texts``): up to
    ``windows`` per distribution at seeded places, drafting from a quarter in; ``want`` rows per split."""
    rng = random.Random(config.seed + 1)
    texts = prose_texts()
    rng.shuffle(texts)
    rows = {split: [] for split in want}
    for name, text in texts:
        split = "valid" if is_valid(name, config.valid_every) else "train"
        if split not in rows or len(rows[split]) >= want[split]:
            continue
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        for _ in range(min(windows, len(ids) // config.row_tokens)):
            at = rng.randrange(0, len(ids) - config.row_tokens + 1)
            row = ids[at : at + config.row_tokens]
            rows[split].append({"ids": torch.tensor(row, dtype=torch.int32), "start": len(row) // 4, "source": f"prose:{name}"})
    return {s: r[: want[s]] for s, r in rows.items()}


KINDS = ("code", "fim", "prose", "chat")


def row_kind(row: dict, fim_prefix: int) -> str:
    """Which of ``KINDS`` a row is: the target's chat reply, prose, a FIM-laid-out file (it opens
    with the ``fim_prefix`` id) or plain code."""
    source = row.get("source", "")
    if source == "chat" or source.startswith("prose:"):
        return source.split(":")[0]
    return "fim" if int(row["ids"][0]) == fim_prefix else "code"


def write_shards(rows: dict[str, list[dict]], work: str | Path, per_shard: int = 64) -> Path:
    from recipes.draft import _save

    data = Path(work) / "data"
    data.mkdir(parents=True, exist_ok=True)
    for split, items in rows.items():
        for i in range(0, len(items), per_shard):
            _save(data / f"{split}-{i // per_shard:03d}.pt", {"rows": items[i : i + per_shard]})
    return data


def chat_requests(n: int, split: str, config: CodeDataConfig) -> list[str]:
    """n chat requests of one split ("train" / "valid"), half of each kind: instructions composed
    from the draft recipe's templates (``recipes.draft_prompts``), and "write this function" requests
    from the docstrings of ``EXTRA_PACKAGES`` (the shape of the chat workload's test split, whose
    packages are others: ``benchmarks.text.fim.TEST_PACKAGES``), split by file hash as the code rows
    are. The validation split's templates never repeat a training one."""
    from benchmarks.text.fim import docstring_requests
    from recipes.draft_prompts import _combinations, chat_prompts

    rng = random.Random(config.seed)
    templates = chat_prompts(_combinations(), seed=config.seed)  # all of them, in a seeded order
    composed = templates[: n // 2] if split == "train" else templates[::-1][: n // 2]
    requests = [
        p.text
        for p in docstring_requests(0, packages=EXTRA_PACKAGES)
        if is_valid(p.source.split(":")[0], config.valid_every) == (split == "valid")
    ]
    rng.shuffle(requests)
    picked = requests[: n - len(composed)]
    return [t for pair in zip(composed, picked) for t in pair] + composed[len(picked) :] + picked[len(composed) :]


def chat_rows(generator, tokenizer, prompts: list[str], max_new_tokens: int, batch: int = 8) -> list[dict]:
    """The target's own greedy replies to chat prompts (through ``generator``, exact: a row's reply
    in a batch is the one it gets alone), as rows that start at the reply. ``batch`` prompts a call,
    since a few rows cost little more than one on this CPU."""
    from specvideo.text.prompts import chat_ids

    out, t0 = [], time.time()
    for i in range(0, len(prompts), batch):
        ids = [chat_ids([{"role": "user", "content": text}], tokenizer) for text in prompts[i : i + batch]]
        replies = generator.generate(ids, max_new_tokens=max_new_tokens).token_ids
        for prompt, reply in zip(ids, replies):
            row = list(prompt) + [int(t) for t in reply]
            out.append({"ids": torch.tensor(row, dtype=torch.int32), "start": len(prompt), "source": "chat"})
        print(f"chat replies: {len(out)} / {len(prompts)} in {time.time() - t0:.0f} s", flush=True)
    return out
