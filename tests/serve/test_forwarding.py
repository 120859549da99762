"""The replicas' entry without Ray: the routing key of each route's body and the in-process ASGI
call that streams an app's answer back chunk by chunk."""

from __future__ import annotations

import asyncio
import json

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from specvideo.serve.forwarding import PREFIX_CHARS, asgi_stream, prefix_key

FILE = "import os\n" + "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(100))


def body(**fields) -> bytes:
    return json.dumps(fields).encode()


def test_the_key_follows_the_text_leading_the_prompt():
    a = prefix_key("/completion", body(prompt=FILE + "def g(", n_predict=8))
    b = prefix_key("/completion", body(prompt=FILE + "class H:", n_predict=32))
    assert a is not None and a == b  # the same file, typed further: the same replica
    assert prefix_key("/completion", body(prompt="import sys\n" + FILE)) != a
    assert prefix_key("/v1/completions", body(model="m", prompt=FILE[:PREFIX_CHARS] + "x")) == a
    assert prefix_key("/v1/fim/completions", body(model="m", prompt=FILE, suffix="tail")) == a
    assert prefix_key("/completion", body(prompt=FILE[: PREFIX_CHARS - 1] + "!")) != a  # within the key


def test_editor_and_chat_keys_start_where_their_prompts_start():
    extra = [{"filename": "util.py", "text": "def util(): pass\n"}]
    one = prefix_key("/infill", body(input_extra=extra, input_prefix=FILE, input_suffix="a"))
    two = prefix_key("/infill", body(input_extra=extra, input_prefix=FILE + "more", input_suffix="b"))
    assert one == two and one != prefix_key("/infill", body(input_prefix=FILE, input_suffix="a"))
    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    turn = history + [{"role": "assistant", "content": "Hello."}, {"role": "user", "content": "More"}]
    assert prefix_key("/v1/chat/completions", body(messages=history)) == prefix_key(
        "/v1/chat/completions", body(messages=turn)
    )


def test_requests_without_a_prompt_have_no_key():
    assert prefix_key("/completion", b"not json") is None
    assert prefix_key("/completion", body(n_predict=3)) is None
    assert prefix_key("/completion", b"[1, 2]") is None
    assert prefix_key("/v1/chat/completions", body(messages=[])) is None


def streaming_app(seen: list) -> FastAPI:
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request):
        data = await request.json()

        async def chunks():
            try:
                for i in range(data["n"]):
                    yield f"{request.url.query}:{i};"
                    await asyncio.sleep(0.01)
            finally:
                seen.append("closed")

        return StreamingResponse(chunks(), media_type="text/plain", headers={"x-n": str(data["n"])})

    return app


def test_asgi_stream_yields_the_start_then_every_chunk_as_written():
    async def run():
        out = []
        async for item in asgi_stream(streaming_app([]), "POST", "/echo", "q=1", [("content-type", "application/json")], body(n=3)):
            out.append(item)
        return out

    start, *chunks = asyncio.run(run())
    assert start["status"] == 200 and ("x-n", "3") in start["headers"]
    assert chunks == [b"q=1:0;", b"q=1:1;", b"q=1:2;"]


def test_closing_the_stream_tells_the_app_its_client_left():
    seen: list = []

    async def run():
        stream = asgi_stream(streaming_app(seen), "POST", "/echo", "", [], body(n=1000))
        assert (await stream.__anext__())["status"] == 200
        assert await stream.__anext__() == b":0;"
        await stream.aclose()

    asyncio.run(asyncio.wait_for(run(), timeout=10))
    assert seen == ["closed"]


def test_an_unknown_path_streams_the_apps_own_404():
    async def run():
        return [item async for item in asgi_stream(streaming_app([]), "GET", "/nope", "", [], b"")]

    start, *chunks = asyncio.run(run())
    assert start["status"] == 404 and b"Not Found" in b"".join(chunks)


def test_a_replay_goes_to_the_head_of_a_full_queue_and_no_header_can_ask_for_it():
    """The replicas' in-process call marks a replay in the ASGI scope; the engine's queue takes it
    first and past its limit. An HTTP header of the same name does nothing."""
    from specvideo.serve.engine import JobQueue
    from specvideo.serve.jobs import Job
    from specvideo.serve.requests import REPLAY_EXTENSION

    jobs = JobQueue(maxsize=2)
    waiting = [Job([i], 1, 0.0, 1.0) for i in range(2)]
    for job in waiting:
        jobs.put_nowait(job)
    replay = Job([9], 1, 0.0, 1.0)
    jobs.put_first(replay)  # the queue is full: only the front door takes it
    assert [jobs.get_nowait() for _ in range(3)] == [replay, *waiting]

    app = FastAPI()

    @app.get("/flag")
    async def flag(request: Request):
        return {"replay": bool(request.scope.get("extensions", {}).get(REPLAY_EXTENSION))}

    async def ask(headers, extensions=None):
        items = [item async for item in asgi_stream(app, "GET", "/flag", "", headers, b"", extensions)]
        return json.loads(b"".join(i for i in items if isinstance(i, bytes)))["replay"]

    assert asyncio.run(ask([], {REPLAY_EXTENSION: True})) is True
    assert asyncio.run(ask([(REPLAY_EXTENSION, "1"), ("x-specvideo-replay", "1")])) is False
