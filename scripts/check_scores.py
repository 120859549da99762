"""Candidate check scores, measured against the target in each draft's place (a diagnostic).

Runs the default speculative setting (flow drafts, k 4, s 0.8, tau from --threshold) on one split's
clips, rebuilds every scored draft's window (``benchmarks.video.inplace``), makes the
reference target's frame (N = 1) in its place, and prints for each candidate score the ROC-AUC of
"score < tau" for drafts below that frame and the Spearman of the score with the draft's SSIM and
with its margin over that frame. The candidates: SSIM / PSNR of the draft against its one-step
refinement at s in {0.2, 0.4, 0.6, 0.8, 1}, against the target's frame, two refinements'
agreement, the mean of two, SSIM to the flow hint, and the draft's position in its round.
Clip i of the run uses seed i, as in `specvideo bench video`, so the pipeline score's row equals
the bench's default row. Choose on --split tuning only.

Usage: python scripts/check_scores.py --split tuning
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from benchmarks.measure import roc_auc, spearman
from benchmarks.video import BenchVideoConfig, load_workloads
from benchmarks.video.inplace import draft_windows, target_in_place
from specvideo.paths import shipped
from specvideo.video.drafters import make_drafter
from specvideo.video.metrics import psnr, ssim
from specvideo.video.pipeline import SpeculativeVideoPipeline

STRENGTHS = (0.2, 0.4, 0.6, 0.8, 1.0)


def candidates(verifier, windows, drafts, target, generator) -> dict[str, list[float]]:
    """Every candidate score of (n, 3, H, W) ``drafts`` checked after (n, P, 3, H, W) ``windows``."""
    cond = verifier.condition(windows)
    out = {
        "SSIM(draft, target)": ssim(drafts, target, data_range=2.0).tolist(),
        "PSNR(draft, target)": psnr(drafts, target, data_range=2.0).tolist(),
        "SSIM(draft, hint)": ssim(drafts, cond[:, -3:], data_range=2.0).tolist(),
    }
    for s in STRENGTHS:
        refined = verifier.refine(cond, drafts, s, 1, torch.randn(drafts.shape, generator=generator))
        out[f"SSIM(draft, refined s {s:g})"] = ssim(drafts, refined, data_range=2.0).tolist()
        out[f"PSNR(draft, refined s {s:g})"] = psnr(drafts, refined, data_range=2.0).tolist()
        if s in (0.6, 0.8):
            again = verifier.refine(cond, drafts, s, 1, torch.randn(drafts.shape, generator=generator))
            out[f"agreement of two at s {s:g}"] = ssim(refined, again, data_range=2.0).tolist()
            both = (ssim(drafts, refined, data_range=2.0) + ssim(drafts, again, data_range=2.0)) / 2
            out[f"mean SSIM of two at s {s:g}"] = both.tolist()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="tuning", choices=("tuning", "validation"))
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--num-synthetic", type=int, default=8)
    parser.add_argument("--num-real", type=int, default=4)
    args = parser.parse_args()
    pipe = SpeculativeVideoPipeline.from_pretrained(shipped("video"))
    pipe.drafter = make_drafter("flow")
    verifier = pipe.verifier
    P = verifier.num_context_frames
    config = BenchVideoConfig(split=args.split, num_synthetic=args.num_synthetic, num_real=args.num_real)
    seed = 0  # clip i of the run (over all workloads) uses seed i, as in the bench
    for workload, clips in load_workloads(config, P).items():
        truth_ssim, place_ssim, scores = [], [], {}
        for clip in clips:
            i, seed = seed, seed + 1
            out = pipe(
                clip.context,
                num_frames=config.num_frames,
                threshold=args.threshold,
                strength=0.8,
                generator=torch.Generator().manual_seed(i),
                output_type="pt",
                progress=False,
            )
            scored = out.stats.scored_drafts
            windows = draft_windows(out.stats, clip.context, out.frames, P)  # (n, P, 3, H, W)
            index = [d.index for d in scored]
            drafts = torch.stack([d.draft.float() for d in scored])  # (n, 3, H, W)
            target = target_in_place(verifier, windows, index, 1, seed=i)  # (n, 3, H, W)
            truth = clip.truth[torch.tensor(index)]
            truth_ssim += ssim(drafts, truth, data_range=2.0).tolist()
            place_ssim += ssim(target, truth, data_range=2.0).tolist()
            found = {
                "pipeline score (s 0.8)": [d.score for d in scored],
                "position (first = 0)": [-d.position for d in scored],
            }
            found |= candidates(verifier, windows, drafts, target, torch.Generator().manual_seed(1000 + i))
            for name, values in found.items():
                scores.setdefault(name, []).extend(values)
        draft, margin = np.array(truth_ssim), np.array(truth_ssim) - np.array(place_ssim)
        worse = (margin < 0).tolist()
        print(f"{workload}: {len(draft)} drafts, {np.mean(worse):.0%} below the target in their place")
        for name, values in scores.items():
            auc = roc_auc(worse, [-v for v in values])
            rho, rho_margin = spearman(values, draft.tolist()), spearman(values, margin.tolist())
            print(
                f"  {name:30s} AUC {auc or float('nan'):.3f}  Spearman: SSIM {rho or float('nan'):.3f}, "
                f"margin {rho_margin or float('nan'):.3f}"
            )


if __name__ == "__main__":
    with torch.inference_mode():
        main()
