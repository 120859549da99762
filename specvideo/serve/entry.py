"""The replicas' one HTTP entry (a Ray Serve ingress deployment, ``specvideo.serve.replicas``).

Every request is read whole, keyed by the text leading its prompt (``forwarding.prefix_key``) and
forwarded to an engine replica through a streaming handle call whose first argument is the key, so
the engine deployment's router can route on it. The answer's status and headers go out with its
first body bytes: until then a replica that dies is replaced by a retry on another (the answer is
the same on every replica); after, the stream ends with an error event in the route's own format
(OpenAI's error object and ``[DONE]``, or llama.cpp's ``{"error": {"code", ...}}``). Past the
replicas' queues the answer is 429, with no replica left 503; both with Retry-After.
"""

import asyncio
import json
import logging

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from specvideo.serve.app import MAX_BODY_BYTES, _body_size, _error
from specvideo.serve.editor import EDITOR_ROUTES
from specvideo.serve.forwarding import prefix_key
from specvideo.serve.protocol import APIError

RETRIES = 2  # further replicas tried for a request whose replica died before answering
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


class Entry:
    def __init__(self, engines, max_body_bytes: int = MAX_BODY_BYTES):
        """engines: the engine deployment's handle."""
        self.engines = engines.options(stream=True)
        self.max_body_bytes = max_body_bytes

    async def forward(self, request: Request):
        if await _body_size(request) > self.max_body_bytes:  # its Content-Length before reading it
            return _error(APIError(413, f"the request body exceeds {self.max_body_bytes} bytes", code="body_too_large"))
        body = await request.body()
        route = request.url.path
        key = prefix_key(route, body) if request.method == "POST" else None
        call = (key, request.method, route, request.url.query, list(request.headers.items()), body)
        try:
            stream, start, first = await _answered(self.engines, call)
        except APIError as err:
            return _error(err)
        headers = {k: v for k, v in start["headers"] if k.lower() not in DROPPED}
        return StreamingResponse(_rest(stream, first, route, headers), status_code=start["status"], headers=headers)


async def _answered(engines, call: tuple):
    """(stream, start, first body chunk) of the first replica that answers; a replica that dies
    before its first body byte is replaced by another, up to ``RETRIES`` times."""
    from ray.exceptions import RayActorError
    from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError

    for attempt in range(RETRIES + 1):
        stream = engines.forward.remote(*call)
        try:
            start = await stream.__anext__()
            first = await _next_or_empty(stream)
            return stream, start, first
        except BackPressureError:
            raise APIError(429, "every replica's queue is full: retry later", "rate_limit_error", headers={"Retry-After": "1"}) from None
        except (RayActorError, DeploymentUnavailableError) as err:
            log.warning("%s: replica lost before answering (try %d): %s", call[2], attempt + 1, type(err).__name__)
            await asyncio.sleep(0.2 * (attempt + 1))
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
    """The answer's body from its first chunk on; a replica lost mid-stream ends it with an error
    event in the route's format; a client that leaves cancels the replica's call."""
    from ray.exceptions import RayActorError

    finished = False
    try:
        if first:
            yield first
        async for chunk in stream:
            yield chunk
        finished = True
    except RayActorError as err:
        finished = True
        log.warning("%s: replica lost mid-stream: %s", route, type(err).__name__)
        if headers.get("content-type", "").startswith("text/event-stream"):
            yield _lost_event(route)
    finally:
        if not finished:
            stream.cancel()


def _lost_event(route: str) -> bytes:
    message = "the replica serving this request died mid-stream: the answer is incomplete, retry it"
    if route in EDITOR_ROUTES:  # llama.cpp's stream error
        return f"data: {json.dumps({'error': {'code': 503, 'message': message, 'type': 'unavailable_error'}})}\n\n".encode()
    body = APIError(503, message, "server_error", code="replica_died").body()
    return f"data: {json.dumps(body)}\n\ndata: [DONE]\n\n".encode()
