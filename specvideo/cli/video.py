"""``specvideo video``: continue a video (or a synthetic demo clip) with speculative frame generation."""

from __future__ import annotations

import argparse
import json
import sys

from specvideo.cli.common import UsageError, add_seed_and_device, check_output, ints
from specvideo.files import clashing_outputs
from specvideo.video.config import FALLBACKS, MODES, VIDEO_DEFAULTS, VideoConfig
from specvideo.video.drafters import DRAFTERS
from specvideo.video.inputs import VIDEO_SCHEDULES
from specvideo.video.metrics import METRICS

DEMO_SIZE = 128  # the --demo clip's side (the procedural shapes render at any size)


def add(commands) -> None:
    p = commands.add_parser("video", help="continue a video with speculative frame generation")
    p.add_argument("input", nargs="?", help="video file whose last frames are the context")
    p.add_argument("--out", help="output MP4 (H.264); written to a temp file, then renamed")
    p.add_argument(
        "--demo",
        metavar="OUT",
        help="no input file: continue a held-out synthetic moving-shapes clip (picked by --seed), write OUT",
    )
    add_settings(p)
    p.add_argument(
        "--check-center",
        type=float,
        default=VIDEO_DEFAULTS.check_center,
        help="the typicality check's fold c: drafts are kept while tau <= r <= c^2 / tau, so drafts far "
        f"easier for the target than real footage are rejected too (default: {VIDEO_DEFAULTS.check_center:g}: "
        "one-sided; the band set on the tuning split: --check-center 2.217 --check-levels 100 --threshold 0.369)",
    )
    p.add_argument(
        "--check-levels",
        type=ints,
        default=VIDEO_DEFAULTS.check_levels,
        help=f"the typicality check's noise levels t, comma-separated (default: "
        f"{','.join(map(str, VIDEO_DEFAULTS.check_levels))})",
    )
    p.add_argument(
        "--fallback",
        choices=FALLBACKS,
        default=VIDEO_DEFAULTS.fallback,
        help="where the check rejects a draft and the learned check the target's correction too: none (keep "
        f"the correction) or still (repeat the last frame) (default: {VIDEO_DEFAULTS.fallback})",
    )
    p.add_argument(
        "--side-by-side", help="also write context | draft | final (accepted green, regenerated red)"
    )
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.set_defaults(run=run)


def add_settings(p) -> None:
    """The generation settings ``specvideo video`` and ``specvideo batch video`` share."""
    d = VIDEO_DEFAULTS
    p.add_argument("--num-frames", type=int, default=d.num_frames)
    p.add_argument("--mode", default=d.mode, choices=MODES)
    p.add_argument("--drafter", choices=DRAFTERS, help="default: the model directory's")
    p.add_argument("--num-draft-frames", "-k", type=int, default=d.num_draft_frames)
    p.add_argument(
        "--threshold",
        type=float,
        help=f"acceptance threshold tau on the metric (default: {d.tau:g} for typicality, 0.9 for "
        "ssim, 30 for psnr)",
    )
    p.add_argument(
        "--metric",
        default=d.metric,
        choices=METRICS,
        help="the check: typicality (the target's denoising error on the real footage over that on the "
        "draft; the draft is kept) or ssim / psnr of a draft against its refinement (the refinement is kept)",
    )
    p.add_argument(
        "--strength", type=float, default=d.strength, help="refinement strength s in (0, 1] (ssim / psnr checks)"
    )
    p.add_argument(
        "--refine-steps",
        dest="num_refine_steps",
        metavar="REFINE_STEPS",
        type=int,
        default=d.num_refine_steps,
        help="refinement steps m (ssim / psnr)",
    )
    p.add_argument(
        "--steps", dest="num_inference_steps", metavar="STEPS", type=int, default=d.num_inference_steps, help="full-sampler steps N"
    )
    p.add_argument("--schedule", default=d.schedule, choices=VIDEO_SCHEDULES)
    p.add_argument("--model", help="pipeline directory (default: the shipped models/video)")
    p.add_argument(
        "--max-side",
        type=int,
        default=d.max_side,
        help="generate at the input's resolution, downscaled so its longer side is at most this (pixels)",
    )
    p.add_argument(
        "--autocast",
        choices=("off", "bf16", "auto"),
        default=d.autocast,
        help="run the verifier's UNet under bf16 autocast (auto, the default: where the CPU or GPU computes "
        "bf16 natively; 1.4-1.7x at 320 px, docs/BENCHMARKS.md)",
    )
    add_seed_and_device(p, d.seed, None)


def settings(args) -> VideoConfig:
    """The VideoConfig the shared flags name (each flag's destination is its setting's name; no
    --drafter: the model directory's, which ``from_pretrained`` reads)."""
    given = {name: getattr(args, name) for name in VideoConfig.names() if hasattr(args, name)}
    if given.get("drafter") is None:
        given.pop("drafter", None)
    return VIDEO_DEFAULTS.updated(**given)


def run(args: argparse.Namespace) -> int:
    import torch

    from specvideo.video.data import VALIDATION_SEEDS, moving_shapes
    from specvideo.video.io import VideoClip, read_context, short_warning, write_video
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
        check_output(path)
    outputs = {"--out": args.out, "--side-by-side": args.side_by_side}
    if problem := clashing_outputs(outputs, [args.input] if args.input else []):
        raise UsageError(problem)
    if args.max_side < 8:
        raise UsageError(f"--max-side must be at least 8 pixels, got {args.max_side}")
    pipe = SpeculativeVideoPipeline.from_pretrained(
        args.model, drafter=args.drafter, device=args.device, autocast=args.autocast
    )
    P = pipe.verifier.num_context_frames
    if args.demo:
        context = moving_shapes(VALIDATION_SEEDS[args.seed], P, min(args.max_side, DEMO_SIZE))
        clip = VideoClip(context, VIDEO_DEFAULTS.fps)
    else:
        # Only the last P + 1 frames are kept (P condition the model, the one before them the
        # typicality check's reference), downscaled on decode: memory stays bounded for any input.
        clip = read_context(args.input, P + 1, args.max_side, minimum=P)
        if warning := short_warning(args.input, clip):
            print(warning, file=sys.stderr)
    context = clip.frames[-(P + 1) :]
    out = pipe(context, settings(args), generator=torch.Generator().manual_seed(args.seed), progress=not args.json)
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
