"""Checks and conversions of what a caller hands the video pipeline: contexts (one or a batch),
generators, settings and callback inputs. Every problem is one ValueError naming it."""

from __future__ import annotations

import math

import numpy as np
import torch

from specvideo.core.schedule import SCHEDULES
from specvideo.video.config import FALLBACKS, MODES, VideoConfig
from specvideo.video.io import frames_to_tensor
from specvideo.video.metrics import METRICS, PSNR_CAP_DB

OUTPUT_TYPES = ("np", "pt", "pil")
VIDEO_SCHEDULES = tuple(s for s in SCHEDULES if s != "confidence")  # frame drafters give no confidence
SSIM_RANGE = (-1.0, 1.0)
PSNR_RANGE_DB = (0.0, PSNR_CAP_DB)  # images in [-1, 1] have PSNR >= 0 dB: tau = 0 accepts every draft


def split_batch(frames) -> tuple[bool, list]:
    """(is a batch, the contexts). A batch is a list/tuple of contexts (each a list of frames or a
    4-D array / tensor), or a 5-D array / tensor (B, F, ...)."""
    if isinstance(frames, (np.ndarray, torch.Tensor)) and frames.ndim == 5:
        if len(frames) == 0:
            raise ValueError("the batch of contexts is empty")
        return True, list(frames)
    if isinstance(frames, (list, tuple)) and frames and _is_context(frames[0]):
        return True, list(frames)
    return False, [frames]


def _is_context(item) -> bool:
    if isinstance(item, (list, tuple)):
        return True
    return isinstance(item, (np.ndarray, torch.Tensor)) and item.ndim == 4


def row_generators(generator, batch_size: int) -> list[torch.Generator | None]:
    """One generator per row: a list of B is taken as it is; one generator (or None) is shared,
    each row drawing its seed from it in turn."""
    if isinstance(generator, (list, tuple)):
        if len(generator) != batch_size:
            raise ValueError(f"got {len(generator)} generators for a batch of {batch_size} contexts")
        if not all(isinstance(g, torch.Generator) for g in generator):
            raise ValueError("generator must be a torch.Generator or a list of them")
        return list(generator)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(
            f"generator must be a torch.Generator or a list of them, got {type(generator).__name__}"
        )
    return [generator] * batch_size


def check_callback_inputs(names, allowed: list[str]) -> list[str]:
    if names is None:
        return list(allowed)
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise ValueError(f"callback_on_step_end_tensor_inputs {unknown} not in {allowed}")
    return list(names)


def check_settings(c: VideoConfig, output_type: str = "np") -> None:
    """Every setting the pipeline's call reads, with the output type: one ValueError naming the first
    bad one."""
    checks = [
        (_int_at_least(c.num_frames, 1), f"num_frames must be an integer >= 1, got {c.num_frames!r}"),
        (c.mode in MODES, f"mode must be one of {MODES}, got {c.mode!r}"),
        (
            _int_at_least(c.num_draft_frames, 1),
            f"num_draft_frames must be an integer >= 1, got {c.num_draft_frames!r}",
        ),
        (
            isinstance(c.tau, (int, float)) and not math.isnan(c.tau),
            f"threshold must be a number (+/-inf allowed), got {c.threshold!r}",
        ),
        (c.metric in METRICS, f"metric must be one of {METRICS}, got {c.metric!r}"),
        (c.fallback in FALLBACKS, f"fallback must be one of {FALLBACKS}, got {c.fallback!r}"),
        (
            isinstance(c.strength, (int, float)) and 0 < c.strength <= 1,
            f"strength must be in (0, 1], got {c.strength!r}",
        ),
        (
            _int_at_least(c.num_refine_steps, 1),
            f"num_refine_steps must be an integer >= 1, got {c.num_refine_steps!r}",
        ),
        (
            _int_at_least(c.num_inference_steps, 1),
            f"num_inference_steps must be an integer >= 1, got {c.num_inference_steps!r}",
        ),
        (output_type in OUTPUT_TYPES, f"output_type must be one of {OUTPUT_TYPES}, got {output_type!r}"),
        (
            c.schedule in VIDEO_SCHEDULES,
            f"schedule must be one of {VIDEO_SCHEDULES} for video, got {c.schedule!r}"
            + (
                " (the confidence schedule needs draft probabilities, which frame drafters do not have)"
                if c.schedule == "confidence"
                else ""
            ),
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)
    check_threshold(c.tau, c.metric)
    check_typicality(c.check_levels, c.check_center)


def check_typicality(levels: tuple[int, ...], center: float) -> None:
    """The typicality check's noise levels (timesteps of the T = 1000 training schedule) and its fold
    (> 0; inf: one-sided): a ValueError naming the bad one. The pipeline and the benchmark share it."""
    if not levels or not all(_int_at_least(t, 0) and t < 1000 for t in levels):
        raise ValueError(f"check_levels must be noise levels t in [0, 1000), got {levels!r}")
    if isinstance(center, bool) or not isinstance(center, (int, float)) or not center > 0:
        raise ValueError(f"check_center must be a number > 0 (inf: a one-sided check), got {center!r}")


def check_threshold(tau: float, metric: str) -> None:
    """A finite tau must lie in its metric's range: typicality >= 0, SSIM in [-1, 1], PSNR in [0, 100] dB; a PSNR tau
    in (0, 1] is refused too, as an SSIM threshold given with the wrong metric (it would accept
    every draft)."""
    if math.isinf(tau):
        return
    if metric == "typicality":
        if tau < 0:
            raise ValueError(f"threshold {tau:g} is outside the typicality range [0, inf)")
        return
    low, high = SSIM_RANGE if metric == "ssim" else PSNR_RANGE_DB
    if not low <= tau <= high:
        unit = "" if metric == "ssim" else " dB"
        raise ValueError(f"threshold {tau:g} is outside the {metric} range [{low:g}, {high:g}]{unit}")
    if metric == "psnr" and 0 < tau <= 1:
        raise ValueError(
            f"threshold {tau:g} dB with metric 'psnr' looks like an SSIM threshold: PSNR thresholds are in dB "
            "(e.g. 25; 0 accepts every draft)"
        )


def _int_at_least(value, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def to_tensor(frames, keep: int) -> torch.Tensor:
    """Any accepted context form -> its last ``keep`` frames, (F, 3, H, W) float32 in [-1, 1].

    Only the frames the model conditions on are converted, so a long clip costs no extra memory.
    """
    if isinstance(frames, torch.Tensor):
        if frames.ndim != 4 or frames.shape[1] != 3 or not frames.is_floating_point():
            raise ValueError(
                f"a context tensor must be (F, 3, H, W) float in [-1, 1], got {tuple(frames.shape)} {frames.dtype}"
            )
        if not torch.isfinite(frames).all():  # every frame given, used or not: NaN means a bug upstream
            raise ValueError("context frames contain NaN or infinite values")
        return frames[-keep:].float()
    if isinstance(frames, (list, tuple)):
        if not frames:
            raise ValueError("no context frames given")
        items = [np.asarray(f) for f in frames[-keep:]]
        shapes = {f.shape for f in items}
        if len(shapes) != 1:
            raise ValueError(f"context frames differ in shape: {sorted(shapes)}")
        frames = np.stack([f[..., None] if f.ndim == 2 else f for f in items])  # 2-D items are gray
    if isinstance(frames, np.ndarray):
        return frames_to_tensor(rgb_uint8(frames, keep))
    raise ValueError(
        f"context_frames must be a list of HxWx3 uint8 arrays, an (F, H, W, 3) array or an (F, 3, H, W) tensor, got {type(frames).__name__}"
    )


def rgb_uint8(frames: np.ndarray, keep: int) -> np.ndarray:
    """The last ``keep`` of (F, H, W, C) uint8 frames, C = 1 (gray), 3 (RGB) or 4 (RGBA, alpha
    dropped), as (F', H, W, 3)."""
    if frames.ndim != 4 or frames.shape[-1] not in (1, 3, 4) or frames.dtype != np.uint8:
        raise ValueError(
            f"context frames must be (F, H, W, 3) uint8 RGB (or 1-channel gray / 4-channel RGBA), "
            f"got {frames.shape} {frames.dtype}"
        )
    frames = frames[-keep:]
    return np.repeat(frames, 3, axis=-1) if frames.shape[-1] == 1 else frames[..., :3]
