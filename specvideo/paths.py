"""Where the shipped weights live: ``models/`` at the top of the repository, or $SPECVIDEO_MODELS."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# the top of a checkout: the package's parent folder, holding models/, benchmarks/ and recipes/
CHECKOUT = Path(__file__).resolve().parents[1]


def models_dir() -> Path:
    env = os.environ.get("SPECVIDEO_MODELS")
    return Path(env) if env else CHECKOUT / "models"


def add_checkout_to_path() -> bool:
    """Make ``benchmarks`` and ``recipes`` importable when the package runs from a checkout (they
    sit beside it, outside the installed package); False for an installed package without them."""
    if not (CHECKOUT / "benchmarks" / "__init__.py").is_file():
        return False
    if str(CHECKOUT) not in sys.path:
        sys.path.append(str(CHECKOUT))
    return True


def shown_path(path: Path | None) -> str | None:
    """``path`` as reports show it: relative to the working directory when inside it (a report
    written from the repository then names ``models/video``, not this machine's absolute path)."""
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def cache_root() -> Path:
    """Where converted models and fetched data live: $SPECVIDEO_CACHE, or ~/.cache/specvideo."""
    env = os.environ.get("SPECVIDEO_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "specvideo"


def shipped(*parts: str) -> Path:
    """Path of a shipped model directory; a clear error when it is not there."""
    path = models_dir().joinpath(*parts)
    if not path.is_dir():
        raise ValueError(
            f"no shipped model at {path}: pass a model directory explicitly, or set SPECVIDEO_MODELS "
            "to the folder that holds models/"
        )
    return path
