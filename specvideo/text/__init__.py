"""Speculative LLM text generation on the shared core."""

from specvideo.text.config import TEXT_DEFAULTS, TextConfig
from specvideo.text.drafting.drafters import ModelDrafter, NGramDrafter, NullDrafter
from specvideo.text.generator import SpeculativeGenerator, TextOutput
from specvideo.text.models.loading import load_causal_lm
from specvideo.text.sampling import SamplingConfig
from specvideo.text.text_models import TextModels
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
    "TextModels",
    "TextOutput",
    "load_causal_lm",
]
