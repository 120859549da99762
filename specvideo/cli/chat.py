"""``specvideo chat``: an interactive terminal chat that streams each reply and keeps the conversation."""

from __future__ import annotations

import argparse
import json
import sys

from specvideo.cli.text import add_settings, load_generator, seeded


def add(commands) -> None:
    p = commands.add_parser(
        "chat",
        help="interactive chat with the target's chat template (default: SmolLM2-135M-Instruct)",
        description="Type a message and press Enter; the reply streams as it is generated. "
        "An empty line or /exit (or end of input) ends the chat, /reset starts a new conversation.",
    )
    p.add_argument("--system", help="a system message that opens the conversation")
    add_settings(p)
    p.add_argument("--json", action="store_true", help="after each reply, print its statistics as one JSON line")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    gen = load_generator(args)
    opening = [{"role": "system", "content": args.system}] if args.system else []
    messages = list(opening)
    interactive = sys.stdin.isatty()
    while True:
        if interactive:
            sys.stdout.write("you> ")
            sys.stdout.flush()
        line = sys.stdin.readline()
        text = line.strip()
        if not line or not text or text == "/exit":
            return 0
        if text == "/reset":
            messages = list(opening)
            continue
        messages.append({"role": "user", "content": text})
        try:
            run_ = gen.start(messages, **seeded(args))
        except ValueError as err:  # e.g. the conversation outgrew the context: say so, keep chatting
            messages.pop()
            print(f"specvideo: error: {err}", file=sys.stderr)
            continue
        reply = []
        for piece in gen.stream_run(run_):
            reply.append(piece)
            sys.stdout.write(piece)
            sys.stdout.flush()
        sys.stdout.write("\n")
        messages.append({"role": "assistant", "content": "".join(reply).strip()})
        if args.json:
            print(json.dumps({"turn": sum(m["role"] == "user" for m in messages), "stats": run_.stats.to_dict()}))
        sys.stdout.flush()
