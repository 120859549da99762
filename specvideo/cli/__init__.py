"""The ``specvideo`` command line, one module per command. Errors print one line on stderr and exit
with code 2 (usage) or 1 (internal, SPECVIDEO_DEBUG=1 shows the traceback)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from specvideo.cli import batch, chat, serve, text, video
from specvideo.cli.common import Parser, UsageError, quiet_libraries
from specvideo.errors import one_line
from specvideo.paths import add_checkout_to_path

# commands whose code lives beside the package, in a checkout of the repository, not in a
# pip-installed specvideo: the command, the module that registers it, its help
CHECKOUT_COMMANDS = (
    ("bench", "benchmarks.cli", "side-by-side benchmarks (dated runs in docs/history/benchmarks.md; current results in docs/BENCHMARKS.md)"),
    ("train", "recipes.cli", "the recipes that produced the shipped weights"),
)

__all__ = ["UsageError", "build_parser", "main", "quiet_libraries"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="specvideo", description="Speculative generation of video frames and text.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    text.add(commands)
    chat.add(commands)
    serve.add(commands)
    video.add(commands)
    batch.add(commands)
    add_checkout_commands(commands, CHECKOUT_COMMANDS)
    return parser


def add_checkout_commands(commands, checkout_commands) -> None:
    """Register ``specvideo bench`` and ``specvideo train`` from their folders beside the package;
    where those are absent (a pip-installed package) the command stays, and says where it runs."""
    add_checkout_to_path()
    for name, module, help in checkout_commands:
        try:
            importlib.import_module(module).add(commands)
        except ModuleNotFoundError as err:
            if err.name is None or not module.startswith(err.name):
                raise
            stub = commands.add_parser(name, help=f"{help} (from a checkout of the repository)")
            stub.add_argument("args", nargs=argparse.REMAINDER)
            stub.set_defaults(run=_needs_checkout(name, module))


def _needs_checkout(name: str, module: str):
    def run(args) -> int:
        folder = module.split(".")[0]
        raise UsageError(
            f"specvideo {name} runs from a checkout of the specvideo repository: its {folder}/ folder "
            "is not part of the installed package (clone the repository, then pip install -e .)"
        )

    return run


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    quiet_libraries()
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


if __name__ == "__main__":
    sys.exit(main())
