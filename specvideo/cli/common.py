"""What every ``specvideo`` subcommand shares: the parser class, usage errors, list-valued argument
types, output-path checks and quiet library logging."""

from __future__ import annotations

import argparse
import os


class UsageError(ValueError):
    """A problem with what the user asked for (bad arguments, missing files, ...)."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, like every other usage error
        self.exit(2, f"{self.prog}: error: {message}\n")


def names(text: str) -> tuple[str, ...]:
    """Comma-separated names -> a tuple, blanks dropped."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in names(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in names(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def add_seed_and_device(
    p: argparse.ArgumentParser, seed: int, device: str | None, seed_help: str | None = None
) -> None:
    p.add_argument("--seed", type=int, default=seed, help=seed_help)
    p.add_argument(
        "--device", default=device, help="cpu, cuda, cuda:1, ..." + ("" if device else " (default: cpu)")
    )


def add_dtype(p: argparse.ArgumentParser) -> None:
    """--dtype and --exact of the text commands (specvideo.text.models.precision says what each means)."""
    from specvideo.text.models.precision import DTYPES

    p.add_argument(
        "--dtype",
        choices=DTYPES,
        default="auto",
        help="number format of the models (auto: a model read from a GGUF file runs the file's own blocks (gguf) "
        "where specvideo's kernel runs, else bfloat16 where the device computes it natively, as CPUs with "
        "avx512_bf16 or AMX do, else float32; int8 / int4: the target's projections and output head weight-only "
        "quantised over those activations, fewer bytes per weight for a memory-bound model, CPU only; gguf: a target "
        "read from a GGUF file runs that file's own quantised blocks, unrounded, on specvideo's VNNI kernel); greedy "
        "output equals the same model's own greedy decoding in each",
    )
    p.add_argument(
        "--exact",
        action="store_true",
        help="float32, for the float32 model's own tokens bit for bit (slower on a CPU with bf16 units)",
    )


def add_report(p: argparse.ArgumentParser, default: str, section: str, off: str = "--no-report") -> None:
    """--report FILE.md (the section to write) or the flag that writes nothing; --json."""
    report = p.add_mutually_exclusive_group()
    report.add_argument(
        "--report",
        "--output",
        metavar="FILE.md",
        default=default,
        help=f"markdown report to write the {section} section of",
    )
    report.add_argument(off, dest="no_report", action="store_true", help="write no report or plot")
    p.add_argument("--json", action="store_true", help="print every result as JSON instead of tables")


def check_output(path: str) -> None:
    """Fail before any work when a result could not be written to ``path``."""
    if os.path.isdir(path):
        raise UsageError(f"output path {path} is a directory, not a file")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"output directory {parent} does not exist (for {path})")


def quiet_libraries() -> None:
    """Keep stderr for our one-line messages: no weight-loading progress bars or library warnings."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    from diffusers.utils import logging as diffusers_logging

    diffusers_logging.set_verbosity_error()
    diffusers_logging.disable_progress_bar()
