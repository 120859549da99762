"""Known-bad drafts injected into the check: does it say no?

Each clip is cut into rounds of k frames that start from true frames (``local.true_rounds``); in
place of the drafter's round the check scores a known-bad one, exactly as the pipeline scores a
round (draft i conditioned on the true context plus the bad drafts before it):

    frozen    the last true frame repeated: the video stops
    shifted   the flow drafter's round moved by 1/16 of the frame (wrapped around)
    blurred   the flow drafter's round under a Gaussian blur of sigma = max(1, W / 64) pixels
    other     another clip's true frames at the same positions, resized to this clip's frames
    flow-worst  the flow drafter's own round, in the rounds whose first draft is in the worst
              quarter by pretrained-feature distance to the true frame (``video.pretrained``):
              the flow drafts that break, which a check has to catch too

Beside them the true frames themselves (``truth``): how often the check rejects real footage, and the
5th percentile of their scores (the typicality threshold's rule: accept 95 % of true frames, chosen
on the tuning split).

A bad round is rejected when its first draft scores below tau (the pipeline then corrects that frame
and drops the round); ``rejected_any`` counts the rounds with any draft below tau. The bad drafts'
SSIM to the truth stands beside each rate: a frozen round of a still scene is not wrong. ``auc``:
the ROC AUC of the check's score telling the true frames from this kind's, on the first draft of
each round (the one whose verdict decides the round; later drafts sit on bad drafts before them, a
state the pipeline never reaches), at any threshold: 1 separates them, 0.5 is chance.
``auc_compare``: the same for the comparing check (``local.compare_round``: each draft against
standing still under the same noise draws), measured beside the pipeline's check;
``auc_compare_hint``: against standing still and the flow drafter's frame both (the smaller ratio);
``auc_band``: the pipeline's score folded at ``band_center`` (the two-sided band, ``rounds.typicality``);
``auc_learned``: the learned check on pretrained features (``video.feature_check``), when one is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from einops import rearrange

from benchmarks.measure import roc_auc
from benchmarks.video.local import compare_ratios, score_round, true_rounds
from benchmarks.video.workloads import BenchClip
from specvideo.video import pretrained
from specvideo.video.config import VIDEO_DEFAULTS as D
from specvideo.video.drafters import FlowDrafter
from specvideo.video.feature_check import FeatureCheck
from specvideo.video.metrics import ssim
from specvideo.video.verifier import DiffusionVerifier

KINDS = ("frozen", "shifted", "blurred", "other")
FLOW_WORST = "flow-worst"  # not injected: the drafter's own worst drafts (no rejection target)
TRUTH = "truth"  # the true frames, scored as a round: the check's false rejections of real footage


@dataclass
class InjectedCheck:
    """One kind of bad draft on one workload, over its true-context rounds."""

    workload: str
    kind: str
    rounds: int
    rejected_first: float  # share of rounds whose first bad draft scored below tau
    rejected_any: float  # share of rounds with any bad draft below tau
    ssim_to_truth: float  # mean SSIM of the bad drafts to the true frames
    score: float  # median score of the first bad drafts
    q05: float  # 5th percentile of the scores of every draft of the rounds
    auc: float | None = None  # ROC AUC of the score, true frames against this kind (None: the truth)
    auc_compare: float | None = None  # the same for the comparing check (local.compare_round)
    auc_compare_hint: float | None = None  # comparing with standing still and the flow frame both
    auc_band: float | None = None  # the two-sided band: the score folded at band_center
    auc_learned: float | None = None  # the learned check on pretrained features


def bad_round(
    kind: str, window: torch.Tensor, flow: torch.Tensor, other: torch.Tensor, truth: torch.Tensor
) -> torch.Tensor:
    """(k, 3, H, W) bad drafts of ``kind`` after the true (P, 3, H, W) window; ``flow``: the flow
    drafter's round; ``other``: another clip's frames (k, 3, h, w); ``truth``: the true round."""
    k, _, H, W = flow.shape
    if kind == TRUTH:
        return truth
    if kind == "frozen":
        return window[-1:].expand(k, -1, -1, -1).clone()
    if kind == "shifted":
        return torch.roll(flow, shifts=(max(1, H // 16), max(1, W // 16)), dims=(-2, -1))
    if kind == "blurred":
        frames = rearrange(flow.float().cpu().numpy(), "k c h w -> k h w c")
        blurred = np.stack([cv2.GaussianBlur(f, (0, 0), max(1.0, W / 64)) for f in frames])
        return torch.from_numpy(rearrange(blurred, "k h w c -> k c h w")).to(flow)
    if kind == "other":
        return F.interpolate(other.float(), size=(H, W), mode="area")
    if kind == FLOW_WORST:
        return flow
    raise ValueError(f"unknown bad draft {kind!r}; choose one of {KINDS}")


def injected_checks(
    verifier: DiffusionVerifier,
    workloads: dict[str, list[BenchClip]],
    metric: str,
    threshold: float,
    k: int,
    strength: float,
    num_refine_steps: int,
    seed: int = 0,
    center: float = D.check_center,
    levels: tuple[int, ...] = D.check_levels,
    band_center: float | None = None,
    feature_check: FeatureCheck | None = None,
) -> list[InjectedCheck]:
    """Every (workload, kind of bad draft, and the truth): the check's rejections at ``threshold``,
    and each candidate check's AUC (module docstring)."""
    flow, checks = FlowDrafter(), []
    for workload, clips in workloads.items():
        k_w = min([k, *(len(c.truth) for c in clips)])
        rounds = true_rounds(verifier, clips, k_w, seed)
        owner = [ci for ci, c in enumerate(clips) for _ in range(0, len(c.truth) - k_w + 1, k_w)]
        # another clip for each: the next one of this workload, or of the run when it has only one
        pool = clips + [c for w, cs in workloads.items() if w != workload for c in cs]
        truth_alt: dict[str, list[float]] = {}
        for kind in (TRUTH, *KINDS, FLOW_WORST):
            first, any_, similar, scores, every, far = [], [], [], [], [], []
            alt: dict[str, list[float]] = {"compare": [], "compare_hint": [], "learned": []}
            for (r_seed, window, truth, before), ci in zip(rounds, owner):
                other = pool[(ci + 1) % len(pool)].truth[:k_w]
                if kind == "other" and len(pool) == 1:
                    continue  # no other clip in the run
                flow_round = flow.propose(window[None], k_w)[0].float()
                drafts = bad_round(kind, window, flow_round, other, truth)
                s = score_round(
                    verifier, window, drafts, strength, metric, r_seed, num_refine_steps, before, levels, center
                )
                first.append(s[0] < threshold)
                any_.append(min(s) < threshold)
                scores.append(s[0])
                every.append(s)
                ratios = compare_ratios(verifier, window, drafts[:1], r_seed, levels, flow_round[:1])  # (2, 1)
                alt["compare"].append(float(ratios[0, 0]))  # against standing still
                alt["compare_hint"].append(float(ratios[:, 0].min()))  # against it and the flow frame
                if feature_check is not None:
                    alt["learned"].append(float(feature_check.score(window[None], drafts[:1])[0]))
                similar.append(float(ssim(drafts, truth, data_range=2.0).mean()))
                if kind == FLOW_WORST:
                    far.append(pretrained.fidelity(pretrained.feature_maps(drafts[:1]), pretrained.feature_maps(truth[:1])))
            if far:  # keep the worst quarter of the flow rounds
                cut = float(np.quantile(far, 0.75))
                keep = [d >= cut for d in far]
                first, any_, similar, scores, every = (
                    [v for v, kept in zip(x, keep) if kept] for x in (first, any_, similar, scores, every)
                )
                alt = {name: [v for v, kept in zip(x, keep) if kept] for name, x in alt.items()}
            alt["typicality"] = scores
            if band_center is not None and math.isinf(center):  # the scores are the unfolded ratios
                alt["band"] = [min(r, band_center**2 / r) for r in scores]
            if kind == TRUTH:
                truth_alt = alt
            if first:
                aucs = {} if kind == TRUTH else _aucs(truth_alt, alt)
                checks.append(
                    InjectedCheck(
                        workload,
                        kind,
                        len(first),
                        sum(first) / len(first),
                        sum(any_) / len(any_),
                        sum(similar) / len(similar),
                        float(torch.tensor(scores).median()),
                        float(
                            torch.tensor([v for drafts_scores in every for v in drafts_scores]).quantile(0.05)
                        ),
                        aucs.get("typicality"),
                        aucs.get("compare"),
                        aucs.get("compare_hint"),
                        aucs.get("band"),
                        aucs.get("learned"),
                    )
                )
    return checks


def _aucs(truth: dict[str, list[float]], bad: dict[str, list[float]]) -> dict[str, float | None]:
    """Each check's ROC AUC, the true frames' scores (positives) against the bad drafts'."""
    return {
        name: roc_auc([True] * len(truth[name]) + [False] * len(bad[name]), truth[name] + bad[name])
        for name in bad
        if bad[name] and truth.get(name)
    }


def injected_table(checks: list[InjectedCheck], workload: str) -> str:
    """Markdown table of one workload's injected bad drafts."""
    lines = [
        "| bad draft | rounds | rejected at the first draft | rejected anywhere in the round | median score | 5th percentile | SSIM to the truth "
        "| AUC against the truth | AUC, two-sided band | AUC, comparing with standing still | AUC, comparing with still and flow | AUC, learned on pretrained features |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in checks:
        if c.workload == workload:
            lines.append(
                f"| {c.kind} | {c.rounds} | {c.rejected_first:.2f} | {c.rejected_any:.2f} | {c.score:.3g} | {c.q05:.3g} | {c.ssim_to_truth:.3f} | "
                + " | ".join(
                    "-" if a is None else f"{a:.2f}"
                    for a in (c.auc, c.auc_band, c.auc_compare, c.auc_compare_hint, c.auc_learned)
                )
                + " |"
            )
    return "\n".join(lines)
