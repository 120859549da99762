"""An OpenAI-compatible HTTP server over the shared speculative core (``specvideo serve``), and the
client side of its ``/v1/verify`` route (``edge``). The entry points are imported on first use, so
the edge client loads no server."""

from __future__ import annotations

from specvideo.lazy import lazy_exports

_EXPORTS = {
    "create_app": "specvideo.serve.app",
    "Engine": "specvideo.serve.engine",
    "Job": "specvideo.serve.engine",
    "FIM_TOKENS": "specvideo.text.prompts",
    "fim_ids": "specvideo.text.prompts",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
