"""The server's operations tell the truth: 503 while loading and after the worker died (with
Retry-After), /health that follows the worker, 429 with Retry-After, a max-tokens cap, a body-size
limit, OpenAI's error JSON on every route, refused unsupported parameters and one log line per
request."""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
import uvicorn

from specvideo.serve import Engine, create_app
from tests.conftest import free_port
from tests.serve.test_server import Server, tiny_pair

torch.set_num_threads(1)


def call(url: str, path: str, body: dict | bytes | None = None, method: str | None = None):
    """(status, headers, JSON body) of one request; errors are answers too."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.headers, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, err.headers, json.loads(err.read())


@pytest.fixture(scope="module")
def server():
    s = Server(tiny_pair(fim=False), api_key=None, max_tokens=5)
    yield s
    s.stop()


@pytest.mark.parametrize(
    "extra, named",
    [
        ({"logprobs": 2}, "logprobs"),
        ({"echo": True}, "echo"),
        ({"best_of": 3}, "best_of"),
        ({"frequency_penalty": 0.5, "presence_penalty": 1.0}, "frequency_penalty, presence_penalty"),
        ({"logit_bias": {"5": 10}}, "logit_bias"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"stream_options": {"include_obfuscation": True}}, "stream_options"),
    ],
)
def test_unsupported_parameters_are_refused_by_name(server, extra, named):
    code, _, body = call(server.url, "/v1/completions", {"model": "tiny", "prompt": "x", **extra})
    assert code == 400 and named in body["error"]["message"]
    assert body["error"]["type"] == "invalid_request_error"


def test_neutral_values_of_unsupported_parameters_and_unknown_fields_pass(server):
    body = {
        "model": "tiny", "prompt": "x", "max_tokens": 2, "temperature": 0, "logprobs": None, "echo": False,
        "frequency_penalty": 0, "presence_penalty": 0.0, "logit_bias": {}, "best_of": 1, "user": "me",
        "stream_options": {"include_usage": True},
    }
    code, _, answer = call(server.url, "/v1/completions", body)
    assert code == 200 and answer["usage"]["completion_tokens"] == 2


def test_every_route_answers_errors_in_openai_json(server):
    code, _, body = call(server.url, "/v1/nothing-here", {"x": 1})
    assert code == 404 and "no route /v1/nothing-here" in body["error"]["message"]
    code, _, body = call(server.url, "/v1/models", {"x": 1}, method="POST")
    assert code == 405 and "not allowed" in body["error"]["message"]
    code, _, body = call(server.url, "/v1/completions", b"{not json")
    assert code == 400 and "error" in body


def test_the_max_tokens_cap_cuts_a_larger_ask(server):
    code, _, body = call(server.url, "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 50, "temperature": 0, "stop": None})
    assert code == 200 and body["usage"]["completion_tokens"] == 5 and body["choices"][0]["finish_reason"] == "length"


def test_a_body_past_the_limit_is_413_sized_or_chunked():
    engine = Engine(tiny_pair(fim=False), "tiny")
    port = free_port()
    config = uvicorn.Config(create_app(engine, None, max_body_bytes=2000), host="127.0.0.1", port=port, log_level="error")
    s = uvicorn.Server(config)
    threading.Thread(target=s.run, daemon=True).start()
    while not s.started:
        time.sleep(0.02)
    try:
        big = json.dumps({"model": "tiny", "prompt": "x" * 5000}).encode()
        code, _, body = call(f"http://127.0.0.1:{port}", "/v1/completions", big)
        assert code == 413 and "2000 bytes" in body["error"]["message"]
        conn = http.client.HTTPConnection("127.0.0.1", port)  # no Content-Length: chunked
        conn.request("POST", "/v1/completions", body=iter([big[:3000], big[3000:]]), headers={"Content-Type": "application/json"}, encode_chunked=True)
        answer = conn.getresponse()
        assert answer.status == 413 and "2000 bytes" in json.loads(answer.read())["error"]["message"]
        code, _, _ = call(f"http://127.0.0.1:{port}", "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 1})
        assert code == 200
    finally:
        s.should_exit = True


def test_503_while_loading_then_ready_and_health_follows():
    s = Server(None, api_key=None)
    try:
        code, headers, body = call(s.url, "/health")
        assert code == 503 and body["status"] == "loading" and int(headers["Retry-After"]) >= 1
        code, headers, body = call(s.url, "/v1/completions", {"model": "tiny", "prompt": "x"})
        assert code == 503 and "loading" in body["error"]["message"] and headers["Retry-After"]
        s.engine.attach(tiny_pair(fim=False))
        code, _, body = call(s.url, "/health")
        assert code == 200 and body["status"] == "ok"
        code, _, _ = call(s.url, "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 1})
        assert code == 200
    finally:
        s.stop()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the worker dies on purpose
def test_a_dead_worker_answers_everyone_503_and_health_says_so():
    gen = tiny_pair(fim=False)

    def die(*a, **k):
        raise SystemExit("boom")  # not an Exception: it kills the worker thread

    gen.open = die  # where every run is opened
    s = Server(gen, api_key=None, max_batch=1)
    try:
        with ThreadPoolExecutor(3) as pool:
            answers = list(pool.map(lambda _: call(s.url, "/v1/completions", {"model": "tiny", "prompt": "x"}), range(3)))
        assert all(code == 503 for code, _, _ in answers)  # the one running and the ones queued
        assert "worker thread stopped" in answers[0][2]["error"]["message"]
        code, _, body = call(s.url, "/health")
        assert code == 503 and body["status"] == "failed"
    finally:
        s.stop()


def test_a_full_queue_says_when_to_retry():
    gen = tiny_pair(fim=False)
    s = Server(gen, api_key=None, max_queue=1, max_batch=1)
    gate, original = threading.Event(), gen.open
    gen.open = lambda *a, **k: (gate.wait(10), original(*a, **k))[1]
    try:
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(call, s.url, "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 2}) for _ in range(4)]
            time.sleep(0.5)
            gate.set()
            answers = [f.result() for f in futures]
        refused = [headers for code, headers, _ in answers if code == 429]
        assert refused and all(int(h["Retry-After"]) >= 1 for h in refused)
    finally:
        s.stop()


def test_one_log_line_per_request(server, caplog):
    with caplog.at_level(logging.INFO, logger="specvideo.serve"):
        call(server.url, "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 3, "temperature": 0, "stop": None})
        call(server.url, "/v1/completions", {"model": "other", "prompt": "x"})  # refused before queueing
    lines = [r.getMessage() for r in caplog.records if r.name == "specvideo.serve"]
    assert len(lines) == 2 and lines[1] == "- /v1/completions refused 400"
    assert lines[0].startswith("cmpl-") and " /v1/completions length prompt=" in lines[0]
    assert "completion=3" in lines[0] and "ttft=" in lines[0] and "tok/s=" in lines[0] and "acceptance=" in lines[0]


def test_metrics_are_scraped_in_prometheus_format_and_count_what_happened(server):
    from prometheus_client.parser import text_string_to_metric_families

    def scrape() -> dict:
        with urllib.request.urlopen(server.url + "/metrics") as r:
            assert r.headers["Content-Type"].startswith("text/plain")
            text = r.read().decode()
        return {s.name + repr(sorted(s.labels.items())): s.value for f in text_string_to_metric_families(text) for s in f.samples}

    before = scrape()
    code, _, answer = call(server.url, "/v1/completions", {"model": "tiny", "prompt": "a b", "max_tokens": 3, "temperature": 0})
    assert code == 200
    call(server.url, "/v1/nothing-here", {"x": 1})
    after = scrape()
    ok = "specvideo_requests_total" + repr([("route", "/v1/completions"), ("status", "200")])
    unmatched = "specvideo_requests_total" + repr([("route", "unmatched"), ("status", "404")])
    assert after[ok] == before.get(ok, 0) + 1 and after[unmatched] == before.get(unmatched, 0) + 1
    grew = lambda name: after[name + "[]"] - before.get(name + "[]", 0)  # noqa: E731
    assert grew("specvideo_generation_tokens_total") == answer["usage"]["completion_tokens"]
    assert grew("specvideo_prompt_tokens_total") == answer["usage"]["prompt_tokens"]
    assert grew("specvideo_time_to_first_token_seconds_count") == 1
    assert grew("specvideo_tokens_per_target_call_count") == 1
    assert after["specvideo_batch_width_count[]"] >= 1 and after["specvideo_queue_depth[]"] == 0
    assert "specvideo_prompt_cache_saved_tokens_total[]" in after
