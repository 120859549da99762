"""``specvideo batch video|text``: many videos or prompts, in this process or over a Ray cluster."""

from __future__ import annotations

import argparse
import json
import sys

from specvideo.cli import text as text_cli
from specvideo.cli import video as video_cli
from specvideo.cli.common import Parser


def add(commands) -> None:
    p = commands.add_parser("batch", help="many videos or prompts; resumable; local or on a Ray cluster")
    kinds = p.add_subparsers(dest="batch", metavar="KIND", required=True, parser_class=Parser)
    v = kinds.add_parser("video", help="continue every video of files, folders or globs into --out-dir")
    v.add_argument(
        "inputs", nargs="+", metavar="INPUT", help="video files, folders of them, or glob patterns"
    )
    v.add_argument("--out-dir", required=True, help="where the MP4s and manifest.jsonl go")
    video_cli.add_settings(v)
    v.add_argument(
        "--side-by-side", action="store_true", help="also write NAME.sbs.mp4 (context | draft | final)"
    )
    v.add_argument("--fps", dest="output_fps", metavar="FPS", type=float, help="frame rate of the outputs (default: each input's)")
    _add_job_flags(v, batch_size=4)
    v.set_defaults(run=run_video)
    t = kinds.add_parser("text", help="answer every line of a prompts JSONL into a results JSONL")
    t.add_argument(
        "prompts", metavar="PROMPTS.jsonl", help='one {"prompt": ...} or {"messages": [...]} a line'
    )
    t.add_argument("--out", required=True, metavar="RESULTS.jsonl", help="one result (manifest row) a line")
    text_cli.add_settings(t)
    _add_job_flags(t, batch_size=8)
    t.set_defaults(run=run_text)


def _add_job_flags(p, batch_size: int) -> None:
    p.add_argument(
        "--ray",
        metavar="WHERE",
        help="fan out over Ray: 'local' (a private instance for this job), 'auto' or an ADDRESS (a running cluster)",
    )
    p.add_argument(
        "--actors", type=int, help="Ray actors (default: one per GPU, else CPUs / --cpus-per-actor)"
    )
    p.add_argument(
        "--cpus-per-actor", type=int, default=1, help="CPUs (torch threads) per Ray actor without GPUs"
    )
    p.add_argument("--batch-size", type=int, default=batch_size, help="items per pipeline call")
    p.add_argument("--force", action="store_true", help="redo items already done with the same settings")
    p.add_argument("--json", action="store_true", help="print the manifest rows and the summary as JSON")


def _job_kwargs(args) -> dict:
    return dict(
        ray=args.ray,
        batch_size=args.batch_size,
        num_actors=args.actors,
        cpus_per_actor=args.cpus_per_actor,
        force=args.force,
        progress=not args.json,
    )


def run_video(args: argparse.Namespace) -> int:
    from specvideo.batch import video_job

    rows, summary = video_job(
        args.inputs,
        args.out_dir,
        model=args.model,
        drafter=args.drafter,
        device=args.device,
        config=video_cli.settings(args),
        fps=args.output_fps,
        side_by_side=args.side_by_side,
        **_job_kwargs(args),
    )
    return _report(rows, summary, args.json)


def run_text(args: argparse.Namespace) -> int:
    from specvideo.batch import text_job

    draft = None if args.ngram else args.draft
    rows, summary = text_job(
        args.prompts,
        args.out,
        target=args.target,
        draft=draft,
        device=args.device,
        config=text_cli.text_config(args),
        dtype=args.dtype,
        exact=args.exact,
        **_job_kwargs(args),
    )
    return _report(rows, summary, args.json)


def _report(rows: list[dict], summary, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"rows": rows, "summary": {**summary.__dict__, "items_per_s": summary.items_per_s}}))
    else:
        for row in rows:
            if row.get("warning"):
                print(row["warning"], file=sys.stderr)
            if row.get("status") != "ok":
                print(f"failed: {row.get('input', row['id'])}: {row.get('reason')}", file=sys.stderr)
        print(summary.line())
    return 0 if summary.errors == 0 else 1
