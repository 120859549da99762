"""``specvideo bench text``: our speculative text generation against transformers, side by side."""

from __future__ import annotations

import argparse
import json
import sys

from specvideo.cli.common import add_report, add_seed_and_device, ints, names


def add(kinds) -> None:
    from specvideo.bench.text import BENCH_TEXT_DEFAULTS as d
    from specvideo.bench.text import FAMILIES

    t = kinds.add_parser(
        "text",
        help="our speculative text generation against transformers generate(), on the same prompts",
        description="Every method on the same prompts in one process; medians over prompts and ratios.",
    )
    t.add_argument(
        "--prompts",
        metavar="FILE.jsonl",
        default=d.prompts,
        help='JSONL file of {"prompt": ...} lines (default: held-out stdlib functions)',
    )
    t.add_argument("--num-prompts", metavar="N", type=int, default=d.num_prompts, help="number of prompts")
    t.add_argument(
        "--max-new-tokens",
        metavar="N",
        type=int,
        default=d.max_new_tokens,
        help="tokens generated per prompt",
    )
    t.add_argument(
        "--target", metavar="DIR", default=d.target, help="target model directory (with its tokenizer)"
    )
    t.add_argument("--draft", metavar="DIR", default=d.draft, help="draft model directory (same tokenizer)")
    t.add_argument(
        "--drafter",
        metavar="NAMES",
        type=names,
        default=d.drafters,
        help="our model-drafter variant(s), comma-separated: model, lean, lean@N (the lean drafter "
        "restricted to the N most frequent tokens), hybrid, hybrid@N (prompt lookup first, else lean)",
    )
    t.add_argument(
        "--methods",
        metavar="LIST",
        type=names,
        default=d.methods,
        help=f"comma-separated subset of {','.join(FAMILIES)}",
    )
    t.add_argument(
        "--schedules",
        metavar="LIST",
        type=names,
        default=d.schedules,
        help="draft-length schedules to sweep",
    )
    t.add_argument(
        "--k-values",
        metavar="LIST",
        type=ints,
        default=d.ks,
        help="draft lengths k to sweep, comma-separated",
    )
    t.add_argument(
        "--lookup-k", metavar="K", type=int, default=d.lookup_k, help="k of both prompt-lookup methods"
    )
    add_seed_and_device(t, d.seed, d.device)
    add_report(t, d.report, "Text")
    t.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import shlex

    from specvideo.bench.text import BenchTextConfig, format_targets, run_benchmark, to_markdown, write_report

    config = BenchTextConfig(
        target=args.target,
        draft=args.draft,
        prompts=args.prompts,
        num_prompts=args.num_prompts,
        max_new_tokens=args.max_new_tokens,
        drafters=args.drafter,
        schedules=args.schedules,
        ks=args.k_values,
        lookup_k=args.lookup_k,
        methods=args.methods,
        seed=args.seed,
        device=args.device,
        report=args.report,
    )
    results = run_benchmark(config, progress=True)
    # Every setting spelled out, so the command reproduces the run whatever the defaults become.
    argv = ["specvideo", "bench", "text"]
    if config.prompts is not None:
        argv += ["--prompts", config.prompts]
    argv += ["--num-prompts", str(config.num_prompts), "--max-new-tokens", str(config.max_new_tokens)]
    argv += ["--target", config.target, "--draft", config.draft, "--drafter", ",".join(config.drafters)]
    argv += ["--methods", ",".join(config.methods), "--schedules", ",".join(config.schedules)]
    argv += ["--k-values", ",".join(map(str, config.ks)), "--lookup-k", str(config.lookup_k)]
    argv += ["--seed", str(config.seed), "--device", config.device]
    written = None if args.no_report else write_report(results, shlex.join(argv), args.report)
    if args.json:
        print(
            json.dumps({**results.to_dict(), "command": shlex.join(argv), "report": written and str(written)})
        )
        return 0
    print(to_markdown(results))
    print("Targets:")
    print(format_targets(results))
    if written is not None:
        print(f"\nreport written to {written}", file=sys.stderr)
    return 0
