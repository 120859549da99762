"""The two-sided typicality band, calibrated on the true frames (docs/history/benchmarks.md "Video"; #47).

The pipeline's typicality score r of a draft is the target's denoising error on the clip's last
real frame over its error on the draft (``rounds.typicality``): r near the true frames' own scores
is typical, r far above means the model finds the draft *easier* than real footage (a copy, a
blur, the flow hint it was trained on), r far below harder (a wrong place, another clip). For every
round of k true frames of a split (``benchmarks.video.local.true_rounds``) this scores, exactly as
the pipeline scores a round, the true frames and the flow drafter's round and the injected bad
rounds (``benchmarks.video.injected``), at each noise level of ``--levels`` alone, then sets the
band by the rule fixed before looking at any draft: [lo, hi] = the (q, 1 - q) quantiles of the true
frames' scores (q = ``--tail``, 0.025: 95 % of true frames accepted), the widest over workloads
(synthetic, and the real clips cut into consecutive and into moving windows). Printed per level: the
band, and per kind the share of rounds whose first draft falls outside it (rejected; for the truth,
its false rejections); then the level chosen by the second rule fixed in advance: the most injected
bad drafts (frozen, shifted, blurred, other) rejected, averaged over kinds and workloads, with its
threshold tau = lo and fold c = sqrt(lo * hi) (``VideoConfig.check_center``: the check then keeps
r in [lo, hi]). ``--statistic hint-gain`` bands e_free(d) / e_hint(d) instead (how much the flow
hint helps the target denoise the draft; a UNet trained with --hint-dropout). Choose on --split
tuning only.

    PYTHONPATH=. python scripts/check_band.py --split tuning --num-synthetic 8 --num-real 8 --levels 100,300,500
    PYTHONPATH=. python scripts/check_band.py --model runs/pipe-v --split tuning ...
"""

from __future__ import annotations

import argparse
import math

import torch

from benchmarks.video.config import BenchVideoConfig
from benchmarks.video.injected import KINDS, TRUTH, bad_round
from benchmarks.video.local import _noise, score_round, true_rounds
from benchmarks.video.workloads import load_workloads
from specvideo.video.drafters import FlowDrafter
from specvideo.video.pipeline import SpeculativeVideoPipeline

NAMES = (TRUTH, "flow", *KINDS)


def hint_gain(verifier, window, drafts, seed: int, level: int) -> list[float]:
    """The other statistic probed: e_free(d) / e_hint(d), how much the flow hint helps the target
    denoise each draft (same noise, same draft; a UNet trained with --hint-dropout has both
    branches), for the k drafts of a round conditioned as the pipeline conditions them."""
    P, k = window.shape[0], drafts.shape[0]
    windows = torch.stack([torch.cat([window, drafts[:i]])[-P:] for i in range(k)])  # (k, P, 3, H, W)
    cond, noise = verifier.condition(windows), torch.stack([_noise(seed, drafts.shape[1:], 2 * i + 1) for i in range(k)])
    errors, own = {}, verifier.check_hint
    try:
        for branch in (True, False):
            verifier.check_hint = branch
            errors[branch] = verifier.denoising_error(cond, drafts, (level,), noise)[:, 0]  # (k,)
    finally:
        verifier.check_hint = own
    return (errors[False] / errors[True].clamp(min=1e-12)).tolist()


def round_scores(
    verifier, workloads, k: int, levels: tuple[int, ...], seed: int = 0, statistic: str = "ratio"
) -> dict:
    """{workload: {level: {kind: [[r of each draft] for each round]}}}: every round's scores at each
    level alone (the pipeline's reference, noise and conditioning: ``score_round``; or the hint gain)."""
    flow, out = FlowDrafter(), {}
    for workload, clips in workloads.items():
        k_w = min([k, *(len(c.truth) for c in clips)])
        rounds = true_rounds(verifier, clips, k_w, seed)
        owner = [ci for ci, c in enumerate(clips) for _ in range(0, len(c.truth) - k_w + 1, k_w)]
        pool = clips + [c for w, cs in workloads.items() if w != workload for c in cs]
        table = {t: {name: [] for name in NAMES} for t in levels}
        for (r_seed, window, truth, before), ci in zip(rounds, owner):
            drafted = flow.propose(window[None], k_w)[0].float()  # (k, 3, H, W)
            other = pool[(ci + 1) % len(pool)].truth[:k_w]
            for name in NAMES:
                drafts = drafted if name == "flow" else bad_round(name, window, drafted, other, truth)
                for t in levels:
                    if statistic == "hint-gain":
                        r = hint_gain(verifier, window, drafts, r_seed, t)
                    else:
                        r = score_round(verifier, window, drafts, 0.0, "typicality", r_seed, 1, before, (t,), math.inf)
                    table[t][name].append(r)
        out[workload] = table
    return out


def band(scores: dict, level: int, tail: float) -> tuple[float, float]:
    """[lo, hi]: the widest over workloads of the true frames' (tail, 1 - tail) score quantiles."""
    lows, highs = [], []
    for table in scores.values():
        truth = torch.tensor([r for rnd in table[level][TRUTH] for r in rnd])
        lows.append(float(truth.quantile(tail)))
        highs.append(float(truth.quantile(1 - tail)))
    return min(lows), max(highs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="pipeline directory (default: models/video)")
    parser.add_argument("--split", default="tuning", choices=("tuning", "validation"))
    parser.add_argument("--levels", default="100,300,500")
    parser.add_argument("--tail", type=float, default=0.025, help="share of true frames outside each bound")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--num-synthetic", type=int, default=8)
    parser.add_argument("--num-real", type=int, default=8)
    parser.add_argument("--num-frames", type=int, default=8)
    parser.add_argument("--max-side", type=int, default=128)
    parser.add_argument("--windows", default="consecutive,moving", help="real windows: consecutive, moving or both")
    parser.add_argument(
        "--statistic", default="ratio", choices=("ratio", "hint-gain"),
        help="ratio: the check's r (one-sided, before the fold); hint-gain: e_free / e_hint (a UNet with both branches)",
    )
    args = parser.parse_args()
    levels = tuple(int(t) for t in args.levels.split(","))
    verifier = SpeculativeVideoPipeline.from_pretrained(args.model).verifier
    workloads = {}
    for i, windows in enumerate(args.windows.split(",")):
        config = BenchVideoConfig(
            split=args.split, num_synthetic=args.num_synthetic if i == 0 else 0, num_real=args.num_real,
            max_side=args.max_side, num_frames=args.num_frames, windows=windows,
        )
        loaded = load_workloads(config, verifier.num_context_frames + 1)  # + 1: the reference frame
        workloads.update({w if w == "synthetic" else f"real {windows}": clips for w, clips in loaded.items()})
    scores = round_scores(verifier, workloads, args.k, levels, statistic=args.statistic)
    print("| level t | band [lo, hi] | workload | rounds | " + " | ".join(f"{n} out (median r)" for n in NAMES) + " |")
    print("|---:|---|---|---:|" + "---:|" * len(NAMES))
    caught = {}
    for t in levels:
        lo, hi = band(scores, t, args.tail)
        caught[t] = []
        for workload, table in scores.items():
            cells = []
            for name in NAMES:
                first = torch.tensor([rnd[0] for rnd in table[t][name]])
                out = float(((first < lo) | (first > hi)).float().mean())
                cells.append(f"{out:.2f} ({first.median():.2f})")
                if name in KINDS:
                    caught[t].append(out)
            rounds = len(table[t][TRUTH])
            print(f"| {t} | [{lo:.3f}, {hi:.3f}] | {workload} | {rounds} | {' | '.join(cells)} |", flush=True)
    best = max(levels, key=lambda t: sum(caught[t]) / len(caught[t]))
    lo, hi = band(scores, best, args.tail)
    print(f"\nchosen: t = {best} (bad drafts rejected {sum(caught[best]) / len(caught[best]):.3f} on average), "
          f"band [{lo:.4g}, {hi:.4g}]: --threshold {lo:.3g} --check-center {math.sqrt(lo * hi):.4g} --check-levels {best}")


if __name__ == "__main__":
    main()
