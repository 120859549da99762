"""``specvideo bench video``: speculative video against the reference target and honest baselines."""

from __future__ import annotations

import argparse
import shlex

from benchmarks.report import print_results
from specvideo.cli.common import add_report, add_seed_and_device, floats, ints, names
from specvideo.video.drafters import DRAFTERS
from specvideo.video.inputs import VIDEO_SCHEDULES
from specvideo.video.metrics import METRICS


def add(kinds) -> None:
    from benchmarks.video import BENCH_VIDEO_DEFAULTS as d
    from benchmarks.video import SPLITS

    v = kinds.add_parser(
        "video",
        help="speculative video against target-only at several N, draft-only, refine-all and first-frame routing",
        description="Every method on the same clips and seeds in one process; a tau x s sweep per drafter. "
        "Choose settings with --split tuning, check them with --split validation (heldout in older reports), "
        "report them once with --split test.",
    )
    v.add_argument(
        "--model", metavar="DIR", default=d.model, help="pipeline directory (default: models/video)"
    )
    v.add_argument(
        "--split", default=d.split, choices=SPLITS + ("heldout",), help="which evaluation split the clips come from (heldout: validation's old name)"
    )
    v.add_argument("--num-synthetic", metavar="N", type=int, default=d.num_synthetic, help="synthetic clips")
    v.add_argument("--num-real", metavar="N", type=int, default=d.num_real, help="real clips (0: none)")
    v.add_argument(
        "--windows", choices=("consecutive", "moving"), default=d.windows,
        help="real windows: consecutive (round-robin over the clips) or moving (per clip, the windows of most motion)",
    )
    v.add_argument("--windows-per-clip", metavar="M", type=int, default=d.windows_per_clip, help="moving windows per clip")
    v.add_argument(
        "--frame-step", metavar="S", type=int, default=d.frame_step,
        help="read every S-th frame (2-4: fast windows, where flow breaks)",
    )
    v.add_argument(
        "--num-frames", metavar="N", type=int, default=d.num_frames, help="frames generated per clip"
    )
    v.add_argument(
        "--clips", metavar="PATH", nargs="+", default=d.clips, help="video files instead of the split"
    )
    v.add_argument(
        "--num-seeds", metavar="K", type=int, default=d.num_seeds, help="samples per clip and method"
    )
    v.add_argument("--synthetic-size", metavar="PX", type=int, default=d.synthetic_size)
    v.add_argument("--max-side", metavar="PX", type=int, default=d.max_side, help="real clips' longer side")
    lists = [
        (
            "--drafters",
            names,
            d.drafters,
            f"draft-only baselines, a comma-separated subset of {','.join(DRAFTERS)}",
        ),
        ("--sweep-drafters", names, d.sweep_drafters, "drafters of the tau x s sweep"),
        ("--thresholds", floats, (), "tau values to sweep (default: a sweep around the metric's default)"),
        ("--strengths", floats, d.strengths, "s values to sweep"),
        ("--target-steps", ints, d.target_steps, "N values of the target-only rows"),
        (
            "--sweep-draft-frames",
            ints,
            d.sweep_draft_frames,
            "further draft lengths k of the sweep and refine-all, beside -k",
        ),
        (
            "--sweep-refine-steps",
            ints,
            d.sweep_refine_steps,
            "further refinement step counts m of the sweep and refine-all, beside --refine-steps",
        ),
    ]
    for flag, parse, default, help in lists:
        v.add_argument(flag, metavar="LIST", type=parse, default=default, help=help)
    v.add_argument("--metric", default=d.metric, choices=METRICS, help="similarity scored against tau")
    v.add_argument(
        "--check-center", type=float, default=d.check_center, help="the typicality check's fold c (inf: one-sided)"
    )
    v.add_argument(
        "--check-levels", metavar="LIST", type=ints, default=d.check_levels, help="the typicality check's noise levels t"
    )
    v.add_argument(
        "--band-center", type=float, default=d.band_center, help="the injected table's two-sided band, folded at this c"
    )
    v.add_argument("--feature-check", metavar="DIR", help="the learned check (default: the model's check/)")
    v.add_argument(
        "--fallback", choices=("none", "still"), default=d.fallback,
        help="the sweep's fallback: still repeats the last frame where the learned check rejects the correction too",
    )
    v.add_argument("--num-draft-frames", "-k", metavar="K", type=int, default=d.num_draft_frames)
    v.add_argument("--refine-steps", metavar="M", type=int, default=d.num_refine_steps)
    v.add_argument("--schedule", default=d.schedule, choices=VIDEO_SCHEDULES)
    v.add_argument(
        "--steps",
        metavar="N",
        type=int,
        default=d.num_inference_steps,
        help="full-sampler steps N of the corrections",
    )
    v.add_argument(
        "--autocast", choices=("off", "bf16", "auto"), default=d.autocast,
        help="run the verifier's UNet under bf16 autocast for every method",
    )
    add_seed_and_device(v, d.seed, d.device, seed_help="clip i uses seed + i for every method")
    add_report(v, d.report, "Video", off="--no-write")
    v.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from benchmarks.video import (
        BenchVideoConfig,
        check_targets,
        format_targets,
        run_benchmark,
        to_markdown,
        write_report,
    )

    config = BenchVideoConfig(
        model=args.model,
        split=args.split,
        num_synthetic=args.num_synthetic,
        num_real=args.num_real,
        windows=args.windows,
        windows_per_clip=args.windows_per_clip,
        frame_step=args.frame_step,
        num_frames=args.num_frames,
        num_seeds=args.num_seeds,
        synthetic_size=args.synthetic_size,
        max_side=args.max_side,
        clips=tuple(args.clips),
        drafters=args.drafters,
        sweep_drafters=args.sweep_drafters,
        thresholds=args.thresholds,
        strengths=args.strengths,
        target_steps=args.target_steps,
        metric=args.metric,
        check_center=args.check_center,
        check_levels=args.check_levels,
        band_center=args.band_center,
        feature_check=args.feature_check,
        fallback=args.fallback,
        num_draft_frames=args.num_draft_frames,
        num_refine_steps=args.refine_steps,
        schedule=args.schedule,
        num_inference_steps=args.steps,
        sweep_draft_frames=args.sweep_draft_frames,
        sweep_refine_steps=args.sweep_refine_steps,
        seed=args.seed,
        device=args.device,
        autocast=args.autocast,
        report=args.report,
    )
    results = run_benchmark(config, progress=True)
    command = shlex.join(argv_of(config))
    written = None if args.no_report else write_report(results, command, args.report)
    payload = results.to_dict(check_targets(results)) if args.json else {}
    return print_results(payload, to_markdown(results), format_targets(results), command, written, args.json)


def argv_of(c) -> list[str]:
    """Every setting spelled out, so the command reproduces the run whatever the defaults become."""
    argv = ["specvideo", "bench", "video"] + (["--model", c.model] if c.model else [])
    if c.clips:
        argv += ["--clips", *c.clips]
    else:
        argv += ["--split", c.split, "--num-synthetic", str(c.num_synthetic), "--num-real", str(c.num_real)]
    if c.windows != "consecutive":  # the split's real clips and --clips files alike
        argv += ["--windows", c.windows, "--windows-per-clip", str(c.windows_per_clip)]
    argv += ["--frame-step", str(c.frame_step)] if c.frame_step != 1 else []
    argv += ["--num-frames", str(c.num_frames), "--num-seeds", str(c.num_seeds)]
    argv += ["--synthetic-size", str(c.synthetic_size), "--max-side", str(c.max_side)]
    argv += ["--drafters", ",".join(c.drafters)]
    argv += ["--sweep-drafters", ",".join(c.sweep_drafters)]
    argv += ["--thresholds", ",".join(f"{t:g}" for t in c.thresholds)]
    argv += ["--strengths", ",".join(f"{s:g}" for s in c.strengths), "--metric", c.metric]
    argv += ["--check-center", f"{c.check_center:g}", "--check-levels", ",".join(map(str, c.check_levels))]
    argv += ["--band-center", f"{c.band_center:g}"] if c.band_center is not None else []
    argv += ["--feature-check", c.feature_check] if c.feature_check else []
    argv += ["--fallback", c.fallback] if c.fallback != "none" else []
    argv += ["--target-steps", ",".join(map(str, c.target_steps))]
    argv += ["--num-draft-frames", str(c.num_draft_frames), "--refine-steps", str(c.num_refine_steps)]
    if c.sweep_draft_frames:
        argv += ["--sweep-draft-frames", ",".join(map(str, c.sweep_draft_frames))]
    if c.sweep_refine_steps:
        argv += ["--sweep-refine-steps", ",".join(map(str, c.sweep_refine_steps))]
    argv += ["--schedule", c.schedule] + (
        ["--steps", str(c.num_inference_steps)] if c.num_inference_steps else []
    )
    return argv + ["--seed", str(c.seed), "--device", c.device, "--autocast", c.autocast]
