"""SpeculativeVideoPipeline: draft frames cheaply, verify them with a conditional diffusion model.

Follows diffusers' conventions: the model (``UNet2DModel``), the scheduler and the pipeline keep
their roles; ``__call__`` takes ``generator``, ``num_inference_steps``, ``output_type`` and
``callback_on_step_end`` and returns an output dataclass; ``save_pretrained``/``from_pretrained``
use one directory with ``unet/``, ``scheduler/``, ``drafter/`` and ``model_index.json``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from diffusers import UNet2DModel
from diffusers.utils import BaseOutput
from PIL import Image
from tqdm.auto import tqdm

from specvideo.core.acceptance import threshold_accept
from specvideo.core.loop import speculate
from specvideo.core.schedule import RowSchedules, make_schedule
from specvideo.files import atomic_dir
from specvideo.paths import shipped
from specvideo.video.config import VIDEO_DEFAULTS, VideoConfig
from specvideo.video.drafters import DRAFTERS, FrameDrafter, LearnedDrafter, make_drafter
from specvideo.video.feature_check import FeatureCheck
from specvideo.video.history import FrameHistory, FrameNoise
from specvideo.video.inputs import (
    OUTPUT_TYPES,
    check_callback_inputs,
    check_settings,
    row_generators,
    split_batch,
    to_tensor,
)
from specvideo.video.io import tensor_to_frames
from specvideo.video.loading import (
    drafter_name_of,
    load_drafter,
    load_part,
    load_scheduler,
    read_json,
    resolve_autocast,
)
from specvideo.video.rounds import (
    RoundSettings,
    VideoDrafter,
    VideoRows,
    VideoSpecStats,
    VideoVerifier,
    merge_row_stats,
)
from specvideo.video.verifier import DiffusionVerifier

D = VIDEO_DEFAULTS


@dataclass
class VideoPipelineOutput(BaseOutput):
    """frames: (F, H, W, 3) uint8 ("np"), (F, 3, H, W) float in [-1, 1] ("pt") or F PIL images; for a
    batch of B contexts, (B, F, H, W, 3), (B, F, 3, H, W) or B lists of F images.
    drafts: the draft behind each output frame (None where the frame had none), same type; a list
    per row for a batch. stats: totals over the batch; row_stats: one VideoSpecStats per row."""

    frames: np.ndarray | torch.Tensor | list
    stats: VideoSpecStats
    drafts: list | None = None
    row_stats: list[VideoSpecStats] | None = None


def pad_to_multiple(x: torch.Tensor, m: int) -> torch.Tensor:
    """(..., h, w) -> (..., H', W'), both sides rounded up to a multiple of m: reflected where the
    frame is large enough, else replicated (the crop ``[..., :h, :w]`` undoes it)."""
    h, w = x.shape[-2:]
    pad_h, pad_w = -h % m, -w % m
    if not (pad_h or pad_w):
        return x
    mode = "reflect" if pad_h < h and pad_w < w else "replicate"
    lead = x.shape[:-3]
    y = F.pad(x.reshape(-1, *x.shape[-3:]), (0, pad_w, 0, pad_h), mode=mode)
    return y.reshape(*lead, *y.shape[-3:])


class SpeculativeVideoPipeline:
    """Speculative video generation with a frame drafter and a ``DiffusionVerifier``."""

    _callback_tensor_inputs = ["frames", "stats"]

    def __init__(
        self, verifier: DiffusionVerifier, drafter: FrameDrafter | None = None, feature_check: FeatureCheck | None = None
    ):
        self.verifier = verifier
        self.feature_check = feature_check  # the "features" check (saved in check/), if any
        self.drafter = drafter if drafter is not None else make_drafter(D.drafter)
        self.drafter_name = drafter_name_of(self.drafter)

    @property
    def unet(self) -> UNet2DModel:
        return self.verifier.unet

    @property
    def scheduler(self):
        return self.verifier.scheduler

    @property
    def device(self) -> torch.device:
        return self.verifier.device

    @property
    def dtype(self) -> torch.dtype:
        return self.unet.dtype

    def to(
        self, device: str | torch.device | None = None, dtype: torch.dtype | None = None
    ) -> SpeculativeVideoPipeline:
        """Move the UNet (and a learned drafter) to ``device`` and/or cast the UNet to ``dtype``."""
        self.verifier.unet.to(device=device, dtype=dtype)
        if isinstance(self.drafter, LearnedDrafter) and device is not None:
            self.drafter.model.to(device)
        return self

    # ------------------------------------------------------------------ generation

    @torch.inference_mode()
    def __call__(
        self,
        context_frames,
        settings: VideoConfig | None = None,
        *,
        generator: torch.Generator | list[torch.Generator] | None = None,
        output_type: str = "np",
        callback_on_step_end=None,
        callback_on_step_end_tensor_inputs: list[str] | None = None,
        progress: bool = True,
        **changes,
    ) -> VideoPipelineOutput:
        """Generate ``num_frames`` frames after ``context_frames``, or after each of a batch of them.

        settings: a ``VideoConfig`` (default ``VIDEO_DEFAULTS``); the call reads its
        ``CALL_SETTINGS`` (num_frames, mode, num_draft_frames, threshold, metric, strength,
        num_refine_steps, num_inference_steps, schedule, check_levels, check_center). ``changes``: any of them by
        name, over ``settings`` (``pipe(context, num_frames=8)``).
        context_frames: one context (a list of H x W x 3 uint8 arrays, an (F, H, W, 3) uint8 array or
        an (F, 3, H, W) float tensor in [-1, 1]) or a batch: a list of such contexts, or a 5-D array /
        tensor. Frames are generated at the context's own resolution (the UNet is fully
        convolutional): a side that is not a multiple of the UNet's ``size_multiple`` is padded by
        reflection for the model and the padding cropped from every output frame; the contexts of a
        batch share one size. Gray (H x W or one channel) and RGBA (alpha dropped) uint8 frames
        become RGB; only the last P frames are used. In a batch every
        row accepts its own number of drafts per round and the UNet calls are batched across rows;
        ``generator`` may be one generator or a list of one per row (row b then equals its context
        generated alone with generator b, up to float rounding: every row has its own draft-length
        schedule).
        mode: "speculative" (draft, verify, accept, correct), "target" (every frame by the full
        sampler) or "draft" (the drafter alone).
        callback_on_step_end(pipe, step, timestep, callback_kwargs) is called after every round (the
        diffusers contract): ``step`` is the round, ``timestep`` None (a round spans many), and
        ``callback_kwargs`` holds the names in ``callback_on_step_end_tensor_inputs`` (default: all
        of "frames", the frames emitted so far, (F_so_far, 3, H, W) or a list per row, and "stats").
        """
        c = (settings or VIDEO_DEFAULTS).updated(**changes)
        check_settings(c, output_type)
        mode, num_frames, threshold = c.mode, c.num_frames, c.tau
        if c.metric == "features":
            if self.feature_check is None:
                raise ValueError("metric 'features' needs a learned check: this pipeline has no check/ directory")
            threshold = self.feature_check.config.threshold if c.threshold is None else c.threshold
        if c.fallback == "still" and self.feature_check is None:
            raise ValueError("fallback 'still' needs a learned check to judge the corrections: this pipeline has no check/ directory")
        tensor_inputs = check_callback_inputs(
            callback_on_step_end_tensor_inputs, self._callback_tensor_inputs
        )
        batched, contexts = split_batch(context_frames)
        prepared = [self._prepare_context(c) for c in contexts]
        generators = row_generators(generator, len(prepared))
        P = self.verifier.num_context_frames
        sizes = sorted({size for _, size in prepared})
        if len(sizes) > 1:
            raise ValueError(f"the contexts of a batch must share one frame size, got {sizes} (H, W)")
        shape = tuple(prepared[0][0].shape[1:])  # (3, H', W'): padded to the UNet's multiple
        tau = -math.inf if mode == "draft" else threshold
        k = num_frames if mode == "draft" else c.num_draft_frames
        rule = RowSchedules([make_schedule("constant" if mode == "draft" else c.schedule, k) for _ in prepared])
        rows = VideoRows(  # each row drafts up to its own k: rows do not depend on each other
            [FrameHistory(c, P) for c, _ in prepared],
            [FrameNoise(g, shape, self.device) for g in generators],
            num_frames,
            rule.row_k,
        )
        stats = VideoSpecStats()
        round_settings = RoundSettings(
            num_frames,
            c.strength,
            c.num_refine_steps,
            c.num_inference_steps,
            c.metric,
            refine=mode != "draft",
            levels=c.check_levels,
            center=c.check_center,
            feature_check=self.feature_check,
            fallback=c.fallback,
        )
        verifier = VideoVerifier(self.verifier, rows, round_settings, stats)
        drafter = VideoDrafter(None if mode == "target" else self.drafter, rows, from_anchor=mode == "speculative")
        bar = tqdm(total=num_frames * len(rows), desc=f"specvideo {mode}", disable=not progress, leave=False)
        for step in speculate(
            drafter, verifier, lambda d, s: threshold_accept(s, tau, d.lengths), rule, stats
        ):
            bar.update(sum(len(e) for e in step.emitted))
            if callback_on_step_end is not None:
                so_far = [torch.stack(h.frames[h.num_context :]) for h in rows.histories]  # (F_b, 3, H, W)
                kwargs = {"frames": so_far if batched else so_far[0], "stats": stats}
                callback_on_step_end(self, step.round, None, {n: kwargs[n] for n in tensor_inputs})
        bar.close()
        merge_row_stats(stats, rows.stats)
        for d in stats.scored_drafts:  # recorded at the model's padded size: cropped as the frames are
            h, w = prepared[d.row][1]
            d.draft = d.draft[..., :h, :w]
        outputs = [
            self._outputs(h, verifier.drafts[b], output_type, size)
            for b, (h, (_, size)) in enumerate(zip(rows.histories, prepared))
        ]
        if not batched:
            return VideoPipelineOutput(outputs[0][0], stats, outputs[0][1], rows.stats)
        frames = [o[0] for o in outputs]
        if output_type != "pil":
            frames = torch.stack(frames) if output_type == "pt" else np.stack(frames)
        return VideoPipelineOutput(frames, stats, [o[1] for o in outputs], rows.stats)

    def _outputs(self, history: FrameHistory, drafts: list, output_type: str, size):
        frames = torch.stack(history.frames[history.num_context :])  # (F, 3, H, W)
        drafts = [
            self._postprocess(d[None].float(), output_type, size)[0] if d is not None else None
            for d in drafts
        ]
        return self._postprocess(frames, output_type, size), drafts

    def _prepare_context(self, context_frames) -> tuple[torch.Tensor, tuple[int, int]]:
        P = self.verifier.num_context_frames
        x = to_tensor(context_frames, keep=P + 1)  # (F, 3, h, w) in [-1, 1], F <= P + 1: the typicality
        # check's reference is the target's error on the last frame given the P before it
        if x.shape[0] < P:
            raise ValueError(f"the model conditions on {P} context frames, got {x.shape[0]}")
        size = tuple(x.shape[-2:])  # (h, w)
        m = self.verifier.size_multiple
        if min(size) < m:
            raise ValueError(f"context frames of {size[0]} x {size[1]} are smaller than the model's {m} x {m} minimum")
        return pad_to_multiple(x, m).clamp(-1, 1).to(self.device), size

    @staticmethod
    def _postprocess(frames: torch.Tensor, output_type: str, size: tuple[int, int]):
        frames = frames[..., : size[0], : size[1]]  # the padding cropped off
        if output_type == "pt":
            return frames.cpu()
        array = tensor_to_frames(frames)  # (F, H, W, 3) uint8
        return array if output_type == "np" else [Image.fromarray(f) for f in array]

    # ------------------------------------------------------------------ save / load

    def save_pretrained(self, path: str | Path, default_drafter: str | None = None) -> None:
        """Write unet/, scheduler/, drafter/, check/ (the learned check, when the pipeline has one) and
        model_index.json (to a temp dir, then renamed);
        other files already in ``path`` (a README, sample images) are kept.

        ``default_drafter`` names the drafter ``from_pretrained`` picks (default: this pipeline's);
        a learned drafter's weights are saved either way."""
        with atomic_dir(path) as tmp:
            self.unet.save_pretrained(tmp / "unet")
            self.scheduler.save_pretrained(tmp / "scheduler")
            (tmp / "drafter").mkdir()
            if isinstance(self.drafter, LearnedDrafter):
                self.drafter.save_pretrained(tmp / "drafter")
            (tmp / "drafter" / "drafter.json").write_text(json.dumps({"name": default_drafter or self.drafter_name}))
            if self.feature_check is not None:
                self.feature_check.save_pretrained(tmp / "check")
            index = {
                "_class_name": type(self).__name__,
                "num_context_frames": self.verifier.num_context_frames,
                "hint": self.verifier.hint,
                "residual": self.verifier.residual,
                "context_noise_level": self.verifier.context_noise_level,
                "check_hint": self.verifier.check_hint,
                "confidence": self.verifier.confidence,
            }
            (tmp / "model_index.json").write_text(json.dumps(index, indent=2))

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path | None = None,
        drafter: str | FrameDrafter | None = None,
        device: str | torch.device | None = None,
        torch_dtype: torch.dtype | None = None,
        autocast: str | torch.dtype | None = VIDEO_DEFAULTS.autocast,
    ) -> SpeculativeVideoPipeline:
        """Load a saved pipeline directory (default: the shipped models/video); ``drafter`` overrides
        the saved one by name or instance. The UNet is stored in fp16 and loaded as float32 unless
        ``torch_dtype`` says otherwise (torch.float16 / torch.bfloat16 on a GPU); ``device`` places
        it. ``autocast`` runs the UNet under ``torch.autocast`` (``resolve_autocast``: "auto", the
        default, for bf16 where the device computes it natively, unless ``torch_dtype`` already asks
        for a half dtype; "bf16"; "off" / None). A missing or corrupt part
        raises one ValueError that names the file or directory."""
        if torch_dtype is not None and not (
            isinstance(torch_dtype, torch.dtype) and torch_dtype.is_floating_point
        ):
            raise ValueError(f"torch_dtype must be a floating torch.dtype, got {torch_dtype!r}")
        path = Path(path) if path is not None else shipped("video")
        if not (path / "model_index.json").is_file():
            raise ValueError(f"{path} is not a specvideo pipeline directory (no model_index.json)")
        index = load_part(path / "model_index.json", read_json)
        unet = load_part(
            path / "unet",
            lambda p: UNet2DModel.from_pretrained(
                p, local_files_only=True, torch_dtype=torch_dtype or torch.float32
            ),
        )
        scheduler = load_part(path / "scheduler", load_scheduler)
        verifier = load_part(  # the index's num_context_frames and hint must match the UNet's channels
            path / "model_index.json",
            lambda p: DiffusionVerifier(
                unet,
                scheduler,
                index.get("num_context_frames"),
                index.get("hint"),
                bool(index.get("residual")),
                index.get("context_noise_level", 0),
                index.get("check_hint", True),
                bool(index.get("confidence", False)),
            ),
        )
        check = path / "check"
        feature_check = load_part(check, FeatureCheck.from_pretrained) if check.is_dir() else None
        pipe = cls(verifier, load_drafter(path / "drafter", drafter), feature_check)
        pipe = pipe.to(device) if device is not None else pipe
        if autocast == "auto" and torch_dtype not in (None, torch.float32):
            autocast = None  # the UNet already runs in the dtype asked for
        verifier.autocast = resolve_autocast(autocast, verifier.device)
        return pipe


__all__ = ["DRAFTERS", "OUTPUT_TYPES", "SpeculativeVideoPipeline", "VideoPipelineOutput"]
