"""``specvideo bench serve``: N concurrent streaming requests against a running ``specvideo serve``."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import asdict

from specvideo.cli.common import add_report, ints


def add(kinds) -> None:
    from benchmarks.serve import BenchServeConfig

    d = BenchServeConfig()
    b = kinds.add_parser(
        "serve",
        help="load on a running specvideo serve: TTFT, p50/p95 latency, tokens/s, refusals at N concurrent streams",
    )
    b.add_argument("--url", default=d.url, help="the server's /v1 base URL")
    b.add_argument("--model", default=d.model)
    b.add_argument("--api-key", default=d.api_key)
    b.add_argument(
        "--concurrency", type=ints, default=d.concurrency, help="comma-separated N (default 1,2,4,8)"
    )
    b.add_argument(
        "--max-tokens", type=ints, default=d.max_tokens, help="tokens per request; several (16,32,64) are taken in turn"
    )
    b.add_argument("--repeats", type=int, default=d.repeats, help="requests each client sends, one after another")
    b.add_argument("--flood", type=int, default=d.flood, help="then send this many at once, past the queue (0: none)")
    b.add_argument("--seeded", action="store_true", help="every second request samples (temperature 0.8) with a fixed seed")
    b.add_argument("--compare", metavar="URL", help="a single server's /v1 URL: every answer's text compared with its answer there")
    b.add_argument("--label", default=d.label, help="report section 'Serving load: LABEL' (the server's --batching, say)")
    b.add_argument(
        "--editor",
        action="store_true",
        help="replay an editor session instead: a real file typed in --edits steps, one streamed /infill each, "
        "without and with the prompt cache (section 'Editor replay')",
    )
    b.add_argument(
        "--team",
        action="store_true",
        help="replay a team's editors instead: --files files typed in turn, --edits edits each, one request at a time, "
        "for the prompt cache's hit rate (section 'Team editor replay: LABEL'; run once per --routing of the server)",
    )
    b.add_argument("--files", type=int, default=8, help="team replay: files typed in turn")
    b.add_argument(
        "--route", choices=("completion", "infill"), default="completion",
        help="team replay: /completion (the text before the cursor) or /infill (FIM models)",
    )
    b.add_argument("--file", help="the file typed in the replay (default: the standard library's textwrap.py)")
    b.add_argument("--context-tokens", type=int, default=2000, help="replay: about this many tokens of context")
    b.add_argument("--edits", type=int, default=20)
    b.add_argument("--n-predict", type=int, default=32, help="replay: tokens per /infill")
    add_report(b, d.report, "'Serving load' or 'Editor replay'")
    b.set_defaults(run=run)


def run_editor(args: argparse.Namespace) -> int:
    from benchmarks.serve_editor import EditorReplayConfig, run_replay, to_markdown

    if args.context_tokens < 16 or args.edits < 1 or args.n_predict < 1:
        raise ValueError("--context-tokens must be >= 16, --edits and --n-predict >= 1")
    root = args.url.rstrip("/").removesuffix("/v1")
    config = EditorReplayConfig(root, args.file, args.context_tokens, args.edits, args.n_predict, args.api_key)
    replay = run_replay(config)
    argv = ["specvideo", "bench", "serve", "--editor", "--url", root, "--context-tokens", str(args.context_tokens)]
    argv += ["--edits", str(args.edits), "--n-predict", str(args.n_predict)] + (["--file", args.file] if args.file else [])
    print(json.dumps({**replay.summary(), "strokes": [asdict(s) for s in replay.strokes]}) if args.json else to_markdown(replay))
    if not args.no_report:
        _write_section(args.report, "## Editor replay", argv, to_markdown(replay))
    return 0


def run_team(args: argparse.Namespace) -> int:
    from benchmarks.serve_team import TeamReplayConfig, run_team_replay, to_markdown

    if args.context_tokens < 16 or args.edits < 1 or args.n_predict < 1:
        raise ValueError("--context-tokens must be >= 16, --edits and --n-predict >= 1")
    root = args.url.rstrip("/").removesuffix("/v1")
    config = TeamReplayConfig(root, args.files, args.edits, args.context_tokens, args.n_predict, args.route, args.api_key)
    replay = run_team_replay(config)
    label = args.label or "this server"
    argv = ["specvideo", "bench", "serve", "--team", "--url", root, "--files", str(args.files), "--edits", str(args.edits)]
    argv += ["--context-tokens", str(args.context_tokens), "--n-predict", str(args.n_predict), "--route", args.route]
    argv += ["--label", args.label] if args.label else []
    print(json.dumps({**replay.summary(), "detail": [asdict(r) for r in replay.requests]}) if args.json else to_markdown(replay, label))
    if not args.no_report:
        _write_section(args.report, f"## Team editor replay: {label}", argv, to_markdown(replay, label))
    return 0


def _write_section(report: str, section: str, argv: list[str], body: str) -> None:
    """Replace (or append) ``section`` of the report with the command and ``body``."""
    from pathlib import Path

    from benchmarks.report import atomic_write, command_block, replace_section

    path = Path(report)
    text = "\n".join([*command_block(section, shlex.join(argv)), body, ""])
    old = path.read_text(encoding="utf-8") if path.exists() else "# Scaling\n"
    atomic_write(path, lambda f: f.write(replace_section(old, section, text)))
    print(f"\nreport written to {path}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from benchmarks.serve import (
        BenchServeConfig,
        reference_answers,
        run_benchmark,
        to_markdown,
        write_report,
    )

    if args.editor:
        return run_editor(args)
    if args.team:
        return run_team(args)
    if not args.concurrency or min(args.concurrency) < 1 or not args.max_tokens or min(args.max_tokens) < 1 or args.repeats < 1:
        raise ValueError("--concurrency values, --max-tokens and --repeats must be >= 1")
    if args.flood < 0:
        raise ValueError(f"--flood must be >= 0, got {args.flood}")
    config = BenchServeConfig(
        url=args.url,
        model=args.model,
        api_key=args.api_key,
        concurrency=tuple(args.concurrency),
        max_tokens=tuple(args.max_tokens),
        repeats=args.repeats,
        report=args.report,
        flood=args.flood,
        label=args.label,
        seeded=args.seeded,
        compare=args.compare,
    )
    waves = run_benchmark(config)
    argv = ["specvideo", "bench", "serve", "--url", config.url, "--model", config.model]
    argv += ["--concurrency", ",".join(map(str, config.concurrency)), "--max-tokens", ",".join(map(str, config.max_tokens))]
    argv += ["--repeats", str(config.repeats)] + (["--flood", str(config.flood)] if config.flood else [])
    argv += (["--seeded"] if config.seeded else []) + (["--compare", config.compare] if config.compare else [])
    argv += ["--label", config.label] if config.label else []
    if args.json:
        alone = reference_answers(waves)
        print(
            json.dumps([{**w.summary(alone), "requests_detail": [asdict(r) for r in w.requests]} for w in waves])
        )
    else:
        print(to_markdown(waves))
    if not args.no_report:
        print(f"\nreport written to {write_report(waves, shlex.join(argv), args.report, config.label)}", file=sys.stderr)
    return 0
