"""The replicas' one HTTP entry (a Ray Serve ingress deployment, ``specvideo.serve.replicas``).

Every request is read whole, keyed by the text leading its prompt (``forwarding.prefix_key``) and
forwarded to an engine replica through a streaming handle call whose first argument is the key, so
the engine deployment's router can route on it. A sampled request without a seed gets one here
(``replay.pin_seed``), named in the answer's ``x-specvideo-seed`` header. The answer's status and
headers go out with its first body bytes: until then a replica that dies is replaced by a retry on
another (the answer is the same on every replica). After, a streamed answer goes out in whole
events, kept in a ``replay.StreamLedger``; when its replica dies, the request is replayed on another,
the replayed text checked against what was sent and dropped, and the stream goes on
(``replay.Resumer``). A replay whose text differs, or a request whose answer depends on the clock,
ends the stream with an error event in the route's own format (OpenAI's error object and ``[DONE]``,
or llama.cpp's ``{"error": {"code", ...}}``). Past the replicas' queues the answer is 429, with no
replica left 503; both with Retry-After. ``GET /metrics`` is a replica's series and the entry's own
(``EntryMetrics``: replays, replayed tokens, refusals and the replay's delay).
"""

import asyncio
import json
import logging
import time

from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from specvideo.serve.app import MAX_BODY_BYTES, _body_size, _error
from specvideo.serve.editor import EDITOR_ROUTES
from specvideo.serve.forwarding import prefix_key
from specvideo.serve.protocol import APIError
from specvideo.serve.replay import (
    SEED_HEADER,
    STREAM_FORMATS,
    ReplayMismatch,
    Resumer,
    StreamLedger,
    not_reproducible,
    pin_seed,
)

RETRIES = 2  # further replicas tried for a request whose replica died before answering
REPLAY_PATIENCE_S = 60.0  # how long a replay waits for room in the replicas' queues
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
DROPPED = {"content-length", "transfer-encoding", "connection"}  # set again for the forwarded body
log = logging.getLogger("specvideo.serve")


def entry_app() -> FastAPI:
    """The entry's ASGI app (built in its replica by ``serve.ingress``): every path to the entry."""
    app = FastAPI(title="specvideo", docs_url=None, redoc_url=None, openapi_url=None)

    @app.api_route("/{path:path}", methods=METHODS)
    async def forward(path: str, request: Request):
        from ray import serve

        return await serve.get_replica_context().servable_object.forward(request)

    return app


class EntryMetrics:
    """The entry's own series, added to a replica's at ``GET /metrics``."""

    def __init__(self):
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.replays = Counter("specvideo_entry_replays", "streams replayed on another replica", registry=r)
        self.resumed = Counter("specvideo_entry_replays_resumed", "replays that caught up and went on", registry=r)
        self.tokens = Counter("specvideo_entry_replayed_tokens", "tokens replayed to reach where a stream was cut", registry=r)
        self.refused = Counter("specvideo_entry_replays_refused", "cut streams ended with an error", ("reason",), registry=r)
        self.delay = Histogram(
            "specvideo_entry_replay_seconds", "from a replica's loss to the first continued event",
            buckets=(0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0), registry=r,
        )


class Entry:
    def __init__(self, engines, max_body_bytes: int = MAX_BODY_BYTES):
        """engines: the engine deployment's handle."""
        self.engines = engines.options(stream=True)
        self.counter = engines
        self.max_body_bytes = max_body_bytes
        self.metrics = EntryMetrics()

    async def forward(self, request: Request):
        if await _body_size(request) > self.max_body_bytes:  # its Content-Length before reading it
            return _error(APIError(413, f"the request body exceeds {self.max_body_bytes} bytes", code="body_too_large"))
        body = await request.body()
        route = request.url.path
        seed = None
        if request.method == "POST":
            body, seed = pin_seed(route, body)
        key = prefix_key(route, body) if request.method == "POST" else None
        call = (key, request.method, route, request.url.query, list(request.headers.items()), body)
        try:
            stream, start, first = await _answered(self.engines, call)
        except APIError as err:
            return _error(err)
        headers = {k: v for k, v in start["headers"] if k.lower() not in DROPPED}
        if seed is not None:
            headers[SEED_HEADER] = str(seed)
        if route == "/metrics" and start["status"] == 200:  # the replica's series, then the entry's
            chunks = [first] + [chunk async for chunk in stream]
            return Response(b"".join(chunks) + generate_latest(self.metrics.registry), headers=headers)
        if headers.get("content-type", "").startswith("text/event-stream") and route in STREAM_FORMATS:
            rest = self._events(stream, first, call)
        else:
            rest = _rest(stream, first, route, headers)
        return StreamingResponse(rest, status_code=start["status"], headers=headers)

    async def _events(self, stream, first: bytes, call: tuple):
        """A streamed answer in whole events; a replica lost mid-stream is replaced by a replay."""
        from ray.exceptions import RayActorError

        route, body = call[2], call[5]
        ledger, resumer, lost = StreamLedger(route), None, 0.0
        for attempt in range(RETRIES + 1):
            done = False
            try:
                async for frame in self._frames(stream, first, ledger, resumer, lost):
                    yield frame
                done = True
                return
            except RayActorError as err:
                done = True
                log.warning("%s: replica lost mid-stream after %d characters: %s", route, len(ledger.text), type(err).__name__)
            except ReplayMismatch as err:
                self.metrics.refused.labels("mismatch").inc()
                log.warning("%s: replay refused: %s", route, err)
                yield _lost_event(route, f"its replay on another replica differed from what was sent ({err})")
                return
            finally:
                if not done:  # the client left, or the replay was refused
                    stream.cancel()
            if attempt == RETRIES:
                break
            lost, why = time.monotonic(), not_reproducible(route, body)
            if why is not None:
                self.metrics.refused.labels("not_reproducible").inc()
                yield _lost_event(route, f"it cannot be replayed ({why})")
                return
            self.metrics.replays.inc()
            try:
                stream, start, first = await _answered(self.engines, call, replay=True)
            except APIError:
                self.metrics.refused.labels("no_replica").inc()
                yield _lost_event(route, "no replica could replay it")
                return
            if start["status"] != 200:
                stream.cancel()
                self.metrics.refused.labels("replay_refused").inc()
                yield _lost_event(route, f"its replay was answered {start['status']}")
                return
            resumer = Resumer(ledger)
        self.metrics.refused.labels("no_replica").inc()
        yield _lost_event(route, f"{RETRIES + 1} replicas died serving it")

    async def _frames(self, stream, first: bytes, ledger: StreamLedger, resumer: Resumer | None, lost: float):
        """The stream's whole events (a replay's: those past the cut, its delay and tokens counted)."""
        cut_text, timed = ledger.text, resumer is None
        async for chunk in _chunks(first, stream):
            frames = ledger.feed(chunk) if resumer is None else resumer.feed(chunk)
            if not timed and resumer.caught_up:
                timed = True
                self.metrics.delay.observe(time.monotonic() - lost)
                self.metrics.resumed.inc()
                if cut_text:
                    asyncio.create_task(self._count_tokens(cut_text))
            for frame in frames:
                yield frame
        if resumer is None and ledger.frames.buffer.strip():  # an unterminated last event
            yield ledger.frames.buffer

    async def _count_tokens(self, text: str) -> None:
        try:
            self.metrics.tokens.inc(await self.counter.count_tokens.remote(None, text))
        except Exception as err:  # noqa: BLE001 - a metric, never the answer's failure
            log.warning("replayed tokens not counted: %s", err)


async def _chunks(first: bytes, stream):
    if first:
        yield first
    async for chunk in stream:
        yield chunk


async def _answered(engines, call: tuple, replay: bool = False):
    """(stream, start, first body chunk) of the first replica that answers; a replica that dies
    before its first body byte is replaced by another, up to ``RETRIES`` times. A ``replay`` goes to
    the head of the replica's queue."""
    from ray.exceptions import RayActorError
    from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError

    attempt, patience = 0, time.monotonic() + REPLAY_PATIENCE_S
    while attempt <= RETRIES:
        stream = engines.forward.remote(*call, replay=replay)
        try:
            start = await stream.__anext__()
            first = await _next_or_empty(stream)
            return stream, start, first
        except BackPressureError:
            if replay and time.monotonic() < patience:  # a client mid-answer waits for room rather than being cut
                await asyncio.sleep(0.25)
                continue
            raise APIError(429, "every replica's queue is full: retry later", "rate_limit_error", headers={"Retry-After": "1"}) from None
        except (RayActorError, DeploymentUnavailableError) as err:
            log.warning("%s: replica lost before answering (try %d): %s", call[2], attempt + 1, type(err).__name__)
            attempt += 1
            await asyncio.sleep(0.2 * attempt)
    raise APIError(
        503, f"the replicas died before answering ({RETRIES + 1} tries): retry later", "unavailable_error",
        code="replica_unavailable", headers={"Retry-After": "5"},
    )


async def _next_or_empty(stream) -> bytes:
    try:
        return await stream.__anext__()
    except StopAsyncIteration:
        return b""


async def _rest(stream, first: bytes, route: str, headers: dict):
    """A non-replayed answer's body from its first chunk on; a replica lost mid-stream ends an event
    stream with an error event in the route's format; a client that leaves cancels the replica's call."""
    from ray.exceptions import RayActorError

    finished = False
    try:
        async for chunk in _chunks(first, stream):
            yield chunk
        finished = True
    except RayActorError as err:
        finished = True
        log.warning("%s: replica lost mid-stream: %s", route, type(err).__name__)
        if headers.get("content-type", "").startswith("text/event-stream"):
            yield _lost_event(route, "")
    finally:
        if not finished:
            stream.cancel()


def _lost_event(route: str, why: str) -> bytes:
    message = "the replica serving this request died mid-stream" + (f" and {why}" if why else "")
    message += ": the answer is incomplete, retry it"
    if route in EDITOR_ROUTES:  # llama.cpp's stream error
        return f"data: {json.dumps({'error': {'code': 503, 'message': message, 'type': 'unavailable_error'}})}\n\n".encode()
    body = APIError(503, message, "server_error", code="replica_died").body()
    return f"data: {json.dumps(body)}\n\ndata: [DONE]\n\n".encode()
