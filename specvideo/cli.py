"""The ``specvideo`` command line. Errors print one line on stderr and exit with code 2."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from specvideo.errors import one_line
from specvideo.text.config import TEXT_DEFAULTS


class UsageError(ValueError):
    """A problem with what the user asked for (bad arguments, missing files, ...)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, like every other usage error
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="specvideo", description="Speculative generation of video frames and text.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_text(commands)
    _add_video(commands)
    _add_bench(commands)
    _add_train(commands)
    return parser


def _add_text(commands) -> None:
    d = TEXT_DEFAULTS
    p = commands.add_parser("text", help="speculative text generation with a target LM and a drafter")
    p.add_argument("prompt", help="the text to continue")
    p.add_argument(
        "--target", help="target model directory or cached Hub id (default: the shipped models/text pair)"
    )
    drafting = p.add_mutually_exclusive_group()
    drafting.add_argument("--draft", help="draft model directory (same tokenizer as the target)")

    drafting.add_argument(
        "--ngram", action="store_true", help="draft by prompt lookup instead of a draft model"
    )
    p.add_argument(
        "--drafter",
        choices=["model", "lean", "hybrid"],
        help="how to run the draft model: transformers, lean, or hybrid (prompt lookup when the context "
        "repeats, else lean); default: hybrid for the shipped pair",
    )
    p.add_argument(
        "--draft-vocab",
        type=int,
        default=d.draft_vocab_size,
        help="lean and hybrid drafters: propose only the N most frequent tokens (FR-Spec; needs "
        "token_ranking.json beside the draft, else all tokens); 0 = all tokens",
    )
    p.add_argument("--num-draft-tokens", "-k", type=int, default=d.num_draft_tokens, help="draft length k")
    p.add_argument("--schedule", default=d.schedule, choices=["constant", "heuristic", "confidence"])
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens)
    p.add_argument("--temperature", type=float, default=d.temperature, help="0 = greedy")
    p.add_argument("--top-k", type=int, default=d.top_k)
    p.add_argument("--top-p", type=float, default=d.top_p)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cpu)")
    p.add_argument("--json", action="store_true", help="print the text and the statistics as JSON")
    p.set_defaults(run=_run_text)


def _run_text(args: argparse.Namespace) -> int:
    import torch

    from specvideo.text import SpeculativeGenerator

    kwargs = dict(
        num_draft_tokens=args.num_draft_tokens,
        schedule=args.schedule,
        device=args.device,
        draft_vocab_size=args.draft_vocab,
    )
    if args.ngram:
        kwargs["drafter"] = "ngram"
    elif args.drafter:
        kwargs["drafter"] = args.drafter
    elif args.target is not None:
        kwargs["drafter"] = "model" if args.draft else "ngram"
    draft = None if args.ngram else args.draft
    gen = SpeculativeGenerator.from_pretrained(args.target, draft, **kwargs)
    if gen.tokenizer is None:
        raise UsageError(f"no tokenizer found in {args.target}: the CLI needs one to encode the prompt")
    generator = torch.Generator().manual_seed(args.seed)
    kwargs = dict(
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        generator=generator,
    )
    if args.json:
        out = gen.generate(args.prompt, **kwargs)
        print(
            json.dumps(
                {
                    "prompt": args.prompt,
                    "text": out.text,
                    "token_ids": out.token_ids,
                    "stats": out.stats.to_dict(),
                }
            )
        )
        return 0
    pieces = gen.stream(args.prompt, **kwargs)  # checks the prompt and settings before any output
    sys.stdout.write(args.prompt)
    for piece in pieces:
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")
    return 0


def _add_bench(commands) -> None:
    from specvideo.bench.text import BENCH_TEXT_DEFAULTS as d
    from specvideo.bench.text import FAMILIES

    p = commands.add_parser("bench", help="side-by-side benchmarks (results in docs/BENCHMARKS.md)")
    kinds = p.add_subparsers(dest="bench", metavar="KIND", required=True, parser_class=_Parser)
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
        type=_names,
        default=d.drafters,
        help="our model-drafter variant(s), comma-separated: model, lean, lean@N (the lean drafter "
        "restricted to the N most frequent tokens), hybrid, hybrid@N (prompt lookup first, else lean)",
    )
    t.add_argument(
        "--methods",
        metavar="LIST",
        type=_names,
        default=d.methods,
        help=f"comma-separated subset of {','.join(FAMILIES)}",
    )
    t.add_argument(
        "--schedules",
        metavar="LIST",
        type=_names,
        default=d.schedules,
        help="draft-length schedules to sweep",
    )
    t.add_argument(
        "--k-values",
        metavar="LIST",
        type=_ints,
        default=d.ks,
        help="draft lengths k to sweep, comma-separated",
    )
    t.add_argument(
        "--lookup-k", metavar="K", type=int, default=d.lookup_k, help="k of both prompt-lookup methods"
    )
    t.add_argument("--seed", type=int, default=d.seed)
    t.add_argument("--device", default=d.device, help="cpu, cuda, cuda:1, ...")
    report = t.add_mutually_exclusive_group()
    report.add_argument(
        "--report", metavar="FILE.md", default=d.report, help="markdown report to write the Text section of"
    )
    report.add_argument("--no-report", action="store_true", help="write no report or plot")
    t.add_argument("--json", action="store_true", help="print every result as JSON instead of tables")
    t.set_defaults(run=_run_bench_text)
    _add_bench_video(kinds)


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in _names(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _run_bench_text(args: argparse.Namespace) -> int:
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


def _add_bench_video(kinds) -> None:
    from specvideo.bench.video import BENCH_VIDEO_DEFAULTS as d
    from specvideo.video.drafters import DRAFTERS

    v = kinds.add_parser(
        "video",
        help="speculative video against target-only, draft-only and first-frame routing, on the same clips",
        description="Every method on the same clips and seeds in one process; a tau x s sweep per drafter.",
    )
    v.add_argument(
        "--model", metavar="DIR", default=d.model, help="pipeline directory (default: models/video)"
    )
    v.add_argument(
        "--num-synthetic", metavar="N", type=int, default=d.num_synthetic, help="held-out synthetic clips"
    )
    v.add_argument(
        "--num-real", metavar="N", type=int, default=d.num_real, help="held-out real clips (0: none)"
    )
    v.add_argument(
        "--num-frames", metavar="N", type=int, default=d.num_frames, help="frames generated per clip"
    )
    v.add_argument(
        "--clips",
        metavar="PATH",
        nargs="+",
        default=d.clips,
        help="video files instead of the held-out clips",
    )
    v.add_argument(
        "--drafters",
        metavar="LIST",
        type=_names,
        default=d.drafters,
        help=f"draft-only baselines, a comma-separated subset of {','.join(DRAFTERS)}",
    )
    v.add_argument(
        "--sweep-drafters",
        metavar="LIST",
        type=_names,
        default=d.sweep_drafters,
        help="drafters of the tau x s sweep",
    )
    v.add_argument(
        "--thresholds", metavar="LIST", type=_floats, default=d.thresholds, help="tau values to sweep"
    )
    v.add_argument("--strengths", metavar="LIST", type=_floats, default=d.strengths, help="s values to sweep")
    v.add_argument(
        "--metric", default=d.metric, choices=["ssim", "psnr"], help="similarity scored against tau"
    )
    v.add_argument("--num-draft-frames", "-k", metavar="K", type=int, default=d.num_draft_frames)
    v.add_argument("--refine-steps", metavar="M", type=int, default=d.num_refine_steps)
    v.add_argument("--schedule", default=d.schedule, choices=["constant", "heuristic"])
    v.add_argument(
        "--steps", metavar="N", type=int, default=d.num_inference_steps, help="full-sampler steps N"
    )
    v.add_argument("--seed", type=int, default=d.seed, help="clip i uses seed + i for every method")
    v.add_argument("--device", default=d.device, help="cpu, cuda, cuda:1, ...")
    report = v.add_mutually_exclusive_group()
    report.add_argument(
        "--report",
        "--output",
        metavar="FILE.md",
        default=d.report,
        help="markdown report to write the Video section of",
    )
    report.add_argument("--no-write", action="store_true", help="write no report or plot")
    v.add_argument("--json", action="store_true", help="print every result as JSON instead of tables")
    v.set_defaults(run=_run_bench_video)


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in _names(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _run_bench_video(args: argparse.Namespace) -> int:
    import shlex

    from specvideo.bench.video import (
        BenchVideoConfig,
        format_targets,
        run_benchmark,
        to_markdown,
        write_report,
    )

    config = BenchVideoConfig(
        model=args.model,
        num_synthetic=args.num_synthetic,
        num_real=args.num_real,
        num_frames=args.num_frames,
        clips=tuple(args.clips),
        drafters=args.drafters,
        sweep_drafters=args.sweep_drafters,
        thresholds=args.thresholds,
        strengths=args.strengths,
        metric=args.metric,
        num_draft_frames=args.num_draft_frames,
        num_refine_steps=args.refine_steps,
        schedule=args.schedule,
        num_inference_steps=args.steps,
        seed=args.seed,
        device=args.device,
        report=args.report,
    )
    results = run_benchmark(config, progress=True)
    command = shlex.join(_bench_video_argv(config))
    written = None if args.no_write else write_report(results, command, args.report)
    if args.json:
        print(json.dumps({**results.to_dict(), "command": command, "report": written and str(written)}))
        return 0
    print(to_markdown(results))
    print("Targets:")
    print(format_targets(results))
    if written is not None:
        print(f"\nreport written to {written}", file=sys.stderr)
    return 0


def _bench_video_argv(c) -> list[str]:
    """Every setting spelled out, so the command reproduces the run whatever the defaults become."""
    argv = ["specvideo", "bench", "video"] + (["--model", c.model] if c.model else [])
    if c.clips:
        argv += ["--clips", *c.clips]
    else:
        argv += ["--num-synthetic", str(c.num_synthetic), "--num-real", str(c.num_real)]
    argv += ["--num-frames", str(c.num_frames), "--drafters", ",".join(c.drafters)]
    argv += ["--sweep-drafters", ",".join(c.sweep_drafters)]
    argv += ["--thresholds", ",".join(f"{t:g}" for t in c.thresholds)]
    argv += ["--strengths", ",".join(f"{s:g}" for s in c.strengths), "--metric", c.metric]
    argv += ["--num-draft-frames", str(c.num_draft_frames), "--refine-steps", str(c.num_refine_steps)]
    argv += ["--schedule", c.schedule, "--steps", str(c.num_inference_steps)]
    return argv + ["--seed", str(c.seed), "--device", c.device]


def _add_video(commands) -> None:
    from specvideo.video.config import VIDEO_DEFAULTS as d

    p = commands.add_parser("video", help="continue a video with speculative frame generation")
    p.add_argument("input", nargs="?", help="video file whose last frames are the context")
    p.add_argument("--out", help="output MP4 (H.264); written to a temp file, then renamed")
    p.add_argument(
        "--demo",
        metavar="OUT",
        help="no input file: continue a held-out synthetic moving-shapes clip (picked by --seed), write OUT",
    )
    p.add_argument("--num-frames", type=int, default=d.num_frames)
    p.add_argument("--mode", default=d.mode, choices=["speculative", "target", "draft"])
    p.add_argument(
        "--drafter", choices=["flow", "learned", "linear", "copy"], help="default: the model directory's"
    )
    p.add_argument("--num-draft-frames", "-k", type=int, default=d.num_draft_frames)
    p.add_argument(
        "--threshold", type=float, default=d.threshold, help="acceptance threshold tau on the metric"
    )
    p.add_argument("--metric", default=d.metric, choices=["ssim", "psnr"])
    p.add_argument("--strength", type=float, default=d.strength, help="refinement strength s in (0, 1]")
    p.add_argument("--refine-steps", type=int, default=d.num_refine_steps)
    p.add_argument("--steps", type=int, default=d.num_inference_steps, help="full-sampler steps N")
    p.add_argument("--schedule", default=d.schedule, choices=["constant", "heuristic"])
    p.add_argument("--model", help="pipeline directory (default: the shipped models/video)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--device", default=None)
    p.add_argument(
        "--side-by-side", help="also write context | draft | final (accepted green, regenerated red)"
    )
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.set_defaults(run=_run_video)


def _run_video(args: argparse.Namespace) -> int:
    import torch

    from specvideo.video.config import VIDEO_DEFAULTS
    from specvideo.video.data import HELDOUT_SEEDS, moving_shapes
    from specvideo.video.io import VideoClip, read_video, write_video
    from specvideo.video.pipeline import SpeculativeVideoPipeline
    from specvideo.video.sidebyside import side_by_side

    if (args.input is None) == (args.demo is None):
        raise UsageError("give either an input video or --demo OUT")
    if args.demo and args.out and args.out != args.demo:
        raise UsageError("--demo OUT already names the output; drop --out")
    args.out = args.out or args.demo
    if args.out is None:
        raise UsageError("--out is required with an input video")
    for path in filter(None, [args.out, args.side_by_side]):
        _check_output(path)
    pipe = SpeculativeVideoPipeline.from_pretrained(args.model, drafter=args.drafter, device=args.device)
    P = pipe.verifier.num_context_frames
    if args.demo:
        context = moving_shapes(HELDOUT_SEEDS[args.seed], P, pipe.verifier.resolution[0])
        clip = VideoClip(context, VIDEO_DEFAULTS.fps)
    else:
        # Only the last P frames are kept, downscaled on decode: memory stays bounded for any input.
        clip = read_video(args.input, max_frames=P, from_end=True, max_side=VIDEO_DEFAULTS.max_input_side)
        if clip.num_frames < P:
            raise UsageError(
                f"{args.input} has {clip.num_frames} frame(s); the model needs {P} context frames"
            )
    context = clip.frames[-P:]
    out = pipe(
        context,
        num_frames=args.num_frames,
        mode=args.mode,
        num_draft_frames=args.num_draft_frames,
        threshold=args.threshold,
        metric=args.metric,
        strength=args.strength,
        num_refine_steps=args.refine_steps,
        num_inference_steps=args.steps,
        schedule=args.schedule,
        generator=torch.Generator().manual_seed(args.seed),
        progress=not args.json,
    )
    write_video(out.frames, args.out, fps=clip.fps)
    if args.side_by_side:
        write_video(
            side_by_side(context[-1], out),
            args.side_by_side,
            fps=clip.fps,
        )
    stats = out.stats
    if args.json:
        print(json.dumps({"out": args.out, "side_by_side": args.side_by_side, "stats": stats.to_dict()}))
    else:
        print(
            f"wrote {args.out}: {len(out.frames)} frames, {stats.accepted}/{stats.drafted} drafts accepted, "
            f"{stats.unet_evals} UNet evaluations (target-only: {stats.target_only_calls})"
        )
    return 0


def _check_output(path: str) -> None:
    """Fail before any work when a result could not be written to ``path``."""
    if os.path.isdir(path):
        raise UsageError(f"output path {path} is a directory, not a file")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"output directory {parent} does not exist (for {path})")


def _add_train(commands) -> None:
    from specvideo.training.text import TrainConfig

    d = TrainConfig()
    p = commands.add_parser("train", help="the recipes that produced the shipped weights")
    kinds = p.add_subparsers(dest="kind", required=True, parser_class=_Parser)
    t = kinds.add_parser("text", help="tokenizer, target and distilled draft for code completion")
    t.add_argument(
        "--stage",
        default="all",
        choices=["all", "tokenizer", "sizes", "target", "draft", "draft-more", "draft-vocab"],
    )
    t.add_argument("--out", default=d.out, help="where the models are saved")
    t.add_argument("--work", default=d.work, help="checkpoints, logs and token caches (resumable)")
    t.add_argument(
        "--target-size",
        choices=["s", "m", "l"],
        default=d.target_size,
        help="default: the sizes-stage winner",
    )
    t.add_argument("--size-steps", type=int, default=d.size_steps)
    t.add_argument("--target-minutes", type=float, default=d.target_minutes)
    t.add_argument("--draft-minutes", type=float, default=d.draft_minutes)
    t.add_argument("--device", default=d.device)
    t.add_argument("--seed", type=int, default=d.seed)
    t.set_defaults(run=_run_train_text)
    _add_train_video(kinds)


def _add_train_video(kinds) -> None:
    from specvideo.training.video import VideoTrainConfig

    d = VideoTrainConfig()
    for stage, steps, what in [
        ("verifier", d.verifier_steps, "the conditional diffusion UNet (x0-prediction, EMA)"),
        ("hint", d.hint_steps, "the verifier widened for the flow hint, trained on from video-verifier"),
        ("residual", d.residual_steps, "the hint verifier as a residual over the flow warp (zeroed output)"),
        ("drafter", d.drafter_steps, "the learned frame predictor"),
    ]:
        v = kinds.add_parser(f"video-{stage}", help=what)
        v.add_argument("--steps", type=int, default=steps)
        v.add_argument("--max-minutes", type=float, default=d.max_minutes, help="stop (resumably) after this")
        v.add_argument(
            "--eval-every", type=int, default=d.eval_every, help="steps between held-out evaluations"
        )
        v.add_argument("--work", default=d.work, help="checkpoints and logs (resumable)")
        v.add_argument("--device", default=d.device)
        v.add_argument("--seed", type=int, default=d.seed)
        v.set_defaults(run=_run_train_video, stage=stage)
    e = kinds.add_parser("video-export", help="write models/video from the trained stages (fp16)")
    e.add_argument("--work", default=d.work)
    e.add_argument("--out", default=d.out)
    e.add_argument("--drafter", default="flow", help="the pipeline's default drafter")
    e.set_defaults(run=_run_train_video, stage="export")


def _run_train_video(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from specvideo.training import video

    cfg = replace(video.VideoTrainConfig(), work=args.work)
    if args.stage == "export":
        print(f"wrote {video.export(replace(cfg, out=args.out), drafter=args.drafter)}")
        return 0
    steps = {f"{args.stage}_steps": args.steps}
    cfg = replace(
        cfg,
        max_minutes=args.max_minutes,
        eval_every=args.eval_every,
        device=args.device,
        seed=args.seed,
        **steps,
    )
    if args.stage == "drafter":
        result = video.train_drafter(cfg)
    else:
        result = video.train_verifier(cfg, stage=args.stage)
    print(json.dumps(result, indent=2))
    return 0


def _run_train_text(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from specvideo.training.text import TrainConfig, run

    cfg = replace(
        TrainConfig(),
        out=args.out,
        work=args.work,
        target_size=args.target_size,
        size_steps=args.size_steps,
        target_minutes=args.target_minutes,
        draft_minutes=args.draft_minutes,
        device=args.device,
        seed=args.seed,
    )
    info = run(args.stage, cfg)
    print(json.dumps({k: v for k, v in info.items() if k != "config"}, indent=2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _quiet_libraries()
    try:
        return args.run(args)
    except (ValueError, TypeError, OSError) as err:
        print(f"specvideo: error: {one_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specvideo: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # never a raw traceback; SPECVIDEO_DEBUG=1 shows it
        if os.environ.get("SPECVIDEO_DEBUG"):
            raise
        print(
            f"specvideo: internal error ({type(err).__name__}): {one_line(err)} (SPECVIDEO_DEBUG=1 for details)",
            file=sys.stderr,
        )
        return 1


def _quiet_libraries() -> None:
    """Keep stderr for our one-line messages: no weight-loading progress bars or library warnings."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    from diffusers.utils import logging as diffusers_logging

    diffusers_logging.set_verbosity_error()
    diffusers_logging.disable_progress_bar()


if __name__ == "__main__":
    sys.exit(main())
