"""Golden CLI runs of the text side: what a restructuring must leave unchanged.

Runs ``specvideo text``, ``chat`` and ``batch text`` over the default pair (and the tiny stdlib pair)
with every kind of drafter, greedy and seeded sampling, and writes each run's tokens, text and
round statistics (timings dropped) to OUT/NAME.json. With ``--compare DIR`` it then diffs OUT
against an earlier run's files and exits 1 on any difference.

    python scripts/golden_text.py --out /tmp/golden-before          # before the change
    python scripts/golden_text.py --out /tmp/golden-after --compare /tmp/golden-before
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CODE = "def fibonacci(n):\n    "
PROSE = "The three primary colours are"
N = ["--max-new-tokens", "32", "--json"]

TEXT_RUNS = {
    "default-ngram": [CODE],
    "lean": [CODE, "--drafter", "lean"],
    "hybrid": [CODE, "--drafter", "hybrid"],
    "model": [CODE, "--drafter", "model"],
    "head": [PROSE, "--drafter", "head"],
    "head-hybrid": [CODE, "--drafter", "head-hybrid"],
    "head-tree": [PROSE, "--drafter", "head-tree"],
    "tree-exact": [CODE, "--drafter", "tree", "--exact"],
    "self-hybrid": [CODE, "--drafter", "self-hybrid", "--dtype", "bfloat16"],  # an int4 copy of the dense target
    "int8": [CODE, "--dtype", "int8"],
    "heuristic-k5": [PROSE, "--schedule", "heuristic", "-k", "5", "--drafter", "lean"],
    "sampled": [PROSE, "--temperature", "0.8", "--top-p", "0.9", "--seed", "3", "--drafter", "head-hybrid"],
    "sampled-ngram": [CODE, "--temperature", "0.7", "--top-k", "20", "--seed", "5"],
    "chat": ["Name two prime numbers.", "--chat", "--drafter", "head-hybrid"],
    "stdlib-pair": ["import os\n", "--target", "models/text/target", "--draft", "models/text/draft", "--drafter", "model"],
}
PROMPTS = [{"prompt": CODE}, {"prompt": PROSE}, {"messages": [{"role": "user", "content": "Say hello."}]}]


def scrub(value):
    """The run's record without wall-clock timings (the only part that may change)."""
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if not k.startswith("time_") and k not in ("seconds", "elapsed_s", "wall_s")}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def cli(args: list[str], stdin: str | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "specvideo.cli", *args], input=stdin, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"specvideo {' '.join(args[:3])} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def runs(out: Path) -> None:
    for name, args in TEXT_RUNS.items():
        record = json.loads(cli(["text", *args, *N]).strip().splitlines()[-1])
        (out / f"{name}.json").write_text(json.dumps(scrub(record), indent=1))
        print(name, repr(record["text"][:60]))
    chat = cli(["chat", "--drafter", "head-hybrid", *N], stdin="Hi!\nWhat is 2 + 2?\n")
    (out / "chat-session.json").write_text(json.dumps(scrub([_line(x) for x in chat.splitlines()]), indent=1))
    with tempfile.TemporaryDirectory() as tmp:
        prompts, results = Path(tmp) / "p.jsonl", Path(tmp) / "r.jsonl"
        prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
        cli(["batch", "text", str(prompts), "--out", str(results), "--batch-size", "3", "--max-new-tokens", "24"])
        rows = [json.loads(x) for x in results.read_text().splitlines()]
    (out / "batch.json").write_text(json.dumps(scrub(rows), indent=1))


def _line(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare", type=Path, help="an earlier run's folder to diff against")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs(args.out)
    if args.compare is None:
        return 0
    differ = [f.name for f in sorted(args.compare.glob("*.json")) if f.read_text() != (args.out / f.name).read_text()]
    print("identical" if not differ else f"differ: {', '.join(differ)}")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
