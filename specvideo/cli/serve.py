"""``specvideo serve``: an OpenAI-compatible HTTP server (completions with fill-in-the-middle, chat,
streaming) over the speculative text generator, for editors and chat front-ends."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from specvideo.cli.common import UsageError, add_dtype, add_seed_and_device
from specvideo.serve.settings import ServeSettings, load_generator
from specvideo.text.config import MODEL_DRAFTERS, SELF_DRAFTERS


def add(commands) -> None:
    p = commands.add_parser("serve", help="OpenAI-compatible HTTP server (completions, FIM, chat, streaming)")
    p.add_argument(
        "--model",
        default="smollm2",
        help="smollm2 (SmolLM2-135M-Instruct and its trained draft), qwen-coder (Qwen2.5-Coder-1.5B-Instruct "
        "drafted by its draft head behind prompt lookup; scripts/fetch_qwen_coder.sh first), FILE.gguf or a model directory",
    )
    p.add_argument("--name", help="the model id clients ask for (default: smollm2, or the directory's name)")
    drafting = p.add_mutually_exclusive_group()
    drafting.add_argument("--draft", help="draft model directory (same tokenizer as the model)")
    drafting.add_argument(
        "--ngram", action="store_true", help="draft by prompt lookup instead of a draft model"
    )
    p.add_argument(
        "--drafter", choices=MODEL_DRAFTERS + SELF_DRAFTERS, help="how to draft (default for smollm2: prompt lookup, ngram)"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this machine only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", help="require 'Authorization: Bearer KEY' on /v1/ routes")
    p.add_argument(
        "--max-queue", type=int, default=16, help="requests waiting at most; more are refused with 429"
    )
    p.add_argument(
        "--max-batch",
        type=int,
        default=4,
        help="requests decoded together at most: a request joins the running batch at its next round "
        "and leaves it when done",
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=2048,
        help="the most tokens one request generates; a larger max_tokens is cut to it",
    )
    p.add_argument(
        "--prompt-cache-mb",
        type=int,
        default=512,
        help="memory for the keys and values of recent prompts, reused by prompts that share their "
        "prefix (an editor's keystrokes); 0 keeps none",
    )
    p.add_argument(
        "--packed",
        choices=("auto", "on", "off"),
        default="auto",
        help="transformers-run models on oneDNN pre-packed weights (auto: float32 on a CPU; "
        "Qwen2.5-Coder-1.5B 1.3-1.5x faster per token, docs/BENCHMARKS.md)",
    )
    add_dtype(p)
    add_seed_and_device(p, 0, None)
    ray = p.add_argument_group("replicas on Ray Serve (the ray extra)")
    ray.add_argument(
        "--replicas", type=int, default=1,
        help="engine replicas behind one HTTP entry on a local Ray cluster (1: one process, no Ray)",
    )
    ray.add_argument(
        "--max-replicas", type=int, help="autoscale between --replicas and this many on ongoing requests"
    )
    ray.add_argument(
        "--target-ongoing-requests", type=float, default=2.0, help="autoscaling: requests a replica should hold"
    )
    ray.add_argument("--replica-threads", type=int, default=1, help="torch threads (and Ray CPUs) per replica")
    ray.add_argument(
        "--routing", choices=("prefix", "load"), default="prefix",
        help="prefix: prompts that start alike go to the same replica, whose prompt cache holds them (load breaks "
        "ties); load: Serve's default, the less loaded of two random replicas",
    )
    p.set_defaults(run=run)


def settings_of(args: argparse.Namespace) -> ServeSettings:
    """The model settings of --model / --name / --draft / --ngram / --drafter / --dtype / ..."""
    return ServeSettings(
        model=args.model, name=args.name, draft=None if args.ngram else args.draft,
        drafter="ngram" if args.ngram else args.drafter, dtype=args.dtype, device=args.device,
        packed=args.packed, exact=args.exact,
    )


def load(args: argparse.Namespace):
    """(generator, model name) for --model / --draft / --ngram / --drafter."""
    settings = settings_of(args)
    return load_generator(settings), settings.served_name


def run(args: argparse.Namespace) -> int:
    """Listen at once and load the model in a thread: 503 (``/health`` included) until it is ready;
    a failed load stops the server with its error."""
    import logging
    import threading

    import uvicorn

    from specvideo.errors import first_line
    from specvideo.serve import Engine, create_app
    from specvideo.text.models.names import check_model

    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be in 1..65535, got {args.port}")
    if args.max_queue < 1 or args.max_batch < 1:
        raise UsageError("--max-queue and --max-batch must be >= 1")
    if args.max_tokens < 1:
        raise UsageError(f"--max-tokens must be >= 1, got {args.max_tokens}")
    if args.prompt_cache_mb < 0:
        raise UsageError(f"--prompt-cache-mb must be >= 0, got {args.prompt_cache_mb}")
    check_model(args.model)  # a missing model fails here, before the server listens
    if args.replicas != 1 or args.max_replicas is not None:
        return run_replicas(args)
    name = settings_of(args).served_name
    engine = Engine(
        None, name, max_queue=args.max_queue, max_batch=args.max_batch, max_tokens=args.max_tokens,
        prompt_cache_bytes=args.prompt_cache_mb << 20,
    )
    server = uvicorn.Server(
        uvicorn.Config(create_app(engine, args.api_key), host=args.host, port=args.port, log_level="warning")
    )
    failed: list[Exception] = []

    def load_model() -> None:
        try:
            gen, _ = load(args)
        except Exception as err:  # noqa: BLE001 - reported by the CLI once the server stops
            failed.append(err)
            engine.fail(first_line(err))
            server.should_exit = True
            return
        engine.attach(gen)
        print(f"ready: {name} ({gen.config.drafter} drafter)", flush=True)

    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    logging.getLogger("specvideo.serve").setLevel(logging.INFO)
    threading.Thread(target=load_model, name="specvideo-load", daemon=True).start()
    print(f"serving {name} on http://{args.host}:{args.port}/v1 (OpenAI API; 503 until loaded)", flush=True)
    server.run()
    if failed:
        raise failed[0]
    return 0


def run_replicas(args: argparse.Namespace) -> int:
    """``--replicas N``: N engines on Ray Serve behind one HTTP entry (``specvideo.serve.replicas``),
    until interrupted."""
    import time

    if args.replicas < 1 or args.replica_threads < 1:
        raise UsageError("--replicas and --replica-threads must be >= 1")
    if args.max_replicas is not None and args.max_replicas < args.replicas:
        raise UsageError(f"--max-replicas ({args.max_replicas}) must be >= --replicas ({args.replicas})")
    if args.target_ongoing_requests <= 0:
        raise UsageError(f"--target-ongoing-requests must be > 0, got {args.target_ongoing_requests}")
    try:
        import ray
        from ray import serve
    except ImportError:
        raise UsageError("--replicas needs Ray Serve: pip install 'specvideo[ray]'") from None
    from specvideo.serve.replicas import application

    settings = replace(
        settings_of(args), max_queue=args.max_queue, max_batch=args.max_batch, max_tokens=args.max_tokens,
        prompt_cache_mb=args.prompt_cache_mb, api_key=args.api_key, threads=args.replica_threads,
    )
    autoscaling = None
    if args.max_replicas is not None:
        autoscaling = {
            "min_replicas": args.replicas, "max_replicas": args.max_replicas,
            "target_ongoing_requests": args.target_ongoing_requests,
        }
    import signal

    def interrupt(signum, frame):  # a service manager's SIGTERM shuts Serve down as Ctrl-C does
        raise KeyboardInterrupt

    ray.init(include_dashboard=False, ignore_reinit_error=True)
    signal.signal(signal.SIGTERM, interrupt)  # after ray.init, which installs its own
    serve.start(http_options={"host": args.host, "port": args.port})
    serve.run(application(settings, args.replicas, autoscaling, routing=args.routing), route_prefix="/", blocking=False)
    count = f"{args.replicas}-{args.max_replicas}" if autoscaling else str(args.replicas)
    print(f"serving on http://{args.host}:{args.port}/v1 with {count} replicas (Ray Serve, {args.routing} routing; 503 until loaded)", flush=True)
    try:
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        serve.shutdown()
        ray.shutdown()
    return 0
