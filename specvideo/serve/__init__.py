"""An OpenAI-compatible HTTP server over the shared speculative core (``specvideo serve``)."""

from specvideo.serve.app import create_app
from specvideo.serve.engine import Engine, Job
from specvideo.text.prompts import FIM_TOKENS, fim_ids

__all__ = ["FIM_TOKENS", "Engine", "Job", "create_app", "fim_ids"]
