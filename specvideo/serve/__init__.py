"""An OpenAI-compatible HTTP server over the shared speculative core (``specvideo serve``)."""

from specvideo.serve.app import FIM_TOKENS, create_app, fim_ids
from specvideo.serve.engine import Engine, Job

__all__ = ["FIM_TOKENS", "Engine", "Job", "create_app", "fim_ids"]
