"""specvideo: speculative generation of video frames and LLM text on one draft -> verify -> accept core."""

__version__ = "0.1.0"
