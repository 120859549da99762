"""TextModels: loaded once, shared by cheap generators; every run is opened by ``SpeculativeGenerator.open``."""

from __future__ import annotations

import pytest
import torch

from specvideo.text import SpeculativeGenerator, TextModels
from specvideo.text.book import RowBook, RowRequest
from specvideo.text.drafting.drafters import NGramDrafter
from tests.helpers import own_greedy, perturbed_copy, random_prompts, tiny_llama

VOCAB = 64


def models(**kwargs) -> TextModels:
    target = tiny_llama(VOCAB, seed=0, logit_scale=4.0)
    return TextModels(target, None, perturbed_copy(target, noise=0.3), **kwargs)


def test_generators_over_one_load_share_its_runners_and_decode_alike():
    m = models(lean_target=True)
    lean, hybrid = SpeculativeGenerator(m, drafter="lean"), SpeculativeGenerator(m, drafter="hybrid", num_draft_tokens=5)
    assert lean.runner is hybrid.runner  # one LeanLlama over the draft, built once
    assert lean.target is hybrid.target and lean.models.target_runner is m.target_runner
    plain = SpeculativeGenerator(m, drafter="none")
    for prompt in random_prompts(3, VOCAB, seed=4, min_len=4, max_len=10):
        want = own_greedy(plain, prompt, 16)
        for gen in (lean, hybrid, plain):
            assert gen.generate([prompt], max_new_tokens=16, stop=None).token_ids[0] == want


def test_a_generator_is_cheap_and_checks_its_settings_against_the_models():
    m = models()
    with pytest.raises(ValueError, match="need a draft head"):
        SpeculativeGenerator(m, drafter="head")
    with pytest.raises(ValueError, match="k must be an integer >= 1, got 0"):
        SpeculativeGenerator(m, drafter="lean", num_draft_tokens=0)
    with pytest.raises(ValueError, match="draft vocabulary size"):
        SpeculativeGenerator(m, drafter="lean", draft_vocab_size=-1)
    no_draft = TextModels(tiny_llama(VOCAB, seed=1))
    assert SpeculativeGenerator(no_draft).config.drafter == "ngram"  # no draft: prompt lookup


def test_every_run_is_opened_by_open(monkeypatch):
    gen = SpeculativeGenerator(models(), drafter="hybrid")
    opened = []
    original = gen.open
    monkeypatch.setattr(gen, "open", lambda *a, **k: opened.append(k.get("drafter")) or original(*a, **k))
    prompt = random_prompts(1, VOCAB, seed=5, min_len=6, max_len=8)[0]
    gen.generate([prompt], max_new_tokens=4, stop=None)
    run = gen.open_rows(RowRequest(prompt, 4))
    for _ in run.steps():
        pass
    assert opened == [None, "hybrid"]  # generate's run (the generator's drafter), a continuous batch's


def test_prompt_lookup_reads_the_rows_of_its_run():
    gen = SpeculativeGenerator(TextModels(tiny_llama(VOCAB, seed=2, logit_scale=4.0)), drafter="ngram")
    prompt = [5, 6, 7, 8, 5, 6, 7, 8, 5, 6]
    run = gen.start([prompt], max_new_tokens=12, stop=None)
    lookup = run.drafter
    assert isinstance(lookup, NGramDrafter) and lookup.rows is run.rows  # the run's book, no copy of its own
    for _ in run.steps():
        assert lookup.rows.outputs is run.rows.outputs
    assert run.rows.outputs[0] == own_greedy(gen, prompt, 12)


def test_a_self_copy_asked_after_the_dense_weights_went_is_a_clear_error():
    target = tiny_llama(VOCAB, seed=0, logit_scale=2.0).to(torch.bfloat16)
    m = TextModels(target, weights="int8")  # its int8 runner frees the dense weights
    with pytest.raises(ValueError, match="dense weights were freed"):
        SpeculativeGenerator(m, drafter="self")
    kept = TextModels(tiny_llama(VOCAB, seed=0, logit_scale=2.0).to(torch.bfloat16), weights="int8", copies=("int4",))
    assert SpeculativeGenerator(kept, drafter="self").runner.weights == "int4"


def test_a_lookup_reads_the_book_and_stops_for_finished_rows():
    rows = RowBook([RowRequest([1, 2, 3, 1, 2], 8), RowRequest([4, 5, 4, 5, 4], 8)])
    lookup = NGramDrafter(2, rows=rows)
    ids = torch.tensor([[1, 2, 3, 1, 2], [4, 5, 4, 5, 4]])
    lookup.start(ids, torch.ones_like(ids))
    assert lookup.propose(2, None).items.tolist() == [[3, 1], [5, 4]]
    rows.emit(0, [3])
    rows.finish([1])
    draft = lookup.propose(2, None)
    assert draft.lengths.tolist() == [2, 0] and draft.items[0].tolist() == [1, 2]
    assert rows.length(0) == len(rows.history(0)) == 6
    assert [rows.tail(0, start) for start in (0, 3, 5, 6, 7)] == [rows.history(0)[start:] for start in (0, 3, 5, 6, 7)]
