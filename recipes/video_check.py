"""The learned check's recipe (`specvideo train video-check`): true next frames against wrong drafts
made from the training clips, an MLP on frozen pretrained features (``specvideo.video.feature_check``).

Each example is three consecutive frames L', L, T of a training clip (real crops at the clips' own
scale, ``NativeClips("train")``, and moving shapes from ``TRAIN_SEEDS``), and a draft D after them:

    truth     D = T                                                         positive
    frozen    D = L (the video stops)                                       negative
    shifted   the flow draft rolled by 1/32-1/8 of the frame                negative
    blurred   T or the flow draft under a Gaussian blur, sigma W/128-W/32   negative
    other     another example's true frame                                  negative
    flow      the flow drafter's draft from (L', L): positive when its pretrained-feature distance
              to T (``pretrained.fidelity``) is at most the training set's median, negative in the
              worst quarter, left out between: the flow drafts that break must fail the check, the
              good ones must pass

Since #65 a share of the triplets is read every s-th frame (``frame_steps``, s up to 4: real camera
motion made fast), where the flow drafts break, and the check also reads the motion features that
signal it (``feature_check.MOTION_FEATURES``): its worst-quarter flow drafts come mostly from there.

The amounts are drawn per example, wider than the bench's fixed ones (``benchmarks/video/
injected.py``: shift 1/16, blur W/64), and the bench's clips are other clips (validation split).
The threshold tau is the 5th percentile of the true frames' scores on the tuning split's triplets
at frame step 1 (the typicality threshold's rule: accept 95 % of real footage as it is; fast
triplets hold cuts, fades and flashes that no draft predicts); the tuning split's AUC per kind is
reported for all, normal and fast triplets, and the validation split is left to the bench.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange

from benchmarks.measure import roc_auc
from specvideo.video import pretrained
from specvideo.video.data import TRAIN_SEEDS, TUNING_SEEDS, moving_shapes
from specvideo.video.drafters import FlowDrafter
from specvideo.video.feature_check import ALL_FEATURES, FeatureCheck, FeatureCheckConfig, features_from_maps
from specvideo.video.io import frames_to_tensor
from specvideo.video.real import NativeClips

KINDS = ("truth", "frozen", "shifted", "blurred", "other", "flow")


@dataclass(frozen=True)
class CheckTrainConfig:
    out: str = "models/video/check"
    num_real: int = 300  # training examples from real crops
    num_synthetic: int = 150  # and from moving shapes
    num_tuning: int = 60  # tuning examples of each source (threshold and AUC)
    crop: int = 128
    # triplets read every s-th frame, s drawn with these weights (#65: fast motion, where flow breaks)
    frame_steps: tuple[int, ...] = (1, 2, 3, 4)
    frame_step_weights: tuple[float, ...] = (0.4, 0.2, 0.2, 0.2)
    features: tuple[str, ...] = ALL_FEATURES
    hidden: int = 32
    steps: int = 3000  # full-batch AdamW steps
    lr: float = 3e-3
    weight_decay: float = 1e-3
    threads: int = 0
    seed: int = 0


def _triplets(
    split: str, num_real: int, num_synthetic: int, cfg: CheckTrainConfig, rng: np.random.Generator
) -> tuple[torch.Tensor, np.ndarray]:
    """(n, 3, 3, S, S) in [-1, 1]: frames L', L, T of real crops and moving shapes of ``split``, each
    read every s-th frame (s from ``cfg.frame_steps``), and each one's s (n,)."""
    real = NativeClips(split, crop=cfg.crop, long_sides=(192, 256, 320))
    seeds = TRAIN_SEEDS if split == "train" else TUNING_SEEDS
    weights = np.asarray(cfg.frame_step_weights, dtype=np.float64)
    steps = rng.choice(cfg.frame_steps, size=num_real + num_synthetic, p=weights / weights.sum())
    clips = [real.sample(rng, 3, step=int(s)) for s in steps[:num_real]]
    for s in steps[num_real:]:
        skip, seed = int(rng.integers(0, 12)), int(rng.integers(seeds.start, seeds.stop))
        clips.append(moving_shapes(seed, skip + 2 * int(s) + 1, cfg.crop)[skip :: int(s)])
    return torch.stack([frames_to_tensor(np.ascontiguousarray(c)) for c in clips]), steps


def _blur(frames: torch.Tensor, sigmas: np.ndarray) -> torch.Tensor:
    x = rearrange(frames.float().numpy(), "n c h w -> n h w c")
    return torch.from_numpy(
        rearrange(np.stack([cv2.GaussianBlur(f, (0, 0), s) for f, s in zip(x, sigmas)]), "n h w c -> n c h w")
    )


def _drafts(triplets: torch.Tensor, rng: np.random.Generator) -> dict[str, torch.Tensor]:
    """Each kind's drafts (n, 3, S, S) for the (n, 3, 3, S, S) triplets (module docstring)."""
    n, S = len(triplets), triplets.shape[-1]
    flow = FlowDrafter().propose(triplets[:, :2], 1)[:, 0].float()  # (n, 3, S, S)
    truth = triplets[:, 2]
    shifts = rng.uniform(1 / 32, 1 / 8, (n, 2)) * S * rng.choice([-1, 1], (n, 2))
    shifted = torch.stack(
        [torch.roll(f, (max(1, int(a)), max(1, int(b))), (-2, -1)) for f, (a, b) in zip(flow, np.abs(shifts))]
    )
    base = torch.where(torch.from_numpy(rng.random(n) < 0.5)[:, None, None, None], truth, flow)
    return {
        "truth": truth,
        "frozen": triplets[:, 1],
        "shifted": shifted,
        "blurred": _blur(base, rng.uniform(S / 128, S / 32, n)),
        "other": truth.roll(1, dims=0),
        "flow": flow,
    }


def examples(
    triplets: torch.Tensor, rng: np.random.Generator, names: tuple[str, ...] = ALL_FEATURES
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """-> features per kind {kind: (n, len(names))}, and the flow drafts' pretrained distance to the truth (n,)."""
    drafts = _drafts(triplets, rng)
    m_before, m_last = pretrained.feature_maps(triplets[:, 0]), pretrained.feature_maps(triplets[:, 1])
    maps = {kind: m_last if kind == "frozen" else pretrained.feature_maps(d) for kind, d in drafts.items()}
    features = {
        kind: features_from_maps((m_before, m_last, maps[kind]), (triplets[:, 0], triplets[:, 1], d), names)
        for kind, d in drafts.items()
    }
    return features, pretrained.feature_distance(maps["flow"], maps["truth"])


def labelled(features: dict[str, torch.Tensor], distance: torch.Tensor, good: float, bad: float):
    """(N, 8) features and (N,) labels (1: accept); flow drafts labelled by their distance."""
    rows, labels = [], []
    for kind, f in features.items():
        if kind == "flow":
            keep = (distance <= good) | (distance >= bad)
            f, y = f[keep], (distance[keep] <= good).float()
        else:
            y = torch.full((len(f),), float(kind == "truth"))
        rows.append(f)
        labels.append(y)
    return torch.cat(rows), torch.cat(labels)


def fit(features: torch.Tensor, labels: torch.Tensor, cfg: CheckTrainConfig) -> FeatureCheck:
    """Full-batch AdamW on the class-balanced logistic loss."""
    mean, scale = features.mean(dim=0), features.std(dim=0).clamp(min=1e-3)
    config = FeatureCheckConfig(cfg.hidden, tuple(mean.tolist()), tuple(scale.tolist()), features=cfg.features)
    check = FeatureCheck(config)
    opt = torch.optim.AdamW(check.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    pos = labels.mean()
    weight = torch.where(labels > 0, 0.5 / pos, 0.5 / (1 - pos))
    for _ in range(cfg.steps):
        loss = F.binary_cross_entropy_with_logits(check.logits(features), labels, weight=weight)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return check.eval()


def tuning_aucs(scores: dict[str, torch.Tensor], distance: torch.Tensor, rows: torch.Tensor) -> dict[str, float]:
    """ROC AUC of the true frames against each kind on the ``rows`` (n,) bool, and against the flow
    drafts in the worst quarter by pretrained-feature distance to the truth ({} where no row is given)."""
    if not rows.any():
        return {}
    truth = scores["truth"][rows].tolist()
    worst = (distance >= float(distance[rows].quantile(0.75))) & rows
    bad = {kind: s[rows].tolist() for kind, s in scores.items() if kind not in ("truth", "flow")}
    bad["flow-worst"] = scores["flow"][worst].tolist()
    return {k: round(roc_auc([True] * len(truth) + [False] * len(s), truth + s), 3) for k, s in bad.items()}


def train_check(cfg: CheckTrainConfig) -> dict:
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    rng, start = np.random.default_rng(cfg.seed), time.time()
    train, train_distance = examples(_triplets("train", cfg.num_real, cfg.num_synthetic, cfg, rng)[0], rng, cfg.features)
    good, bad = (float(train_distance.quantile(q)) for q in (0.5, 0.75))
    features, labels = labelled(train, train_distance, good, bad)
    check = fit(features, labels, cfg)
    triplets, steps = _triplets("tuning", cfg.num_tuning, cfg.num_tuning, cfg, rng)
    tuning, tuning_distance = examples(triplets, rng, cfg.features)
    with torch.no_grad():
        scores = {kind: torch.sigmoid(check.logits(f)) for kind, f in tuning.items()}
    # the typicality threshold's rule on footage as it is (frame step 1): fast windows hold cuts,
    # fades and flashes no draft can predict, more than 5 % of their true frames (#65)
    normal = torch.from_numpy(steps == 1)
    tau = float(scores["truth"][normal].quantile(0.05))
    check.config = replace(check.config, threshold=tau)
    check.save_pretrained(cfg.out)
    return {
        "examples": len(labels),
        "threshold": round(tau, 4),
        "tuning_auc": tuning_aucs(scores, tuning_distance, torch.ones_like(normal)),
        "tuning_auc_normal": tuning_aucs(scores, tuning_distance, normal),
        "tuning_auc_fast": tuning_aucs(scores, tuning_distance, ~normal),
        "tuning_truth_accepted_fast": round(float((scores["truth"][~normal] >= tau).float().mean()), 3) if (~normal).any() else None,
        "tuning_flow_accepted": round(float((scores["flow"] >= tau).float().mean()), 3),
        "minutes": round((time.time() - start) / 60, 2),
        "params": sum(p.numel() for p in check.parameters()),
    }
