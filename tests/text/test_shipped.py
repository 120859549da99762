"""The tiny stdlib pair under models/text loads offline by path and decodes exactly (a few tokens, CPU)."""

import json

import pytest
import torch

from specvideo.cli import main
from specvideo.paths import models_dir
from specvideo.text import SpeculativeGenerator


@pytest.fixture(autouse=True)
def real_models(monkeypatch):
    """The repository's models/, even when the app tests point SPECVIDEO_MODELS at tiny ones."""
    monkeypatch.delenv("SPECVIDEO_MODELS", raising=False)


def tiny_pair() -> tuple[str, str]:
    return str(models_dir() / "text" / "target"), str(models_dir() / "text" / "draft")


def test_the_tiny_pair_loads_by_path_and_is_exact():
    """exact=True: float32, token-identical to transformers' generate()."""
    gen = SpeculativeGenerator.from_pretrained(*tiny_pair(), drafter="hybrid", exact=True)
    assert gen.target is not None and gen.draft is not None and gen.tokenizer is not None
    assert gen.drafter_name == "hybrid" and gen._lean.vocab is not None  # lookup, else lean@2048
    prompt = "def quicksort(arr):\n"
    out = gen.generate(prompt, max_new_tokens=24, stop=None)
    ids = torch.tensor([gen.tokenizer(prompt)["input_ids"]])
    reference = gen.target.generate(
        ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=24, eos_token_id=[]
    )[0, ids.shape[1] :].tolist()
    assert out.token_ids == reference
    assert out.stats.accepted > 0


def test_cli_text_runs_the_tiny_pair(capsys):
    target, draft = tiny_pair()
    args = ["text", "def quicksort(arr):", "--target", target, "--draft", draft, "--drafter", "hybrid"]
    assert main([*args, "--max-new-tokens", "16", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["stats"]["emitted"] >= 1 and isinstance(report["text"], str)
