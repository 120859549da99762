"""Bad-input matrix for text, through the Python API and ``specvideo text`` (docs/RELIABILITY.md).

Every failure is a ValueError whose message names the problem; the CLI prints one line on stderr,
nothing on stdout, and exits 2. Rows already covered elsewhere (token-id prompts past the context,
negative max_new_tokens, bad sampling settings, vocabulary mismatch in the constructor, a missing
or truncated target directory) live in tests/text/test_errors.py and tests/test_cli.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from specvideo.cli import main
from specvideo.text import SpeculativeGenerator
from tests.helpers import save_model_dir, tiny_llama, tiny_tokenizer

LONG_PROMPT = "for i in range(10):\n    print(i)\n" * 60  # far more than 256 tokens
INVALID_UTF8 = b"def \xff(x):"


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer(300)


@pytest.fixture(scope="module")
def gen(tok):
    return SpeculativeGenerator.from_models(tiny_llama(len(tok), context=256), tokenizer=tok, drafter="ngram")


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory, tok):
    root = tmp_path_factory.mktemp("models")
    save_model_dir(root / "target", len(tok), seed=0, tokenizer=tok)
    save_model_dir(root / "draft", len(tok), seed=1, tokenizer=tok)
    save_model_dir(root / "other", len(tok) - 5, seed=2)  # fewer rows than the tokenizer has tokens
    save_model_dir(root / "padded", len(tok) + 6, seed=3)  # the same tokenizer, vocab_size padded
    return root


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_cli_error(code: int, out: str, err: str, message: str) -> None:
    assert code == 2, err
    assert err.startswith("specvideo: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and message in err, err
    assert out == ""  # nothing half-printed: the prompt is echoed only once generation is under way


# ------------------------------------------------------------------------------------ prompts

BAD_PROMPTS = [
    ("empty", "", "prompt is empty: give some text to continue"),
    ("empty-bytes", b"", "prompt is empty: give some text to continue"),
    ("beyond-context", LONG_PROMPT, "exceeds the target's context length of 256 tokens"),
    (
        "invalid-utf8-bytes",
        INVALID_UTF8,
        r"prompt is not valid UTF-8: b'\xff' at position 4 (invalid start byte)",
    ),
    (
        "lone-surrogate",
        "def \ud800",
        r"prompt is not valid UTF-8: '\ud800' at position 4 (surrogates not allowed)",
    ),
    ("batch-with-invalid-bytes", ["ok", INVALID_UTF8], "prompt is not valid UTF-8"),
]


@pytest.mark.parametrize("prompt,message", [c[1:] for c in BAD_PROMPTS], ids=[c[0] for c in BAD_PROMPTS])
def test_api_rejects_bad_prompt(gen, prompt, message):
    with pytest.raises(ValueError) as info:
        gen.generate(prompt, max_new_tokens=4)
    assert message in str(info.value)
    with pytest.raises(ValueError):  # stream() checks when called, before the first piece
        gen.stream(prompt, max_new_tokens=4)


def test_api_accepts_utf8_bytes(gen):
    as_bytes = gen.generate(b"def f(x):", max_new_tokens=5, stop=None)
    assert as_bytes.token_ids == gen.generate("def f(x):", max_new_tokens=5, stop=None).token_ids


CLI_PROMPTS = [
    ("empty", "", "prompt is empty"),
    ("beyond-context", LONG_PROMPT, "exceeds the target's context length of 256 tokens"),
    # how Python hands over a command-line argument holding the byte 0xff (surrogateescape)
    ("invalid-utf8-argument", INVALID_UTF8.decode("utf-8", "surrogateescape"), r"b'\xff' at position 4"),
]


@pytest.mark.parametrize("json_flag", [[], ["--json"]], ids=["stream", "json"])
@pytest.mark.parametrize("prompt,message", [c[1:] for c in CLI_PROMPTS], ids=[c[0] for c in CLI_PROMPTS])
def test_cli_rejects_bad_prompt(model_dirs, capsys, prompt, message, json_flag):
    code, out, err = cli(capsys, "text", prompt, "--target", model_dirs / "target", "--ngram", *json_flag)
    assert_cli_error(code, out, err, message)


def test_console_script_with_invalid_utf8_argument(model_dirs):
    argv = [sys.executable, "-m", "specvideo.cli", "text", INVALID_UTF8, "--target", model_dirs / "target"]
    result = subprocess.run(argv, capture_output=True, timeout=300)
    assert result.returncode == 2, result.stderr
    assert result.stdout == b""
    assert (
        result.stderr
        == b"specvideo: error: prompt is not valid UTF-8: b'\\xff' at position 4 (invalid start byte)\n"
    )


# ------------------------------------------------------------------------------ max_new_tokens


def test_api_zero_new_tokens_is_an_empty_result(gen):
    out = gen.generate("def f(x):", max_new_tokens=0)
    assert out.token_ids == [] and out.text == ""
    assert out.stats.rounds == 0 and out.stats.target_calls == 0
    assert list(gen.stream("def f(x):", max_new_tokens=0)) == []


def test_cli_zero_new_tokens_echoes_the_prompt(model_dirs, capsys):
    code, out, err = cli(
        capsys, "text", "def f(x):", "--target", model_dirs / "target", "--max-new-tokens", "0"
    )
    assert code == 0, err
    assert out == "def f(x):\n"


# --------------------------------------------------------------------------- model directories


def _edit_config(**changes) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        config = json.loads((root / "config.json").read_text())
        (root / "config.json").write_text(json.dumps({**config, **changes}))

    return edit


def _write(name: str, text: str) -> Callable[[Path], None]:
    return lambda root: (root / name).write_text(text)


def _truncate_weights(root: Path) -> None:
    data = (root / "model.safetensors").read_bytes()
    (root / "model.safetensors").write_bytes(data[: len(data) // 2])


BAD_DIRS = [
    ("missing", lambda root: shutil.rmtree(root), "no such model directory"),
    ("truncated-weights", _truncate_weights, "cannot load a causal LM from model directory"),
    ("no-weights", lambda root: (root / "model.safetensors").unlink(), "no file named model.safetensors"),
    ("garbled-config", _write("config.json", "{garbage"), "is not a valid JSON file"),
    ("empty-config", _write("config.json", ""), "is not a valid JSON file"),
    ("unknown-model-type", _edit_config(model_type="nonsense"), "model type `nonsense`"),
    ("config-vocab-not-the-weights", _edit_config(vocab_size=999), "shapes do not match config.json"),
    ("config-width-not-the-weights", _edit_config(hidden_size=64), "shapes do not match config.json"),
    ("garbled-tokenizer", _write("tokenizer.json", "{garbage"), "cannot load the tokenizer in"),
]
# The draft's tokenizer is never read (the target's is used), so that row is for the target only.
BAD_DIR_ROWS = [
    pytest.param(role, mutate, message, id=f"{role}-{name}")
    for role in ("target", "draft")
    for name, mutate, message in BAD_DIRS
    if not (role == "draft" and name == "garbled-tokenizer")
]


def _broken_copy(model_dirs: Path, tmp_path: Path, mutate: Callable[[Path], None]) -> Path:
    root = tmp_path / "broken"
    shutil.copytree(model_dirs / "target", root)
    mutate(root)
    return root


def _paths(model_dirs: Path, broken: Path, role: str) -> tuple[str, str]:
    """(target, draft) with the broken directory in ``role``."""
    good = {"target": str(model_dirs / "target"), "draft": str(model_dirs / "draft")}
    return (str(broken), good["draft"]) if role == "target" else (good["target"], str(broken))


@pytest.mark.parametrize("role,mutate,message", BAD_DIR_ROWS)
def test_api_rejects_bad_model_directory(model_dirs, tmp_path, role, mutate, message):
    target, draft = _paths(model_dirs, _broken_copy(model_dirs, tmp_path, mutate), role)
    with pytest.raises(ValueError) as info:
        SpeculativeGenerator.from_pretrained(target, draft)
    assert message in str(info.value) and (target if role == "target" else draft) in str(info.value)


@pytest.mark.parametrize("role,mutate,message", BAD_DIR_ROWS)
def test_cli_rejects_bad_model_directory(model_dirs, tmp_path, capsys, role, mutate, message):
    target, draft = _paths(model_dirs, _broken_copy(model_dirs, tmp_path, mutate), role)
    code, out, err = cli(capsys, "text", "def f():", "--target", target, "--draft", draft)
    assert_cli_error(code, out, err, message)


def test_mismatched_draft_vocabulary_through_from_pretrained(model_dirs):
    with pytest.raises(
        ValueError, match="draft vocabulary size 293 does not match the target's vocabulary size 298"
    ):
        SpeculativeGenerator.from_pretrained(str(model_dirs / "target"), str(model_dirs / "other"))


def test_a_padded_draft_vocabulary_is_accepted(model_dirs, capsys):
    gen = SpeculativeGenerator.from_pretrained(str(model_dirs / "target"), str(model_dirs / "padded"))
    assert gen.draft.config.vocab_size == gen.target.config.vocab_size + 6
    code, out, err = cli(
        capsys, "text", "def f():", "--target", model_dirs / "target", "--draft", model_dirs / "padded"
    )
    assert code == 0 and out.startswith("def f():")


def test_mismatched_draft_vocabulary_with_the_lean_drafter(model_dirs, capsys):
    argv = ["--target", model_dirs / "target", "--draft", model_dirs / "other", "--drafter", "lean"]
    code, out, err = cli(capsys, "text", "def f():", *argv)
    assert_cli_error(code, out, err, "does not match the target's vocabulary size")


def test_tokenizer_with_a_smaller_vocabulary_than_the_ids_it_makes(tok, capsys):
    small = SpeculativeGenerator.from_models(tiny_llama(64), tokenizer=tok, drafter="ngram")  # tok has 298 ids
    with pytest.raises(ValueError, match=r"outside the vocabulary \[0, 64\)"):
        small.generate("def quicksort(arr):", max_new_tokens=2, generator=torch.Generator().manual_seed(0))


RANKINGS = [
    ("garbled", "{garbage", "is not a token ranking"),
    ("no-list", '{"ranking": "abc"}', "'ranking' must be a list of token ids"),
    ("too-short", '{"ranking": [1, 2, 3]}', "fewer than the 100 asked for"),
    (
        "out-of-range",
        json.dumps({"ranking": list(range(5000, 5100))}),
        "draft vocabulary ids must lie in [0, 298)",
    ),
]


@pytest.mark.parametrize("text,message", [r[1:] for r in RANKINGS], ids=[r[0] for r in RANKINGS])
def test_bad_token_ranking_beside_the_draft(model_dirs, tmp_path, capsys, text, message):
    draft = tmp_path / "draft"
    shutil.copytree(model_dirs / "draft", draft)
    (draft / "token_ranking.json").write_text(text)
    with pytest.raises(ValueError) as info:
        SpeculativeGenerator.from_pretrained(
            str(model_dirs / "target"), str(draft), drafter="lean", draft_vocab_size=100
        )
    assert message in str(info.value)
    argv = ["--target", model_dirs / "target", "--draft", draft, "--drafter", "lean", "--draft-vocab", "100"]
    assert_cli_error(*cli(capsys, "text", "def f():", *argv), message)


def test_negative_draft_vocab_flag(model_dirs, capsys):
    argv = ["--target", model_dirs / "target", "--draft", model_dirs / "draft", "--drafter", "lean"]
    code, out, err = cli(capsys, "text", "def f():", *argv, "--draft-vocab", "-1")
    assert_cli_error(code, out, err, "draft vocabulary size must be an integer >= 0 (0 = all tokens), got -1")
