"""Speculative LLM text generation on the shared core. The entry points are imported on first use,
so ``specvideo.text.config`` (the settings) imports no torch."""

from __future__ import annotations

from specvideo.lazy import lazy_exports

_EXPORTS = {
    "TEXT_DEFAULTS": "specvideo.text.config",
    "TextConfig": "specvideo.text.config",
    "ModelDrafter": "specvideo.text.drafting.drafters",
    "NGramDrafter": "specvideo.text.drafting.drafters",
    "NullDrafter": "specvideo.text.drafting.drafters",
    "SpeculativeGenerator": "specvideo.text.generator",
    "TextOutput": "specvideo.text.generator",
    "load_causal_lm": "specvideo.text.models.loading",
    "SamplingConfig": "specvideo.text.sampling",
    "TextModels": "specvideo.text.text_models",
    "TargetVerifier": "specvideo.text.verifier",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
