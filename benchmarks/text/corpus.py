"""The text corpus and its splits: the Python standard library's own .py sources on this machine.

It lives beside the benchmarks because its held-out split is what they evaluate on; the recipes
import it to train on the rest (recipes depend on benchmarks, never the other way).

Test packages are excluded. A fixed list of modules is held out: never trained on, used for every
evaluation (held-out loss, acceptance rate, benchmark prompts). With CPython 3.11 these are about
1.0 MB of the 12.1 MB corpus (8.6%).
"""

from __future__ import annotations

import re
import sysconfig
from pathlib import Path

HELD_OUT_MODULES = (
    "argparse",
    "csv",
    "difflib",
    "email",
    "fractions",
    "heapq",
    "json",
    "logging",
    "pathlib",
    "shutil",
    "statistics",
    "string",
    "textwrap",
)

_TEST_PART = re.compile(r"^(test|tests|idle_test)$")


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def module_name(path: Path, root: Path) -> str:
    """Top-level module of a stdlib file: email/mime/text.py -> email, heapq.py -> heapq."""
    first = path.relative_to(root).parts[0]
    return first[:-3] if first.endswith(".py") else first


def corpus_files(split: str, root: Path | None = None) -> list[Path]:
    """Sorted .py files of the "train" or "heldout" split."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
    root = root or stdlib_root()
    files = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if parts[0] == "site-packages" or any(_TEST_PART.match(p) for p in parts[:-1]):
            continue
        if parts[-1].startswith("test_"):
            continue
        held_out = module_name(path, root) in HELD_OUT_MODULES
        if held_out == (split == "heldout"):
            files.append(path)
    return files


def read_sources(files: list[Path]) -> list[str]:
    return [p.read_text(encoding="utf-8", errors="replace") for p in files]
