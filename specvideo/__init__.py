"""specvideo: speculative generation of video frames and LLM text on one draft -> verify -> accept core.

The main entry points of both sides, imported on first use (``import specvideo`` stays cheap)::

    from specvideo import SpeculativeVideoPipeline, SpeculativeGenerator
"""

from __future__ import annotations

from specvideo.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "SpeculativeVideoPipeline": "specvideo.video",
    "VideoPipelineOutput": "specvideo.video",
    "DiffusionVerifier": "specvideo.video",
    "VideoSpecStats": "specvideo.video",
    "read_video": "specvideo.video",
    "write_video": "specvideo.video",
    "SpeculativeGenerator": "specvideo.text",
    "TextModels": "specvideo.text",
    "TextConfig": "specvideo.text",
    "TextOutput": "specvideo.text",
    "speculate": "specvideo.core",
    "SpecStats": "specvideo.core",
}

__all__ = ["__version__", *_EXPORTS]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
