"""The text training recipe on tiny models: a target run, resume, distillation and draft-more."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import LlamaForCausalLM

from recipes import text
from specvideo.text.models.vocab import load_token_ranking, token_ranking
from tests.helpers import tiny_tokenizer


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setattr(text, "DRAFT_SIZE", text.ModelSize(hidden=16, layers=1, heads=2, intermediate=32))
    cfg = text.TrainConfig(
        out=str(tmp_path / "out"),
        work=str(tmp_path / "work"),
        context=64,
        seq_len=16,
        batch_size=2,
        eval_windows=4,
        eval_every=2,
        warmup=1,
        draft_minutes=0.01,  # the step count is fixed from 5 timed steps: at least 10
    )
    tok = tiny_tokenizer(300)
    rng = np.random.default_rng(0)
    train = rng.integers(3, len(tok), 3000).astype(np.uint16)
    heldout = rng.integers(3, len(tok), 400).astype(np.uint16)
    return cfg, tok, train, heldout


def test_target_trains_and_resumes_from_its_checkpoint(setup):
    cfg, tok, train, heldout = setup
    size = text.ModelSize(hidden=16, layers=1, heads=2, intermediate=32)
    model = text.make_llama(size, cfg, tok)
    first = text.train_loop("target", model, text.lm_loss, train, heldout, None, 1e-3, cfg, steps=3)
    assert first["steps"] == 3 and np.isfinite(first["heldout_loss"])
    log = [json.loads(line) for line in open(f"{cfg.work}/target/log.jsonl")]
    assert log[-1]["step"] == 3 and "heldout_loss" in log[-1]
    fresh = text.make_llama(size, cfg, tok)  # resumes: weights, optimizer and step come back
    again = text.train_loop("target", fresh, text.lm_loss, train, heldout, None, 1e-3, cfg, steps=3)
    assert again["steps"] == 3
    torch.testing.assert_close(fresh.state_dict(), model.state_dict())


def test_draft_is_distilled_then_distilled_further(setup):
    cfg, tok, train, heldout = setup
    with pytest.raises(ValueError, match="draft-more needs a trained target"):
        text.stage_draft_more(cfg, tok, train, heldout)
    target = text.make_llama(text.ModelSize(hidden=32, layers=1, heads=2, intermediate=64), cfg, tok)
    text.save_model(target, tok, Path(cfg.out) / "target")
    with pytest.raises(ValueError, match="draft-more needs a trained draft"):
        text.stage_draft_more(cfg, tok, train, heldout)
    draft = text.stage_draft(cfg, tok, train, heldout)
    assert draft["steps"] >= 10 and np.isfinite(draft["heldout_loss"])
    before = LlamaForCausalLM.from_pretrained(f"{cfg.out}/draft").state_dict()
    more = text.stage_draft_more(replace(cfg, draft_more_lr=1e-2), tok, train, heldout)
    assert more["steps"] >= 10 and (Path(cfg.work) / "draft-more" / "checkpoint.pt").exists()
    after = LlamaForCausalLM.from_pretrained(f"{cfg.out}/draft").state_dict()
    assert after["model.layers.0.mlp.up_proj.weight"].dtype == torch.float16  # shipped as fp16
    assert not torch.equal(
        after["model.layers.0.mlp.up_proj.weight"], before["model.layers.0.mlp.up_proj.weight"]
    )
    assert load_token_ranking(f"{cfg.out}/draft") == token_ranking(train, len(tok))  # beside the draft
    second = text.stage_draft_more(replace(cfg, draft_more_lr=1e-2), tok, train, heldout)  # a new round
    assert second["steps"] >= 10 and (Path(cfg.work) / "draft-more-2" / "checkpoint.pt").exists()
    again = LlamaForCausalLM.from_pretrained(f"{cfg.out}/draft").state_dict()
    assert not torch.equal(
        again["model.layers.0.mlp.up_proj.weight"], after["model.layers.0.mlp.up_proj.weight"]
    )


def test_draft_vocab_stage_writes_the_train_ranking(setup):
    cfg, tok, train, heldout = setup
    with pytest.raises(ValueError, match="draft-vocab needs a trained draft"):
        text.stage_draft_vocab(cfg, tok, train, heldout)
    draft = text.make_llama(text.DRAFT_SIZE, cfg, tok)
    text.save_model(draft, tok, Path(cfg.out) / "draft")
    assert load_token_ranking(f"{cfg.out}/draft") is None
    skewed = np.concatenate([train, np.full(500, 7, dtype=np.uint16)])  # token 7 now the most frequent
    info = text.stage_draft_vocab(cfg, tok, skewed, heldout)
    ranking = load_token_ranking(f"{cfg.out}/draft")
    assert ranking[0] == 7 and sorted(ranking) == list(range(len(tok)))
    assert info["train_coverage"] == {len(tok): 1.0}  # 298 tokens: below the smallest listed size
    assert "train_agreement" not in info  # no target to agree with
    text.save_model(text.make_llama(text.DRAFT_SIZE, cfg, tok), tok, Path(cfg.out) / "target")
    agreement = text.stage_draft_vocab(cfg, tok, skewed, heldout)["train_agreement"]
    assert set(agreement) == {len(tok)} and 0 <= agreement[len(tok)] <= 1  # 298 tokens: only "all"
