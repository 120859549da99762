"""The benchmark's prompts: two workloads, each with a tuning and a held-out split (fim and chat a
test split too, from third-party packages: ``benchmarks.text.fim``).

code: completing functions of the held-out stdlib modules (``benchmarks.text.corpus``), which
no model of this project was trained on; even candidates are the tuning split, odd ones held out.
chat: instructions written for this benchmark (how-to, explanation, code request, short writing),
sent through the target's chat template. The draft's training prompts are generated from
templates (``recipes.draft_prompts``) and never include these (a test checks).
"""

from __future__ import annotations

import ast
import json
import os
from dataclasses import dataclass
from pathlib import Path

from benchmarks.text.config import SPLITS, check_positive_int

CHAT_TUNING = (
    "How can I make my Python script accept command-line arguments?",
    "What is the difference between a process and a thread?",
    "Write a Python function that returns the n-th triangular number.",
    "Write a short thank-you note to a neighbour who watered my plants.",
    "Why do leaves change colour in autumn?",
    "How do I undo the last commit in git?",
    "Give three ideas for a rainy Sunday afternoon.",
    "Explain what an API is to someone who does not program.",
)
CHAT_HELDOUT = (
    "How do I install a Python package only for my user account?",
    "What does the 'yield' keyword do in Python?",
    "Explain the difference between RAM and disk storage.",
    "Write a Python function that counts how often each letter appears in a string.",
    "Write a limerick about a cat who loves boxes.",
    "How can I keep my laptop battery healthy?",
    "What is a good way to start learning to draw?",
    "Explain why the sky looks blue during the day.",
    "Write a Python class for a simple bank account with deposit and withdraw methods.",
    "How do I convert a list of strings to integers in Python?",
    "Describe a quiet beach at sunrise in three sentences.",
    "What are the main causes of traffic jams in cities?",
    "How should I prepare for a job interview for a software role?",
    "Write a short welcome message for new members of a hiking club.",
    "What is the difference between a list and a tuple in Python?",
    "Explain how a refrigerator keeps food cold.",
)


def chat_prompts(split: str = "heldout", n: int = 0) -> list[BenchPrompt]:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if split == "test":  # third-party requests (fim.docstring_requests)
        from benchmarks.text.fim import docstring_requests

        return [BenchPrompt(p.text, f"chat-test {p.source}", "chat") for p in docstring_requests(n)]
    texts = CHAT_TUNING if split == "tuning" else CHAT_HELDOUT
    prompts = [BenchPrompt(t, f"chat-{split} {i}", "chat") for i, t in enumerate(texts)]
    return evenly_spaced(prompts, n)


@dataclass(frozen=True)
class BenchPrompt:
    """text: what the models continue (code), or the user's message (chat: through the target's
    chat template, the assistant's turn opened); source: where it came from."""

    text: str
    source: str
    workload: str = "code"
    suffix: str | None = None  # fill-in-the-middle: the text after the gap (``text`` is before it)

    @property
    def chat(self) -> bool:
        return self.workload == "chat"


def code_prompts(split: str = "heldout", n: int = 0, root: Path | None = None) -> list[BenchPrompt]:
    """Code-completion prompts of one split: the functions of the held-out stdlib modules (never
    trained on), alternating between the tuning split (even candidates) and the held-out split
    (odd ones), ``n`` of them evenly spaced (0 = all)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if split == "test":
        raise ValueError("the code workload has no test split: its prompts are the held-out stdlib modules (use fim or chat)")
    candidates = function_candidates(root)
    part = candidates[0::2] if split == "tuning" else candidates[1::2]
    return evenly_spaced(part, n)


def evenly_spaced(items: list, n: int) -> list:
    """``n`` items at the centres of n equal slices (all of them for n = 0)."""
    if n == 0:
        return list(items)
    if len(items) < n:
        raise ValueError(f"asked for {n} prompts but the split has only {len(items)}")
    return [items[(2 * i + 1) * len(items) // (2 * n)] for i in range(n)]


def function_candidates(root: Path | None = None, **limits) -> list[BenchPrompt]:
    from benchmarks.text.corpus import corpus_files, stdlib_root

    root = root or stdlib_root()
    out, seen = [], set()
    for path in corpus_files("heldout", root):
        for prompt in _function_prompts(path, root, **{**FUNCTION_LIMITS, **limits}):
            if prompt.text not in seen:  # the same method text in two files counts once
                seen.add(prompt.text)
                out.append(prompt)
    return out


FUNCTION_LIMITS = dict(body_lines=2, min_rest_lines=4, max_lines=24, max_chars=1200)


def heldout_prompts(
    n: int = 24,
    root: Path | None = None,
    body_lines: int = 2,
    min_rest_lines: int = 4,
    max_prompt_lines: int = 24,
    max_prompt_chars: int = 1200,
) -> list[BenchPrompt]:
    """``n`` code-completion prompts from the held-out stdlib modules (never the train split).

    Candidates are the top-level functions and the methods of top-level classes of every held-out
    file, in sorted file order then line order. A prompt is the function's source from its ``def``
    line through its docstring (if any) and the first ``body_lines`` code lines of the body (blank
    and comment lines in between come along), indentation kept, without a trailing newline (the
    model starts by writing the line break). Functions are skipped when fewer than
    ``min_rest_lines`` code lines are left to complete, when the body starts on the ``def`` line,
    or when the prompt is longer than ``max_prompt_lines`` lines / ``max_prompt_chars``
    characters. ``n`` prompts are taken evenly spaced over the candidates (centres of n equal
    slices), so the selection is deterministic and spread over the held-out files.
    """
    check_positive_int("n", n)
    candidates = function_candidates(
        root,
        body_lines=body_lines,
        min_rest_lines=min_rest_lines,
        max_lines=max_prompt_lines,
        max_chars=max_prompt_chars,
    )
    return evenly_spaced(candidates, n)


def _function_prompts(
    path: Path, root: Path, body_lines: int, min_rest_lines: int, max_lines: int, max_chars: int
) -> list[BenchPrompt]:
    """Every function (and method of a top-level class) of one file as a prompt."""
    parsed = file_functions(path)
    if parsed is None:
        return []
    lines, functions = parsed
    rel = path.relative_to(root).as_posix()
    prompts = []
    for name, fn in functions:
        text = _function_prompt(fn, lines, body_lines, min_rest_lines)
        if text is None or text.count("\n") + 1 > max_lines or len(text) > max_chars:
            continue
        prompts.append(BenchPrompt(text=text, source=f"{rel}:{fn.lineno} {name}"))
    return prompts


def file_functions(
    path: Path,
) -> tuple[list[str], list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]] | None:
    """(the file's lines, its top-level functions and the methods of its top-level classes as
    (qualified name, node), in file order), or None when it does not parse."""
    source = path.read_text(encoding="utf-8", errors="replace")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    functions: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            for child in node.body:
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    functions.append((f"{node.name}.{child.name}", child))
    return source.splitlines(), functions


def _function_prompt(fn, lines: list[str], body_lines: int, min_rest_lines: int) -> str | None:
    body = fn.body
    has_doc = (
        isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    rest = body[1:] if has_doc else body
    if not rest or rest[0].lineno <= fn.lineno or fn.end_lineno is None:
        return None
    start = fn.lineno - 1  # the def line (decorators left out), 0-based
    end = rest[0].lineno - 1  # first line of code after the docstring
    taken = 0
    while end < fn.end_lineno and taken < body_lines:
        taken += _is_code(lines[end])  # blank and comment-only lines come along but do not count
        end += 1
    left = sum(_is_code(line) for line in lines[end : fn.end_lineno])
    if taken < body_lines or left < min_rest_lines:
        return None
    return "\n".join(line.rstrip() for line in lines[start:end])


def _is_code(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def load_prompts_jsonl(path: str | os.PathLike) -> list[BenchPrompt]:
    """Prompts from a JSON Lines file, one ``{"prompt": "..."}`` object per line (blank lines
    skipped); ``"chat": true`` sends that prompt as a user message through the chat template."""
    prompts = []
    with open(path, encoding="utf-8") as f:  # a missing file raises OSError naming it
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{where}: not valid JSON ({err.msg})") from err
            if not isinstance(record, dict) or "prompt" not in record:
                raise ValueError(f'{where}: expected an object like {{"prompt": "..."}}')
            text = record["prompt"]
            if not isinstance(text, str) or not text:
                raise ValueError(f'{where}: "prompt" must be a non-empty string')
            prompts.append(
                BenchPrompt(text=text, source=where, workload="chat" if record.get("chat") else "code")
            )
    if not prompts:
        raise ValueError(f'no prompts in {path}: expected one {{"prompt": "..."}} object per line')
    return prompts
