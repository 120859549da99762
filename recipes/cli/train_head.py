"""``specvideo train {smollm2,qwen-coder}-head[-data,-export,-eval]``: the draft heads' recipes
(recipes/head.py, code_data.py)."""

from __future__ import annotations

import argparse
import json

from recipes.cli.train import check_ranges

TARGETS = ("smollm2", "qwen-coder")


def add(kinds) -> None:
    from recipes.code_data import CodeDataConfig

    for name in TARGETS:
        _add_head(kinds, name)
    dd = CodeDataConfig()
    g = kinds.add_parser(
        "qwen-coder-head-data",
        help="rows of real Python source (and the target's own chat replies) for the code pair's head",
    )
    g.add_argument("--work", default=dd.work)
    g.add_argument("--train-rows", type=int, default=dd.train_rows)
    g.add_argument("--valid-rows", type=int, default=dd.valid_rows)
    g.add_argument("--row-tokens", type=int, default=dd.row_tokens)
    g.add_argument("--num-chat", type=int, default=0, help="training rows of the target's own replies to chat requests")
    g.add_argument("--valid-chat", type=int, default=24, help="validation rows of them (with --num-chat)")
    g.add_argument("--chat-tokens", type=int, default=128, help="reply length of a chat row")
    g.add_argument("--num-prose", type=int, default=0, help="training rows of prose (the installed distributions' descriptions)")
    g.add_argument("--valid-prose", type=int, default=24, help="validation rows of prose (with --num-prose)")
    g.add_argument("--threads", type=int, default=2)
    g.set_defaults(run=_run_code_data)


def _add_head(kinds, name: str) -> None:
    from recipes.head import head_config

    d = head_config(name)
    h = kinds.add_parser(
        f"{name}-head",
        help=f"the draft head on {name}'s features: cache them from the data rows, then train (resumable)",
    )
    h.add_argument("--data", default=d.data, help=f"the {name}-{'draft' if name == 'smollm2' else 'head'}-data work directory")
    h.add_argument("--work", default=d.work)
    h.add_argument("--steps", type=int, default=d.steps)
    h.add_argument("--max-minutes", type=float, default=d.max_minutes)
    h.add_argument("--threads", type=int, default=d.threads)
    h.add_argument("--lr", type=float, default=d.lr, help="peak learning rate")
    h.add_argument(
        "--ttt-steps",
        type=int,
        default=d.ttt_steps,
        help="steps unrolled on the head's own features (EAGLE-3; 1 = none)",
    )
    h.add_argument(
        "--init-head", metavar="DIR", help="an exported head to start from (default: the target's last layer)"
    )
    h.add_argument(
        "--feature-layers",
        type=_layers,
        help="EAGLE-3: the target's hidden states the head fuses, comma-separated (transformers' numbering; the last the final state)",
    )
    h.add_argument("--reg-weight", type=float, help=f"weight of the feature regression (default {d.reg_weight}; EAGLE-3: 0)")
    h.set_defaults(run=_run_head, target=name)
    e = kinds.add_parser(f"{name}-head-export", help=f"write {d.out} (fp16) from the checkpoint")
    e.add_argument("--work", default=d.work)
    e.add_argument("--out", default=d.out)
    e.add_argument("--feature-layers", type=_layers, help="as the head was trained with")
    e.set_defaults(run=_run_head_export, target=name)
    v = kinds.add_parser(f"{name}-head-eval", help="greedy acceptance per draft position on the validation rows")
    v.add_argument("--work", default=d.work)
    v.add_argument("--head", default=d.out, help="the exported head directory")
    v.add_argument("--k", type=int, default=5)
    v.add_argument("--draft-vocab", type=int, default=2048, help="FR-Spec tokens it drafts from (0 = all)")
    v.add_argument("--threads", type=int, default=d.threads)
    v.add_argument(
        "--rows",
        choices=("all", "code", "fim", "prose", "chat"),
        default="all",
        help="which validation rows (code: plain files, fim: laid out for fill-in-the-middle, chat: the target's replies)",
    )
    v.set_defaults(run=_run_head_eval, target=name)


def _layers(text: str) -> tuple[int, ...]:
    try:
        layers = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"comma-separated layer numbers, got {text!r}") from None
    if len(layers) < 2 or list(layers) != sorted(set(layers)) or layers[0] < 1:
        raise argparse.ArgumentTypeError(f"two or more increasing layer numbers from 1, got {text!r}")
    return layers


def _token_id(target: str, token: str) -> int:
    from transformers import AutoTokenizer

    from specvideo.text.models.names import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(target, "auto").target).convert_tokens_to_ids(token)


def head_target(name: str):
    """The target a head is trained on, as it verifies: SmolLM2 in float32 (its recipe's), the code
    pair's 1.5B in the dtype ``auto`` picks on this machine (its bf16 conversion here)."""
    from specvideo.text.models.loading import load_causal_lm

    if name == "smollm2":
        from specvideo.text.models.smollm import smollm2_dir

        return load_causal_lm(str(smollm2_dir())).eval()
    from specvideo.text.models.names import resolve_model
    from specvideo.text.models.precision import resolve_dtype

    dtype = resolve_dtype("auto", "cpu", architecture="qwen2")
    return load_causal_lm(resolve_model("qwen-coder", dtype).target, dtype).eval()


def _run_head(args: argparse.Namespace) -> int:
    from recipes.head import compute_features, head_config, train
    from specvideo.text.models.head import is_draft_head

    if args.init_head and not is_draft_head(args.init_head):
        raise ValueError(
            f"--init-head {args.init_head} is not an exported draft head ({args.target}-head-export writes one)"
        )
    check_ranges(
        ("--steps", args.steps, args.steps >= 1),
        ("--lr", args.lr, args.lr > 0),
        ("--ttt-steps", args.ttt_steps, 1 <= args.ttt_steps <= 8),
        ("--threads", args.threads, args.threads >= 1),
        ("--reg-weight", args.reg_weight, args.reg_weight is None or args.reg_weight >= 0),
    )
    keys = ("data", "work", "steps", "max_minutes", "threads", "lr", "ttt_steps", "init_head", "feature_layers", "reg_weight")
    cfg = head_config(args.target, **{k: getattr(args, k) for k in keys})
    target = head_target(args.target)
    compute_features(cfg, target)
    print(train(cfg, target.float()))  # the head trains in float32 on the cached features
    return 0


def _run_head_export(args: argparse.Namespace) -> int:
    from recipes.head import export, head_config

    cfg = head_config(args.target, work=args.work, out=args.out, feature_layers=args.feature_layers)
    print(export(cfg, head_target(args.target)))
    return 0


def _run_head_eval(args: argparse.Namespace) -> int:
    from pathlib import Path

    import torch

    from recipes.head import chain_acceptance
    from specvideo.text.models.head import load_head
    from specvideo.text.models.vocab import ranked_vocabulary

    torch.set_num_threads(args.threads)
    target = head_target(args.target).float()
    head = load_head(args.head, target).float()
    vocab = (
        ranked_vocabulary(args.head, args.draft_vocab, target.config.vocab_size) if args.draft_vocab else None
    )
    rows = torch.load(Path(args.work) / "features" / "valid.pt")["rows"]
    if args.rows != "all":
        from recipes.code_data import row_kind
        from specvideo.text.prompts import FIM_TOKENS

        fim_prefix = -1 if args.target == "smollm2" else _token_id(args.target, FIM_TOKENS[0])  # SmolLM2: no FIM
        rows = [r for r in rows if row_kind(r, fim_prefix) == args.rows]
    values = chain_acceptance(head, rows, vocab, args.k)
    print(
        json.dumps(
            {
                "rows": len(rows),
                "which": args.rows,
                "draft_vocab": args.draft_vocab,
                "acceptance_by_position": [round(v, 4) for v in values],
            }
        )
    )
    return 0


def _run_code_data(args: argparse.Namespace) -> int:
    from dataclasses import replace

    import torch

    from recipes.code_data import (
        CodeDataConfig,
        chat_requests,
        chat_rows,
        code_rows,
        prose_rows,
        write_shards,
    )

    check_ranges(
        ("--train-rows", args.train_rows, args.train_rows >= 1),
        ("--valid-rows", args.valid_rows, args.valid_rows >= 1),
        ("--row-tokens", args.row_tokens, args.row_tokens >= 64),
        ("--num-chat", args.num_chat, args.num_chat >= 0),
        ("--valid-chat", args.valid_chat, args.valid_chat >= 0),
        ("--chat-tokens", args.chat_tokens, args.chat_tokens >= 1),
        ("--num-prose", args.num_prose, args.num_prose >= 0),
        ("--valid-prose", args.valid_prose, args.valid_prose >= 0),
    )
    torch.set_num_threads(args.threads)
    cfg = replace(
        CodeDataConfig(),
        work=args.work,
        train_rows=args.train_rows,
        valid_rows=args.valid_rows,
        row_tokens=args.row_tokens,
    )
    from transformers import AutoTokenizer

    from specvideo.text.models.names import resolve_model

    target_dir = resolve_model("qwen-coder", "auto").target
    tokenizer = AutoTokenizer.from_pretrained(target_dir)
    rows = code_rows(tokenizer, cfg)
    if args.num_prose:
        for split, more in prose_rows(tokenizer, cfg, {"train": args.num_prose, "valid": args.valid_prose}).items():
            rows[split] += more
    if args.num_chat:
        from specvideo.text.generator import SpeculativeGenerator

        gen = SpeculativeGenerator.from_pretrained("qwen-coder", drafter="none")  # the target as it serves
        for split, n in (("train", args.num_chat), ("valid", args.valid_chat)):
            rows[split] += chat_rows(gen, tokenizer, chat_requests(n, split, cfg), args.chat_tokens)
    print(write_shards(rows, cfg.work), {s: len(r) for s, r in rows.items()})
    return 0
