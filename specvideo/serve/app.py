"""``specvideo serve``: the OpenAI HTTP API over the shared speculative core (FastAPI + uvicorn).

Routes: ``POST /v1/completions`` (``prompt``, ``suffix`` for fill-in-the-middle), ``POST
/v1/chat/completions`` (``messages`` through the model's chat template), ``GET /v1/models``,
``GET /health``. ``stream: true`` answers with server-sent events in OpenAI's chunk format ending
with ``data: [DONE]``. Every answer carries ``usage`` and a ``speculative`` field (acceptance rate,
tokens per target call, the batch it ran in). Errors are OpenAI's error JSON: 400 for bad fields,
401 for a wrong API key, 413 for a prompt past the context, 429 when the queue is full.
"""

from __future__ import annotations

import asyncio
import json
import queue
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse

from specvideo.serve.engine import Done, Engine, Failed, Job, Piece
from specvideo.serve.protocol import (
    APIError,
    ChatRequest,
    CompletionRequest,
    chat_body,
    completion_body,
    new_id,
)
from specvideo.text.prompts import FIM_TOKENS, chat_ids, fim_ids
from specvideo.text.state import context_length

DEFAULT_CHAT_TOKENS = 512
POLL_S = 0.25  # how often a waiting stream checks that its client is still there


def create_app(engine: Engine, api_key: str | None = None) -> FastAPI:
    app = FastAPI(title="specvideo", docs_url=None, redoc_url=None)

    @app.exception_handler(APIError)
    async def _api_error(request: Request, err: APIError):
        return JSONResponse(err.body(), status_code=err.status)

    @app.exception_handler(RequestValidationError)
    async def _bad_fields(request: Request, err: RequestValidationError):
        first = err.errors()[0]
        field = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return JSONResponse(
            APIError(400, f"{field}: {first.get('msg')}", param=field or None).body(), status_code=400
        )

    @app.middleware("http")
    async def _auth(request: Request, call_next):
        if api_key and request.url.path.startswith("/v1/"):
            if request.headers.get("authorization", "") != f"Bearer {api_key}":
                err = APIError(
                    401, "invalid or missing API key (Authorization: Bearer ...)", code="invalid_api_key"
                )
                return JSONResponse(err.body(), status_code=401)
        return await call_next(request)

    @app.get("/health")
    async def health():
        return {"status": "ok", "model": engine.model_name, "queued": engine.queue.qsize()}

    @app.get("/v1/models")
    async def models():
        return {
            "object": "list",
            "data": [{"id": engine.model_name, "object": "model", "created": 0, "owned_by": "specvideo"}],
        }

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request):
        ids = _completion_ids(engine, body)
        job = _job(engine, body, ids, body.max_tokens)
        return await _answer(engine, job, request, body.stream, completion_body, new_id("cmpl"))

    @app.post("/v1/chat/completions")
    async def chat(body: ChatRequest, request: Request):
        _check_model(engine, body.model)
        try:
            ids = chat_ids([m.model_dump() for m in body.messages], engine.generator.tokenizer)
        except ValueError as err:
            raise APIError(400, str(err), param="messages") from None
        job = _job(engine, body, ids, body.limit)
        return await _answer(engine, job, request, body.stream, chat_body, new_id("chatcmpl"))

    return app


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


def _job(engine: Engine, body, ids: list[int], max_tokens: int | None) -> Job:
    context = context_length(engine.generator.target)
    room = context - len(ids)
    if room <= 0 or (max_tokens is not None and max_tokens > room):
        asked = "" if max_tokens is None else f" and max_tokens ({max_tokens})"
        raise APIError(
            413,
            f"the prompt ({len(ids)} tokens){asked} exceed the model's context of {context} tokens",
            param="prompt",
            code="context_length_exceeded",
        )
    limit = max_tokens if max_tokens is not None else min(DEFAULT_CHAT_TOKENS, room)
    return Job(ids, limit, body.temperature, body.top_p, body.seed, body.stops)


async def _answer(engine: Engine, job: Job, request: Request, stream: bool, make, rid: str):
    engine.submit(job)
    if stream:
        return StreamingResponse(
            _events(job, request, make, rid, engine.model_name), media_type="text/event-stream"
        )
    text = ""
    while True:
        event = await _next(job, request)
        if isinstance(event, Piece):
            text += event.text
        elif isinstance(event, Failed):
            raise event.error
        elif isinstance(event, Done):
            return make(
                rid, engine.model_name, text, event.finish_reason, event.usage, event.speculative, chunk=False
            )
        elif event is None:  # the client left
            return JSONResponse({}, status_code=499)


async def _events(job: Job, request: Request, make, rid: str, model: str) -> AsyncIterator[str]:
    """The SSE stream of one job; however it ends (done, failed, the client gone, the task
    cancelled by the server on disconnect), an unfinished job is cancelled."""
    first, finished = True, False
    try:
        while True:
            event = await _next(job, request)
            if event is None:
                return
            if isinstance(event, Failed):
                finished = True
                yield _sse(event.error.body())
                break
            if isinstance(event, Piece):
                yield _sse(_chunk(make, rid, model, event.text, None, None, None, first))
                first = False
            elif isinstance(event, Done):
                finished = True
                yield _sse(
                    _chunk(make, rid, model, "", event.finish_reason, event.usage, event.speculative, first)
                )
                break
        yield "data: [DONE]\n\n"
    finally:
        if not finished:
            job.cancelled.set()


def _chunk(make, rid, model, text, finish, usage, extra, first) -> dict:
    if make is chat_body:
        return chat_body(rid, model, text, finish, usage, extra, chunk=True, first=first)
    return completion_body(rid, model, text, finish, usage, extra, chunk=True)


async def _next(job: Job, request: Request):
    """The job's next event; None (and the job cancelled) once the client has disconnected."""
    while True:
        try:
            return await asyncio.to_thread(job.events.get, timeout=POLL_S)
        except queue.Empty:
            if await request.is_disconnected():
                job.cancelled.set()
                return None


def _sse(data: dict) -> str:
    return f"data: {json.dumps(data)}\n\n"
