"""Video side: the speculative pipeline, its diffusion verifier, frame drafters, metrics and I/O."""

from specvideo.video.drafters import (
    DRAFTERS,
    CopyLastDrafter,
    FlowConfig,
    FlowDrafter,
    FrameDrafter,
    FramePredictor,
    LearnedDrafter,
    LinearDrafter,
    make_drafter,
)
from specvideo.video.io import (
    DEFAULT_FPS,
    VideoClip,
    VideoInfo,
    VideoReadError,
    frames_to_tensor,
    probe_video,
    read_video,
    tensor_to_frames,
    write_video,
)
from specvideo.video.metrics import METRICS, PSNR_CAP_DB, psnr, similarity, ssim
from specvideo.video.pipeline import SpeculativeVideoPipeline, VideoPipelineOutput
from specvideo.video.rounds import VideoSpecStats
from specvideo.video.verifier import DiffusionVerifier, default_scheduler

__all__ = [
    "DEFAULT_FPS",
    "DRAFTERS",
    "METRICS",
    "PSNR_CAP_DB",
    "CopyLastDrafter",
    "DiffusionVerifier",
    "FlowConfig",
    "FlowDrafter",
    "FrameDrafter",
    "FramePredictor",
    "LearnedDrafter",
    "LinearDrafter",
    "SpeculativeVideoPipeline",
    "VideoClip",
    "VideoInfo",
    "VideoPipelineOutput",
    "VideoReadError",
    "VideoSpecStats",
    "default_scheduler",
    "frames_to_tensor",
    "make_drafter",
    "probe_video",
    "psnr",
    "read_video",
    "similarity",
    "ssim",
    "tensor_to_frames",
    "write_video",
]
