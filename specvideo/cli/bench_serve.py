"""``specvideo bench serve``: N concurrent streaming requests against a running ``specvideo serve``."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import asdict

from specvideo.cli.common import add_report, ints


def add(kinds) -> None:
    from specvideo.bench.serve import BenchServeConfig

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
    b.add_argument("--max-tokens", type=int, default=d.max_tokens)
    b.add_argument("--repeats", type=int, default=d.repeats)
    add_report(b, d.report, "'Serving load'")
    b.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from specvideo.bench.serve import BenchServeConfig, run_benchmark, to_markdown, write_report

    if not args.concurrency or min(args.concurrency) < 1 or args.max_tokens < 1 or args.repeats < 1:
        raise ValueError("--concurrency values, --max-tokens and --repeats must be >= 1")
    config = BenchServeConfig(
        url=args.url,
        model=args.model,
        api_key=args.api_key,
        concurrency=tuple(args.concurrency),
        max_tokens=args.max_tokens,
        repeats=args.repeats,
        report=args.report,
    )
    waves = run_benchmark(config)
    argv = ["specvideo", "bench", "serve", "--url", config.url, "--model", config.model]
    argv += ["--concurrency", ",".join(map(str, config.concurrency)), "--max-tokens", str(config.max_tokens)]
    argv += ["--repeats", str(config.repeats)]
    if args.json:
        print(
            json.dumps([{**w.summary(), "requests_detail": [asdict(r) for r in w.requests]} for w in waves])
        )
    else:
        print(to_markdown(waves))
    if not args.no_report:
        print(f"\nreport written to {write_report(waves, shlex.join(argv), args.report)}", file=sys.stderr)
    return 0
