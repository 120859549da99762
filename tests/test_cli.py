"""The CLI end to end on tiny models saved to a temporary directory."""

import json
import subprocess
import sys

import pytest

from specvideo.cli import main
from tests.helpers import save_model_dir, tiny_tokenizer


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    tok = tiny_tokenizer(300)
    vocab = len(tok)
    save_model_dir(root / "target", vocab, seed=0, tokenizer=tok, logit_scale=4.0)
    save_model_dir(root / "draft", vocab, seed=1, tokenizer=tok)
    save_model_dir(root / "other", vocab - 5, seed=2)  # cannot hold the tokenizer's ids
    return root


def run_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_text_json_with_draft_and_ngram_agree_greedily(model_dirs, capsys):
    target, draft = str(model_dirs / "target"), str(model_dirs / "draft")
    common = ["--max-new-tokens", "12", "--json"]
    with_draft = run_json(
        capsys, "text", "def quicksort(arr):", "--target", target, "--draft", draft, "-k", "3", *common
    )
    with_ngram = run_json(capsys, "text", "def quicksort(arr):", "--target", target, "--ngram", *common)
    hybrid = run_json(
        capsys,
        "text",
        "def quicksort(arr):",
        "--target",
        target,
        "--draft",
        draft,
        "--drafter",
        "hybrid",
        *common,
    )
    assert with_draft["token_ids"] == with_ngram["token_ids"] == hybrid["token_ids"]  # all exact
    stats = with_draft["stats"]
    assert stats["drafted"] > 0 and 0 <= stats["acceptance_rate"] <= 1
    assert stats["target_calls"] >= 1 and isinstance(with_draft["text"], str)


def test_text_streams_plain_text(model_dirs, capsys):
    argv = [
        "text",
        "for i in",
        "--target",
        str(model_dirs / "target"),
        "--max-new-tokens",
        "8",
        "--temperature",
        "0.8",
    ]
    assert main([*argv, "--top-p", "0.9", "--seed", "3"]) == 0
    first = capsys.readouterr().out
    assert first.startswith("for i in")
    assert main([*argv, "--top-p", "0.9", "--seed", "3"]) == 0
    assert capsys.readouterr().out == first  # the seed makes sampling reproducible


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--num-draft-tokens", "0"], "k must be an integer >= 1"),
        (["--temperature", "-1"], "temperature must be a finite number >= 0"),
        (["--top-p", "1.5", "--temperature", "1"], "top_p must be in (0, 1]"),
        (["--top-k", "0", "--temperature", "1"], "top_k must be an integer >= 1"),
        (["--max-new-tokens", "-2"], "max_new_tokens must be an integer >= 0"),
        (["--max-new-tokens", "100000"], "exceeds the target's context length of 256 tokens"),
        (["--draft", "OTHER"], "does not match the target's vocabulary size"),
        (["--draft", "/nonexistent/dir"], "cannot load a causal LM"),
        (["--drafter", "hybrid"], "drafter='hybrid' needs a draft model"),
        (["--drafter", "lean"], "drafter='lean' needs a draft model"),
    ],
)
def test_text_errors_are_one_line_and_exit_2(model_dirs, capsys, extra, message):
    extra = [str(model_dirs / "other") if e == "OTHER" else e for e in extra]
    code = main(["text", "def f():", "--target", str(model_dirs / "target"), *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_console_script_reports_missing_target_without_traceback(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "specvideo.cli", "text", "x", "--target", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert (
        result.stderr.startswith("specvideo: error: cannot load a causal LM")
        and "Traceback" not in result.stderr
    )
