"""``specvideo bench edge``: drafting here and verifying on a running server, against the server
streaming its own answer, at added round-trip delays (``benchmarks.edge``)."""

from __future__ import annotations

import argparse
import shlex
import sys

from specvideo.cli.common import add_report

SECTION = "## Text: drafting on the client, verifying on the server"


def add(kinds) -> None:
    from benchmarks.edge import BenchEdgeConfig

    d = BenchEdgeConfig()
    b = kinds.add_parser("edge", help="draft here, verify on a running server (/v1/verify) against the server's own streaming, at added delays")
    b.add_argument("--url", default=d.url, help="the server's address")
    b.add_argument("--model", default=d.model)
    b.add_argument("--workload", default=d.workload, choices=("chat", "code"))
    b.add_argument("--split", default=d.split, choices=("tuning", "heldout"))
    b.add_argument("--num-prompts", type=int, default=d.num_prompts)
    b.add_argument("--max-tokens", type=int, default=d.max_tokens)
    b.add_argument("--delays-ms", default=",".join(f"{x:g}" for x in d.delays_ms), help="comma-separated round trips to add")
    b.add_argument("--repeats", type=int, default=d.repeats)
    b.add_argument("--local-draft", default=d.local_draft, help="lookup, none, or a local model (name, FILE.gguf, directory)")
    b.add_argument("--local-dtype", default=d.local_dtype, help="the local draft model's weights (auto, bfloat16, int8, int4)")
    b.add_argument("--temperature", type=float, default=d.temperature)
    b.add_argument("--seed", type=int, default=d.seed)
    b.add_argument("--prompts", metavar="FILE.jsonl", help='prompts instead of the split: {"prompt": "...", "chat": true} a line')
    b.add_argument("--load", type=int, default=d.load, help="other users streaming the server's own answers meanwhile")
    b.add_argument("--label", default="", help="the report section's name after the heading")
    add_report(b, "docs/history/benchmarks.md", "edge")
    b.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from benchmarks.edge import BenchEdgeConfig, run_benchmark, to_markdown
    from benchmarks.report import write_section

    delays = tuple(float(x) for x in args.delays_ms.split(",") if x.strip())
    config = BenchEdgeConfig(
        url=args.url, model=args.model, workload=args.workload, split=args.split, num_prompts=args.num_prompts,
        max_tokens=args.max_tokens, delays_ms=delays, repeats=args.repeats, local_draft=args.local_draft,
        temperature=args.temperature, seed=args.seed, prompts=args.prompts, local_dtype=args.local_dtype,
        load=args.load,
    )
    rows = run_benchmark(config, progress=lambda line: print(line, file=sys.stderr))
    lines = to_markdown(rows)
    print("\n".join(lines))
    if not args.no_report:
        heading = f"{SECTION}: {args.label}" if args.label else SECTION
        argv = ["specvideo", "bench", "edge", "--url", config.url, "--model", config.model, "--workload", config.workload,
                "--split", config.split, "--num-prompts", str(config.num_prompts), "--max-tokens", str(config.max_tokens),
                "--delays-ms", args.delays_ms, "--repeats", str(config.repeats), "--local-draft", config.local_draft]
        argv += ["--local-dtype", config.local_dtype] if config.local_dtype != "auto" else []
        argv += ["--temperature", str(config.temperature), "--seed", str(config.seed)] if config.temperature > 0 else []
        argv += ["--prompts", config.prompts] if config.prompts else []
        argv += ["--load", str(config.load)] if config.load else []
        argv += ["--label", args.label] if args.label else []
        write_section(args.report, heading, shlex.join(argv), lines)
    return 0
