"""How well the video check ranks drafts for the same context (docs/history/benchmarks.md "Video"; #47).

For every window of a bench split (``benchmarks.video.workloads``: its context and the true next
frame), the drafts of one context are the true frame, the copied last frame (frozen), the flow
extrapolation, it shifted and blurred, and another window's true frame (``benchmarks.video.injected``).
Each is noised with the same noise to each level t of ``--levels`` and scored by the pipeline's
check statistic, the target's denoising error (``DiffusionVerifier.denoising_error``: on the
hint-free branch when the pipeline's ``check_hint`` is off). Printed per level: the share of contexts
whose true frame has a lower error than each wrong draft (1.0: the check tells them apart every
time; 0.5: a coin), and the median of e(truth) / e(draft) (the typicality score with the true frame
as its reference: 1 for a draft as typical as the truth, above 1 for one the model finds easier, a
copy or a blur, below 1 for one it finds harder). The level is chosen on the tuning split only.

    PYTHONPATH=. python scripts/check_probe.py --split tuning --num-synthetic 8 --num-real 8 --levels 100,300,500,700
    PYTHONPATH=. python scripts/check_probe.py --model DIR ...   # another pipeline (its model_index.json's check_hint)
"""

import argparse

import torch

from benchmarks.video.config import BenchVideoConfig
from benchmarks.video.injected import KINDS, bad_round
from benchmarks.video.workloads import load_workloads
from specvideo.video.drafters import FlowDrafter
from specvideo.video.pipeline import SpeculativeVideoPipeline, pad_to_multiple


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="pipeline directory (default: models/video)")
    parser.add_argument("--split", default="tuning", choices=("tuning", "validation"))
    parser.add_argument("--levels", default="100,200,300,500,700")
    parser.add_argument("--num-synthetic", type=int, default=3)
    parser.add_argument("--num-real", type=int, default=3)
    parser.add_argument("--max-side", type=int, default=128)
    parser.add_argument("--windows", default="consecutive", choices=("consecutive", "moving"))
    args = parser.parse_args()
    levels = tuple(int(t) for t in args.levels.split(","))
    pipe = SpeculativeVideoPipeline.from_pretrained(args.model)
    verifier = pipe.verifier
    P = verifier.num_context_frames
    config = BenchVideoConfig(
        split=args.split, num_synthetic=args.num_synthetic, num_real=args.num_real, max_side=args.max_side,
        num_frames=1, windows=args.windows,
    )
    print(f"| workload | level t | contexts | {' | '.join(f'truth below {k} (median ratio)' for k in ('flow', *KINDS))} |")
    print("|---|---:|---:|" + "---:|" * (1 + len(KINDS)))
    for workload, clips in load_workloads(config, P).items():
        wins = {t: {k: [] for k in ("flow", *KINDS)} for t in levels}
        ratios = {t: {k: [] for k in ("flow", *KINDS)} for t in levels}
        for i, clip in enumerate(clips):
            window, truth = clip.context, clip.truth[:1]  # (P, 3, H, W), (1, 3, H, W)
            other = clips[(i + 1) % len(clips)].truth[:1]
            flow = FlowDrafter().propose(window[None], 1)[0].float()  # (1, 3, H, W)
            drafts = {"truth": truth, "flow": flow, **{k: bad_round(k, window, flow, other, truth) for k in KINDS}}
            x = pad_to_multiple(torch.cat(list(drafts.values())), verifier.size_multiple)  # (D, 3, H', W')
            windows = pad_to_multiple(window, verifier.size_multiple)  # (P, 3, H', W')
            cond = verifier.condition(windows[None].expand(len(drafts), -1, -1, -1, -1))  # (D, C, H', W')
            noise = torch.randn(x[:1].shape, generator=torch.Generator().manual_seed(i)).expand_as(x)
            error = verifier.denoising_error(cond, x, levels, noise)  # (D, L)
            for j, t in enumerate(levels):
                for d, name in enumerate(drafts):
                    if name != "truth":
                        wins[t][name].append(float(error[0, j] < error[d, j]))
                        ratios[t][name].append(float(error[0, j] / error[d, j].clamp(min=1e-12)))
        for t in levels:
            shares = " | ".join(
                f"{sum(w) / len(w):.2f} ({torch.tensor(r).median():.2f})" for w, r in zip(wins[t].values(), ratios[t].values())
            )
            print(f"| {workload} | {t} | {len(clips)} | {shares} |", flush=True)


if __name__ == "__main__":
    main()
