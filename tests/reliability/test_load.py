"""Concurrent requests against ``python app.py`` on tiny models (docs/RELIABILITY.md, "Load").

N clients send /text and /video requests at once. Each request completes or is turned away with
gradio's queue-full message; the server stays up and serves a last request; its peak RSS (VmHWM)
is printed. The default suite runs 6 requests against a 1-place queue, so both outcomes occur;
``-m slow`` adds the 16-request run against the default queue.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from gradio_client import Client
from gradio_client.utils import QueueError

from tests.app.test_app import _wait_for
from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
TEXT = dict(max_new_tokens=32, api_name="/text")
VIDEO = dict(num_frames=4, steps=4, refine_steps=1, api_name="/video")
BUSY = "Queue is full"


@contextmanager
def app_process(models: Path, log: Path, **env: str):
    """``python app.py`` on the given models, with SPECVIDEO_<NAME> settings; yields (pid, url)."""
    port = free_port()
    settings = {f"SPECVIDEO_{k.upper()}": str(v) for k, v in env.items()}
    environ = {**os.environ, **settings, "SPECVIDEO_MODELS": str(models), "SPECVIDEO_PORT": str(port)}
    environ.setdefault("SPECVIDEO_TEXT_TARGET", str(models / "text" / "target"))  # the tiny pair, not SmolLM2
    environ.setdefault("SPECVIDEO_TEXT_DRAFT", str(models / "text" / "draft"))
    with open(log, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "app.py", "--host", "127.0.0.1"],
            cwd=REPO,
            env=environ,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        try:
            url = f"http://127.0.0.1:{port}/"
            _wait_for(url, proc)
            yield proc, url
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set size (VmHWM), in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    kib = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(kib) / 1024


@dataclass(frozen=True)
class LoadResult:
    outcomes: Counter  # "completed", "busy", or the unexpected error
    wall_s: float
    peak_rss_mb: float


def one_request(client: Client, index: int, start: threading.Barrier) -> str:
    kwargs = TEXT if index % 2 == 0 else VIDEO
    start.wait()
    try:
        client.predict(**{**kwargs, "seed": index})
        return "completed"
    except QueueError as err:
        return "busy" if BUSY in str(err) else f"QueueError: {err}"
    except Exception as err:  # anything else is a failure the test reports
        return f"{type(err).__name__}: {err}"


def run_load(url: str, pid: int, num_requests: int) -> LoadResult:
    clients = [Client(url, verbose=False) for _ in range(num_requests)]  # one session per user
    clients[0].predict(max_new_tokens=2, api_name="/text")  # load the models before timing
    clients[0].predict(**{**VIDEO, "num_frames": 2})
    start = threading.Barrier(num_requests)
    began = time.perf_counter()
    with ThreadPoolExecutor(num_requests) as pool:
        outcomes = Counter(pool.map(one_request, clients, range(num_requests), [start] * num_requests))
    return LoadResult(outcomes, time.perf_counter() - began, peak_rss_mb(pid))


def check_load(tiny_models, tmp_path, num_requests: int, **env) -> LoadResult:
    with app_process(tiny_models, tmp_path / "server.log", **env) as (proc, url):
        result = run_load(url, proc.pid, num_requests)
        print(
            f"\nload: {num_requests} concurrent requests ({env or 'defaults'}): "
            f"{dict(result.outcomes)}, {result.wall_s:.1f} s, server peak RSS {result.peak_rss_mb:.0f} MiB"
        )
        assert set(result.outcomes) <= {"completed", "busy"}, result.outcomes
        assert result.outcomes["completed"] >= 1
        assert proc.poll() is None  # still up
        highlighted, _ = Client(url, verbose=False).predict(max_new_tokens=4, api_name="/text")
        assert len(highlighted) >= 2
    return result


def test_six_concurrent_requests_complete_or_are_turned_away(tiny_models, tmp_path):
    result = check_load(tiny_models, tmp_path, 6, queue_size=1)
    assert result.outcomes["busy"] >= 1  # 3 video requests at once cannot all wait in a 1-place queue


@pytest.mark.slow
def test_sixteen_concurrent_requests(tiny_models, tmp_path):
    check_load(tiny_models, tmp_path, 16)
