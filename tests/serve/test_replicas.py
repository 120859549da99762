"""`specvideo serve --replicas`: two engine replicas of the tiny stdlib model on a local Ray Serve,
behind one HTTP entry: the same routes and answers on every replica, streaming included, metrics
per replica, prompts that start alike on one replica and its prompt cache, a replica killed
mid-stream whose streams are replayed on the other and go on unchanged, its unanswered requests
retried there, and Serve replacing it. Skipped without Ray Serve (pip install -e ".[ray]")."""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
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


def replica_actors() -> dict[str, str]:
    """{replica id: actor name} of the engine deployment's live replicas."""
    names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if "SERVE_REPLICA" in a["name"]]
    return {n.rsplit("#", 1)[-1]: n for n in names if "#specvideo#" in n}


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


FILE = "".join(f"def scale_{i}(values, factor):\n    return [v * factor + {i} for v in values]\n\n" for i in range(15))  # 1,100 characters, 390 tokens


def llama_completion(url: str, prompt: str, n: int, stream: bool = False) -> tuple[int, str]:
    return post(url + "/completion", {"prompt": prompt, "n_predict": n, "temperature": 0, "stream": stream})


def test_prompts_that_start_alike_go_to_one_replica_and_its_cache(entry):
    cached = []
    for i in range(5):  # an editor typing into one file: each request the file so far
        code, raw = llama_completion(entry, FILE + f"def typed_{i}(", 4)
        assert code == 200
        cached.append(json.loads(raw)["tokens_cached"])
    assert all(c > 200 for c in cached[1:]), cached  # every later one reuses the file's prefill


def test_new_prefixes_are_spread_evenly_and_known_ones_stay_home():
    from specvideo.serve.routing import place, rank

    homes: dict[str, str] = {}
    for i in range(8):
        homes[f"file{i}"] = place(f"file{i}", ["a", "b"], homes)
    assert sorted(homes.values()) == ["a"] * 4 + ["b"] * 4  # bounded loads: 4 and 4, not 6 and 2
    assert homes["file0"] == rank("file0", ["a", "b"])[0]  # the first key: its rendezvous favourite
    assert place("new", ["a", "c"], homes) == "c"  # a replica that joined has no homes yet


def open_stream(url: str, body: dict):
    req = urllib.request.Request(url + "/completion", json.dumps({**body, "stream": True}).encode(), {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=60)


def llama_text(raw: str) -> tuple[str, list[dict]]:
    events = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]
    return "".join(e.get("content", "") for e in events), events


def test_a_replica_killed_mid_stream_is_replayed_and_its_streams_go_on_unchanged(entry):
    """Two streams on one replica (greedy; sampled, its seed pinned at the entry) and a request queued
    behind them; the replica is killed once both have sent text: both streams finish with exactly
    the text a whole answer has, the queued request moves, and /metrics counts the replays."""
    prompt = "def long_one(values):\n"  # room for 480 tokens: streams long enough to be cut
    greedy = {"prompt": prompt, "n_predict": 400, "temperature": 0}
    sampled = {"prompt": prompt, "n_predict": 400, "temperature": 0.9}
    waiting: list = []
    with open_stream(entry, greedy) as first, open_stream(entry, sampled) as second:
        victim = replica_actors()[first.headers["x-specvideo-replica"]]
        assert second.headers["x-specvideo-replica"] == first.headers["x-specvideo-replica"]  # one prompt, one home
        seed = int(second.headers["x-specvideo-seed"])
        heads = [first.readline() + first.readline(), second.readline() + second.readline()]  # text went out
        later = threading.Thread(target=lambda: waiting.append(llama_completion(entry, prompt, 160)))
        later.start()  # queued behind the streams on the same replica: nothing of it went out yet
        time.sleep(0.3)
        ray.kill(ray.get_actor(victim, namespace="serve"), no_restart=True)
        streamed = [llama_text((head + s.read()).decode()) for head, s in zip(heads, (first, second))]
    for (text, events), body in zip(streamed, (greedy, {**sampled, "seed": seed})):
        assert "error" not in events[-1] and events[-1]["stop"] is True
        code, whole = post(entry + "/completion", body)  # the same request answered in one piece
        assert code == 200 and text == json.loads(whole)["content"]
    later.join(timeout=60)
    assert waiting and waiting[0][0] == 200
    with urllib.request.urlopen(entry + "/metrics") as r:
        series = r.read().decode()
    resumed = [line for line in series.splitlines() if line.startswith("specvideo_entry_replays_resumed_total")]
    assert resumed and float(resumed[0].split()[-1]) >= 2, series[-2000:]
    deadline = time.monotonic() + 90  # Serve replaces the dead replica (a new actor)
    replaced = lambda: victim not in replica_actors().values() and len(replica_actors()) == 2 and running() == 2  # noqa: E731
    while time.monotonic() < deadline and not replaced():
        time.sleep(1)
    assert replaced()
    assert completion(entry)[0] == 200


def test_the_entry_refuses_a_body_past_its_limit_and_answers_unknown_routes_as_the_server(entry):
    # the headers of a 5 MiB body and none of it: the entry answers from its Content-Length without
    # reading the body (sending it all races that answer: the client may still be writing when the
    # entry closes the connection, a broken pipe)
    url = urllib.parse.urlsplit(entry)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    conn.putrequest("POST", "/v1/completions")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(5 << 20))
    conn.endheaders()
    answer = conn.getresponse()
    assert answer.status == 413 and "exceeds" in json.loads(answer.read())["error"]["message"]
    conn.close()
    code, body = post(entry + "/nowhere", {})
    assert code == 404 and json.loads(body)["error"]["message"] == "no route /nowhere"


def test_serve_run_builder_reads_its_settings_and_names_unknown_ones():
    from specvideo.serve.replicas import app_builder

    assert isinstance(app_builder({"model": MODEL, "replicas": "3", "threads": "1", "routing": "load"}), serve.Application)
    with pytest.raises(ValueError, match="routing must be one of"):
        app_builder({"model": MODEL, "routing": "hash"})
    with pytest.raises(ValueError, match="unknown settings \\['modle'\\]"):
        app_builder({"modle": MODEL})
    with pytest.raises(ValueError, match="packed must be auto, on or off"):
        app_builder({"model": MODEL, "packed": "maybe"})


def test_the_cli_checks_replica_settings_before_starting_ray(capsys):
    from specvideo.cli import main

    assert main(["serve", "--model", MODEL, "--replicas", "2", "--max-replicas", "1"]) != 0
    assert "--max-replicas (1) must be >= --replicas (2)" in capsys.readouterr().err
