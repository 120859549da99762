"""The diffusion verifier: a conditional diffusers ``UNet2DModel`` and a diffusers scheduler.

The UNet sees the noisy frame concatenated on channels with the P previous frames (the MCVD
recipe), so ``in_channels == 3 * (P + 1)``. With ``hint="flow"`` it also sees the optical-flow
extrapolation of those frames (the flow drafter's first frame) as three more channels, so
``in_channels == 3 * (P + 2)``: the model then learns a correction of the warp (occlusions, bounces,
disocclusions) instead of the whole frame, as warp-conditioned video predictors do. ``refine`` re-noises drafts to the timestep of strength
s and takes m scheduler steps from there down to 0, batched over frames (m = 1 is one x0 estimate:
one UNet pass verifies all k drafts). ``generate`` samples a frame from pure noise with N steps.
The noise maths stay in the scheduler; this class only orchestrates and counts UNet evaluations.

``residual=True`` (needs the hint and x0-prediction) makes the UNet predict a correction of the
warp: x0 = hint + UNet(x_t, condition, t). With the UNet's output layer zero-initialised
(``make_residual``) the untrained verifier returns the flow extrapolation exactly, so training only
learns what flow gets wrong, and a draft's score measures how much correction it needs.

``confidence=True`` (a residual verifier) also gives the UNet the hint's confidence map c
(``FlowDrafter.confidence``: forward-backward agreement of the flow, 0 at disocclusions) on one
channel before the hint, ``in_channels == 3 * (P + 2) + 1``, and gates the correction by it:
x0 = hint + (1 - c) * UNet(...). Where the pretrained flow is sure of itself the target keeps its
warp; the UNet draws only where the warp cannot be trusted.
"""

from __future__ import annotations

import contextlib
import inspect

import torch
from diffusers import DDIMScheduler, DDPMScheduler, SchedulerMixin, UNet2DModel
from einops import rearrange

from specvideo.video.conditioning import HINTS, condition, hint_free


def default_scheduler(prediction_type: str = "sample") -> DDIMScheduler:
    """DDIM with trailing spacing (the first step really starts from pure noise) and x0 clipping."""
    return DDIMScheduler(
        num_train_timesteps=1000,
        beta_schedule="squaredcos_cap_v2",
        prediction_type=prediction_type,
        timestep_spacing="trailing",
        clip_sample=True,
        set_alpha_to_one=True,
    )


SAMPLERS = ("ddim", "ddpm")


def make_scheduler(name: str = "ddim", prediction_type: str = "sample") -> SchedulerMixin:
    """The verifier's sampler by name: "ddim" (deterministic) or "ddpm" (ancestral: fresh noise at
    every step, drawn from the per-frame generators), on the one training schedule."""
    if name not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {name!r}")
    ddim = default_scheduler(prediction_type)
    return ddim if name == "ddim" else DDPMScheduler.from_config(ddim.config)


class DiffusionVerifier:
    """Refines drafted frames and generates frames from noise, conditioned on the previous P frames.

    Frames are (N, 3, H, W) in [-1, 1]; conditions are (N, 3P [+ 3], H, W) from ``condition``:
    the P context frames, oldest first, then the hint if any. ``unet_evals`` counts UNet
    evaluations (a batched call of N frames counts N), ``unet_passes`` sequential UNet calls (a
    batched call counts once). The UNet may hold any dtype: its inputs are cast to it, and the
    scheduler's maths and every returned frame stay float32.

    ``generator`` arguments take one ``torch.Generator`` or a list of one per frame (the diffusers
    convention): stochastic schedulers (DDPM, Euler ancestral, SDE solvers) draw each frame's step
    noise from its own generator, so a frame does not depend on what else is in the batch.
    """

    def __init__(
        self,
        unet: UNet2DModel,
        scheduler: SchedulerMixin | None = None,
        num_context_frames: int | None = None,
        hint: str | None = None,
        residual: bool = False,
        context_noise_level: int = 0,
        check_hint: bool = True,
        confidence: bool = False,
    ):
        if hint not in HINTS:
            raise ValueError(f"hint must be one of {HINTS}, got {hint!r}")
        if confidence and not (hint and residual):
            raise ValueError("confidence=True gates a residual over the hint: it needs a hint and residual=True")
        extra = 1 if hint else 0  # hint frames on the channels
        in_channels = unet.config.in_channels - int(confidence)  # the confidence map's channel
        if in_channels % 3 or in_channels < 3 * (2 + extra):
            needs = "3 * (P + 2)" if hint else "3 * (P + 1)"
            needs += " + 1" if confidence else ""
            raise ValueError(
                f"the verifier UNet needs in_channels = {needs} with P >= 1, got {unet.config.in_channels}"
            )
        P = in_channels // 3 - 1 - extra
        if num_context_frames is not None and num_context_frames != P:
            raise ValueError(
                f"num_context_frames={num_context_frames} does not match the UNet (in_channels={in_channels} "
                f"with hint={hint!r} means P={P})"
            )
        if unet.config.out_channels != 3:
            raise ValueError(f"the verifier UNet must output 3 channels, got {unet.config.out_channels}")
        self.unet = unet.eval()
        self.scheduler = scheduler if scheduler is not None else default_scheduler()
        if residual and (hint is None or self.scheduler.config.get("prediction_type") != "sample"):
            raise ValueError(
                "a residual verifier predicts x0 = hint + correction: it needs a hint and a scheduler with "
                f"prediction_type='sample' (got hint={hint!r}, prediction_type="
                f"{self.scheduler.config.get('prediction_type')!r})"
            )
        self.num_context_frames = P
        T = self.scheduler.config.num_train_timesteps
        if not (isinstance(context_noise_level, int) and 0 <= context_noise_level < T):
            raise ValueError(f"context_noise_level must be an integer timestep in [0, {T}), got {context_noise_level!r}")
        # t_c of the context frames, for a UNet trained with noisy context (``takes_context_noise``)
        self.context_noise_level = context_noise_level
        # add_noise of the training schedule (alphas_cumprod), whatever sampler ``scheduler`` is
        self._noiser = DDPMScheduler.from_config(self.scheduler.config)
        self.hint = hint
        self.residual = residual
        self.confidence = confidence
        if not check_hint and (hint is None or residual):
            raise ValueError(
                "check_hint=False scores drafts on the hint-free branch (the hint's channels zeroed): it needs "
                "a hint and a UNet that is not a residual over it (one trained with hint dropout)"
            )
        # False: ``denoising_error`` (the check) zeroes the hint's channels, so a flow draft is not
        # judged against its own extrapolation (a UNet trained with the hint dropped in a share of samples)
        self.check_hint = check_hint
        # run the UNet under torch.autocast(device, autocast) (bf16 on a CPU with bf16 units: its
        # convolutions on AMX / AVX-512 BF16); None: in its own dtype. The scheduler stays float32.
        self.autocast: torch.dtype | None = None
        self.unet_evals = 0
        self.unet_passes = 0
        self._step_takes_generator = _accepts(self.scheduler.step, "generator")

    @property
    def resolution(self) -> tuple[int, int]:
        """The (H, W) the UNet was configured with; it runs at any multiple of ``size_multiple``."""
        size = self.unet.config.sample_size
        return (size, size) if isinstance(size, int) else tuple(size)

    @property
    def size_multiple(self) -> int:
        """Frame sides must be multiples of this: 2 ** (number of downsampling levels)."""
        return 2 ** (len(self.unet.config.block_out_channels) - 1)

    @property
    def takes_context_noise(self) -> bool:
        """Whether the UNet was trained with noisy context and is told its level (class labels)."""
        return self.unet.config.get("class_embed_type") == "timestep"

    @property
    def device(self) -> torch.device:
        return self.unet.device

    def condition(self, window: torch.Tensor, context_noise: torch.Tensor | None = None) -> torch.Tensor:
        """(N, P, 3, H, W) context windows, oldest first -> (N, C, H, W) UNet conditions. With a
        ``context_noise_level`` > 0 and ``context_noise`` (N, P, 3, H, W), the frames on the channels
        are noised to that level (the scheduler's ``add_noise``), as in training against drift; the
        hint is computed from the clean frames."""
        cond = condition(window, self.hint, self.confidence)  # (N, C, H, W)
        if not (self.takes_context_noise and self.context_noise_level and context_noise is not None):
            return cond
        P = window.shape[1]
        levels = torch.full((window.shape[0] * P,), self.context_noise_level, device=window.device)
        noised = self._noiser.add_noise(
            rearrange(window.float(), "n p c h w -> (n p) c h w"),
            rearrange(context_noise.to(window.device).float(), "n p c h w -> (n p) c h w"),
            levels,
        )
        cond[:, : 3 * P] = rearrange(noised, "(n p) c h w -> n (p c) h w", p=P).to(cond.dtype)
        return cond

    @torch.inference_mode()
    def refine(
        self,
        cond: torch.Tensor,
        x: torch.Tensor,
        strength: float,
        num_refine_steps: int,
        noise: torch.Tensor,
        generator: torch.Generator | list[torch.Generator] | None = None,
        context_noise_level: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Re-noise x (N, 3, H, W) to t(strength) with ``noise`` and denoise it in m steps -> (N, 3, H, W)."""
        timesteps = self._refine_timesteps(strength, num_refine_steps)
        t0 = timesteps[:1].expand(x.shape[0]).to(x.device)  # (N,)
        sample = self.scheduler.add_noise(x.float(), noise.float(), t0)  # (N, 3, H, W)
        return self._denoise(cond, sample, timesteps, generator, context_noise_level)

    @torch.inference_mode()
    def generate(
        self,
        cond: torch.Tensor,
        num_inference_steps: int,
        noise: torch.Tensor,
        generator: torch.Generator | list[torch.Generator] | None = None,
        context_noise_level: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Sample frames (N, 3, H, W) from pure ``noise`` with the full sampler."""
        self.scheduler.set_timesteps(num_inference_steps, device=noise.device)
        sample = noise.float() * self.scheduler.init_noise_sigma  # (N, 3, H, W)
        return self._denoise(cond, sample, self.scheduler.timesteps, generator, context_noise_level)

    @torch.inference_mode()
    def denoising_error(
        self,
        cond: torch.Tensor,
        x: torch.Tensor,
        levels: tuple[int, ...],
        noise: torch.Tensor,
        context_noise_level: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The typicality statistic of frames under the model: x (N, 3, H, W) is noised to each
        timestep of ``levels`` (L,) with ``noise`` (N, 3, H, W), the model predicts x0 once (one
        batched pass over the N * L noisy frames), and the mean squared error to x is returned,
        (N, L). Frames the model finds typical of this context come back close to themselves."""
        N, L = x.shape[0], len(levels)
        t = torch.tensor(levels, device=x.device).repeat_interleave(N)  # (L * N,): level-major
        sample = self._noiser.add_noise(x.float().repeat(L, 1, 1, 1), noise.float().repeat(L, 1, 1, 1), t)
        labels = self.class_labels(N, context_noise_level)
        if not self.check_hint:
            cond = hint_free(cond)
        cond = cond.to(self.device, self.unet.dtype).repeat(L, 1, 1, 1)  # (L * N, C, H, W)
        with self._autocast():
            x0 = predict_x0(
                self.unet,
                sample.to(self.unet.dtype),
                cond,
                t.to(self.device),
                self.residual,
                None if labels is None else labels.repeat(L),
                self.confidence,
            ).float()  # (L * N, 3, H, W)
        self.unet_evals += N * L
        self.unet_passes += 1
        x0 = self._as_x0(x0, sample, t)
        error = (x0.clamp(-1, 1) - x.float().repeat(L, 1, 1, 1)).pow(2)
        return rearrange(error.mean(dim=(1, 2, 3)), "(l n) -> n l", l=L)

    def _as_x0(self, output: torch.Tensor, sample: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """The model's output as an x0 estimate, whatever the scheduler's prediction type."""
        kind = self.scheduler.config.get("prediction_type", "sample")
        if kind == "sample":
            return output
        alpha = self._noiser.alphas_cumprod.to(sample.device)[t.to(sample.device)][:, None, None, None]
        if kind == "epsilon":
            return (sample - (1 - alpha).sqrt() * output) / alpha.sqrt()
        return alpha.sqrt() * sample - (1 - alpha).sqrt() * output  # v-prediction

    def class_labels(self, n: int, level: torch.Tensor | None) -> torch.Tensor | None:
        """The context noise level (n,) for a UNet that takes one, else None."""
        if self.unet.config.get("class_embed_type") != "timestep":
            return None
        if level is None:
            level = torch.full((n,), self.context_noise_level, dtype=torch.long)
        return level.to(self.device)

    def _autocast(self):
        if self.autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast)

    def _denoise(self, cond, sample, timesteps, generator, context_noise_level=None) -> torch.Tensor:
        dtype = self.unet.dtype
        labels = self.class_labels(sample.shape[0], context_noise_level)
        cond = cond.to(self.device, dtype)
        if isinstance(generator, list) and len(generator) != sample.shape[0]:
            raise ValueError(f"got {len(generator)} generators for {sample.shape[0]} frames")
        for t in timesteps:
            model_input = self.scheduler.scale_model_input(sample, t).to(dtype)
            with self._autocast():
                output = predict_x0(
                    self.unet, model_input, cond, t, self.residual, labels, self.confidence
                ).float()  # (N, 3, H, W)  # (N, 3, H, W)
            self.unet_evals += sample.shape[0]
            self.unet_passes += 1
            kwargs = {"generator": generator} if self._step_takes_generator else {}
            sample = self.scheduler.step(output, t, sample, **kwargs).prev_sample
        return sample.clamp(-1, 1)

    def _refine_timesteps(self, strength: float, m: int) -> torch.Tensor:
        """m timesteps from t(s) = s * (T - 1) down towards 0, the last step landing on x0."""
        T = self.scheduler.config.num_train_timesteps
        t_start = max(1, round(strength * (T - 1)))
        if _accepts(self.scheduler.set_timesteps, "timesteps"):
            ts = torch.linspace(t_start, 0, m + 1)[:-1].round().long().tolist()
            self.scheduler.set_timesteps(timesteps=ts, device=self.device)
            return self.scheduler.timesteps
        if hasattr(self.scheduler, "sigmas"):  # sigma-based (Euler ancestral, ...): diffusers' img2img way
            return self._img2img_timesteps(strength, m)
        # DDIM-style schedulers step from t to t - T // num_inference_steps: pick the count so that m
        # steps of that stride span t_start .. 0, then set the timesteps themselves.
        n = max(1, (T * m) // (t_start + 1))
        self.scheduler.set_timesteps(n, device=self.device)
        stride = T // n
        self.scheduler.timesteps = torch.tensor(
            [max(t_start - i * stride, 0) for i in range(m)], device=self.device
        )
        return self.scheduler.timesteps

    def _img2img_timesteps(self, strength: float, m: int) -> torch.Tensor:
        """The last m of n = round(m / s) steps, starting the scheduler's step index there (as
        diffusers' image-to-image pipelines do for schedulers that take no explicit timesteps)."""
        n = max(m, round(m / strength))
        self.scheduler.set_timesteps(n, device=self.device)
        begin = (n - m) * self.scheduler.order
        if hasattr(self.scheduler, "set_begin_index"):
            self.scheduler.set_begin_index(begin)
        return self.scheduler.timesteps[begin:]


def predict_x0(
    unet: UNet2DModel,
    sample: torch.Tensor,
    cond: torch.Tensor,
    t,
    residual: bool = False,
    class_labels=None,
    confidence: bool = False,
) -> torch.Tensor:
    """The UNet's output for (N, 3, H, W) ``sample`` given (N, C, H, W) ``cond``; a residual UNet's
    output is added to the hint (the last 3 condition channels), gated by 1 - c with ``confidence``
    (c: the channel before the hint). ``class_labels`` (N,): the context noise level of a UNet
    trained with noisy context (``class_embed_type="timestep"``)."""
    output = unet(torch.cat([sample, cond], dim=1), t, class_labels=class_labels).sample  # (N, 3, H, W)
    if confidence:
        output = (1 - cond[:, -4:-3]) * output  # (N, 3, H, W): no correction where c = 1
    return output + cond[:, -3:] if residual else output


def _accepts(fn, name: str) -> bool:
    return name in inspect.signature(fn).parameters
