"""Fill-in-the-middle prompts for the code pair's benchmark, cut from real source files.

Candidates are the functions (and methods of top-level classes) of the Python files of a few
installed packages that specvideo's dependencies bring (``FIM_PACKAGES``; never the standard
library, whose held-out modules are the SmolLM2 benchmark's prompts), in sorted file and line
order. A function with enough code lines is cut into a prefix (its ``def`` line through the
docstring and ``prefix_lines`` code lines of the body), a hidden middle (the next ``middle_lines``
lines: what the model should write) and a suffix (up to ``suffix_lines`` lines after it). Even
candidates are the tuning split, odd ones the held-out split; ``n`` are taken evenly spaced. The
packages' versions are part of the source names, so a report says which files it cut. The test
split (``TEST_PACKAGES``) is every candidate of four other packages, read once at the end; its chat
requests ("write this function" from their docstrings) are third-party text as well.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
from pathlib import Path

from benchmarks.text.config import SPLITS
from benchmarks.text.prompts import BenchPrompt, evenly_spaced, file_functions

FIM_PACKAGES = ("click", "jinja2", "packaging", "tqdm")
# the test split's packages (fim and chat): in no other split and no training set (recipes.code_data)
TEST_PACKAGES = ("h11", "starlette", "filelock", "idna")
PREFIX_LINES, MIDDLE_LINES, SUFFIX_LINES, MAX_FUNCTION_LINES = 2, 3, 8, 60


def fim_prompts(
    split: str = "heldout", n: int = 0, packages: tuple[str, ...] = FIM_PACKAGES
) -> list[BenchPrompt]:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if split == "test":  # every candidate of the test packages
        return evenly_spaced([p for pkg in TEST_PACKAGES for p in _package_prompts(pkg)], n)
    candidates = [p for pkg in packages for p in _package_prompts(pkg)]
    return evenly_spaced(candidates[0::2] if split == "tuning" else candidates[1::2], n)


def docstring_requests(n: int = 0, packages: tuple[str, ...] = TEST_PACKAGES) -> list[BenchPrompt]:
    """Chat requests written by third parties: "write this function" from the docstrings of the test
    packages' functions (the first paragraph, 40 to 400 characters), ``n`` evenly spaced."""
    out = []
    for package in packages:
        for prompt in _package_functions(package):
            out.append(prompt)
    return evenly_spaced(out, n)


def _package_functions(package: str) -> list[BenchPrompt]:
    root, version = _package_root(package)
    out = []
    for path in sorted(root.rglob("*.py")):
        parsed = None if "test" in path.relative_to(root).as_posix() else file_functions(path)
        if parsed is None:
            continue
        for fn in sorted((node for _, node in parsed[1]), key=lambda f: f.lineno):
            doc = (ast.get_docstring(fn) or "").split("\n\n")[0].replace("\n", " ").strip()
            if 40 <= len(doc) <= 400 and not fn.name.startswith("_"):
                args = ", ".join(a.arg for a in fn.args.args if a.arg != "self")
                text = f"Write a Python function `{fn.name}({args})`. What it should do: {doc}"
                out.append(BenchPrompt(text, f"{package}-{version}/{path.relative_to(root).as_posix()}:{fn.lineno} {fn.name}", "chat"))
    return out


def _package_root(package: str) -> tuple[Path, str]:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ValueError(f"the benchmark's prompts need the installed package {package!r}")
    return Path(spec.origin).parent, importlib.metadata.version(package)


def _package_prompts(package: str) -> list[BenchPrompt]:
    root, version = _package_root(package)
    out = []
    for path in sorted(root.rglob("*.py")):
        if "test" in path.relative_to(root).as_posix():
            continue
        out += _file_prompts(path, f"{package}-{version}/{path.relative_to(root).as_posix()}")
    return out


def _file_prompts(path: Path, name: str) -> list[BenchPrompt]:
    parsed = file_functions(path)
    if parsed is None:
        return []
    lines, functions = parsed
    out = []
    for fn in sorted((node for _, node in functions), key=lambda f: f.lineno):
        cut = _cut(fn, lines)
        if cut is not None:
            prefix, suffix = cut
            out.append(BenchPrompt(prefix, f"{name}:{fn.lineno} {fn.name}", "fim", suffix=suffix))
    return out


def _cut(fn, lines: list[str]) -> tuple[str, str] | None:
    """(prefix, suffix) around a hidden middle of MIDDLE_LINES lines, or None if the function is
    too short, too long or starts its body on the ``def`` line."""
    body = fn.body
    has_doc = (
        isinstance(body[0], ast.Expr)
        and isinstance(getattr(body[0], "value", None), ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    rest = body[1:] if has_doc else body
    if (
        not rest
        or rest[0].lineno <= fn.lineno
        or fn.end_lineno is None
        or fn.end_lineno - fn.lineno > MAX_FUNCTION_LINES
    ):
        return None
    code = [
        i
        for i in range(rest[0].lineno - 1, fn.end_lineno)
        if lines[i].strip() and not lines[i].strip().startswith("#")
    ]
    if len(code) < PREFIX_LINES + MIDDLE_LINES + 2:
        return None
    gap = code[PREFIX_LINES]  # the first hidden line
    after = gap + MIDDLE_LINES
    prefix = "\n".join(line.rstrip() for line in lines[fn.lineno - 1 : gap]) + "\n"
    suffix = (
        "\n".join(line.rstrip() for line in lines[after : min(fn.end_lineno, after + SUFFIX_LINES)]) + "\n"
    )
    return prefix, suffix
