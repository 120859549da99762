"""Which modules one round of a run passes through, and how many lines of their functions run.

Opens a run of the default pair (or ``--drafter``'s), steps it past its first rounds, then traces
one round (``sys.setprofile``) and lists every specvideo module whose functions were called, with
the lines of those functions: the measure behind docs/ARCHITECTURE.md's "a greedy round reads in
N modules".

    python scripts/round_modules.py                       # the default: SmolLM2, prompt lookup, k 3
    python scripts/round_modules.py --drafter head-hybrid
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections import defaultdict


def traced_round(steps) -> dict[str, set]:
    """module -> the code objects of its functions the next round of ``steps`` (a run's) called."""
    called: dict[str, set] = defaultdict(set)

    def profile(frame, event, arg):
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if module.startswith("specvideo."):
                called[module].add(frame.f_code)

    sys.setprofile(profile)
    try:
        next(steps)
    finally:
        sys.setprofile(None)
    return called


def source_lines(code) -> int:
    """Lines of a function's source (0 for generated code: a dataclass's __init__, a module body)."""
    if code.co_name == "<module>":
        return 0
    try:
        return len(inspect.getsourcelines(code)[0])
    except OSError:
        return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drafter", default=None)
    parser.add_argument("--warm-rounds", type=int, default=3)
    args = parser.parse_args()
    from specvideo.text import SpeculativeGenerator

    gen = SpeculativeGenerator.from_pretrained(drafter=args.drafter)
    run = gen.start("def fibonacci(n):\n    ", max_new_tokens=64, stop=None)
    steps = run.steps()
    for _ in range(args.warm_rounds):
        next(steps)
    called = traced_round(steps)
    total = 0
    for module in sorted(called):
        lines = sum(source_lines(code) for code in called[module])
        total += lines
        print(f"{module:50s} {len(called[module]):3d} functions {lines:5d} lines")
    text = [m for m in called if m.startswith("specvideo.text")]
    print(f"{len(called)} modules ({len(text)} in specvideo.text, {len(called) - len(text)} elsewhere), {total} lines of functions")


if __name__ == "__main__":
    main()
