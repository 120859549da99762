"""Writing files safely: temp-then-rename with the mode a plain write would give, and the check that
no output path of a command lands on one of its inputs or on another of its outputs.

Every file a command writes goes through a temporary sibling that is renamed over the destination
only when complete, so a crash leaves either the old file or the new one. ``mkstemp`` creates its
file with mode 0600; ``atomic_write`` gives the result the destination's existing mode, or the
umask's default (0666 & ~umask), as ``open(path, "w")`` would.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path


def plain_mode(path: str | os.PathLike) -> int:
    """The mode a plain write to ``path`` would leave: its current mode, or 0666 & ~umask."""
    path = Path(path)
    if path.exists():
        return path.stat().st_mode & 0o777
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path: str | os.PathLike, write: Callable, binary: bool = False) -> None:
    """``write(f)`` into a temporary file in ``path``'s folder, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            write(f)
        os.chmod(tmp, plain_mode(path))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _same(a: str, b: str) -> bool:
    """Whether two paths name one file: the same resolved path (symlinks, '..', relative paths), or
    the same inode where both exist (hard links)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def clashing_outputs(outputs: dict[str, str], inputs: Iterable[str] = ()) -> str | None:
    """A message naming the first output that is one of ``inputs`` or another output, else None.

    outputs: {what it is (e.g. "--out"): path}; inputs: the files the command reads."""
    named = [(what, path) for what, path in outputs.items() if path]
    inputs = [p for p in inputs if p]
    for i, (what, path) in enumerate(named):
        for source in inputs:
            if _same(path, source):
                return f"{what} {path} is the input {source}: writing it would replace the input; choose another path"
        for other_what, other in named[:i]:
            if _same(path, other):
                return (
                    f"{what} {path} and {other_what} {other} are the same file: one would replace the other"
                )
    return None
