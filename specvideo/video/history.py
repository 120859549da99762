"""A video row's frames and noise: ``FrameHistory`` (its context and emitted frames, which the
verifier conditions on and the drafter anchors at) and ``FrameNoise`` (each output frame's noise,
drawn from the row's seed and the frame's index alone)."""

from __future__ import annotations

import torch


class FrameNoise:
    """Noise derived per output frame index from one seed drawn from the row's generator, so a
    frame's noise does not depend on how the frames before it were made, nor on the other rows of a
    batch: rejecting every draft reproduces target-only generation exactly. Every draw is made on
    the generator's device (a CPU generator gives the same frames on any device)."""

    def __init__(self, generator: torch.Generator | None, shape: tuple[int, ...], device: torch.device):
        self.generator_device = generator.device if generator is not None else torch.device("cpu")
        seed = torch.randint(0, 2**62, (1,), generator=generator, device=self.generator_device)
        self.seed = int(seed)
        self.shape, self.device = shape, device

    STREAMS = 5

    def generator(self, index: int, stream: int) -> torch.Generator:
        """Streams: 0 full-sampler start, 1 refinement noise, 2 full-sampler steps, 3 refinement steps,
        4 the noise on the context frames the frame is conditioned on."""
        seed = (self.seed + self.STREAMS * index + stream) % 2**63  # index -1: the context's last frame
        return torch.Generator(device=self.generator_device).manual_seed(seed)

    def _draw(self, index: int, stream: int, frames: tuple[int, ...] = ()) -> torch.Tensor:
        g = self.generator(index, stream)
        shape = (*frames, *self.shape)  # ([P,] 3, H, W)
        return torch.randn(shape, generator=g, device=self.generator_device).to(self.device)

    def context(self, index: int, num_frames: int) -> torch.Tensor:
        """(P, 3, H, W) noise for the context frames of output frame ``index``: the same whether the
        frame is a draft's check or its regeneration, so rejecting every draft stays target-only."""
        return self._draw(index, 4, (num_frames,))

    def full(self, index: int) -> torch.Tensor:
        return self._draw(index, 0)

    def refine(self, index: int) -> torch.Tensor:
        """Stream 1: a refinement's re-noising, or the typicality check's noise (a check makes one)."""
        return self._draw(index, 1)


class FrameHistory:
    """Context frames then emitted frames, (3, H, W) each; the verifier conditions on the last P.
    ``drafted[i]``: frame i is an accepted draft (not real footage, not a frame the target sampled)."""

    def __init__(self, context: torch.Tensor, num_context_frames: int):
        self.frames = list(context)
        self.num_context = len(self.frames)
        self.P = num_context_frames
        self.drafted = [False] * len(self.frames)

    def anchor(self) -> tuple[torch.Tensor, int]:
        """The window (P, 3, H, W) ending at the last real or target-sampled frame, and how many
        accepted drafts follow it: the next round drafts from there with the accumulated motion,
        not from its own drafts (a drift of the drafter would otherwise compound unseen)."""
        last = max(i for i, drafted in enumerate(self.drafted) if not drafted)
        return torch.stack(self.frames[: last + 1][-self.P :]), len(self.frames) - 1 - last

    @property
    def emitted(self) -> int:
        return len(self.frames) - self.num_context

    def window(self, extra: list[torch.Tensor] = ()) -> torch.Tensor:
        return torch.stack((self.frames + list(extra))[-self.P :])  # (P, 3, H, W)
