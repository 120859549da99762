"""``specvideo train``: the recipes that produced the shipped weights (recipes/)."""

from __future__ import annotations

import argparse
import json

from specvideo.cli.common import Parser, add_seed_and_device, floats, ints


def add(commands) -> None:
    from recipes.text import STAGES, TARGET_SIZES, TrainConfig

    d = TrainConfig()
    p = commands.add_parser("train", help="the recipes that produced the shipped weights")
    kinds = p.add_subparsers(dest="kind", required=True, parser_class=Parser)
    t = kinds.add_parser("text", help="tokenizer, target and distilled draft for code completion")
    t.add_argument(
        "--stage",
        default="all",
        choices=STAGES,
    )
    t.add_argument("--out", default=d.out, help="where the models are saved")
    t.add_argument("--work", default=d.work, help="checkpoints, logs and token caches (resumable)")
    t.add_argument(
        "--target-size",
        choices=tuple(TARGET_SIZES),
        default=d.target_size,
        help="default: the sizes-stage winner",
    )
    t.add_argument("--size-steps", type=int, default=d.size_steps)
    t.add_argument("--target-minutes", type=float, default=d.target_minutes)
    t.add_argument("--draft-minutes", type=float, default=d.draft_minutes)
    add_seed_and_device(t, d.seed, d.device)
    t.set_defaults(run=_run_train_text)
    _add_train_video(kinds)
    _add_train_sampler(kinds)
    _add_train_check(kinds)
    _add_train_smollm2(kinds)


def _add_train_smollm2(kinds) -> None:
    from recipes.draft import DraftConfig
    from recipes.draft_data import DataConfig

    d, dd = DraftConfig(), DataConfig()
    g = kinds.add_parser(
        "smollm2-draft-data", help="the target's own greedy replies to training prompts (resumable)"
    )
    g.add_argument("--work", default=dd.work)
    g.add_argument("--num-chat", type=int, default=dd.num_chat)
    g.add_argument("--num-code", type=int, default=dd.num_code)
    g.add_argument("--batch-size", type=int, default=dd.batch_size)
    g.add_argument("--max-new-tokens", type=int, default=dd.max_new_tokens)
    g.add_argument("--max-minutes", type=float, default=dd.max_minutes)
    g.add_argument("--threads", type=int, default=dd.threads, help="torch threads (0 = default)")
    g.set_defaults(run=_run_smollm2_data)
    t = kinds.add_parser("smollm2-draft", help="distil the SmolLM2 draft on that data (resumable)")
    t.add_argument("--work", default=d.work)
    t.add_argument("--steps", type=int, default=d.steps)
    t.add_argument("--max-minutes", type=float, default=d.max_minutes)
    t.add_argument("--threads", type=int, default=d.threads)
    t.set_defaults(run=_run_smollm2_draft)
    e = kinds.add_parser("smollm2-draft-export", help="write models/smollm2-draft (fp16) from the checkpoint")
    e.add_argument("--work", default=d.work)
    e.add_argument("--out", default=d.out)
    e.set_defaults(run=_run_smollm2_export)
    from recipes.cli import train_head

    train_head.add(kinds)


def check_ranges(*checks: tuple[str, object, bool]) -> None:
    """(flag, value, ok) triples: a clear error naming the first flag out of range."""
    for flag, value, ok in checks:
        if not ok:
            raise ValueError(f"{flag} is out of range: {value}")


def _run_smollm2_data(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from recipes.draft_data import DataConfig, run_data
    from specvideo.text.models.smollm import smollm2_dir

    cfg = replace(
        DataConfig(),
        work=args.work,
        num_chat=args.num_chat,
        num_code=args.num_code,
        batch_size=args.batch_size,
        max_new_tokens=args.max_new_tokens,
        max_minutes=args.max_minutes,
        threads=args.threads,
    )
    print(run_data(cfg, str(smollm2_dir())))
    return 0


def _run_smollm2_draft(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from recipes.draft import DraftConfig, train
    from specvideo.text.models.smollm import smollm2_dir

    cfg = replace(
        DraftConfig(), work=args.work, steps=args.steps, max_minutes=args.max_minutes, threads=args.threads
    )
    print(train(cfg, str(smollm2_dir())))
    return 0


def _run_smollm2_export(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from recipes.draft import DraftConfig, export
    from specvideo.text.models.smollm import smollm2_dir

    print(export(replace(DraftConfig(), work=args.work, out=args.out), str(smollm2_dir())))
    return 0


def _add_train_video(kinds) -> None:
    """video-drafter (the learned frame predictor) and video-export; the UNet is the sampler
    stage's (``video-sampler``; the stages before it are in git history, recipes/video.py says
    where)."""
    from recipes.video import VideoTrainConfig
    from specvideo.video.conditioning import HINTS
    from specvideo.video.drafters import DRAFTERS
    from specvideo.video.verifier import SAMPLERS

    d = VideoTrainConfig()
    v = kinds.add_parser("video-drafter", help="the learned frame predictor")
    v.add_argument("--steps", type=int, default=d.drafter_steps)
    v.add_argument("--max-minutes", type=float, default=d.max_minutes, help="stop (resumably) after this")
    v.add_argument(
        "--eval-every",
        type=int,
        default=d.eval_every,
        help="steps between evaluations (on the tuning split)",
    )
    v.add_argument("--work", default=d.work, help="checkpoints and logs (resumable)")
    v.add_argument("--lr", type=float, default=d.drafter_lr, help="peak learning rate")
    v.add_argument(
        "--min-lr-ratio",
        type=float,
        default=d.min_lr_ratio,
        help="the cosine ends at this share of the peak (1: constant after the warm-up)",
    )
    v.add_argument(
        "--unroll", type=int, default=d.drafter_unroll, help="frames each training clip is unrolled on the model's own outputs"
    )
    v.add_argument("--batch-size", type=int, default=d.batch_size, help="clips per step")
    add_seed_and_device(v, d.seed, d.device)
    v.set_defaults(run=_run_train_video, stage="drafter")
    e = kinds.add_parser("video-export", help="write models/video from the sampler stage and the drafter (fp16)")
    e.add_argument("--work", default=d.work)
    e.add_argument("--out", default=d.out)
    e.add_argument("--drafter", default="flow", choices=DRAFTERS, help="the pipeline's default drafter")
    e.add_argument("--sampler", default="ddim", choices=SAMPLERS, help="the full sampler's scheduler")
    e.add_argument("--hint", default="flow", choices=HINTS[1:], help="the hint the UNet was trained with (its --hint)")
    e.add_argument(
        "--context-noise-level",
        type=int,
        default=0,
        help="t_c the context frames are noised to (a sampler-stage UNet only; chosen on the tuning split)",
    )
    e.add_argument(
        "--prediction",
        choices=("x0", "v"),
        default="x0",
        help="what the sampler stage's UNet predicts (its --prediction): x0 = hint + UNet, or v",
    )
    e.add_argument(
        "--check-hint-free",
        action="store_true",
        help="the check zeroes the hint's channels (a v UNet trained with --hint-dropout)",
    )
    e.add_argument(
        "--grid-frames",
        type=int,
        default=d.grid_frames,
        help="frames of each rollout in samples.png (0: write no samples.png)",
    )
    e.set_defaults(run=_run_train_video, stage="export")


def _add_train_sampler(kinds) -> None:
    from recipes.video_sampler import SamplerConfig
    from specvideo.video.conditioning import HINTS

    d = SamplerConfig()
    v = kinds.add_parser(
        "video-sampler",
        help="the video target as a diffusion sampler: all noise levels, native-scale crops, noisy context",
    )
    v.add_argument("--work", default=d.work, help="checkpoints and logs (resumable)")
    v.add_argument("--init", metavar="DIR", help="residual UNet to start from (default: models/video/unet)")
    v.add_argument(
        "--resume-from", metavar="DIR", help="a committed resume point, when --work holds no checkpoint"
    )
    v.add_argument(
        "--write-resume-point",
        metavar="DIR",
        help="write a compact resume point (fp16 weights + EMA + step) from --work's checkpoint, then stop",
    )
    v.add_argument("--steps", type=int, default=d.steps)
    v.add_argument("--lr", type=float, default=d.lr, help="peak learning rate")
    v.add_argument("--min-lr-ratio", type=float, default=d.min_lr_ratio)
    v.add_argument(
        "--context-noise-max", type=int, default=d.context_noise_max, help="t_c drawn from [0, this]"
    )
    v.add_argument(
        "--rollout-share",
        type=float,
        default=d.rollout_share,
        help="share of each batch whose context frames the model samples itself (0 = true context only)",
    )
    v.add_argument(
        "--rollout-frames", type=int, default=d.rollout_frames, help="frames sampled before the target"
    )
    v.add_argument(
        "--eval-rollout",
        type=int,
        default=d.eval_rollout,
        help="frames of the drift evaluation's rollout (0 = none)",
    )
    v.add_argument(
        "--prediction",
        choices=("x0", "v"),
        default=d.prediction,
        help="x0: x0 = hint + UNet (the shipped residual); v: v-prediction, nothing anchored on the hint",
    )
    v.add_argument(
        "--hint-dropout", type=float, default=d.hint_dropout, help="share of samples with the hint zeroed"
    )
    v.add_argument("--hint", default=d.hint, choices=HINTS[1:], help="the hint's flow: flow (OpenCV DIS) or flow:<pretrained net>")
    v.add_argument(
        "--confidence",
        action="store_true",
        help="the hint's confidence map on a channel, the residual gated by it (x0 = hint + (1 - c) UNet)",
    )
    v.add_argument(
        "--frame-steps", metavar="LIST", type=ints, default=d.frame_steps,
        help="clips read every s-th frame, s drawn from this list (2-4: fast motion)",
    )
    v.add_argument("--frame-step-weights", metavar="LIST", type=floats, default=d.frame_step_weights)
    v.add_argument("--repa-weight", type=float, default=d.repa_weight, help="REPA's weight (0: off; recipes/video_repa.py)")
    v.add_argument("--perceptual-weight", type=float, default=d.perceptual_weight, help="the perceptual term's (0: off)")
    v.add_argument("--max-minutes", type=float, default=d.max_minutes, help="stop (resumably) after this")
    v.add_argument("--eval-every", type=int, default=d.eval_every)
    v.add_argument("--threads", type=int, default=d.threads, help="torch threads (0 = torch's default)")
    v.add_argument(
        "--pixels-per-batch",
        type=int,
        default=d.pixels_per_batch,
        help="pixels a step sees (batch = this / crop^2)",
    )
    add_seed_and_device(v, d.seed, d.device)
    v.set_defaults(run=_run_train_sampler)


def _add_train_check(kinds) -> None:
    from recipes.video_check import CheckTrainConfig

    d = CheckTrainConfig()
    c = kinds.add_parser("video-check", help="the learned check on pretrained features (models/video/check)")
    c.add_argument("--out", default=d.out)
    c.add_argument("--num-real", type=int, default=d.num_real, help="training examples from real crops")
    c.add_argument("--num-synthetic", type=int, default=d.num_synthetic, help="and from moving shapes")
    c.add_argument("--num-tuning", type=int, default=d.num_tuning, help="tuning examples of each source")
    c.add_argument("--threads", type=int, default=d.threads, help="torch threads (0 = torch's default)")
    c.add_argument("--seed", type=int, default=d.seed)
    c.set_defaults(run=_run_train_check)


def _run_train_check(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from recipes.video_check import CheckTrainConfig, train_check

    check_ranges(
        ("--num-real", args.num_real, args.num_real >= 1),
        ("--num-synthetic", args.num_synthetic, args.num_synthetic >= 1),
        ("--num-tuning", args.num_tuning, args.num_tuning >= 2),
        ("--threads", args.threads, args.threads >= 0),
    )
    keys = ("out", "num_real", "num_synthetic", "num_tuning", "threads", "seed")
    print(json.dumps(train_check(replace(CheckTrainConfig(), **{k: getattr(args, k) for k in keys})), indent=2))
    return 0


def _run_train_sampler(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from recipes.video_sampler import SamplerConfig, train_sampler, write_resume_point

    check_ranges(
        ("--steps", args.steps, args.steps >= 1),
        ("--lr", args.lr, args.lr > 0),
        ("--min-lr-ratio", args.min_lr_ratio, 0 <= args.min_lr_ratio <= 1),
        ("--context-noise-max", args.context_noise_max, 0 <= args.context_noise_max < 1000),
        ("--eval-every", args.eval_every, args.eval_every >= 1),
        ("--threads", args.threads, args.threads >= 0),
        ("--pixels-per-batch", args.pixels_per_batch, args.pixels_per_batch >= 64 * 64),
        ("--rollout-share", args.rollout_share, 0 <= args.rollout_share <= 1),
        ("--rollout-frames", args.rollout_frames, args.rollout_frames >= 1),
        ("--eval-rollout", args.eval_rollout, args.eval_rollout >= 0),
        ("--hint-dropout", args.hint_dropout, 0 <= args.hint_dropout <= 1),
        ("--repa-weight", args.repa_weight, args.repa_weight >= 0),
        ("--perceptual-weight", args.perceptual_weight, args.perceptual_weight >= 0),
        ("--frame-steps", args.frame_steps, bool(args.frame_steps) and min(args.frame_steps) >= 1),
        (
            "--frame-step-weights", args.frame_step_weights,
            len(args.frame_step_weights) == len(args.frame_steps) and min(args.frame_step_weights) >= 0
            and sum(args.frame_step_weights) > 0,
        ),
    )
    if args.confidence and args.prediction != "x0":
        raise ValueError("--confidence gates the residual x0 = hint + (1 - c) UNet: use it with --prediction x0")
    if args.prediction != "x0" and (args.rollout_share or args.eval_rollout):
        raise ValueError("--rollout-share and --eval-rollout sample with the residual x0 model: use them with --prediction x0")
    cfg = replace(
        SamplerConfig(),
        **{k: getattr(args, k) for k in ("work", "init", "resume_from", "steps", "lr", "min_lr_ratio")},
        context_noise_max=args.context_noise_max,
        pixels_per_batch=args.pixels_per_batch,
        **{k: getattr(args, k) for k in ("rollout_share", "rollout_frames", "eval_rollout")},
        prediction=args.prediction,
        hint_dropout=args.hint_dropout,
        **{k: getattr(args, k) for k in ("hint", "confidence", "frame_steps", "frame_step_weights")},
        repa_weight=args.repa_weight,
        perceptual_weight=args.perceptual_weight,
        **{k: getattr(args, k) for k in ("max_minutes", "eval_every", "threads", "seed", "device")},
    )
    if args.write_resume_point:
        print(f"wrote {write_resume_point(cfg, args.write_resume_point)}")
        return 0
    print(json.dumps(train_sampler(cfg), indent=2))
    return 0


def _run_train_video(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from recipes import video

    cfg = replace(video.VideoTrainConfig(), work=args.work)
    if args.stage == "export":
        if args.grid_frames < 0:
            raise ValueError(f"--grid-frames must be >= 0, got {args.grid_frames}")
        cfg = replace(cfg, out=args.out, grid_frames=args.grid_frames, hint=args.hint)
        out = video.export(
            cfg, args.drafter, args.context_noise_level, args.sampler, args.prediction, not args.check_hint_free
        )
        print(f"wrote {out}")
        return 0
    _check_knobs(args)
    cfg = replace(
        cfg,
        max_minutes=args.max_minutes,
        eval_every=args.eval_every,
        device=args.device,
        seed=args.seed,
        min_lr_ratio=args.min_lr_ratio,
        drafter_steps=args.steps,
        drafter_lr=args.lr,
        drafter_unroll=args.unroll,
        batch_size=args.batch_size,
    )
    result = video.train_drafter(cfg)
    print(json.dumps(result, indent=2))
    return 0


def _check_knobs(args: argparse.Namespace) -> None:
    unroll = args.unroll
    for flag, value, ok, rule in (
        ("--steps", args.steps, args.steps >= 1, ">= 1"),
        ("--lr", args.lr, args.lr > 0, "> 0"),
        ("--min-lr-ratio", args.min_lr_ratio, 0 <= args.min_lr_ratio <= 1, "in [0, 1]"),
        ("--unroll", unroll, unroll >= 1, ">= 1"),
        ("--batch-size", args.batch_size, args.batch_size >= 1, ">= 1"),
    ):
        if not ok:
            raise ValueError(f"{flag} must be {rule}, got {value}")


def _run_train_text(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from recipes.text import TrainConfig, run

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
