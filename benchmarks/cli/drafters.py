"""``specvideo bench drafters``: the frame drafters alone, normal and fast windows, pretrained eyes and cost."""

from __future__ import annotations

import argparse
import shlex

from specvideo.cli.common import add_report, ints, names

SECTION = "## Video: drafters alone on pretrained eyes"


def add(kinds) -> None:
    from benchmarks.video.config import SPLITS
    from benchmarks.video.drafters import BenchDraftersConfig

    d = BenchDraftersConfig()
    b = kinds.add_parser(
        "drafters",
        help="every frame drafter alone on normal and fast windows: Inception / EfficientNet KID, fidelity, motion, ms per frame",
    )
    b.add_argument("--split", default=d.split, choices=SPLITS)
    b.add_argument("--drafters", metavar="LIST", type=names, default=d.drafters, help="copy, linear, flow, flow:spynet, flow:rife, ...")
    b.add_argument("--frame-steps", metavar="LIST", type=ints, default=d.frame_steps, help="1: normal footage; 2-4: fast")
    for flag, value in (
        ("--num-synthetic", d.num_synthetic), ("--num-real", d.num_real), ("--num-frames", d.num_frames),
        ("--windows-per-clip", d.windows_per_clip), ("--synthetic-size", d.synthetic_size),
        ("--max-side", d.max_side), ("--repeats", d.repeats),
    ):
        b.add_argument(flag, metavar="N", type=int, default=value)
    add_report(b, d.report, "drafters")
    b.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import json

    from benchmarks.report import write_section
    from benchmarks.video.drafters import BenchDraftersConfig, run_drafters, to_markdown

    config = BenchDraftersConfig(
        split=args.split, drafters=args.drafters, frame_steps=args.frame_steps, num_synthetic=args.num_synthetic,
        num_real=args.num_real, num_frames=args.num_frames, windows_per_clip=args.windows_per_clip,
        synthetic_size=args.synthetic_size, max_side=args.max_side, repeats=args.repeats,
    )
    rows = run_drafters(config, progress=not args.json)
    command = shlex.join(argv_of(config))
    table = to_markdown(rows)
    if args.json:
        print(json.dumps({"command": command, "rows": [r.__dict__ for r in rows]}))
    else:
        print(table)
    if not args.no_report:
        write_section(args.report, f"{SECTION} ({config.split})", command, [table, ""])
    return 0


def argv_of(c) -> list[str]:
    return [
        "specvideo", "bench", "drafters", "--split", c.split, "--drafters", ",".join(c.drafters),
        "--frame-steps", ",".join(map(str, c.frame_steps)), "--num-synthetic", str(c.num_synthetic),
        "--num-real", str(c.num_real), "--num-frames", str(c.num_frames), "--windows-per-clip", str(c.windows_per_clip),
        "--synthetic-size", str(c.synthetic_size), "--max-side", str(c.max_side), "--repeats", str(c.repeats),
    ]
