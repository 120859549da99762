"""Writing files safely: temp-then-rename with the mode a plain write would give, and the check that
no output path of a command lands on one of its inputs or on another of its outputs.

Every file a command writes goes through a temporary sibling that is renamed over the destination
only when complete, so a crash leaves either the old file or the new one. ``mkstemp`` creates its
file with mode 0600; ``atomic_write`` gives the result the destination's existing mode, or the
umask's default (0666 & ~umask), as ``open(path, "w")`` would.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
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
    with atomic_path(path) as tmp, open(tmp, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
        write(f)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary file path in ``path``'s folder for a writer that takes a path (ffmpeg,
    ``torch.save``): renamed over ``path`` when the block ends without an error, removed otherwise.
    suffix: the temporary name's ending (a writer may read the format from it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, plain_mode(path))  # mkstemp made it 0600
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike, keep_others: bool = True) -> Iterator[Path]:
    """A temporary folder beside ``path`` to write a model directory into: it replaces ``path``
    when the block ends without an error and is removed otherwise. keep_others: the entries of an
    existing ``path`` that the block did not write (a README, sample grids, a token ranking) move
    into the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}-", dir=path.parent))
    try:
        yield tmp
        tmp.chmod(0o755)  # mkdtemp made it private; a model directory is ordinary files
        if path.is_dir() and keep_others:
            for item in path.iterdir():
                if not (tmp / item.name).exists():
                    item.rename(tmp / item.name)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
