"""The routes editor plugins call, in the shapes their clients send.

- ``POST /infill`` (llama.cpp; llama.vscode and llama.vim): ``input_prefix``, ``input_suffix``,
  ``input_extra`` ([{filename, text}], chunks of other open files, laid out with the model's
  repository FIM tokens), ``prompt`` (the start of the middle), ``n_predict`` (0: no generation,
  a cache warm-up), ``t_max_predict_ms``, ``stream`` in llama.cpp's SSE format (``data: {"content",
  "stop"}`` lines, no ``[DONE]``).
- ``POST /completion`` (llama.cpp; Twinny, Continue's llama.cpp provider): ``prompt`` as text or
  token ids, the same options and answer.
- ``POST /v1/fim/completions`` (Mistral's FIM route, Continue): ``prompt`` + ``suffix``; answers
  in the chat completion shape (``choices[0].message.content``, streamed as ``delta.content``).

``cache_prompt: false`` keeps a request off the prompt cache. llama.cpp's ``samplers``,
``t_max_prompt_ms`` and its other tuning fields are accepted and ignored: sampling here is temperature, then top-k, then top-p, whatever the chain asks.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from specvideo.serve.engine import Done, Engine, Failed, Job, Piece
from specvideo.serve.protocol import APIError, _Request, chat_body, new_id
from specvideo.serve.requests import job_events, submit
from specvideo.text.prompts import FIM_TOKENS, infill_ids
from specvideo.text.runtime.contract import context_length

EDITOR_ROUTES = ("/infill", "/completion")  # behind --api-key too, as llama.cpp's


class ExtraChunk(BaseModel):
    filename: str = ""
    text: str = ""


class LlamaRequest(BaseModel):
    """llama.cpp's /completion options this server reads (the rest are accepted and ignored)."""

    model_config = ConfigDict(extra="ignore")

    prompt: str | list[int] = ""
    n_predict: int = Field(default=-1, ge=-1)  # -1: up to the server's cap
    temperature: float = Field(default=0.8, ge=0.0, le=2.0)
    top_k: int = Field(default=40, ge=0)
    top_p: float = Field(default=0.95, gt=0.0, le=1.0)
    stop: list[str] = Field(default_factory=list, max_length=16)
    seed: int = -1
    stream: bool = False
    t_max_predict_ms: float | None = Field(default=None, ge=0)
    cache_prompt: bool = True  # false: this request neither reuses nor keeps a cached prompt
    n_probs: int = Field(default=0, ge=0, le=0)  # token probabilities are not served


class InfillRequest(LlamaRequest):
    input_prefix: str = ""
    input_suffix: str = ""
    input_extra: list[ExtraChunk] = Field(default_factory=list)


class FimRequest(_Request):
    prompt: str
    suffix: str = ""
    max_tokens: int | None = Field(default=None, ge=0)


def add_editor_routes(app: FastAPI, engine: Engine, answer, ready) -> None:
    """``answer``: the OpenAI routes' answer function (submit, wait or stream); ``ready``: the 503 check."""

    @app.post("/infill")
    async def infill(body: InfillRequest, request: Request):
        ready(engine)
        extra = [(c.filename, c.text) for c in body.input_extra]
        budget = context_length(engine.generator.target) - _predict(engine, body)
        ids = await asyncio.to_thread(
            infill_ids, engine.generator.tokenizer, body.input_prefix, body.input_suffix, extra,
            body.prompt if isinstance(body.prompt, str) else "", budget,
        )
        if ids is None:
            raise APIError(400, f"model {engine.model_name!r} has no fill-in-the-middle tokens {list(FIM_TOKENS)}")
        return await _llama_answer(engine, body, ids, request)

    @app.post("/completion")
    async def completion(body: LlamaRequest, request: Request):
        ready(engine)
        if isinstance(body.prompt, list):
            ids = list(body.prompt)
            vocab = engine.generator.target.config.vocab_size
            if not ids or any(not 0 <= t < vocab for t in ids):
                raise APIError(400, f"prompt token ids must be non-empty and in [0, {vocab})", param="prompt")
        else:
            if not body.prompt:
                raise APIError(400, "prompt is empty: give some text to continue", param="prompt")
            ids = await asyncio.to_thread(lambda: list(engine.generator.tokenizer(body.prompt)["input_ids"]))
        return await _llama_answer(engine, body, ids, request)

    @app.post("/v1/fim/completions")
    async def fim(body: FimRequest, request: Request):
        ready(engine)
        if body.model != engine.model_name:
            raise APIError(400, f"unknown model {body.model!r}; this server serves {engine.model_name!r}", param="model", code="model_not_found")
        ids = await asyncio.to_thread(infill_ids, engine.generator.tokenizer, body.prompt, body.suffix)
        if ids is None:
            raise APIError(400, f"model {engine.model_name!r} has no fill-in-the-middle tokens {list(FIM_TOKENS)}", param="suffix")
        job = _job(engine, ids, body.max_tokens, body.temperature, body.top_p, body.seed, body.stops)
        return await answer(engine, job, request, body.stream, chat_body, new_id("fim"))


def _predict(engine: Engine, body: LlamaRequest) -> int:
    cap = engine.max_tokens or 2048
    return cap if body.n_predict < 0 else min(body.n_predict, cap)


def _job(
    engine: Engine, ids, max_tokens, temperature, top_p, seed, stops, top_k=None, max_predict_ms=None, cache=True
) -> Job:
    room = engine.room(ids, 1)  # at least one token must fit; the answer is cut to the room
    limit = min(room, max_tokens if max_tokens is not None else room, engine.max_tokens or room)
    return Job(ids, limit, temperature, top_p, seed, list(stops), top_k or None, max_predict_ms, cache)


async def _llama_answer(engine: Engine, body: LlamaRequest, ids: list[int], request: Request):
    job = _job(
        engine, ids, _predict(engine, body), body.temperature, body.top_p, None if body.seed < 0 else body.seed,
        body.stop, body.top_k, body.t_max_predict_ms, body.cache_prompt,
    )
    events = _llama_events(engine, job, request, submit(engine, job, request, new_id("cmpl")))
    if body.stream:
        return StreamingResponse((f"data: {json.dumps(e)}\n\n" async for e in events), media_type="text/event-stream")
    content, last = "", {}
    async for event in events:
        content += event.get("content", "")
        last = event
    if "error" in last:
        return JSONResponse(last, status_code=last["error"]["code"])
    return {**last, "content": content}


async def _llama_events(engine: Engine, job: Job, request: Request, trace) -> AsyncIterator[dict]:
    """llama.cpp's stream objects: {"content", "stop": false} per piece, then the final one."""
    async for event in job_events(job, request, trace):
        if isinstance(event, Piece):
            yield {"content": event.text, "stop": False}
        elif isinstance(event, Failed):
            yield {"error": {"code": event.error.status, "message": event.error.message, "type": event.error.type}}
        else:
            yield _final(engine, event)


def _final(engine: Engine, done: Done) -> dict:
    n, t = done.usage.completion_tokens, done.timings
    predicted_ms = t.get("predicted_ms", 0.0)
    stop_type = "word" if done.stop_word else "eos" if done.finish_reason == "stop" else "limit"
    return {
        "content": "", "stop": True, "model": engine.model_name, "stop_type": stop_type,
        "stopping_word": done.stop_word or "", "tokens_predicted": n, "tokens_evaluated": done.usage.prompt_tokens,
        "tokens_cached": t.get("cached_tokens", 0), "truncated": False,
        "timings": {
            "prompt_n": done.usage.prompt_tokens, "prompt_ms": t.get("prompt_ms", 0.0),
            "predicted_n": n, "predicted_ms": predicted_ms,
            "predicted_per_second": 1e3 * n / predicted_ms if predicted_ms else 0.0,
        },
        "speculative": done.speculative,
    }
