"""``specvideo bench KIND``: the benchmark commands, one module per kind. The ``specvideo`` CLI
registers them when this folder is beside the installed package (a checkout of the repository)."""

from __future__ import annotations

from benchmarks.cli import batch, checks, drafters, edge, serve, text, video
from specvideo.cli.common import Parser

HELP = "side-by-side benchmarks (dated runs in docs/history/benchmarks.md; current results in docs/BENCHMARKS.md)"


def add(commands) -> None:
    bench = commands.add_parser("bench", help=HELP)
    kinds = bench.add_subparsers(dest="bench", metavar="KIND", required=True, parser_class=Parser)
    for kind in (text, video, drafters, checks, batch, serve, edge):
        kind.add(kinds)
