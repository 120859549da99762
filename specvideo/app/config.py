"""Serving settings and input limits of the web demo; the CLI flags and environment override them."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace

ENV_PREFIX = "SPECVIDEO_"  # SPECVIDEO_HOST, SPECVIDEO_PORT, SPECVIDEO_MAX_FILE_SIZE, ...


@dataclass(frozen=True)
class AppConfig:
    host: str = "127.0.0.1"
    port: int = 7860
    max_file_size: str = "50mb"  # uploads, enforced by gradio's launch(max_file_size=...)
    concurrency: int = 2  # requests served at once (video runs one at a time: they share the UNet)
    queue_size: int = 16  # requests waiting beyond that are turned away
    max_frames: int = 64  # generated frames per request
    max_steps: int = 100  # full-sampler steps N and refinement steps m
    max_draft: int = 16  # k, for text and video
    max_pixels: int = 1920 * 1080  # input video resolution (width x height)
    max_new_tokens: int = 256
    max_prompt_chars: int = 4000
    cache_max_age_s: int = 3600  # uploads and outputs in gradio's cache: deleted after 1 to 2 x this
    # the Text tab's pair: "" = SmolLM2-135M-Instruct with its trained draft (the library's default)
    text_target: str = ""
    text_draft: str = ""
    # the text models' number format (specvideo.text.models.precision): auto = a GGUF-sourced model's
    # own blocks where specvideo's kernel runs, else bfloat16 where the CPU has bf16 units, else float32
    text_dtype: str = "auto"


APP_DEFAULTS = AppConfig()


def from_env(config: AppConfig = APP_DEFAULTS, environ=os.environ) -> AppConfig:
    """Every field can be set as SPECVIDEO_<FIELD> (SPECVIDEO_PORT=8000, SPECVIDEO_MAX_FRAMES=32)."""
    changes = {}
    for f in fields(config):
        value = environ.get(ENV_PREFIX + f.name.upper())
        if value is not None:
            kind = type(getattr(config, f.name))
            try:
                changes[f.name] = kind(value)
            except ValueError:
                raise ValueError(
                    f"{ENV_PREFIX}{f.name.upper()}={value!r} is not a valid {kind.__name__}"
                ) from None
    return replace(config, **changes)
