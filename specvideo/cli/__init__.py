"""The ``specvideo`` command line, one module per command. Errors print one line on stderr and exit
with code 2 (usage) or 1 (internal, SPECVIDEO_DEBUG=1 shows the traceback)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from specvideo.cli import (
    batch,
    bench_batch,
    bench_serve,
    bench_text,
    bench_video,
    chat,
    serve,
    text,
    train,
    video,
)
from specvideo.cli.common import Parser, UsageError, quiet_libraries
from specvideo.errors import one_line

__all__ = ["UsageError", "build_parser", "main", "quiet_libraries"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="specvideo", description="Speculative generation of video frames and text.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    text.add(commands)
    chat.add(commands)
    serve.add(commands)
    video.add(commands)
    bench = commands.add_parser("bench", help="side-by-side benchmarks (results in docs/BENCHMARKS.md)")
    kinds = bench.add_subparsers(dest="bench", metavar="KIND", required=True, parser_class=Parser)
    bench_text.add(kinds)
    bench_video.add(kinds)
    bench_batch.add(kinds)
    bench_serve.add(kinds)
    batch.add(commands)
    train.add(commands)
    return parser


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
