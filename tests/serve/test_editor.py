"""The editor routes driven with the bodies their clients send: llama.vscode's /infill, llama.cpp's
/completion (Twinny, Continue's llama.cpp provider) and Continue's /v1/fim/completions."""

from __future__ import annotations

import json
import urllib.request

import pytest
import torch

from specvideo.text.prompts import FIM_TOKENS, REPO_TOKENS, infill_ids
from tests.serve.test_server import KEY, Server, tiny_pair

torch.set_num_threads(1)

# what llama.vscode sends on a keystroke (its defaults), here with its optional context chunks
VSCODE_INFILL = {
    "input_prefix": "def quicksort(arr):\n    ",
    "input_suffix": "\n    return arr\n",
    "input_extra": [{"filename": "util.py", "text": "def helper(x):\n    return x\n"}],
    "prompt": "",
    "n_predict": 12,
    "top_k": 40,
    "top_p": 0.99,
    "stream": False,
    "samplers": ["top_k", "top_p", "infill"],
    "cache_prompt": True,
    "t_max_prompt_ms": 500,
    "t_max_predict_ms": 1000,
}


def repo_pair():
    """The tiny pair with FIM and repository tokens (Qwen2.5-Coder's) in its vocabulary."""
    from specvideo.text import SpeculativeGenerator
    from tests.helpers import perturbed_copy, tiny_llama, tiny_tokenizer

    tok = tiny_tokenizer(300)
    tok.add_special_tokens({"additional_special_tokens": list(FIM_TOKENS) + list(REPO_TOKENS)})
    target = tiny_llama(len(tok), seed=0, logit_scale=4.0)
    return SpeculativeGenerator.from_models(target, tokenizer=tok, draft=perturbed_copy(target, 0.3), drafter="model", num_draft_tokens=3)


@pytest.fixture(scope="module")
def server():
    s = Server(repo_pair(), api_key=KEY)
    yield s
    s.stop()


def post(server, path, body, key=KEY):
    req = urllib.request.Request(
        server.url + path, data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})},
    )
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read().decode()


def greedy(server, ids, n):
    """The cold greedy output (the server's prompt cache set aside)."""
    gen = server.engine.generator
    cache, gen.prompt_cache = gen.prompt_cache, None
    try:
        out = gen.generate(ids, max_new_tokens=n, temperature=0.0)
    finally:
        gen.prompt_cache = cache
    return gen.tokenizer.decode(out.token_ids, skip_special_tokens=True), out.token_ids


def test_vscode_infill_answers_in_llama_cpp_shape(server):
    code, _, raw = post(server, "/infill", VSCODE_INFILL)
    body = json.loads(raw)
    assert code == 200 and isinstance(body["content"], str) and body["stop"] is True
    assert 0 < body["tokens_predicted"] <= 12 and body["stop_type"] in ("eos", "limit", "word")
    assert set(body["timings"]) >= {"prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "predicted_per_second"}


def test_greedy_infill_lays_out_the_other_files_with_repo_tokens_and_equals_generate(server):
    tok = server.engine.generator.tokenizer
    code, _, raw = post(server, "/infill", {**VSCODE_INFILL, "temperature": 0, "prompt": "re"})
    ids = infill_ids(tok, VSCODE_INFILL["input_prefix"], VSCODE_INFILL["input_suffix"], [("util.py", "def helper(x):\n    return x\n")], "re")
    text = tok.decode(ids)
    assert text.startswith("<|repo_name|>myproject\n<|file_sep|>util.py\ndef helper") and "<|file_sep|>filename\n<|fim_prefix|>" in text
    assert text.endswith("<|fim_middle|>re")
    expected, tokens = greedy(server, ids, 12)
    body = json.loads(raw)
    assert code == 200 and body["content"] == expected and body["tokens_predicted"] == len(tokens)


def test_n_predict_zero_warms_up_without_generating(server):
    code, _, raw = post(server, "/infill", {**VSCODE_INFILL, "n_predict": 0})
    body = json.loads(raw)
    assert code == 200 and body["content"] == "" and body["tokens_predicted"] == 0 and body["tokens_evaluated"] > 10


def test_streamed_infill_uses_llama_cpp_events_and_matches_the_whole_answer(server):
    whole = json.loads(post(server, "/infill", {**VSCODE_INFILL, "temperature": 0})[2])
    code, headers, raw = post(server, "/infill", {**VSCODE_INFILL, "temperature": 0, "stream": True})
    assert code == 200 and headers["content-type"].startswith("text/event-stream")
    events = [json.loads(e[6:]) for e in raw.split("\n\n") if e]
    assert "[DONE]" not in raw and events[-1]["stop"] is True and all(not e["stop"] for e in events[:-1])
    assert "".join(e["content"] for e in events) == whole["content"]


def test_completion_takes_text_or_token_ids(server):
    tok = server.engine.generator.tokenizer
    ids = list(tok("def quicksort(arr):")["input_ids"])
    by_text = json.loads(post(server, "/completion", {"prompt": "def quicksort(arr):", "n_predict": 8, "temperature": 0})[2])
    by_ids = json.loads(post(server, "/completion", {"prompt": ids, "n_predict": 8, "temperature": 0})[2])
    assert by_text["content"] == by_ids["content"] == greedy(server, ids, 8)[0]
    code, _, raw = post(server, "/completion", {"prompt": [10**9], "n_predict": 2})
    assert code == 400 and "token ids" in raw
    code, _, raw = post(server, "/completion", {"prompt": "x", "n_probs": 5})
    assert code == 400


def test_continue_fim_route_streams_chat_deltas_equal_to_completions_with_suffix(server):
    body = {"model": "tiny", "prompt": "def f(x):\n", "suffix": "    return y\n", "max_tokens": 8, "temperature": 0}
    code, _, raw = post(server, "/v1/fim/completions", {**body, "stream": True})
    events = [e[6:] for e in raw.split("\n\n") if e]
    assert code == 200 and events[-1] == "[DONE]"
    text = "".join(json.loads(e)["choices"][0]["delta"].get("content", "") for e in events[:-1])
    openai_style = server.client.completions.create(**body)
    assert text == openai_style.choices[0].text
    whole = json.loads(post(server, "/v1/fim/completions", body)[2])
    assert whole["choices"][0]["message"]["content"] == text


def test_editor_routes_sit_behind_the_api_key(server):
    assert post(server, "/infill", VSCODE_INFILL, key=None)[0] == 401
    assert post(server, "/completion", {"prompt": "x"}, key="wrong")[0] == 401


def test_infill_layout_keeps_the_budget_dropping_oldest_chunks_first():
    tok = repo_pair().tokenizer
    extra = [("old.py", "x = 1\n" * 40), ("new.py", "y = 2\n")]
    full = infill_ids(tok, "a = 1\n" * 30, "b = 2\n" * 30, extra)
    cut = infill_ids(tok, "a = 1\n" * 30, "b = 2\n" * 30, extra, budget=len(full) - 5)
    assert len(cut) <= len(full) - 5
    text = tok.decode(cut)
    assert "old.py" not in text and "new.py" in text  # the oldest chunk went first
    tight = infill_ids(tok, "a = 1\n" * 30, "b = 2\n" * 30, extra, budget=40)
    assert len(tight) <= 40 and "file_sep" not in tok.decode(tight) and tok.decode(tight).endswith("<|fim_middle|>")
    plain = tiny_pair(fim=False).tokenizer
    assert infill_ids(plain, "a", "b") is None


def test_keystrokes_reuse_the_cached_prompt_and_answer_as_cold(server):
    tok = server.engine.generator.tokenizer
    body = {**VSCODE_INFILL, "temperature": 0, "input_suffix": "\n    return arr\n" * 6}
    first = json.loads(post(server, "/infill", body)[2])
    typed = {**body, "input_suffix": body["input_suffix"] + "x"}  # one more keystroke at the end
    second = json.loads(post(server, "/infill", typed)[2])
    ids = infill_ids(tok, typed["input_prefix"], typed["input_suffix"], [("util.py", "def helper(x):\n    return x\n")])
    assert second["tokens_cached"] > 0.8 * second["tokens_evaluated"] and first["tokens_evaluated"] > 40
    assert second["content"] == greedy(server, ids, 12)[0]
    warm = json.loads(post(server, "/infill", {**typed, "n_predict": 0, "input_prefix": "import os\n" + typed["input_prefix"]})[2])
    assert warm["content"] == "" and warm["tokens_predicted"] == 0
    again = json.loads(post(server, "/infill", {**typed, "input_prefix": "import os\n" + typed["input_prefix"]})[2])
    assert again["tokens_cached"] == again["tokens_evaluated"] - 1  # the warm-up cached it all


def test_bench_serve_replays_an_editor_session_without_and_with_the_cache(server, tmp_path, capsys):
    from specvideo.cli import main

    report = tmp_path / "SCALING.md"
    argv = ["bench", "serve", "--editor", "--url", server.url + "/v1", "--api-key", KEY, "--context-tokens", "40"]
    assert main([*argv, "--edits", "4", "--n-predict", "4", "--report", str(report), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cold"]["answered"] == out["cache"]["answered"] == 4 and out["cold"]["failed"] == 0
    assert out["cold"]["cached_tokens_median"] == 0 and out["cache"]["cached_tokens_median"] > 0
    cold = [s for s in out["strokes"] if not s["cache"]]
    warm = [s for s in out["strokes"] if s["cache"]]
    assert all(c["prompt_tokens"] == w["prompt_tokens"] for c, w in zip(cold, warm))
    assert "## Editor replay" in report.read_text() and "textwrap.py" in report.read_text()


def test_bench_serve_replays_a_teams_files_in_turn_and_counts_cache_hits(server, tmp_path, capsys):
    from specvideo.cli import main

    report = tmp_path / "SCALING.md"
    argv = ["bench", "serve", "--team", "--url", server.url, "--api-key", KEY, "--files", "2", "--edits", "3"]
    argv += ["--context-tokens", "40", "--n-predict", "4", "--route", "infill", "--label", "one server"]
    assert main([*argv, "--report", str(report), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["answered"] == out["requests"] == 6 and out["failed"] == 0
    assert [r["file"] for r in out["detail"][:2]] == ["textwrap.py", "difflib.py"]  # in turn
    assert all(r["cached_tokens"] > 50 for r in out["detail"][2:])  # each file's later edits reuse its earlier
    assert out["hits"] >= 3 and 0 < out["token_hit_rate"] < 1
    assert "## Team editor replay: one server" in report.read_text()
    assert main([*argv[:-2], "--files", "9", "--no-report"]) != 0  # past the list of files
    assert "--files must be in 1..8" in capsys.readouterr().err
