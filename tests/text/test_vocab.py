"""The frequency-ranked draft vocabulary (FR-Spec): ranking, loading, the lean drafter's restricted
logits, and exact generation through a draft that can only propose some tokens."""

import numpy as np
import pytest
import torch

from specvideo.cli import main
from specvideo.text import SpeculativeGenerator
from specvideo.text.models.vocab import (
    RANKING_FILE,
    draft_vocabulary,
    load_token_ranking,
    ranked_vocabulary,
    save_token_ranking,
    token_ranking,
)
from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.state import CausalLMState
from tests.helpers import perturbed_copy, random_prompts, save_model_dir, tiny_llama, tiny_tokenizer


def test_ranking_orders_by_count_then_id_and_round_trips(tmp_path):
    ranking = token_ranking(np.array([3, 3, 3, 1, 1, 4, 0]), vocab_size=6)
    assert ranking == [3, 1, 0, 4, 2, 5]  # 3 x3, 1 x2, then 0 and 4 once, then unseen 2 and 5
    save_token_ranking(tmp_path, ranking, "test")
    assert load_token_ranking(tmp_path) == ranking
    assert load_token_ranking(tmp_path / "elsewhere") is None
    assert [p.name for p in tmp_path.iterdir()] == [RANKING_FILE]  # no temp file left behind


def test_vocabulary_sizes_and_errors(tmp_path):
    ranking = [5, 2, 7, 0, 1, 3, 4, 6]
    assert draft_vocabulary(ranking, 3, 8).tolist() == [2, 5, 7]  # sorted ids
    assert draft_vocabulary(ranking, 0, 8) is None and draft_vocabulary(ranking, 8, 8) is None
    assert ranked_vocabulary(tmp_path, 3, 8) is None  # no ranking in the directory: all tokens
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="integer >= 0"):
            draft_vocabulary(ranking, bad, 8)
        with pytest.raises(ValueError, match="integer >= 0"):
            ranked_vocabulary(tmp_path, bad, 8)  # checked even without a ranking
    with pytest.raises(ValueError, match="fewer than the 5 asked for"):
        draft_vocabulary(ranking[:4], 5, 8)
    (tmp_path / RANKING_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="is not a token ranking"):
        load_token_ranking(tmp_path)


def test_lean_logits_are_the_models_on_the_vocabulary_and_minus_inf_elsewhere():
    model = tiny_llama(64, seed=0)
    vocab = torch.tensor([1, 4, 9, 16, 25, 36, 49, 63])
    ids = torch.tensor([random_prompts(1, 64, seed=3, min_len=12, max_len=12)[0]])
    hf = CausalLMState(model, ids, torch.ones_like(ids)).forward(num_logits=4)  # (1, 4, 64)
    fast = CausalLMState(LeanLlama(model, vocab), ids, torch.ones_like(ids)).forward(num_logits=4)
    torch.testing.assert_close(fast[..., vocab], hf[..., vocab], atol=1e-4, rtol=1e-4)
    outside = torch.ones(64, dtype=torch.bool)
    outside[vocab] = False
    assert torch.isneginf(fast[..., outside]).all()
    for bad, message in [([70], r"lie in \[0, 64\)"), ([1, 1], "distinct"), ([[1, 2]], "1-D")]:
        with pytest.raises(ValueError, match=message):
            LeanLlama(model, torch.tensor(bad))


def test_greedy_through_a_restricted_draft_is_exact_and_drafts_only_its_tokens():
    target = tiny_llama(64, seed=0, logit_scale=8.0)
    draft = perturbed_copy(target, noise=0.1)
    vocab = torch.arange(0, 64, 2)  # even ids only
    gen = SpeculativeGenerator.from_models(target, draft=draft, drafter="lean", draft_vocab=vocab, num_draft_tokens=4)
    plain = SpeculativeGenerator.from_models(target, drafter="none")
    prompts = random_prompts(3, 64, seed=5)
    run = gen.start(prompts, max_new_tokens=24, stop=None)
    drafted = torch.cat([step.draft.items.flatten() for step in run.steps()])
    assert len(drafted) > 0 and bool((drafted % 2 == 0).all())
    out = gen._output(run)
    assert out.token_ids == plain.generate(prompts, max_new_tokens=24, stop=None).token_ids
    assert any(t % 2 for row in out.token_ids for t in row)  # odd tokens still come from the target
    assert out.stats.accepted > 0


def test_draft_vocab_needs_the_lean_drafter():
    target = tiny_llama(64, seed=0)
    with pytest.raises(ValueError, match="draft_vocab applies to the lean and hybrid drafters"):
        SpeculativeGenerator.from_models(target, draft=target, drafter="model", draft_vocab=[1, 2])


def test_from_pretrained_and_cli_read_the_ranking_beside_the_draft(tmp_path, capsys):
    tok = tiny_tokenizer(300)
    save_model_dir(tmp_path / "target", len(tok), seed=0, tokenizer=tok)
    save_model_dir(tmp_path / "draft", len(tok), seed=1)
    target, draft = str(tmp_path / "target"), str(tmp_path / "draft")
    no_ranking = SpeculativeGenerator.from_pretrained(target, draft, drafter="lean")
    assert no_ranking.runner.vocab is None
    save_token_ranking(tmp_path / "draft", list(range(len(tok))), "test")
    gen = SpeculativeGenerator.from_pretrained(target, draft, drafter="lean", draft_vocab_size=40)
    assert gen.runner.vocab.tolist() == list(range(40))
    full = SpeculativeGenerator.from_pretrained(target, draft, drafter="lean", draft_vocab_size=0)
    assert full.runner.vocab is None
    argv = [
        "text",
        "def f(x):",
        "--target",
        target,
        "--draft",
        draft,
        "--drafter",
        "lean",
        "--max-new-tokens",
        "4",
    ]
    assert main([*argv, "--draft-vocab", "40"]) == 0
    capsys.readouterr()
    assert main([*argv, "--draft-vocab", "-3"]) == 2
    err = capsys.readouterr().err
    assert "draft vocabulary size must be an integer >= 0" in err and "Traceback" not in err
