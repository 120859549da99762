"""`specvideo serve --replicas`: two engine replicas of the tiny stdlib model on a local Ray Serve,
behind one HTTP entry: the same routes and answers on every replica, streaming included, metrics
per replica, and a killed replica replaced by Serve while the other keeps answering. Skipped without
Ray Serve (pip install -e ".[ray]")."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import free_port

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

MODEL = str(Path(__file__).resolve().parents[2] / "models" / "text" / "target")


def post(url: str, body: dict) -> tuple[int, str]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def running(app: str = "default") -> int:
    return serve.status().applications[app].deployments["specvideo"].replica_states.get("RUNNING", 0)


@pytest.fixture(scope="module")
def entry():
    from specvideo.serve.replicas import application
    from specvideo.serve.settings import ServeSettings

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    settings = ServeSettings(model=MODEL, name="tiny", drafter="ngram", dtype="float32", threads=1)
    serve.run(application(settings, replicas=2, health_check_period_s=1.0), route_prefix="/", blocking=False)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    break
        except OSError:
            time.sleep(0.5)
    yield url
    serve.shutdown()
    ray.shutdown()


def completion(url: str, stream: bool = False) -> tuple[int, str]:
    body = {"model": "tiny", "prompt": "def add(a, b):", "max_tokens": 8, "temperature": 0, "stream": stream}
    return post(url + "/v1/completions", body)


def streamed_text(raw: str) -> str:
    events = [line[6:] for line in raw.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])


def test_every_replica_gives_the_same_answer_streamed_or_not(entry):
    assert running() == 2
    answers = [completion(entry) for _ in range(6)]
    assert {code for code, _ in answers} == {200}
    texts = {json.loads(body)["choices"][0]["text"] for _, body in answers}
    assert len(texts) == 1
    code, raw = completion(entry, stream=True)
    assert code == 200 and streamed_text(raw) == texts.pop()
    with urllib.request.urlopen(entry + "/metrics") as r:  # a replica's own series
        assert b"specvideo_requests_total" in r.read()


def test_a_killed_replica_is_replaced_and_the_other_keeps_answering(entry):
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if "SERVE_REPLICA" in a["name"]]
    assert len(names) == 2
    ray.kill(ray.get_actor(names[0], namespace="serve"), no_restart=True)
    codes = [completion(entry)[0] for _ in range(4)]
    assert codes.count(200) >= 3 and set(codes) <= {200, 500, 503}  # at most the one on its way to the dead replica
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and running() < 2:
        time.sleep(1)
    assert running() == 2
    assert completion(entry)[0] == 200


def test_serve_run_builder_reads_its_settings_and_names_unknown_ones():
    from specvideo.serve.replicas import app_builder

    assert isinstance(app_builder({"model": MODEL, "replicas": "3", "threads": "1"}), serve.Application)
    with pytest.raises(ValueError, match="unknown settings \\['modle'\\]"):
        app_builder({"modle": MODEL})
    with pytest.raises(ValueError, match="packed must be auto, on or off"):
        app_builder({"model": MODEL, "packed": "maybe"})


def test_the_cli_checks_replica_settings_before_starting_ray(capsys):
    from specvideo.cli import main

    assert main(["serve", "--model", MODEL, "--replicas", "2", "--max-replicas", "1"]) != 0
    assert "--max-replicas (1) must be >= --replicas (2)" in capsys.readouterr().err
