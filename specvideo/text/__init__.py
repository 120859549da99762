"""Speculative LLM text generation on the shared core."""

from specvideo.text.config import TEXT_DEFAULTS, TextConfig
from specvideo.text.drafters import ModelDrafter, NGramDrafter, NullDrafter
from specvideo.text.generator import SpeculativeGenerator, TextOutput
from specvideo.text.loading import load_causal_lm
from specvideo.text.sampling import SamplingConfig
from specvideo.text.verifier import TargetVerifier

__all__ = [
    "TEXT_DEFAULTS",
    "ModelDrafter",
    "NGramDrafter",
    "NullDrafter",
    "SamplingConfig",
    "SpeculativeGenerator",
    "TargetVerifier",
    "TextConfig",
    "TextOutput",
    "load_causal_lm",
]
