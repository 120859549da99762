"""``specvideo bench drafters``: every drafter alone, on normal and fast windows, judged with
pretrained eyes, beside its cost per frame (#65 item 1).

Each drafter drafts the whole window from the two true context frames (the draft-only rollout, k =
``num_frames``). Per workload (synthetic or real, at each frame step: 1 is normal footage, 2-4 the
same footage s times faster):

- realism: per-frame KID x 1000 on the TF-FID Inception-v3's pool features (``specvideo.video.inception``,
  the frames of all windows pooled) and on EfficientNet-Lite0's cells (``specvideo.video.pretrained``);
- fidelity: EfficientNet feature distance to the true frame, mean over windows and the mean of the
  worst quarter of windows (where a drafter breaks);
- motion: Wasserstein-1 distance between the flow magnitudes of the drafts and of the truth (px);
- cost: milliseconds per drafted frame, the median over windows of each window's median over
  ``repeats`` runs, and the [min-max] over repeats of the workload's total per frame.

Drafters are named as ``make_drafter`` names them; ``flow:<net>`` is the flow drafter along a
pretrained network's flow (``flow`` alone: OpenCV DIS).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch

from benchmarks.measure import spread
from benchmarks.video.config import SPLITS, BenchVideoConfig
from benchmarks.video.workloads import BenchClip, load_workloads
from specvideo.video import inception, pretrained
from specvideo.video.drafters import FrameDrafter, make_drafter

P = 2  # context frames: what the flow drafters read


@dataclass(frozen=True)
class BenchDraftersConfig:
    split: str = "tuning"
    drafters: tuple[str, ...] = ("copy", "linear", "flow", "flow:spynet", "flow:rife")
    frame_steps: tuple[int, ...] = (1, 3)
    num_synthetic: int = 6
    num_real: int = 15
    num_frames: int = 8
    windows_per_clip: int = 3
    synthetic_size: int = 128
    max_side: int = 320
    repeats: int = 3
    report: str = "docs/history/benchmarks.md"

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {self.split!r}")
        if not self.drafters or not self.frame_steps:
            raise ValueError("give at least one drafter and one frame step")
        for name in self.drafters:
            build_drafter(name)  # an unknown name or flow model fails here, before any work
        if self.repeats < 1 or min(self.frame_steps) < 1:
            raise ValueError("repeats and frame steps must be >= 1")

    def workload_config(self, step: int) -> BenchVideoConfig:
        return BenchVideoConfig(
            split=self.split, num_synthetic=self.num_synthetic, num_real=self.num_real, num_frames=self.num_frames,
            synthetic_size=self.synthetic_size, max_side=self.max_side, windows="moving",
            windows_per_clip=self.windows_per_clip, frame_step=step,
        )


def build_drafter(name: str) -> FrameDrafter:
    """A drafter by its name (``DRAFTERS``; ``learned`` would need weights and is not benchmarked here)."""
    if name == "learned":
        raise ValueError("bench drafters measures the weight-free drafters; the learned one runs in bench video")
    return make_drafter(name)


@dataclass
class DrafterRow:
    workload: str
    drafter: str
    windows: int
    kid_inception: float
    kid_efficientnet: float
    fidelity: float
    fidelity_worst_quarter: float
    motion: float
    ms_per_frame: float
    ms_spread: tuple[float, float]


@dataclass
class Truth:
    inception: torch.Tensor  # (n, 2048) every true frame of the workload
    records: list[pretrained.PretrainedRecord]  # each window's true frames


def run_drafters(config: BenchDraftersConfig, progress: bool = False) -> list[DrafterRow]:
    rows = []
    for step in config.frame_steps:
        for name, clips in load_workloads(config.workload_config(step), P).items():
            label = name if step == 1 else f"{name}, frame step {step}"
            truth = Truth(
                torch.cat([inception.inception_features(c.truth) for c in clips]),
                [pretrained.PretrainedRecord.of(c.truth) for c in clips],
            )
            for drafter in config.drafters:
                rows.append(score_drafter(label, drafter, clips, truth, config.repeats))
                if progress:
                    print(format_row(rows[-1]), flush=True)
    return rows


def score_drafter(workload: str, name: str, clips: list[BenchClip], truth: Truth, repeats: int) -> DrafterRow:
    drafter = build_drafter(name)
    drafter.propose(clips[0].context[None], 1)  # loads a pretrained net before the clock starts
    times = np.zeros((repeats, len(clips)))  # seconds per frame
    outputs = []
    for j, clip in enumerate(clips):
        for r in range(repeats):
            start = time.perf_counter()
            frames = drafter.propose(clip.context[None], len(clip.truth))[0]  # (F, 3, H, W)
            times[r, j] = (time.perf_counter() - start) / len(clip.truth)
        outputs.append(frames)
    records = [pretrained.PretrainedRecord.of(f) for f in outputs]
    fid = np.array([pretrained.fidelity(r.maps.float(), t.maps.float()) for r, t in zip(records, truth.records)])
    worst = np.sort(fid)[-max(1, len(fid) // 4) :]
    cells = lambda rs: torch.cat([pretrained.frame_cells(r.maps.float()) for r in rs])  # noqa: E731
    return DrafterRow(
        workload=workload,
        drafter=name,
        windows=len(clips),
        kid_inception=inception.kid_frames(torch.cat([inception.inception_features(f) for f in outputs]), truth.inception),
        kid_efficientnet=pretrained.kid_cells(cells(records), cells(truth.records)),
        fidelity=float(fid.mean()),
        fidelity_worst_quarter=float(worst.mean()),
        motion=statistics.mean(pretrained.motion_distance(r.magnitudes, t.magnitudes) for r, t in zip(records, truth.records)),
        ms_per_frame=1000 * float(np.median(np.median(times, axis=0))),
        ms_spread=tuple(1000 * x for x in spread(list(times.mean(axis=1)))),
    )


HEADER = (
    "| workload | drafter | windows | Inception KID per frame | EfficientNet KID per frame | fidelity mean | "
    "fidelity, worst quarter | motion px | ms / frame [repeats] |\n|---|---|---:|---:|---:|---:|---:|---:|---|"
)


def format_row(r: DrafterRow) -> str:
    return (
        f"| {r.workload} | {r.drafter} | {r.windows} | {r.kid_inception:.1f} | {r.kid_efficientnet:.1f} | "
        f"{r.fidelity:.3f} | {r.fidelity_worst_quarter:.3f} | {r.motion:.3f} | "
        f"{r.ms_per_frame:.1f} [{r.ms_spread[0]:.1f}-{r.ms_spread[1]:.1f}] |"
    )


def to_markdown(rows: list[DrafterRow]) -> str:
    return "\n".join([HEADER, *map(format_row, rows)])
