"""``specvideo serve --replicas N``: N engine replicas behind one HTTP entry, on Ray Serve.

Each replica is a Ray Serve deployment replica (its own process) that builds the very app a single
server runs (``create_app`` over its own ``Engine``, the model loaded in a thread behind it), through
``serve.ingress``'s builder, so every route, streaming included, is the same. Serve's proxy is the
one HTTP entry and balances requests over the replicas; Serve calls ``check_health`` every few
seconds and restarts a replica whose worker died or whose model failed to load. ``autoscaling``
(min / max replicas, target ongoing requests) replaces the fixed count.
"""

from __future__ import annotations

import threading
from dataclasses import asdict

from specvideo.serve.settings import ServeSettings, load_generator

_ENGINE = None  # this replica process's engine (each replica is a process of its own)


def build_app(settings: ServeSettings):
    """The replica's ASGI app: an engine that loads the model in a thread, and ``create_app`` over it."""
    global _ENGINE
    import torch

    from specvideo.serve import Engine, create_app

    torch.set_num_threads(settings.threads)
    engine = Engine(
        None, settings.served_name, max_queue=settings.max_queue, max_batch=settings.max_batch,
        max_tokens=settings.max_tokens, prompt_cache_bytes=settings.prompt_cache_mb << 20,
    )
    _ENGINE = engine
    threading.Thread(target=_load, args=(engine, settings), name="specvideo-load", daemon=True).start()
    return create_app(engine, settings.api_key)


def _load(engine, settings: ServeSettings) -> None:
    from specvideo.errors import first_line

    try:
        gen = load_generator(settings)
    except Exception as err:  # noqa: BLE001 - the replica answers 503 and fails its health check
        engine.fail(first_line(err))
        return
    engine.attach(gen)


class Replica:
    """The deployment's class: Serve's health check reads the replica's engine."""

    def check_health(self) -> None:
        if _ENGINE is not None and _ENGINE.state == "failed":
            raise RuntimeError(f"the replica cannot generate: {_ENGINE.error or 'its worker thread stopped'}")


def application(
    settings: ServeSettings,
    replicas: int = 2,
    autoscaling: dict | None = None,
    health_check_period_s: float = 5.0,
):
    """The Serve application: ``replicas`` replicas (or ``autoscaling``: Serve's autoscaling_config,
    e.g. {"min_replicas": 1, "max_replicas": 4, "target_ongoing_requests": 2})."""
    from ray import serve

    ingress = serve.ingress(lambda: build_app(settings))(Replica)
    options = {"autoscaling_config": autoscaling} if autoscaling else {"num_replicas": replicas}
    deployment = serve.deployment(
        ingress,
        name="specvideo",
        max_ongoing_requests=settings.max_queue + settings.max_batch,
        health_check_period_s=health_check_period_s,
        ray_actor_options={"num_cpus": settings.threads},
        **options,
    )
    return deployment.bind()


def app_builder(args: dict):
    """``serve run specvideo.serve.replicas:app_builder model=smollm2 replicas=2``: the same
    application from a config file or the ``serve run`` command line (values are strings there)."""
    known = set(asdict(ServeSettings()))
    ints = {"max_queue", "max_batch", "max_tokens", "prompt_cache_mb", "threads"}
    values = {k: int(v) if k in ints else v for k, v in args.items() if k in known}
    if "exact" in values:
        values["exact"] = str(values["exact"]).lower() in ("1", "true", "yes")
    if values.get("packed", "auto") not in ("auto", "on", "off"):
        raise ValueError(f"packed must be auto, on or off, got {values['packed']!r}")
    unknown = sorted(set(args) - known - {"replicas", "autoscaling"})
    if unknown:
        raise ValueError(f"unknown settings {unknown}; known: {sorted(known | {'replicas', 'autoscaling'})}")
    return application(ServeSettings(**values), int(args.get("replicas", 2)), args.get("autoscaling"))
