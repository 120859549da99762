"""A learned check on frozen pretrained features: is this draft a plausible next frame?

The typicality check asks the target how easy a draft is to denoise, and a draft the target finds
*easier* than real footage (a copy of the last frame, a blur, a warp of the hint it is built on)
passes it. This check asks a question the target cannot answer: does the draft change from the last
frame the way real footage changes, judged on ImageNet features (EfficientNet-Lite0,
``specvideo.video.pretrained``) and a few pixel statistics, relative to how the context itself
changed? Its score is the probability, from a small MLP trained on the training clips
(``recipes/video_check.py``), that the draft is a true next frame rather than a copied, shifted,
blurred, other-clip or badly warped one.

Per draft D after context frames (..., L', L), with phi the feature map of a frame (cells of 1,280
values, ``pretrained.feature_maps``) and d(a, b) the cosine distance of two cells:

    f0  log mean_cells d(phi(D), phi(L))                 how much the draft's content moved
    f1  log mean_cells d(phi(L), phi(L'))                how much the context moved
    f2  log mean_{cells c of D} min_{cells c' of L} d    new content (shift-tolerant)
    f3  log mean_{cells c of L} min_{cells c' of D} d    content gone
    f4  log |phi(D)| / |phi(L)|                          feature energy (a blur lowers it)
    f5  log Laplacian energy of D / of L                 pixel sharpness
    f6  log mean |D - L| / mean |L - L'|                 pixel change against the context's
    f7  log mean |D - L|                                 pixel change (a copy: the floor)

Since #65 a check may also read how reliable the context's motion is, the signals of flow breaking
(``MOTION_FEATURES``; which ones a check reads is stored with it, ``FeatureCheckConfig.features``),
with v the OpenCV DIS velocity of L (``FlowDrafter.velocity``):

    f8  log mean |warp(L', v) - L| / mean |L - L'|       context change the flow fails to explain
    f9  log mean |v| / short side                        speed (flow breaks on fast motion)
    f10 log mean (1 - c)                                 the share of the extrapolated frame the flow
                                                         cannot vouch for (c: ``FlowDrafter.confidence``,
                                                         forward-backward agreement, 0 at disocclusions)

(A third, the draft's distance to SpyNet's extrapolation of (L', L), was tried and dropped: it made
the check self-confirming, flow drafts agree with another flow's extrapolation where true frames of
fast motion do not, and it rejected a quarter of the true frames of fast real windows.)

The MLP sees the values standardised (means and scales stored with its weights), so the
same check runs at any resolution; frames are read at a 224 px short side as the yardstick reads
them. Scores are in (0, 1); the threshold is the 5th percentile of the true frames' scores on the
tuning split (the typicality threshold's rule), stored with the weights.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from specvideo.video import pretrained
from specvideo.video.drafters import FlowDrafter
from specvideo.video.warp import backward_warp

FEATURES = ("move", "context_move", "new", "gone", "energy", "sharpness", "change_ratio", "change")
MOTION_FEATURES = ("flow_residual", "speed", "unsure")
ALL_FEATURES = FEATURES + MOTION_FEATURES
EPS = 1e-4
CONFIG = "feature_check.json"
WEIGHTS = "feature_check.safetensors"


def _laplacian_energy(frames: torch.Tensor) -> torch.Tensor:
    """(n, 3, H, W) -> (n,) mean squared Laplacian of the grey frames."""
    grey = frames.float().mean(dim=1, keepdim=True)
    kernel = torch.tensor([[0.0, 1, 0], [1, -4, 1], [0, 1, 0]])[None, None]
    return F.conv2d(grey, kernel).pow(2).mean(dim=(1, 2, 3))


def _cell_distances(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(n, h, w, c) x2 -> (n, hw, hw) cosine distances between every cell of a and every cell of b."""
    a = F.normalize(a.flatten(1, 2), dim=-1)
    b = F.normalize(b.flatten(1, 2), dim=-1)
    return 1 - a @ b.transpose(1, 2)


@torch.inference_mode()
def features_from_maps(
    maps: tuple[torch.Tensor, ...], frames: tuple[torch.Tensor, ...], names: tuple[str, ...] = FEATURES
) -> torch.Tensor:
    """The (n, len(names)) raw features (module docstring) from the maps (n, h, w, c) and frames
    (n, 3, H, W) of L', L and D, in that order."""
    m_before, m_last, m_draft = maps
    x_before, x_last, x_draft = (t.float().cpu() for t in frames)
    cross = _cell_distances(m_draft, m_last)  # (n, hw, hw)
    same_place = torch.diagonal(cross, dim1=1, dim2=2).mean(dim=1)  # (n,)
    context = 1 - F.cosine_similarity(m_last, m_before, dim=-1).flatten(1).mean(dim=1)  # (n,)
    new, gone = cross.min(dim=2).values.mean(dim=1), cross.min(dim=1).values.mean(dim=1)
    energy = m_draft.flatten(1).norm(dim=1) / m_last.flatten(1).norm(dim=1).clamp(min=EPS)
    sharp = _laplacian_energy(x_draft) / _laplacian_energy(x_last).clamp(min=EPS)
    change = (x_draft - x_last).abs().mean(dim=(1, 2, 3))
    context_change = (x_last - x_before).abs().mean(dim=(1, 2, 3))
    values = [same_place, context, new, gone, energy, sharp, (change + EPS) / (context_change + EPS), change]
    if any(name in MOTION_FEATURES for name in names):
        values += motion_values(x_before, x_last, context_change, "unsure" in names)
    columns = [ALL_FEATURES.index(name) for name in names]
    return torch.stack([torch.log(values[i].clamp(min=0) + EPS) for i in columns], dim=1)  # (n, len(names))


def motion_values(
    before: torch.Tensor, last: torch.Tensor, context_change: torch.Tensor, unsure: bool = True
) -> list[torch.Tensor]:
    """f8, f9 and f10 before their log (module docstring), each (n,), for (n, 3, H, W) L' and L
    (f10 zeros unless ``unsure``: it costs a second flow)."""
    flow = FlowDrafter()
    velocity = flow.velocity(before, last).float()  # (n, 2, H, W)
    residual = (backward_warp(before, velocity) - last).abs().mean(dim=(1, 2, 3))
    speed = velocity.norm(dim=1).mean(dim=(1, 2)) / min(last.shape[-2:])
    doubt = torch.zeros_like(speed)
    if unsure:
        confidence = flow.confidence(before, last, velocity, flow.splat_weight(velocity))  # (n, 1, H, W)
        doubt = (1 - confidence).mean(dim=(1, 2, 3))
    return [(residual + EPS) / (context_change + EPS), speed, doubt]


def pair_features(
    before: torch.Tensor, last: torch.Tensor, drafts: torch.Tensor, names: tuple[str, ...] = FEATURES
) -> torch.Tensor:
    """(n, 3, H, W) frames L', L and drafts D in [-1, 1] -> (n, len(names)) raw features (module docstring)."""
    if not before.shape == last.shape == drafts.shape:
        raise ValueError(f"frames must share one shape, got {before.shape}, {last.shape}, {drafts.shape}")
    n = len(drafts)
    frames = torch.cat([before, last, drafts])  # (3n, 3, H, W)
    # a round's drafts are the context of the drafts after them: each distinct frame is read once
    unique, index = _distinct(frames)
    maps = pretrained.feature_maps(unique)[index]  # (3n, h, w, c), at a 224 px short side
    return features_from_maps((maps[:n], maps[n : 2 * n], maps[2 * n :]), (before, last, drafts), names)


def _distinct(frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(m, ...) -> the distinct frames (u, ...) and, per frame, the index of its copy among them."""
    kept: list[torch.Tensor] = []
    index = []
    for frame in frames:
        at = next((i for i, k in enumerate(kept) if torch.equal(k, frame)), None)
        if at is None:
            kept.append(frame)
            at = len(kept) - 1
        index.append(at)
    return torch.stack(kept), torch.tensor(index)


@dataclass(frozen=True)
class FeatureCheckConfig:
    hidden: int = 32
    mean: tuple[float, ...] = (0.0,) * len(FEATURES)
    scale: tuple[float, ...] = (1.0,) * len(FEATURES)
    threshold: float = 0.5  # tau: the 5th percentile of true frames' scores (tuning split)
    features: tuple[str, ...] = FEATURES  # which of ALL_FEATURES it reads (a check saved before #65: FEATURES)

    def __post_init__(self) -> None:
        unknown = [f for f in self.features if f not in ALL_FEATURES]
        if unknown or not self.features:
            raise ValueError(f"unknown check features {unknown}; choose from {ALL_FEATURES}")
        if not len(self.mean) == len(self.scale) == len(self.features):
            raise ValueError(f"the check reads {len(self.features)} features but stores {len(self.mean)} means and {len(self.scale)} scales")


class FeatureCheck(nn.Module):
    """The MLP over standardised ``pair_features``: 8 -> hidden -> hidden -> 1 (a logit)."""

    def __init__(self, config: FeatureCheckConfig | None = None):
        super().__init__()
        self.config = config or FeatureCheckConfig()
        h = self.config.hidden
        self.mlp = nn.Sequential(
            nn.Linear(len(self.config.features), h), nn.SiLU(), nn.Linear(h, h), nn.SiLU(), nn.Linear(h, 1)
        )

    def logits(self, features: torch.Tensor) -> torch.Tensor:
        """(n, len(features)) raw features -> (n,) logits (true next frame: positive)."""
        mean = torch.tensor(self.config.mean, dtype=features.dtype)
        scale = torch.tensor(self.config.scale, dtype=features.dtype)
        return self.mlp((features - mean) / scale).squeeze(-1)

    @torch.inference_mode()
    def score(self, windows: torch.Tensor, drafts: torch.Tensor) -> torch.Tensor:
        """(n, P, 3, H, W) context windows (P >= 2) and (n, 3, H, W) drafts -> (n,) scores in (0, 1)."""
        if windows.ndim != 5 or windows.shape[1] < 2:
            raise ValueError(f"windows must be (n, P >= 2, 3, H, W), got {tuple(windows.shape)}")
        features = pair_features(windows[:, -2], windows[:, -1], drafts, self.config.features)
        return torch.sigmoid(self.logits(features).float())

    def save_pretrained(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / CONFIG).write_text(json.dumps(asdict(self.config), indent=1))
        save_file(
            {k: v.detach().half().contiguous() for k, v in self.state_dict().items()}, directory / WEIGHTS
        )

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> FeatureCheck:
        directory = Path(directory)
        if not (directory / CONFIG).is_file() or not (directory / WEIGHTS).is_file():
            raise FileNotFoundError(f"no feature check in {directory} (needs {CONFIG} and {WEIGHTS})")
        raw = json.loads((directory / CONFIG).read_text())
        config = FeatureCheckConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})
        check = cls(config)
        check.load_state_dict({k: v.float() for k, v in load_file(directory / WEIGHTS).items()})
        return check.eval()
