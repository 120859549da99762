"""Video side: frame drafters, similarity metrics and video file I/O."""

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

__all__ = [
    "DEFAULT_FPS",
    "DRAFTERS",
    "METRICS",
    "PSNR_CAP_DB",
    "CopyLastDrafter",
    "FlowConfig",
    "FlowDrafter",
    "FrameDrafter",
    "FramePredictor",
    "LearnedDrafter",
    "LinearDrafter",
    "VideoClip",
    "VideoInfo",
    "VideoReadError",
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
