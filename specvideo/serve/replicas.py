"""``specvideo serve --replicas N``: N engine replicas behind one HTTP entry, on Ray Serve.

Two deployments. ``specvideo``: N engine replicas, each its own process running the very app a
single server runs (``create_app`` over its own ``Engine``; the model loads before Serve routes to
it). ``entry``: the one HTTP ingress; it reads each request's body, keys it by the text leading its
prompt (``forwarding.prefix_key``) and forwards it through a streaming ``DeploymentHandle`` call, so
Serve's request router sees the key: ``routing="prefix"`` (``routing.PrefixRouter``) sends prompts
that start alike to the same replica and its warm prompt cache, ``"load"`` keeps Serve's default
(the less loaded of two random replicas). The replica runs the request through its app in process
(``forwarding.asgi_stream``) and streams the bytes back as they are written: every route, streaming
included, is the single server's.

Nothing is lost across replicas: a replica that dies before any byte of its answer went out is
retried on another (generation is a pure function of the request, so the answer is the same);
a stream whose replica dies mid-way is replayed on another, the replayed text checked against what
was sent and skipped, and continued (``specvideo.serve.replay``); Serve calls
``check_health`` every few seconds and restarts a replica whose worker died or whose model failed
to load. Past the replicas' queues the entry answers 429. ``autoscaling`` (min / max replicas,
target ongoing requests) replaces the fixed count.
"""

from __future__ import annotations

from dataclasses import asdict

from specvideo.serve.settings import ServeSettings, load_generator


class Replica:
    """The engine deployment's class: its own engine and app, which the entry forwards to. The
    model loads in the constructor: Serve routes to a replica only once that returns, so a new or
    restarted replica never answers "loading"; a model that fails to load fails the replica's start,
    with its error in ``serve status``."""

    def __init__(self, settings: ServeSettings):
        import torch

        from specvideo.serve import Engine, create_app

        torch.set_num_threads(settings.threads)
        self.engine = Engine(
            None, settings.served_name, max_queue=settings.max_queue, max_batch=settings.max_batch,
            max_tokens=settings.max_tokens, prompt_cache_bytes=settings.prompt_cache_mb << 20,
        )
        self.engine.attach(load_generator(settings))
        self.app = create_app(self.engine, settings.api_key)

    async def forward(
        self, key: str | None, method: str, path: str, query: str, headers: list, body: bytes, replay: bool = False
    ):
        """The response to one request, streamed: its start ({"status", "headers"}), then its body
        chunks. ``key`` is the router's (``routing.PrefixRouter``); the app never reads it. A
        ``replay`` (a stream cut on another replica) goes to the head of the engine's queue."""
        from ray import serve

        from specvideo.serve.forwarding import asgi_stream
        from specvideo.serve.requests import REPLAY_EXTENSION

        replica = serve.get_replica_context().replica_id.unique_id
        extensions = {REPLAY_EXTENSION: True} if replay else None
        async for item in asgi_stream(self.app, method, path, query, headers, body, extensions):
            if isinstance(item, dict):  # the start: say which replica answers
                item["headers"].append(("x-specvideo-replica", replica))
            yield item

    def count_tokens(self, key: str | None, text: str) -> int:
        """The tokens of ``text`` (the entry's count of what a replay regenerated); ``key`` as forward's."""
        return len(self.engine.generator.tokenizer(text, add_special_tokens=False)["input_ids"])

    def check_health(self) -> None:
        if self.engine.state == "failed":
            raise RuntimeError(f"the replica cannot generate: {self.engine.error or 'its worker thread stopped'}")


ROUTINGS = ("prefix", "load")


def application(
    settings: ServeSettings,
    replicas: int = 2,
    autoscaling: dict | None = None,
    health_check_period_s: float = 5.0,
    routing: str = "prefix",
):
    """The Serve application: the entry over ``replicas`` engine replicas (or ``autoscaling``:
    Serve's autoscaling_config, e.g. {"min_replicas": 1, "max_replicas": 4,
    "target_ongoing_requests": 2}), routed by prompt prefix or by load alone."""
    from ray import serve
    from ray.serve.config import RequestRouterConfig

    from specvideo.serve.entry import Entry, entry_app

    if routing not in ROUTINGS:
        raise ValueError(f"routing must be one of {ROUTINGS}, got {routing!r}")
    most = autoscaling["max_replicas"] if autoscaling else replicas
    options = {"autoscaling_config": autoscaling} if autoscaling else {"num_replicas": replicas}
    if routing == "prefix":
        options["request_router_config"] = RequestRouterConfig(
            request_router_class="specvideo.serve.routing:PrefixRouter",
            request_router_kwargs={"imbalance": settings.max_batch},
        )
    engines = serve.deployment(
        Replica,
        name="specvideo",
        max_ongoing_requests=settings.max_queue + settings.max_batch,  # what one engine holds
        max_queued_requests=settings.max_queue * most,  # past it the entry answers 429
        health_check_period_s=health_check_period_s,
        ray_actor_options={"num_cpus": settings.threads},
        **options,
    )
    entry = serve.deployment(
        serve.ingress(entry_app)(Entry),
        name="entry",
        max_ongoing_requests=(settings.max_queue * 2 + settings.max_batch) * most,
        ray_actor_options={"num_cpus": 0},
    )
    return entry.bind(engines.bind(settings))


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
    extra = {"replicas", "autoscaling", "routing"}
    unknown = sorted(set(args) - known - extra)
    if unknown:
        raise ValueError(f"unknown settings {unknown}; known: {sorted(known | extra)}")
    return application(
        ServeSettings(**values), int(args.get("replicas", 2)), args.get("autoscaling"),
        routing=args.get("routing", "prefix"),
    )
