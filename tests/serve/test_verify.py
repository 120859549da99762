"""Drafting on the client, verifying on the server (``POST /v1/verify`` and ``specvideo.serve.edge``),
through the real HTTP stack on the tiny pair: the client's text equals the server's own answer
(greedy and seeded, drafting by prompt lookup, by a local model, or not at all), sessions keep their
settings and expire, bad input is a 4xx naming the problem, /metrics counts the rounds, and a server
without the route is asked for the answer whole."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import uvicorn

from specvideo.serve import Engine, create_app
from specvideo.serve.edge import EdgeClient, KChooser, LookupDrafter, ModelDrafter
from specvideo.serve.engine import RoundCosts
from specvideo.serve.verify import Sessions
from specvideo.text import SpeculativeGenerator
from specvideo.text import run as run_module
from tests.conftest import free_port
from tests.serve.test_server import Server, tiny_pair

PROMPT = "abcabcabcab"  # repeats: prompt lookup finds drafts


@pytest.fixture(scope="module")
def server():
    s = Server(tiny_pair(fim=False), api_key=None)
    yield s
    s.stop()


def post(url: str, path: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def own_answer(s: Server, **settings) -> str:
    return own(s, **settings).choices[0].text


def own(s: Server, **settings):
    return s.client.completions.create(model="tiny", prompt=PROMPT, **settings)


SETTINGS = [
    {"max_tokens": 24, "temperature": 0},
    {"max_tokens": 24, "temperature": 0.9, "top_p": 0.95, "seed": 3},
]


@pytest.mark.parametrize("settings", SETTINGS, ids=["greedy", "seeded"])
def test_the_clients_text_is_the_servers_own_answer_whatever_it_drafts(server, settings):
    answer = own(server, **settings)
    tok = server.engine.generator.tokenizer
    local = SpeculativeGenerator.from_models(server.engine.generator.models.draft, tokenizer=tok, drafter="ngram")
    for drafter, k in [(LookupDrafter(), None), (ModelDrafter(local), 4), (None, None), (LookupDrafter(), 16)]:
        client = EdgeClient(server.url, "tiny", drafter, tokenizer=tok, k=k)
        text = "".join(client.stream(prompt=PROMPT, **settings))
        assert text == answer.choices[0].text and answer.usage.completion_tokens > 8, (type(drafter).__name__, k)
        stats = client.stats.summary()
        assert stats["tokens"] == answer.usage.completion_tokens and client.stats.rounds >= 1 and not stats["fallback"]
        assert 0 < stats["first_s"] <= client.stats.wall_s
        if drafter is None:  # nothing drafted: one forward per token, as plain decoding
            assert client.stats.target_calls == client.stats.rounds


def test_a_round_checks_the_draft_by_equality_and_sends_only_new_tokens(server):
    code, first = post(server.url, "/v1/verify", {"model": "tiny", "prompt": PROMPT, "max_tokens": 12, "temperature": 0})
    assert code == 200 and first["accepted"] == 0 and len(first["tokens"]) == 1 and first["prompt_ids"]
    full = server.engine.generator.generate([first["prompt_ids"]], max_new_tokens=12, temperature=0.0).token_ids[0]
    assert first["tokens"] == full[:1]
    good = full[1:5]
    code, second = post(server.url, "/v1/verify", {"model": "tiny", "session": first["session"], "draft": good[:2] + [(good[2] + 1) % 200]})
    assert code == 200 and second["accepted"] == 2 and second["tokens"] == full[1:4]  # 2 accepted, then the target's own
    code, third = post(server.url, "/v1/verify", {"model": "tiny", "session": first["session"], "draft": full[4:11], "temperature": 0})
    assert code == 200 and third["accepted"] == 7 and third["tokens"] == full[4:12] and third["finished"]
    assert third["finish_reason"] == "length" and third["usage"]["target_calls"] == 3 and third["position"] == 12
    code, gone = post(server.url, "/v1/verify", {"model": "tiny", "session": first["session"], "draft": []})
    assert code == 404 and "unknown or expired session" in gone["error"]["message"]  # an ended answer's session closes


@pytest.mark.parametrize(
    "body, status, words",
    [
        ({"model": "tiny", "session": "vs-nope"}, 404, "unknown or expired session"),
        ({"model": "tiny", "prompt": PROMPT, "draft": list(range(40))}, 400, "at most 32 tokens"),
        ({"model": "tiny", "prompt": PROMPT, "draft": [10_000]}, 400, "draft token ids must be in"),
        ({"model": "tiny", "prompt": [1, 99_999]}, 400, "prompt token ids"),
        ({"model": "tiny", "prompt": PROMPT, "session": "vs-x"}, 400, "exactly one of session, prompt or messages"),
        ({"model": "other", "prompt": PROMPT}, 400, "unknown model"),
    ],
)
def test_bad_input_is_a_4xx_naming_the_problem(server, body, status, words):
    code, answer = post(server.url, "/v1/verify", body)
    assert code == status and words in answer["error"]["message"], answer


def test_a_session_keeps_its_settings_and_metrics_count_rounds(server):
    code, first = post(server.url, "/v1/verify", {"model": "tiny", "prompt": PROMPT, "max_tokens": 8, "temperature": 0.7})
    assert code == 200 and first["seed"] >= 0  # sampled without a seed: the server picked one, and says it
    code, answer = post(server.url, "/v1/verify", {"model": "tiny", "session": first["session"], "temperature": 0.2})
    assert code == 400 and "differs from the session's 0.7" in answer["error"]["message"]
    with urllib.request.urlopen(server.url + "/metrics") as r:
        series = r.read().decode()
    assert "specvideo_verify_sessions " in series and "specvideo_verify_rounds_total" in series


def test_sessions_expire_unused_and_stay_within_their_bound():
    class Row:
        ended = False

        def end(self):
            self.ended = True

    from specvideo.serve.verify import Session

    sessions = Sessions(max_sessions=2, ttl_s=10)
    rows = [Row() for _ in range(3)]
    now = time.monotonic()
    for i, row in enumerate(rows):
        sessions.add(Session(f"s{i}", row, {}, [], [], now + 10 * (i + 1)))
    assert list(sessions.open) == ["s1", "s2"] and rows[0].ended  # the least recently used left
    sessions.expire(now + 25)
    assert list(sessions.open) == ["s2"] and rows[1].ended


def test_k_follows_the_round_trip():
    near, far = KChooser(), KChooser()
    for chooser, trip in ((near, 0.0), (far, 0.08)):
        for _ in range(20):
            chooser.update(checked=4, accepted=3, trip_s=trip, server_s=0.01, draft_s=0.004)
    assert far.choose() > near.choose() >= 1


def test_a_server_without_the_route_is_asked_for_the_answer_whole(server):
    app = create_app(Engine(server.engine.generator, "tiny"), None)
    app.router.routes = [r for r in app.router.routes if getattr(r, "path", "") != "/v1/verify"]
    port = free_port()
    plain = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    threading.Thread(target=plain.run, daemon=True).start()
    while not plain.started:
        time.sleep(0.02)
    try:
        client = EdgeClient(f"http://127.0.0.1:{port}", "tiny", LookupDrafter())
        text = "".join(client.stream(prompt=PROMPT, max_tokens=12, temperature=0))
        assert client.stats.fallback and text == own_answer(server, max_tokens=12, temperature=0)
    finally:
        plain.should_exit = True


def test_the_cli_drafts_here_and_verifies_on_the_server(server, capsys):
    from specvideo.cli import main

    own_text = own_answer(server, max_tokens=10, temperature=0)
    argv = ["text", PROMPT, "--verify-url", server.url, "--model", "tiny", "--max-new-tokens", "10", "--temperature", "0"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["text"] == own_text and out["stats"]["tokens"] == 10
    assert main([*argv[:3], "http://127.0.0.1:1", *argv[4:]]) == 2  # nothing listens there: one clear line
    assert "could not verify" in capsys.readouterr().err


def test_bench_edge_runs_both_modes_at_each_delay_and_reports(server, tmp_path, capsys):
    from specvideo.cli import main

    report, prompts = tmp_path / "BENCHMARKS.md", tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "abcabcab"}\n{"prompt": "def f(x):"}\n')
    argv = ["bench", "edge", "--url", server.url, "--model", "tiny", "--prompts", str(prompts), "--num-prompts", "2",
            "--max-tokens", "6", "--delays-ms", "0,5", "--repeats", "1", "--report", str(report)]
    assert main(argv) == 0
    table = capsys.readouterr().out
    rows = [line for line in table.splitlines() if line.startswith("| 0 ms") or line.startswith("| 5 ms")]
    assert len(rows) == 4 and all(line.endswith("| 2/2 |") for line in rows if "| edge |" in line)
    assert "## Text: drafting on the client, verifying on the server" in report.read_text()


def test_bench_edge_under_load_reports_what_the_rounds_cost_the_others(server, tmp_path, capsys):
    from specvideo.cli import main

    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "abcabcab"}\n')
    argv = ["bench", "edge", "--url", server.url, "--model", "tiny", "--prompts", str(prompts), "--num-prompts", "1",
            "--max-tokens", "8", "--delays-ms", "0", "--repeats", "1", "--workload", "code", "--load", "1", "--no-report"]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "others' tok/s" in table and "forwards / token delivered" in table
    for line in (row for row in table.splitlines() if row.startswith("| 0 ms")):
        others, per_s, per_token = (float(x) for x in line.strip("| ").split(" | ")[-3:])
        assert others > 0 and per_s > 0 and 0 < per_token <= 1.0, line


def test_a_drafter_that_knows_the_answer_gets_k_plus_one_tokens_a_round(server):
    gen = server.engine.generator
    prompt_ids = list(gen.tokenizer(PROMPT)["input_ids"])
    full = prompt_ids + gen.generate([prompt_ids], max_new_tokens=20, temperature=0.0).token_ids[0]

    class Oracle:
        def draft(self, ids, k):
            return full[len(ids) : len(ids) + k] if full[: len(ids)] == ids else []

    client = EdgeClient(server.url, "tiny", Oracle(), tokenizer=gen.tokenizer, k=3)
    text = "".join(client.stream(prompt=PROMPT, max_tokens=20, temperature=0))
    assert text == own_answer(server, max_tokens=20, temperature=0)
    s = client.stats
    assert s.rounds == -(-s.tokens // 4) and s.accepted == s.drafted > 0 and s.target_calls == s.rounds


def test_a_stop_string_ends_the_answer_where_the_servers_own_ends(server):
    whole = own_answer(server, max_tokens=24, temperature=0)
    stop = whole[6:8]  # a string the greedy answer reaches
    expected = own(server, max_tokens=24, temperature=0, stop=[stop])
    client = EdgeClient(server.url, "tiny", LookupDrafter())
    text = "".join(client.stream(prompt=PROMPT, max_tokens=24, temperature=0, stop=[stop]))
    assert text == expected.choices[0].text == whole[: whole.index(stop)] and stop not in text


@pytest.mark.parametrize("settings", SETTINGS, ids=["greedy", "seeded"])
def test_verify_rounds_join_the_running_batch_and_answer_as_alone(monkeypatch, settings):
    """While a long request decodes, a session's rounds after its first run as rows of that batch
    (the client's tokens their draft): both texts are what they are alone, and /metrics counts the
    batched rounds."""
    original = run_module.Run.steps

    def slow_steps(self):  # every round of the batch 30 ms longer: room for the session's rounds to join
        for step in original(self):
            time.sleep(0.03)
            yield step

    monkeypatch.setattr(run_module.Run, "steps", slow_steps)
    monkeypatch.setattr(RoundCosts, "join_pays", lambda self, rows: True)  # the tiny model's rows cost ~nothing: noise decides
    s = Server(tiny_pair(fim=False), api_key=None, max_batch=4)
    try:
        tok = s.engine.generator.tokenizer
        answer = own_answer(s, **settings)
        long = {"prompt": "def quicksort(arr):", "max_tokens": 60, "temperature": 0, "extra_body": {"stop": None}}
        alone = s.client.completions.create(model="tiny", **long).choices[0].text
        with ThreadPoolExecutor(1) as pool:
            running = pool.submit(lambda: s.client.completions.create(model="tiny", **long).choices[0].text)
            time.sleep(0.1)  # the long one is decoding when the session starts
            client = EdgeClient(s.url, "tiny", LookupDrafter(), tokenizer=tok)
            text = "".join(client.stream(prompt=PROMPT, **settings))
            assert running.result() == alone
        assert text == answer
        with urllib.request.urlopen(s.url + "/metrics") as r:
            series = r.read().decode()
        batched = float(next(line.split()[-1] for line in series.splitlines() if line.startswith("specvideo_verify_rounds_batched_total")))
        assert batched >= 3, series
    finally:
        s.stop()


def test_a_verify_round_joins_the_batch_only_where_a_row_and_its_moves_cost_less_than_half_an_alone_round():
    costs = RoundCosts()
    assert costs.join_pays(1)  # nothing measured yet: join, and so measure
    costs.round(1, 90.0)
    costs.alone(85.0)
    assert costs.join_pays(1)  # two rows not measured yet
    costs.round(2, 160.0)  # a second row costs 70 ms where an alone round costs 85: a compute-bound CPU
    assert not costs.join_pays(1)
    for _ in range(20):
        costs.round(2, 100.0)  # a second row nearly free (memory-bound kernels, a GPU)
    assert costs.join_pays(1) and costs.join_pays(2)  # three rows not measured: join
    for _ in range(20):
        costs.move(20.0)  # but moving the row in and out costs 40 ms a round: no longer worth it
    assert not costs.join_pays(1)
