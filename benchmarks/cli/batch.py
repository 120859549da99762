"""``specvideo bench batch``: a batch job in this process against the same job on local Ray actors."""

from __future__ import annotations

import argparse
import shlex
import sys

from specvideo.cli.common import add_report


def add(kinds) -> None:
    from benchmarks.batch import BenchBatchConfig

    d = BenchBatchConfig()
    b = kinds.add_parser(
        "batch",
        help="batch throughput: local mode against a private local Ray cluster, side by side",
        description="16 sample-video clips and 64 prompts, local and on Ray actors, repeated; medians and spread.",
    )
    b.add_argument("--num-clips", type=int, default=d.num_clips)
    b.add_argument("--clip-frames", type=int, default=d.clip_frames, help="frames per input clip")
    b.add_argument("--num-frames", type=int, default=d.num_frames, help="frames generated per clip")
    b.add_argument("--num-prompts", type=int, default=d.num_prompts)
    b.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens)
    b.add_argument("--actors", type=int, default=d.actors, help="Ray actors (1 CPU each)")
    b.add_argument("--repeats", type=int, default=d.repeats)
    add_report(b, d.report, "'Measured on this machine'")
    b.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from benchmarks.batch import BenchBatchConfig, run_benchmark, to_markdown, write_report
    from specvideo.batch.runner import RAY_INSTALL

    try:
        import ray  # noqa: F401
    except ImportError:
        raise ValueError(RAY_INSTALL) from None
    config = BenchBatchConfig(
        num_clips=args.num_clips,
        clip_frames=args.clip_frames,
        num_frames=args.num_frames,
        num_prompts=args.num_prompts,
        max_new_tokens=args.max_new_tokens,
        actors=args.actors,
        repeats=args.repeats,
        report=args.report,
    )
    results = run_benchmark(config, progress=not args.json)
    argv = ["specvideo", "bench", "batch"] + [
        f"--{k.replace('_', '-')}={v}" for k, v in config.__dict__.items() if k != "report"
    ]
    print(to_markdown(results))
    if not args.no_report:
        print(f"\nreport written to {write_report(results, shlex.join(argv), args.report)}", file=sys.stderr)
    return 0
