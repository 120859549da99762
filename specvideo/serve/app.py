"""``specvideo serve``: the OpenAI HTTP API over the shared speculative core (FastAPI + uvicorn).

Routes: ``POST /v1/completions`` (``prompt``, ``suffix`` for fill-in-the-middle), ``POST
/v1/chat/completions`` (``messages`` through the model's chat template), ``GET /v1/models``,
``GET /health``, ``GET /metrics`` (Prometheus, ``specvideo.serve.metrics``), the editor plugins' ``/infill``, ``/completion`` and ``/v1/fim/completions``
(``specvideo.serve.editor``), and ``POST /v1/verify``, a client's own draft checked in a session
(``specvideo.serve.verify``). ``stream: true`` answers with server-sent events in OpenAI's chunk format ending
with ``data: [DONE]``. Every answer carries ``usage`` and a ``speculative`` field (acceptance rate,
tokens per target call, the batch it ran in). Errors are OpenAI's error JSON on every route: 400
for bad or unsupported fields, 401 for a wrong API key, 404 for an unknown route, 413 for a body
past ``max_body_bytes`` or a prompt past the context, 429 when the queue is full and 503 while the
model loads or after the worker died (both with ``Retry-After``). ``/health`` is 200 only when the
server can generate (llama.cpp's convention: 503 while loading). Prompts are tokenized off the event
loop; every request logs one line (``specvideo.serve``): id, route, tokens, TTFT, tok/s, acceptance.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException

from specvideo.serve.editor import EDITOR_ROUTES, add_editor_routes
from specvideo.serve.engine import Engine, Failed, Job, Piece
from specvideo.serve.protocol import (
    APIError,
    ChatRequest,
    CompletionRequest,
    chat_body,
    completion_body,
    new_id,
)
from specvideo.serve.requests import Trace, job_events, submit
from specvideo.serve.verify import add_verify_route
from specvideo.text.prompts import FIM_TOKENS, chat_ids, fim_ids

DEFAULT_CHAT_TOKENS = 512
MAX_BODY_BYTES = 4 << 20  # 4 MiB: far past any context these models hold
log = logging.getLogger("specvideo.serve")


def _error(err: APIError) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.status, headers=err.headers)


def create_app(engine: Engine, api_key: str | None = None, max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    app = FastAPI(title="specvideo", docs_url=None, redoc_url=None)
    routes: set[str] = set()  # the paths /metrics labels requests by (any other is "unmatched")

    @app.exception_handler(APIError)
    async def _api_error(request: Request, err: APIError):
        return _error(err)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, err: HTTPException):  # 404 / 405 in OpenAI's JSON
        what = {404: f"no route {request.url.path}", 405: f"{request.method} is not allowed on {request.url.path}"}
        return _error(APIError(err.status_code, what.get(err.status_code, str(err.detail)), code=str(err.status_code)))

    @app.exception_handler(RequestValidationError)
    async def _bad_fields(request: Request, err: RequestValidationError):
        first = err.errors()[0]
        field = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        message = str(first.get("msg", "")).removeprefix("Value error, ")
        return _error(APIError(400, f"{field}: {message}" if field else message, param=field or None))

    @app.middleware("http")
    async def _guard(request: Request, call_next):
        if api_key and (request.url.path.startswith("/v1/") or request.url.path in EDITOR_ROUTES):
            if request.headers.get("authorization", "") != f"Bearer {api_key}":
                return _error(APIError(401, "invalid or missing API key (Authorization: Bearer ...)", code="invalid_api_key"))
        if request.method == "POST" and await _body_size(request) > max_body_bytes:
            response = _error(APIError(413, f"the request body exceeds {max_body_bytes} bytes", code="body_too_large"))
        else:
            response = await call_next(request)
        if request.method == "POST" and not getattr(request.state, "traced", False):  # refused before a job
            log.info("- %s refused %d", request.url.path, response.status_code)
        engine.metrics.answered(request.url.path if request.url.path in routes else "unmatched", response.status_code)
        return response

    @app.get("/metrics")
    async def metrics():  # Prometheus' text format (specvideo.serve.metrics)
        return Response(engine.metrics.render(), media_type=engine.metrics.content_type)

    @app.get("/health")
    async def health():
        body = {"status": engine.state, "model": engine.model_name, "queued": engine.queue.qsize()}
        if (err := engine.unavailable()) is not None:
            return JSONResponse({**body, **err.body()}, status_code=503, headers=err.headers)
        return {**body, "status": "ok"}

    @app.get("/v1/models")
    async def models():
        return {
            "object": "list",
            "data": [{"id": engine.model_name, "object": "model", "created": 0, "owned_by": "specvideo"}],
        }

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request):
        _ready(engine)
        ids = await asyncio.to_thread(_completion_ids, engine, body)
        job = _job(engine, body, ids, body.max_tokens)
        return await _answer(engine, job, request, body.stream, completion_body, new_id("cmpl"))

    @app.post("/v1/chat/completions")
    async def chat(body: ChatRequest, request: Request):
        _ready(engine)
        _check_model(engine, body.model)
        try:
            messages = [m.model_dump() for m in body.messages]
            ids = await asyncio.to_thread(chat_ids, messages, engine.generator.tokenizer)
        except ValueError as err:
            raise APIError(400, str(err), param="messages") from None
        job = _job(engine, body, ids, body.limit)
        return await _answer(engine, job, request, body.stream, chat_body, new_id("chatcmpl"))

    add_editor_routes(app, engine, _answer, _ready)
    add_verify_route(app, engine, _ready, _check_model, _verify_ids)
    routes.update(route.path for route in app.routes)
    return app


async def _body_size(request: Request) -> int:
    """The body's size: its Content-Length, or the body read whole when it comes chunked."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit():
        return int(length)
    return len(await request.body())


def _ready(engine: Engine) -> None:
    if (err := engine.unavailable()) is not None:
        raise err


def _check_model(engine: Engine, name: str) -> None:
    if name != engine.model_name:
        raise APIError(
            400,
            f"unknown model {name!r}; this server serves {engine.model_name!r}",
            param="model",
            code="model_not_found",
        )


def _completion_ids(engine: Engine, body: CompletionRequest) -> list[int]:
    _check_model(engine, body.model)
    tok = engine.generator.tokenizer
    if body.suffix is not None:
        ids = fim_ids(tok, body.prompt, body.suffix)
        if ids is None:
            raise APIError(
                400,
                f"model {engine.model_name!r} has no fill-in-the-middle tokens {list(FIM_TOKENS)}: drop 'suffix'",
                param="suffix",
            )
        return ids
    if not body.prompt:
        raise APIError(400, "prompt is empty: give some text to continue", param="prompt")
    return list(tok(body.prompt)["input_ids"])


def _verify_ids(engine: Engine, body) -> list[int]:
    """A /v1/verify session's prompt: token ids as given, text tokenized, or chat messages templated."""
    tok = engine.generator.tokenizer
    if body.messages is not None:
        try:
            return chat_ids([m.model_dump() for m in body.messages], tok)
        except ValueError as err:
            raise APIError(400, str(err), param="messages") from None
    if isinstance(body.prompt, list):
        vocab = engine.generator.models.vocab_size
        if not body.prompt or any(not 0 <= t < vocab for t in body.prompt):
            raise APIError(400, f"prompt token ids must be a non-empty list in [0, {vocab})", param="prompt")
        return list(body.prompt)
    if not body.prompt:
        raise APIError(400, "prompt is empty: give some text to continue", param="prompt")
    return list(tok(body.prompt)["input_ids"])


def _job(engine: Engine, body, ids: list[int], max_tokens: int | None) -> Job:
    room = engine.room(ids, max(max_tokens or 0, 1))  # at least one token must fit
    limit = max_tokens if max_tokens is not None else min(DEFAULT_CHAT_TOKENS, room)
    if engine.max_tokens is not None:
        limit = min(limit, engine.max_tokens)  # the server's cap (--max-tokens)
    return Job(ids, limit, body.temperature, body.top_p, body.seed, body.stops)


async def _answer(engine: Engine, job: Job, request: Request, stream: bool, make, rid: str):
    trace = submit(engine, job, request, rid)
    if stream:
        return StreamingResponse(
            _events(job, request, make, rid, engine.model_name, trace), media_type="text/event-stream"
        )
    text = ""
    async for event in job_events(job, request, trace):
        if isinstance(event, Piece):
            text += event.text
        elif isinstance(event, Failed):
            raise event.error
        else:
            return make(
                rid, engine.model_name, text, event.finish_reason, event.usage, event.speculative, chunk=False
            )
    return JSONResponse({}, status_code=499)  # the client left


async def _events(job: Job, request: Request, make, rid: str, model: str, trace: Trace) -> AsyncIterator[str]:
    """The SSE stream of one job, ending with ``data: [DONE]`` unless the client left."""
    first, ended = True, False
    async for event in job_events(job, request, trace):
        if isinstance(event, Piece):
            yield _sse(_chunk(make, rid, model, event.text, None, None, None, first))
            first = False
        elif isinstance(event, Failed):
            ended = True
            yield _sse(event.error.body())
        else:
            ended = True
            yield _sse(_chunk(make, rid, model, "", event.finish_reason, event.usage, event.speculative, first))
    if ended:
        yield "data: [DONE]\n\n"


def _chunk(make, rid, model, text, finish, usage, extra, first) -> dict:
    if make is chat_body:
        return chat_body(rid, model, text, finish, usage, extra, chunk=True, first=first)
    return completion_body(rid, model, text, finish, usage, extra, chunk=True)


def _sse(data: dict) -> str:
    return f"data: {json.dumps(data)}\n\n"
