"""Turning exceptions into the one-line messages the CLI, the app and loaders show."""

from __future__ import annotations


def one_line(err: BaseException) -> str:
    """The whole message on one line (whitespace collapsed), or the exception's type name."""
    text = " ".join(str(err).split())
    return text or type(err).__name__


def first_line(err: BaseException) -> str:
    """The first line of the message (library errors often append long hints), or the type name."""
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__
