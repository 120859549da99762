"""What both tabs share: errors as one-line gr.Error messages, stats tables, scratch files."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache, wraps
from pathlib import Path

import gradio as gr

from specvideo.errors import one_line

STATS_HEADERS = ["statistic", "value"]
SCRATCH_MAX_AGE_S = 3600.0
SCRATCH_KEEP = 4  # request folders on disk at most (the video action runs one request at a time)
_SCRATCH_LOCK = threading.Lock()


@contextmanager
def user_errors() -> Iterator[None]:
    """Library errors become gr.Error with their message: the UI shows it, never a traceback."""
    try:
        yield
    except gr.Error:
        raise
    except (ValueError, TypeError, OSError) as err:  # VideoReadError is a ValueError
        raise gr.Error(one_line(err)) from err
    except Exception as err:
        raise gr.Error(f"internal error ({type(err).__name__}): {one_line(err)}") from err


def check(ok: bool, message: str) -> None:
    if not ok:
        raise gr.Error(message)


def bounded_int(value, name: str, low: int, high: int) -> int:
    """An integer input within the demo's limits (sliders send floats; API clients anything)."""
    integral = isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer()
    check(integral, f"{name} must be an integer, got {value!r}")
    check(low <= int(value) <= high, f"{name} must be between {low} and {high}, got {int(value)}")
    return int(value)


def cached(fn: Callable) -> Callable:
    """functools.cache whose first call per key runs once even when requests arrive together."""
    lock, memo = threading.Lock(), cache(fn)

    @wraps(fn)
    def call(*args):
        with lock:
            return memo(*args)

    return call


def ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}x" if denominator else "n/a"


def percent(value: float) -> str:
    return f"{100 * value:.1f}%"


@cache
def scratch_root() -> Path:
    """One folder per server process for examples and generated videos (gradio copies outputs)."""
    return Path(tempfile.mkdtemp(prefix="specvideo-app-"))


def request_dir() -> Path:
    """A fresh folder for one request's files. Gradio copies the outputs into its cache when the
    request returns, so only the newest SCRATCH_KEEP folders are kept, none older than an hour."""
    with _SCRATCH_LOCK:
        root = scratch_root()
        folders = sorted(root.glob("req-*"), key=lambda p: p.stat().st_mtime, reverse=True)
        for rank, old in enumerate(folders):
            if rank >= SCRATCH_KEEP - 1 or time.time() - old.stat().st_mtime > SCRATCH_MAX_AGE_S:
                shutil.rmtree(old, ignore_errors=True)
        return Path(tempfile.mkdtemp(prefix="req-", dir=root))
