"""specvideo serve driven by real clients: the official ``openai`` package (completions, chat,
streaming, fill-in-the-middle, errors, concurrent streams) and raw HTTP for the SSE wire format, on
tiny models built in the test (a byte-level tokenizer with FIM tokens, a tiny Llama target and a
perturbed draft)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
import torch
import uvicorn

from specvideo.serve import FIM_TOKENS, Engine, create_app
from specvideo.text import SpeculativeGenerator
from tests.conftest import free_port
from tests.helpers import perturbed_copy, tiny_llama, tiny_tokenizer

KEY = "test-key"


def tiny_pair(fim: bool):
    tok = tiny_tokenizer(300)
    if fim:
        tok.add_special_tokens({"additional_special_tokens": list(FIM_TOKENS)})
    target = tiny_llama(len(tok), seed=0, logit_scale=4.0)
    draft = perturbed_copy(target, noise=0.3)
    return SpeculativeGenerator.from_models(target, tokenizer=tok, draft=draft, drafter="model", num_draft_tokens=3)


class Server:
    def __init__(self, gen, name="tiny", api_key=KEY, **engine_kw):
        self.engine = Engine(gen, name, **engine_kw)
        self.port = free_port()
        config = uvicorn.Config(
            create_app(self.engine, api_key), host="127.0.0.1", port=self.port, log_level="error"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.port}"
        self.client = openai.OpenAI(base_url=self.url + "/v1", api_key=api_key or "none", max_retries=0)

    def stop(self):
        self.server.should_exit = True
        self.thread.join(timeout=5)


@pytest.fixture(scope="module")
def server():
    s = Server(tiny_pair(fim=True))
    yield s
    s.stop()


def greedy_reference(gen, ids, n):
    out = gen.generate(ids, max_new_tokens=n, temperature=0.0)
    return gen.tokenizer.decode(out.token_ids, skip_special_tokens=True), out.token_ids


def test_models_and_health(server):
    assert [m.id for m in server.client.models.list().data] == ["tiny"]
    with urllib.request.urlopen(server.url + "/health") as r:
        assert json.loads(r.read())["status"] == "ok"


def test_completion_equals_the_targets_greedy_continuation(server):
    gen = server.engine.generator
    out = server.client.completions.create(
        model="tiny", prompt="def quicksort(arr):", max_tokens=12, temperature=0
    )
    ids = list(gen.tokenizer("def quicksort(arr):")["input_ids"])
    text, tokens = greedy_reference(gen, ids, 12)
    assert out.choices[0].text == text
    assert out.usage.prompt_tokens == len(ids) and out.usage.completion_tokens == len(tokens)
    assert out.choices[0].finish_reason in ("stop", "length")
    extra = out.model_extra["speculative"]
    assert 0 <= extra["acceptance_rate"] <= 1 and extra["tokens_per_target_call"] >= 1


def test_streamed_completion_joins_to_the_same_text(server):
    whole = server.client.completions.create(model="tiny", prompt="for i in", max_tokens=10, temperature=0)
    chunks = list(
        server.client.completions.create(
            model="tiny", prompt="for i in", max_tokens=10, temperature=0, stream=True
        )
    )
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_chat_through_the_template_streamed_and_not(server):
    messages = [{"role": "user", "content": "print numbers"}]
    out = server.client.chat.completions.create(model="tiny", messages=messages, max_tokens=8, temperature=0)
    gen = server.engine.generator
    ids = gen.tokenizer(
        gen.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
        add_special_tokens=False,
    )["input_ids"]
    assert out.choices[0].message.content == greedy_reference(gen, list(ids), 8)[0]
    assert out.choices[0].message.role == "assistant"
    stream = list(
        server.client.chat.completions.create(
            model="tiny", messages=messages, max_tokens=8, temperature=0, stream=True
        )
    )
    assert stream[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in stream) == out.choices[0].message.content


def test_fill_in_the_middle_uses_the_fim_tokens(server):
    gen = server.engine.generator
    out = server.client.completions.create(
        model="tiny", prompt="def f(x):\n", suffix="\n    return y\n", max_tokens=6, temperature=0
    )
    pre, suf, mid = FIM_TOKENS
    ids = gen.tokenizer(f"{pre}def f(x):\n{suf}\n    return y\n{mid}", add_special_tokens=False)["input_ids"]
    assert out.choices[0].text == greedy_reference(gen, list(ids), 6)[0]
    assert out.usage.prompt_tokens == len(ids)


def test_stop_sequences_cut_the_text(server):
    whole = (
        server.client.completions.create(
            model="tiny", prompt="def quicksort(arr):", max_tokens=16, temperature=0
        )
        .choices[0]
        .text
    )
    assert len(whole) > 4
    stop = whole[2:4]
    cut = server.client.completions.create(
        model="tiny", prompt="def quicksort(arr):", max_tokens=16, temperature=0, stop=stop
    )
    assert cut.choices[0].text == whole[: whole.find(stop)] and cut.choices[0].finish_reason == "stop"
    streamed = server.client.completions.create(
        model="tiny", prompt="def quicksort(arr):", max_tokens=16, temperature=0, stop=[stop], stream=True
    )
    assert "".join(c.choices[0].text for c in streamed) == cut.choices[0].text


def test_sampling_is_reproducible_per_seed(server):
    def ask(seed):
        return (
            server.client.completions.create(
                model="tiny", prompt="x =", max_tokens=8, temperature=0.8, top_p=0.9, seed=seed
            )
            .choices[0]
            .text
        )

    assert ask(3) == ask(3)
    assert len({ask(s) for s in range(4)}) > 1


def test_errors_are_openai_errors(server):
    c = server.client
    with pytest.raises(openai.BadRequestError, match="unknown model 'gpt-4'"):
        c.completions.create(model="gpt-4", prompt="x", max_tokens=2)
    with pytest.raises(openai.BadRequestError, match="temperature"):
        c.completions.create(model="tiny", prompt="x", max_tokens=2, temperature=3.5)
    with pytest.raises(openai.BadRequestError, match="max_tokens"):
        c.completions.create(model="tiny", prompt="x", max_tokens=-1)
    with pytest.raises(openai.BadRequestError, match="last chat message is the assistant"):
        c.chat.completions.create(
            model="tiny", messages=[{"role": "assistant", "content": "hi"}], max_tokens=2
        )
    with pytest.raises(openai.APIStatusError) as info:
        c.completions.create(model="tiny", prompt="x " * 400, max_tokens=2)
    assert info.value.status_code == 413 and "exceeds the target's context length" in info.value.message
    bad = openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


def test_suffix_on_a_model_without_fim_tokens_is_refused():
    s = Server(tiny_pair(fim=False), api_key=None)
    try:
        with pytest.raises(openai.BadRequestError, match="no fill-in-the-middle tokens"):
            s.client.completions.create(model="tiny", prompt="a", suffix="b", max_tokens=2)
    finally:
        s.stop()


def test_concurrent_streams_share_batches_and_match_alone(server):
    prompts = ["def quicksort(arr):", "for i in range(10):", "print(i)", "return sorted"]
    alone = [
        server.client.completions.create(model="tiny", prompt=p, max_tokens=10, temperature=0).choices[0].text
        for p in prompts
    ]
    before = len(server.engine.batches)

    def stream(p):
        chunks = server.client.completions.create(
            model="tiny", prompt=p, max_tokens=10, temperature=0, stream=True
        )
        return "".join(c.choices[0].text for c in chunks)

    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(stream, prompts))
    assert together == alone  # greedy rows of a ragged batch equal each prompt alone
    assert max(server.engine.batches[before:]) > 1  # requests that arrived together shared a batch


def test_a_full_queue_is_refused_with_429_and_nothing_is_lost():
    gen = tiny_pair(fim=False)
    s = Server(gen, api_key=None, max_queue=1, max_batch=1)
    gate = threading.Event()
    original = gen.open

    def slow_open(*a, **k):
        gate.wait(10)
        return original(*a, **k)

    gen.open = slow_open  # every run is opened here: the first request holds the worker
    try:
        with ThreadPoolExecutor(4) as pool:
            futures = [
                pool.submit(_raw_completion, s.url, {"model": "tiny", "prompt": "x", "max_tokens": 2})
                for _ in range(4)
            ]
            time.sleep(0.5)
            gate.set()
            answers = [f.result() for f in futures]
        codes = sorted(code for code, _ in answers)
        assert set(codes) <= {200, 429} and 429 in codes and 200 in codes  # every request answered
        refused = next(body for code, body in answers if code == 429)
        assert "queue is full" in refused["error"]["message"]
    finally:
        s.stop()


def test_raw_sse_format(server):
    req = urllib.request.Request(
        server.url + "/v1/chat/completions",
        data=json.dumps(
            {
                "model": "tiny",
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 4,
                "temperature": 0,
                "stream": True,
            }
        ).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"},
    )
    with urllib.request.urlopen(req) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        raw = r.read().decode()
    events = [e for e in raw.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length") and "usage" in chunks[-1]


def test_a_client_that_disconnects_stops_its_generation():
    gen = tiny_pair(fim=False)
    s = Server(gen, api_key=None, max_batch=1)
    steps = []
    original = gen.open

    def counting_open(*a, **k):
        run = original(*a, **k)
        inner = run.steps

        def steps_():
            for step in inner():
                steps.append(1)
                time.sleep(0.05)
                yield step

        run.steps = steps_
        return run

    gen.open = counting_open
    try:
        stream = s.client.completions.create(
            model="tiny", prompt="def", max_tokens=200, temperature=0, stream=True, extra_body={"stop": None}
        )
        next(iter(stream))
        stream.close()  # the client goes away after the first chunk
        time.sleep(1.0)
        seen = len(steps)
        time.sleep(0.5)
        assert len(steps) == seen  # no more rounds for a client that left
        assert seen < 200
    finally:
        s.stop()


def _raw_completion(url, body) -> tuple[int, dict]:
    req = urllib.request.Request(
        url + "/v1/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_cli_serve_refuses_bad_arguments(capsys):
    from specvideo.cli import main

    assert main(["serve", "--model", "/no/such/dir"]) == 2
    assert "no such model directory (a model is smollm2, qwen-coder, a .gguf file" in capsys.readouterr().err
    assert main(["serve", "--port", "0", "--model", "/no/such/dir"]) == 2


torch.set_num_threads(1)


def test_qwen_coder_not_fetched_says_how_to_fetch_it(tmp_path, monkeypatch, capsys):
    from specvideo.cli import main

    monkeypatch.setenv("SPECVIDEO_CACHE", str(tmp_path))
    assert main(["serve", "--model", "qwen-coder"]) == 2
    assert "run scripts/fetch_qwen_coder.sh" in capsys.readouterr().err


def test_a_gguf_model_with_fim_tokens_serves_and_fills_the_middle(tmp_path, monkeypatch, capsys):
    """A FILE.gguf model (converted once into the cache) through the CLI's loader, the server and
    specvideo text --suffix: the same middle either way, equal to the target's greedy output."""
    import argparse

    from specvideo.cli import main
    from specvideo.cli.serve import load
    from tests.text.test_gguf import write_tiny_qwen2_gguf

    monkeypatch.setenv("SPECVIDEO_CACHE", str(tmp_path / "cache"))
    write_tiny_qwen2_gguf(tmp_path / "coder.gguf")
    args = argparse.Namespace(
        model=str(tmp_path / "coder.gguf"), draft=None, ngram=False, drafter=None, device=None, name=None,
        packed="auto", dtype="float32", exact=False,  # packing applies to float32 targets
    )
    gen, name = load(args)
    assert name == "coder" and gen.config.drafter == "ngram"
    assert len(gen.models.packed_models(gen.drafter_spec)) == 1  # auto: a float32 transformers target on the CPU runs pre-packed
    s = Server(gen, name=name, api_key=None)
    try:
        served = s.client.completions.create(
            model="coder", prompt="def f(x):", suffix="    return y", max_tokens=6, temperature=0
        )
    finally:
        s.stop()
    assert (
        main(
            [
                "text",
                "def f(x):",
                "--suffix",
                "    return y",
                "--target",
                str(tmp_path / "coder.gguf"),
                "--ngram",
                "--max-new-tokens",
                "6",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["text"] == served.choices[0].text
    assert main(["text", "x", "--suffix", "y", "--target", str(tmp_path / "coder.gguf"), "--chat"]) == 2


def test_bench_serve_reports_every_request(tmp_path, capsys):
    """specvideo bench serve against a live server: every request answered or refused, none lost."""
    from specvideo.cli import main

    s = Server(tiny_pair(fim=False), name="tiny", api_key=None, max_queue=4, max_batch=2)  # 4 clients never overflow the queue; a flood of 16 does
    try:
        report = tmp_path / "SCALING.md"
        argv = [
            "bench",
            "serve",
            "--url",
            s.url + "/v1",
            "--model",
            "tiny",
            "--concurrency",
            "1,4",
            "--max-tokens",
            "4",
        ]
        compare = ["--seeded", "--compare", s.url + "/v1"]  # every second request sampled; all sent again
        assert main([*argv, "--repeats", "2", "--flood", "16", *compare, "--report", str(report), "--json"]) == 0
        waves = json.loads(capsys.readouterr().out)
        assert main([*argv, "--repeats", "1", "--label", "continuous", "--report", str(report)]) == 0
    finally:
        s.stop()
    assert [w["concurrency"] for w in waves] == [1, 4, 16]
    for w, sent in zip(waves, (2, 8, 16)):  # every request answered or refused with 429, none lost
        assert w["answered"] + w["refused"] == w["requests"] == sent and w["failed"] == 0
    assert waves[1]["refused"] == 0 and waves[2]["refused"] > 0  # a flood past a queue of 4
    assert waves[0]["answered"] == 2 and waves[0]["ttft_s_median"] > 0 and waves[0]["tokens_per_s"] > 0
    done, same = map(int, waves[1]["equal_to_alone"].split("/"))
    assert done > 0 and same == done  # greedy answers under load equal the one-client answers
    for w in waves:  # greedy and seeded answers under load equal the same requests sent alone
        sent_again, same = map(int, w["equal_to_single"].split("/"))
        assert sent_again == w["answered"] and same == sent_again and w["cut"] == 0
    assert {r["temperature"] for r in waves[1]["requests_detail"]} == {0, 0.8}
    text = report.read_text()
    assert "## Serving load\n" in text and "## Serving load: continuous" in text
    assert "| 4 |" in text and "| flood of 16 at once |" in text and "specvideo bench serve --url" in text
