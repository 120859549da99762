"""Continuous batching in the server: requests that arrive while another decodes join its batch at
the next round, leave it when they finish or disconnect, and answer what they answer alone."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from specvideo.text import run as run_module
from tests.serve.test_server import Server, tiny_pair


@pytest.fixture
def slow_rounds(monkeypatch):
    """Every round of a Run takes 30 ms more (room for requests to arrive mid-run); counts them."""
    rounds = []
    original = run_module.Run.steps

    def steps(self):
        for step in original(self):
            rounds.append(self.size)
            time.sleep(0.03)
            yield step

    monkeypatch.setattr(run_module.Run, "steps", steps)
    return rounds


def ask(server, prompt, **kw):
    return server.client.completions.create(model="tiny", prompt=prompt, **kw).choices[0].text


def test_requests_arriving_mid_run_join_it_and_answer_what_they_answer_alone(slow_rounds):
    s = Server(tiny_pair(fim=True), api_key=None, max_batch=4)
    try:
        jobs = [
            ("def quicksort(arr):", {"max_tokens": 40, "temperature": 0}),
            ("for i in range(10):", {"max_tokens": 12, "temperature": 0}),
            ("print(i)", {"max_tokens": 15, "temperature": 0.8, "top_p": 0.9, "seed": 5}),
            ("return sorted", {"max_tokens": 9, "temperature": 1.2, "seed": 6}),
        ]
        alone = [ask(s, p, extra_body={"stop": None}, **kw) for p, kw in jobs]
        assert max(s.engine.batches) == 1
        before = len(s.engine.batches)
        with ThreadPoolExecutor(4) as pool:
            first = pool.submit(ask, s, jobs[0][0], extra_body={"stop": None}, **jobs[0][1])
            time.sleep(0.15)  # the first is decoding when the others arrive
            rest = [pool.submit(ask, s, p, extra_body={"stop": None}, **kw) for p, kw in jobs[1:]]
            together = [first.result()] + [f.result() for f in rest]
        assert together == alone  # greedy and sampled rows alike
        assert max(s.engine.batches[before:]) > 1  # they joined a running batch
        assert max(slow_rounds) > 1
    finally:
        s.stop()


def test_a_client_that_disconnects_inside_a_batch_frees_its_row(slow_rounds):
    s = Server(tiny_pair(fim=False), api_key=None, max_batch=4)
    try:
        stay = threading.Thread(target=lambda: results.append(ask(s, "def", max_tokens=60, temperature=0, extra_body={"stop": None})))
        results: list[str] = []
        stay.start()
        time.sleep(0.1)
        stream = s.client.completions.create(
            model="tiny", prompt="x = 1", max_tokens=200, temperature=0, stream=True, extra_body={"stop": None}
        )
        next(iter(stream))  # its first token came with its prefill; rounds of two rows follow
        time.sleep(0.15)
        seen = len(slow_rounds)
        assert max(slow_rounds[-3:]) == 2  # both rows run
        stream.close()  # the second client goes away
        stay.join(timeout=30)
        assert 1 in slow_rounds[seen:]  # its row left, the other went on alone
        ended = len(slow_rounds)
        time.sleep(0.3)
        assert len(slow_rounds) == ended  # and nothing runs for the client that left
        assert results and results[0] == ask(s, "def", max_tokens=60, temperature=0, extra_body={"stop": None})
    finally:
        s.stop()


def test_a_full_queue_in_continuous_mode_refuses_with_429_and_loses_nothing(monkeypatch):
    gate = threading.Event()
    original = run_module.Run.__init__

    def slow_init(self, *a, **k):
        gate.wait(10)
        original(self, *a, **k)

    monkeypatch.setattr(run_module.Run, "__init__", slow_init)
    s = Server(tiny_pair(fim=False), api_key=None, max_queue=1, max_batch=2)
    try:
        with ThreadPoolExecutor(5) as pool:
            futures = [pool.submit(_complete, s) for _ in range(5)]
            time.sleep(0.5)
            gate.set()
            codes = sorted(f.result() for f in futures)
        assert set(codes) <= {200, 429} and 429 in codes and 200 in codes
    finally:
        s.stop()


def _complete(server) -> int:
    from tests.serve.test_server import _raw_completion

    code, body = _raw_completion(server.url, {"model": "tiny", "prompt": "x", "max_tokens": 3})
    assert code in (200, 429), body
    return code

