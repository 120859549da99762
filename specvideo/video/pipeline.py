"""SpeculativeVideoPipeline: draft frames cheaply, verify them with a conditional diffusion model.

Follows diffusers' conventions: the model (``UNet2DModel``), the scheduler and the pipeline keep
their roles; ``__call__`` takes ``generator``, ``num_inference_steps``, ``output_type`` and
``callback_on_step_end`` and returns an output dataclass; ``save_pretrained``/``from_pretrained``
use one directory with ``unet/``, ``scheduler/``, ``drafter/`` and ``model_index.json``.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

import diffusers
import numpy as np
import torch
import torch.nn.functional as F
from diffusers import UNet2DModel
from diffusers.utils import BaseOutput
from PIL import Image
from tqdm.auto import tqdm

from specvideo.core.acceptance import threshold_accept
from specvideo.core.loop import speculate
from specvideo.core.schedule import make_schedule
from specvideo.errors import first_line
from specvideo.paths import shipped
from specvideo.video.config import MODES, VIDEO_DEFAULTS
from specvideo.video.drafters import DRAFTERS, FrameDrafter, LearnedDrafter, make_drafter
from specvideo.video.io import frames_to_tensor, tensor_to_frames
from specvideo.video.metrics import METRICS
from specvideo.video.rounds import (
    FrameHistory,
    FrameNoise,
    RoundSettings,
    VideoDrafter,
    VideoSpecStats,
    VideoVerifier,
)
from specvideo.video.verifier import DiffusionVerifier

D = VIDEO_DEFAULTS
OUTPUT_TYPES = ("np", "pt", "pil")


@dataclass
class VideoPipelineOutput(BaseOutput):
    """frames: (F, H, W, 3) uint8 ("np"), (F, 3, H, W) float in [-1, 1] ("pt") or PIL images.
    drafts: the draft behind each output frame (None where the frame had none), same type."""

    frames: np.ndarray | torch.Tensor | list[Image.Image]
    stats: VideoSpecStats
    drafts: list | None = None


class SpeculativeVideoPipeline:
    """Speculative video generation with a frame drafter and a ``DiffusionVerifier``."""

    def __init__(self, verifier: DiffusionVerifier, drafter: FrameDrafter | None = None):
        self.verifier = verifier
        self.drafter = drafter if drafter is not None else make_drafter(D.drafter)
        self.drafter_name = _drafter_name(self.drafter)

    @property
    def unet(self) -> UNet2DModel:
        return self.verifier.unet

    @property
    def scheduler(self):
        return self.verifier.scheduler

    def to(self, device: str | torch.device) -> SpeculativeVideoPipeline:
        self.verifier.unet.to(device)
        if isinstance(self.drafter, LearnedDrafter):
            self.drafter.model.to(device)
        return self

    # ------------------------------------------------------------------ generation

    @torch.inference_mode()
    def __call__(
        self,
        context_frames,
        num_frames: int = D.num_frames,
        mode: str = D.mode,
        num_draft_frames: int = D.num_draft_frames,
        threshold: float = D.threshold,
        metric: str = D.metric,
        strength: float = D.strength,
        num_refine_steps: int = D.num_refine_steps,
        num_inference_steps: int = D.num_inference_steps,
        schedule: str = D.schedule,
        generator: torch.Generator | None = None,
        output_type: str = "np",
        callback_on_step_end=None,
        resize_to_input: bool = False,
        progress: bool = True,
    ) -> VideoPipelineOutput:
        """Generate ``num_frames`` frames after ``context_frames``.

        context_frames: list of H x W x 3 uint8 arrays, an (F, H, W, 3) uint8 array, or an
        (F, 3, H, W) float tensor in [-1, 1]; resized to the model's resolution. Gray (H x W or one
        channel) and RGBA (alpha dropped) uint8 frames become RGB; only the last P frames are used.
        mode: "speculative" (draft, verify, accept, correct), "target" (every frame by the full
        sampler) or "draft" (the drafter alone). ``callback_on_step_end(pipe, round, step, stats)``
        is called after every round.
        """
        _check_call(
            num_frames,
            mode,
            num_draft_frames,
            threshold,
            metric,
            strength,
            num_refine_steps,
            num_inference_steps,
            output_type,
        )
        context, input_size = self._prepare_context(context_frames)
        history = FrameHistory(context, self.verifier.num_context_frames)
        stats = VideoSpecStats()
        settings = RoundSettings(
            num_frames, strength, num_refine_steps, num_inference_steps, metric, refine=mode != "draft"
        )
        noise = FrameNoise(generator, tuple(context.shape[1:]), context.device)
        verifier = VideoVerifier(self.verifier, history, settings, noise, stats)
        drafter = VideoDrafter(None if mode == "target" else self.drafter, history)
        tau = -math.inf if mode == "draft" else threshold
        k = num_frames if mode == "draft" else num_draft_frames
        rule = make_schedule("constant" if mode == "draft" else schedule, k)
        bar = tqdm(total=num_frames, desc=f"specvideo {mode}", disable=not progress, leave=False)
        for step in speculate(
            drafter, verifier, lambda d, s: threshold_accept(s, tau, d.lengths), rule, stats
        ):
            bar.update(len(step.emitted[0]))
            if callback_on_step_end is not None:
                callback_on_step_end(self, step.round, step, stats)
        bar.close()
        frames = torch.stack(history.frames[history.num_context :])  # (F, 3, H, W)
        drafts = [
            self._postprocess(d[None], output_type, input_size if resize_to_input else None)[0]
            if d is not None
            else None
            for d in verifier.drafts
        ]
        return VideoPipelineOutput(
            frames=self._postprocess(frames, output_type, input_size if resize_to_input else None),
            stats=stats,
            drafts=drafts,
        )

    def _prepare_context(self, context_frames) -> tuple[torch.Tensor, tuple[int, int]]:
        P = self.verifier.num_context_frames
        x = _to_tensor(context_frames, keep=P)  # (F, 3, h, w) in [-1, 1], F <= P
        if x.shape[0] < P:
            raise ValueError(f"the model conditions on {P} context frames, got {x.shape[0]}")
        size = tuple(x.shape[-2:])
        H, W = self.verifier.resolution
        if size != (H, W):
            x = F.interpolate(
                x,
                size=(H, W),
                mode="area" if size[0] >= H else "bilinear",
                align_corners=None if size[0] >= H else False,
            )
        return x.clamp(-1, 1).to(self.verifier.device), size

    @staticmethod
    def _postprocess(frames: torch.Tensor, output_type: str, size: tuple[int, int] | None):
        if size is not None and tuple(frames.shape[-2:]) != size:
            frames = F.interpolate(frames, size=size, mode="bilinear", align_corners=False).clamp(-1, 1)
        if output_type == "pt":
            return frames.cpu()
        array = tensor_to_frames(frames)  # (F, H, W, 3) uint8
        return array if output_type == "np" else [Image.fromarray(f) for f in array]

    # ------------------------------------------------------------------ save / load

    def save_pretrained(self, path: str | Path, default_drafter: str | None = None) -> None:
        """Write unet/, scheduler/, drafter/ and model_index.json (to a temp dir, then renamed);
        other files already in ``path`` (a README, sample images) are kept.

        ``default_drafter`` names the drafter ``from_pretrained`` picks (default: this pipeline's);
        a learned drafter's weights are saved either way."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        self.unet.save_pretrained(tmp / "unet")
        self.scheduler.save_pretrained(tmp / "scheduler")
        (tmp / "drafter").mkdir()
        if isinstance(self.drafter, LearnedDrafter):
            self.drafter.save_pretrained(tmp / "drafter")
        (tmp / "drafter" / "drafter.json").write_text(
            json.dumps({"name": default_drafter or self.drafter_name})
        )
        index = {
            "_class_name": type(self).__name__,
            "num_context_frames": self.verifier.num_context_frames,
            "hint": self.verifier.hint,
            "residual": self.verifier.residual,
        }
        (tmp / "model_index.json").write_text(json.dumps(index, indent=2))
        if path.is_dir():  # keep what lives beside the parts (README, sample grids, ...)
            for item in path.iterdir():
                if not (tmp / item.name).exists():
                    item.rename(tmp / item.name)
        shutil.rmtree(path, ignore_errors=True)
        tmp.rename(path)

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path | None = None,
        drafter: str | FrameDrafter | None = None,
        device: str | None = None,
    ) -> SpeculativeVideoPipeline:
        """Load a saved pipeline directory (default: the shipped models/video); ``drafter`` overrides
        the saved one by name or instance. A missing or corrupt part raises one ValueError that
        names the file or directory."""
        path = Path(path) if path is not None else shipped("video")
        if not (path / "model_index.json").is_file():
            raise ValueError(f"{path} is not a specvideo pipeline directory (no model_index.json)")
        index = _load_part(path / "model_index.json", _read_json)
        unet = _load_part(path / "unet", lambda p: UNet2DModel.from_pretrained(p, local_files_only=True))
        scheduler = _load_part(path / "scheduler", _load_scheduler)
        verifier = _load_part(  # the index's num_context_frames and hint must match the UNet's channels
            path / "model_index.json",
            lambda p: DiffusionVerifier(
                unet, scheduler, index.get("num_context_frames"), index.get("hint"), bool(index.get("residual"))
            ),
        )
        pipe = cls(verifier, _load_drafter(path / "drafter", drafter))
        return pipe.to(device) if device is not None else pipe


def _load_part(path: Path, load):
    """``load(path)``; any failure becomes one ValueError naming the file or directory."""
    if not path.exists():
        raise ValueError(f"cannot load {path}: it does not exist")
    try:
        return load(path)
    except Exception as err:
        raise ValueError(f"cannot load {path}: {first_line(err)}") from err


def _read_json(path: Path) -> dict:
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    return data


def _load_scheduler(path: Path):
    config = _read_json(path / "scheduler_config.json")
    name = config.get("_class_name")
    if not isinstance(name, str) or not hasattr(diffusers, name):
        raise ValueError(f"unknown scheduler class {name!r} in scheduler_config.json")
    return getattr(diffusers, name).from_config(config)


def _load_drafter(path: Path, drafter: str | FrameDrafter | None) -> FrameDrafter:
    if isinstance(drafter, FrameDrafter):
        return drafter
    saved = path / "drafter.json"
    name = drafter or (_load_part(saved, _read_json).get("name") if saved.is_file() else D.drafter)
    if name == "learned":
        if not (path / "config.json").is_file():
            raise ValueError(f"drafter 'learned' needs trained weights in {path}")
        return _load_part(path, lambda p: LearnedDrafter.from_pretrained(p, local_files_only=True))
    return make_drafter(name)


def _drafter_name(drafter: FrameDrafter) -> str:
    names = {
        "CopyLastDrafter": "copy",
        "LinearDrafter": "linear",
        "FlowDrafter": "flow",
        "LearnedDrafter": "learned",
    }
    return names.get(type(drafter).__name__, type(drafter).__name__)


def _to_tensor(frames, keep: int) -> torch.Tensor:
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
        return frames_to_tensor(_rgb_uint8(frames, keep))
    raise ValueError(
        f"context_frames must be a list of HxWx3 uint8 arrays, an (F, H, W, 3) array or an (F, 3, H, W) tensor, got {type(frames).__name__}"
    )


def _rgb_uint8(frames: np.ndarray, keep: int) -> np.ndarray:
    """The last ``keep`` of (F, H, W, C) uint8 frames, C = 1 (gray), 3 (RGB) or 4 (RGBA, alpha
    dropped), as (F', H, W, 3)."""
    if frames.ndim != 4 or frames.shape[-1] not in (1, 3, 4) or frames.dtype != np.uint8:
        raise ValueError(
            f"context frames must be (F, H, W, 3) uint8 RGB (or 1-channel gray / 4-channel RGBA), "
            f"got {frames.shape} {frames.dtype}"
        )
    frames = frames[-keep:]
    return np.repeat(frames, 3, axis=-1) if frames.shape[-1] == 1 else frames[..., :3]


def _check_call(num_frames, mode, k, threshold, metric, strength, refine_steps, steps, output_type) -> None:
    checks = [
        (
            isinstance(num_frames, int) and num_frames >= 1,
            f"num_frames must be an integer >= 1, got {num_frames!r}",
        ),
        (mode in MODES, f"mode must be one of {MODES}, got {mode!r}"),
        (isinstance(k, int) and k >= 1, f"num_draft_frames must be an integer >= 1, got {k!r}"),
        (
            isinstance(threshold, (int, float)) and not math.isnan(threshold),
            f"threshold must be a number (+/-inf allowed), got {threshold!r}",
        ),
        (metric in METRICS, f"metric must be one of {METRICS}, got {metric!r}"),
        (
            isinstance(strength, (int, float)) and 0 < strength <= 1,
            f"strength must be in (0, 1], got {strength!r}",
        ),
        (
            isinstance(refine_steps, int) and refine_steps >= 1,
            f"num_refine_steps must be an integer >= 1, got {refine_steps!r}",
        ),
        (
            isinstance(steps, int) and steps >= 1,
            f"num_inference_steps must be an integer >= 1, got {steps!r}",
        ),
        (output_type in OUTPUT_TYPES, f"output_type must be one of {OUTPUT_TYPES}, got {output_type!r}"),
    ]
    for ok, message in checks:
        if not ok:
            raise ValueError(message)


__all__ = ["DRAFTERS", "SpeculativeVideoPipeline", "VideoPipelineOutput"]
