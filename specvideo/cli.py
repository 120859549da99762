"""The ``specvideo`` command line. Errors print one line on stderr and exit with code 2."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

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
    return parser


def _add_text(commands) -> None:
    d = TEXT_DEFAULTS
    p = commands.add_parser("text", help="speculative text generation with a target LM and a drafter")
    p.add_argument("prompt", help="the text to continue")
    p.add_argument("--target", required=True, help="target model directory (or a cached Hub id)")
    drafting = p.add_mutually_exclusive_group()
    drafting.add_argument("--draft", help="draft model directory (same tokenizer as the target)")
    drafting.add_argument(
        "--ngram", action="store_true", help="draft by prompt lookup instead of a draft model"
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

    drafter = "model" if args.draft else "ngram"
    gen = SpeculativeGenerator.from_pretrained(
        args.target,
        args.draft,
        drafter=drafter,
        num_draft_tokens=args.num_draft_tokens,
        schedule=args.schedule,
        device=args.device,
    )
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
    sys.stdout.write(args.prompt)
    for piece in gen.stream(args.prompt, **kwargs):
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _quiet_libraries()
    try:
        return args.run(args)
    except (ValueError, TypeError, OSError) as err:
        print(f"specvideo: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specvideo: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # never a raw traceback; SPECVIDEO_DEBUG=1 shows it
        if os.environ.get("SPECVIDEO_DEBUG"):
            raise
        print(
            f"specvideo: internal error ({type(err).__name__}): {_one_line(err)} (SPECVIDEO_DEBUG=1 for details)",
            file=sys.stderr,
        )
        return 1


def _quiet_libraries() -> None:
    """Keep stderr for our one-line messages: no weight-loading progress bars or library warnings."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text or type(err).__name__


if __name__ == "__main__":
    sys.exit(main())
