"""Any causal LM in a GGUF file, converted once to a transformers model directory in the cache.

transformers reads a GGUF file (with the ``gguf`` package: Llama, Qwen2 and other architectures) and
de-quantises it to float, which takes seconds to minutes; ``converted_dir`` does that once, writes
config, safetensors weights (in ``dtype``) and tokenizer to a temp directory beside the target and
renames it into place, stamped with the source file's size and mtime so a changed file converts
again. Later loads read the directory. Nothing is downloaded.

The stored dtype is float32 by default, chosen by measurement on Qwen2.5-Coder-1.5B (this 2-core CPU,
page cache dropped before each load): float32 stores the de-quantised weights exactly (6.7 GB) and
loads in 2.1 s (safetensors maps the file); bfloat16 halves the disk (3.4 GB) but rounds the Q4_K
values (not bit-equal after loading back to float32) and loads in 17.2 s (every tensor converted).
The conversion takes 3 min 51 s for the pair, 14.4 GB peak memory.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
from pathlib import Path

from tqdm import tqdm

from specvideo.files import atomic_dir
from specvideo.paths import cache_root

SOURCE_FILE = "specvideo_source.json"  # in the converted directory: which GGUF file it came from


def converted_dir(
    source: str | os.PathLike, out: str | os.PathLike | None = None, dtype: str = "float32"
) -> Path:
    """The transformers directory for GGUF file ``source`` (default: ``<cache>/converted/<stem>``,
    ``<stem>-bfloat16`` and so on for another dtype than float32), converting it on first use, or
    when the file changed."""
    source = Path(source)
    if not source.is_file():
        raise ValueError(f"GGUF file not found: {source}")
    out = Path(out) if out is not None else cache_root() / "converted" / source.stem
    if dtype != "float32":  # one directory per stored dtype: switching dtypes converts nothing twice
        out = out.with_name(f"{out.name}-{dtype}")
    stamp = {
        "gguf": str(source.resolve()),
        "size": source.stat().st_size,
        "mtime_ns": source.stat().st_mtime_ns,
        "dtype": dtype,
    }
    if (out / "config.json").is_file() and _read_stamp(out) == stamp:
        return out
    _convert(source, out, stamp, dtype)
    return out


def _read_stamp(directory: Path) -> dict | None:
    try:
        return json.loads((directory / SOURCE_FILE).read_text())
    except (OSError, ValueError):
        return None


def _convert(source: Path, out: Path, stamp: dict, dtype: str) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    if importlib.util.find_spec("gguf") is None:
        raise ValueError(f"reading {source.name} needs the gguf package: pip install gguf")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tqdm(total=3, desc=f"converting {source.name} once to {out}", unit="step") as bar:
        try:
            tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
            quantized = AutoModelForCausalLM.from_pretrained(
                source.parent, gguf_file=source.name, dtype=torch.float32
            )
        except Exception as err:
            raise ValueError(f"cannot read {source} as a causal LM: {str(err).splitlines()[0]}") from err
        bar.update()
        config = quantized.config.to_dict()
        for key in ("quantization_config", "_model_name_or_path"):
            config.pop(key, None)
        # the same weights in a plain model of the architecture, no GGUF quantizer attached
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config))
        model.load_state_dict(quantized.state_dict(), strict=True)
        model.generation_config = quantized.generation_config
        del quantized
        model.to(getattr(torch, dtype))
        bar.update()
        with atomic_dir(out, keep_others=False) as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            (tmp / SOURCE_FILE).write_text(json.dumps(stamp))
        bar.update()


META_DIR = "gguf"  # <cache>/gguf/<stem>: a GGUF file's config and tokenizer, no weights
DENSE_TABLE_LIMIT = 512 * 2**20  # bytes of float32 token tables above which none is made dense


def metadata_dir(source: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """A directory with the config, generation config and tokenizer (its chat template) read from
    GGUF file ``source``'s metadata (a few MB, no weights), written once (temp dir, then rename) and
    stamped like ``converted_dir``: what ``load_gguf_target`` builds the target from, while the file's
    own blocks run it (``LeanLlama(weights="gguf")``)."""
    source = Path(source)
    if not source.is_file():
        raise ValueError(f"GGUF file not found: {source}")
    out = Path(out) if out is not None else cache_root() / META_DIR / source.stem
    stamp = {"gguf": str(source.resolve()), "size": source.stat().st_size, "mtime_ns": source.stat().st_mtime_ns}
    if (out / "config.json").is_file() and _read_stamp(out) == {**stamp, "weights": "gguf"}:
        return out
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    if importlib.util.find_spec("gguf") is None:
        raise ValueError(f"reading {source.name} needs the gguf package: pip install gguf")
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _one_parse():
            config = AutoConfig.from_pretrained(source.parent, gguf_file=source.name)
            tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
    except Exception as err:
        raise ValueError(f"cannot read {source} as a causal LM: {str(err).splitlines()[0]}") from err
    config = AutoConfig.for_model(**{k: v for k, v in config.to_dict().items() if k != "quantization_config"})
    with atomic_dir(out, keep_others=False) as tmp:
        config.save_pretrained(tmp)
        GenerationConfig.from_model_config(config).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / SOURCE_FILE).write_text(json.dumps({**stamp, "weights": "gguf"}))
    return out


@contextlib.contextmanager
def _one_parse():
    """transformers reads the config and the tokenizer with a ``gguf.GGUFReader`` each, and one
    parse of a large file's metadata takes seconds (every vocabulary entry becomes numpy views):
    within this block one reader per file serves both."""
    import gguf

    original, readers = gguf.GGUFReader, {}

    def shared(path, *args, **kwargs):
        key = (os.path.realpath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = original(path, *args, **kwargs)
        return readers[key]

    gguf.GGUFReader = shared
    try:
        yield
    finally:
        gguf.GGUFReader = original


def is_metadata_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a ``metadata_dir`` (a GGUF file's config and tokenizer, no weights)."""
    stamp = _read_stamp(Path(path)) if Path(path).is_dir() else None
    return bool(stamp and stamp.get("weights") == "gguf")


def load_gguf_target(directory: str | os.PathLike):
    """The transformers model of a ``metadata_dir`` without a converted copy of its weights: its
    layers on the meta device (the file's blocks run it: ``TextModels(weights="gguf")``), its token
    table and output projection de-quantised from the file dense in float32 where the two fit in
    ``DENSE_TABLE_LIMIT`` (the rows a draft sharing them reads), else left on the meta device too
    (a draft head reads the runner's block tables). Calling it says what runs it."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    from specvideo.text.models.gguf_weights import dense_tables

    directory = Path(directory)
    source = source_of(directory)
    if source is None:
        raise ValueError(f"{directory} names no GGUF file that exists (its source moved?): load the file again")
    config = AutoConfig.from_pretrained(directory)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    model.model.rotary_emb = type(model.model.rotary_emb)(config=config)  # its tables, off the meta device
    embed, output = dense_tables(source, config, DENSE_TABLE_LIMIT)
    if embed is not None:
        model.get_input_embeddings().weight = torch.nn.Parameter(embed, requires_grad=False)
        if output is None:
            model.get_output_embeddings().weight = model.get_input_embeddings().weight
        else:
            model.get_output_embeddings().weight = torch.nn.Parameter(output, requires_grad=False)
    model.generation_config = GenerationConfig.from_pretrained(directory)
    model.name_or_path = str(directory)
    model.config.name_or_path = str(directory)
    model.specvideo_released = True  # what runs it is the file's blocks (quant.release_layers)
    model.register_forward_pre_hook(_run_elsewhere)
    return model.eval()


def _run_elsewhere(module, args):
    raise ValueError(
        f"{module.name_or_path} holds a GGUF file's config and token tables only: its layers run in "
        "specvideo's k-quant runner (TextModels.target_runner, a LeanLlama over the file's blocks), "
        "not in transformers; for a transformers model of it load the file with dtype float32 or bfloat16"
    )


def source_of(model_dir: str | os.PathLike) -> Path | None:
    """The GGUF file a converted model directory came from (None for any other directory)."""
    stamp = _read_stamp(Path(model_dir))
    path = Path(stamp["gguf"]) if stamp and "gguf" in stamp else None
    return path if path is not None and path.is_file() else None


def weights_source(model, weights: str | None) -> str | None:
    """The GGUF file a ``weights="gguf"`` runner of ``model`` reads (None for other weights), with a
    clear error where the model did not come from one or specvideo's kernel cannot run here."""
    if weights != "gguf":
        return None
    from specvideo.text.runtime import kernels

    source = source_of(getattr(model, "name_or_path", "") or "")
    if source is None:
        raise ValueError('dtype="gguf" runs a target loaded from a GGUF file; this one was not (use int4 or int8)')
    if not kernels.built():
        raise ValueError(f"dtype=\"gguf\" needs specvideo's k-quant kernel, which cannot run here: {kernels.why_not()}")
    return str(source)


def gguf_blocks(model, weights: str | None):
    """The blocks of the GGUF file a ``weights="gguf"`` runner of ``model`` reads
    (``gguf_weights.load_layers``, LeanLlama's ``gguf``), or None for other weights."""
    from specvideo.text.models.gguf_weights import load_layers

    path = weights_source(model, weights)
    return None if path is None else load_layers(path, model.config)


def has_gguf_source(model) -> bool:
    """Whether ``weights="gguf"`` can run ``model`` here: it came from a GGUF file and the kernel runs."""
    from specvideo.text.runtime import kernels

    return source_of(getattr(model, "name_or_path", "") or "") is not None and kernels.built()
