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
from dataclasses import asdict, dataclass, field

_ENGINE = None  # this replica process's engine (each replica is a process of its own)


@dataclass(frozen=True)
class ReplicaSettings:
    """What every replica loads and how it serves (``specvideo serve``'s settings)."""

    model: str = "smollm2"
    name: str | None = None
    draft: str | None = None
    drafter: str | None = None
    dtype: str = "auto"
    device: str = "cpu"
    max_queue: int = 16
    max_batch: int = 4
    max_tokens: int = 2048
    prompt_cache_mb: int = 512
    api_key: str | None = None
    threads: int = 1  # torch threads per replica (and the CPUs Ray reserves for it)
    text: dict = field(default_factory=dict)  # further TextConfig settings (num_draft_tokens, ...)


def build_app(settings: ReplicaSettings):
    """The replica's ASGI app: an engine that loads the model in a thread, and ``create_app`` over it."""
    global _ENGINE
    import torch

    from specvideo.serve import Engine, create_app
    from specvideo.text.models.names import model_name

    torch.set_num_threads(settings.threads)
    name = settings.name or model_name(settings.model)
    engine = Engine(
        None, name, max_queue=settings.max_queue, max_batch=settings.max_batch, max_tokens=settings.max_tokens,
        prompt_cache_bytes=settings.prompt_cache_mb << 20,
    )
    _ENGINE = engine
    threading.Thread(target=_load, args=(engine, settings), name="specvideo-load", daemon=True).start()
    return create_app(engine, settings.api_key)


def _load(engine, settings: ReplicaSettings) -> None:
    from specvideo.errors import first_line
    from specvideo.text import SpeculativeGenerator
    from specvideo.text.config import TEXT_DEFAULTS

    try:
        config = TEXT_DEFAULTS.updated(**({"drafter": settings.drafter} if settings.drafter else {}), **settings.text)
        gen = SpeculativeGenerator.from_pretrained(
            settings.model, settings.draft, dtype=settings.dtype, device=settings.device, config=config
        )
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
    settings: ReplicaSettings,
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
    known = set(asdict(ReplicaSettings()))
    ints = {"max_queue", "max_batch", "max_tokens", "prompt_cache_mb", "threads"}
    values = {k: int(v) if k in ints else v for k, v in args.items() if k in known}
    unknown = sorted(set(args) - known - {"replicas", "autoscaling"})
    if unknown:
        raise ValueError(f"unknown settings {unknown}; known: {sorted(known | {'replicas', 'autoscaling'})}")
    return application(ReplicaSettings(**values), int(args.get("replicas", 2)), args.get("autoscaling"))
