"""``specvideo bench checks``: the checks against known-bad drafts and the flow drafts that break,
on normal and fast windows (#65 item 4): the pipeline's typicality check (the target's denoising
error) beside a learned check on pretrained features, each as ROC AUC of true frames against each
kind of bad draft (``benchmarks.video.injected``), rounds drafted from the true context."""

from __future__ import annotations

import argparse
import shlex

from specvideo.cli.common import add_report, ints

SECTION = "## Video: the checks against bad and breaking drafts"


def add(kinds) -> None:
    from benchmarks.video.config import SPLITS

    b = kinds.add_parser("checks", help="typicality and the learned check: AUC against bad and breaking drafts, normal and fast windows")
    b.add_argument("--model", metavar="DIR", help="pipeline directory (default: models/video)")
    b.add_argument("--feature-check", metavar="DIR", help="the learned check to compare (default: the model's check/)")
    b.add_argument("--split", default="validation", choices=SPLITS)
    b.add_argument("--frame-steps", metavar="LIST", type=ints, default=(1, 3), help="1: normal footage; 2-4: fast")
    b.add_argument("--num-synthetic", metavar="N", type=int, default=6)
    b.add_argument("--num-real", metavar="N", type=int, default=15)
    b.add_argument("--num-frames", metavar="N", type=int, default=8)
    b.add_argument("--windows-per-clip", metavar="N", type=int, default=3)
    b.add_argument("--max-side", metavar="PX", type=int, default=320)
    b.add_argument("--synthetic-size", metavar="PX", type=int, default=128)
    b.add_argument("-k", "--num-draft-frames", metavar="K", type=int, default=4)
    add_report(b, "docs/history/benchmarks.md", "checks")
    b.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from benchmarks.report import write_section
    from benchmarks.video.config import BenchVideoConfig
    from benchmarks.video.injected import injected_checks, injected_table
    from benchmarks.video.workloads import load_workloads
    from specvideo.video.config import VIDEO_DEFAULTS as D
    from specvideo.video.config import default_threshold
    from specvideo.video.feature_check import FeatureCheck
    from specvideo.video.pipeline import SpeculativeVideoPipeline

    pipe = SpeculativeVideoPipeline.from_pretrained(args.model)
    check = FeatureCheck.from_pretrained(args.feature_check) if args.feature_check else pipe.feature_check
    P = pipe.verifier.num_context_frames + 1  # the typicality check's reference context needs one more
    tables = []
    for step in args.frame_steps:
        config = BenchVideoConfig(
            split=args.split, num_synthetic=args.num_synthetic, num_real=args.num_real, num_frames=args.num_frames,
            synthetic_size=args.synthetic_size, max_side=args.max_side, windows="moving",
            windows_per_clip=args.windows_per_clip, frame_step=step,
        )
        workloads = load_workloads(config, P)
        checks = injected_checks(
            pipe.verifier, workloads, D.metric, default_threshold(D.metric), args.num_draft_frames, D.strength,
            D.num_refine_steps, feature_check=check,
        )
        for workload in workloads:
            name = workload if step == 1 else f"{workload}, frame step {step}"
            tables += [f"**{name}** ({len(workloads[workload])} windows)", "", injected_table(checks, workload), ""]
    command = shlex.join(argv_of(args))
    print("\n".join(tables))
    if not args.no_report:
        write_section(args.report, f"{SECTION} ({args.split})", command, tables)
    return 0


def argv_of(a: argparse.Namespace) -> list[str]:
    argv = ["specvideo", "bench", "checks"] + (["--model", a.model] if a.model else [])
    argv += ["--feature-check", a.feature_check] if a.feature_check else []
    return argv + [
        "--split", a.split, "--frame-steps", ",".join(map(str, a.frame_steps)), "--num-synthetic", str(a.num_synthetic),
        "--num-real", str(a.num_real), "--num-frames", str(a.num_frames), "--windows-per-clip", str(a.windows_per_clip),
        "--max-side", str(a.max_side), "--synthetic-size", str(a.synthetic_size), "-k", str(a.num_draft_frames),
    ]
