"""Video side: the speculative pipeline, its diffusion verifier, frame drafters, metrics and I/O.
The entry points are imported on first use, so ``specvideo.video.config`` (the settings) imports
no torch."""

from __future__ import annotations

from specvideo.lazy import lazy_exports

_EXPORTS = {
    "DRAFTERS": "specvideo.video.drafters",
    "CopyLastDrafter": "specvideo.video.drafters",
    "FlowConfig": "specvideo.video.drafters",
    "FlowDrafter": "specvideo.video.drafters",
    "FrameDrafter": "specvideo.video.drafters",
    "FramePredictor": "specvideo.video.drafters",
    "LearnedDrafter": "specvideo.video.drafters",
    "LinearDrafter": "specvideo.video.drafters",
    "make_drafter": "specvideo.video.drafters",
    "DEFAULT_FPS": "specvideo.video.io",
    "VideoClip": "specvideo.video.io",
    "VideoInfo": "specvideo.video.io",
    "VideoReadError": "specvideo.video.io",
    "frames_to_tensor": "specvideo.video.io",
    "probe_video": "specvideo.video.io",
    "read_video": "specvideo.video.io",
    "tensor_to_frames": "specvideo.video.io",
    "write_video": "specvideo.video.io",
    "METRICS": "specvideo.video.metrics",
    "PSNR_CAP_DB": "specvideo.video.metrics",
    "psnr": "specvideo.video.metrics",
    "similarity": "specvideo.video.metrics",
    "ssim": "specvideo.video.metrics",
    "SpeculativeVideoPipeline": "specvideo.video.pipeline",
    "VideoPipelineOutput": "specvideo.video.pipeline",
    "VideoSpecStats": "specvideo.video.rounds",
    "DiffusionVerifier": "specvideo.video.verifier",
    "default_scheduler": "specvideo.video.verifier",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
