"""Greedy speculative decoding must be token-identical to the target's own greedy decoding."""

import pytest
import torch

from specvideo.text import SpeculativeGenerator
from tests.helpers import perturbed_copy, random_prompts, tiny_llama

VOCAB, NEW = 64, 24


@pytest.fixture(scope="module")
def models():
    target = tiny_llama(VOCAB, seed=0, logit_scale=8.0)
    return target, perturbed_copy(target, noise=0.15)


@pytest.fixture(scope="module")
def prompts():
    return random_prompts(20, VOCAB, seed=3, max_len=16)


def reference(target, prompt, new_tokens, eos=None):
    ids = torch.tensor([prompt])
    out = target.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=new_tokens,
        eos_token_id=eos if eos is not None else [],  # [] really disables EOS (None means the config's)
        pad_token_id=0,
    )
    return out[0, len(prompt) :].tolist()


@pytest.fixture(scope="module")
def references(models, prompts):
    return [reference(models[0], p, NEW) for p in prompts]


@pytest.mark.parametrize("drafter", ["model", "ngram"])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_batch_one_matches_target_generate(models, prompts, references, drafter, k):
    target, draft = models
    gen = SpeculativeGenerator.from_models(target, draft=draft, drafter=drafter, num_draft_tokens=k, schedule="constant")
    accepted = 0
    for prompt, ref in zip(prompts, references):
        out = gen.generate(prompt, max_new_tokens=NEW, stop=None)
        assert out.token_ids == ref
        assert out.stats.emitted == NEW
        accepted += out.stats.accepted
    assert accepted > 0  # the drafts were really used, not all rejected


@pytest.mark.parametrize("drafter", ["model", "ngram"])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_ragged_batch_of_four_matches_each_prompt_alone(models, prompts, references, drafter, k):
    target, draft = models
    gen = SpeculativeGenerator.from_models(target, draft=draft, drafter=drafter, num_draft_tokens=k, schedule="heuristic")
    for start in range(0, 20, 4):
        batch = prompts[start : start + 4]
        assert len({len(p) for p in batch}) > 1  # really ragged
        out = gen.generate(batch, max_new_tokens=NEW, stop=None)
        assert out.token_ids == references[start : start + 4]


def test_rows_accept_different_numbers_of_tokens_per_round(models, prompts):
    target, draft = models
    gen = SpeculativeGenerator.from_models(target, draft=draft, num_draft_tokens=4, schedule="constant")
    out = gen.generate(
        torch.tensor([prompts[0][:5], prompts[1][:5], prompts[2][:5]]), max_new_tokens=NEW, stop=None
    )
    assert len(out.token_ids) == 3 and all(len(t) == NEW for t in out.token_ids)
    hist = out.stats.accepted_length_hist
    assert sum(1 for c in hist if c) > 1  # rows accepted different lengths


def test_stop_at_eos_matches_target(models, prompts):
    target, draft = models
    for prompt in prompts[:6]:
        full = reference(target, prompt, NEW)
        eos = full[NEW // 2]  # a token the target really produces mid-way
        ref = reference(target, prompt, NEW, eos=eos)
        assert ref[-1] == eos and len(ref) <= NEW // 2 + 1
        target.generation_config.eos_token_id = eos
        try:
            for drafter in ("model", "ngram"):
                gen = SpeculativeGenerator.from_models(target, draft=draft, drafter=drafter, num_draft_tokens=5)
                assert gen.generate(prompt, max_new_tokens=NEW).token_ids == ref
        finally:
            target.generation_config.eos_token_id = 2


def test_confidence_schedule_and_target_only_loop_are_exact(models, prompts, references):
    target, draft = models
    spec = SpeculativeGenerator.from_models(
        target, draft=draft, num_draft_tokens=6, schedule="confidence", confidence_threshold=0.6
    )
    plain = SpeculativeGenerator.from_models(target, drafter="none")
    for prompt, ref in zip(prompts[:8], references[:8]):
        assert spec.generate(prompt, max_new_tokens=NEW, stop=None).token_ids == ref
        out = plain.generate(prompt, max_new_tokens=NEW, stop=None)
        assert out.token_ids == ref
        assert out.stats.target_calls == NEW  # one call per token, the prompt in the first


def test_tensor_prompt_and_zero_new_tokens(models, prompts, references):
    target, draft = models
    gen = SpeculativeGenerator.from_models(target, draft=draft)
    out = gen.generate(torch.tensor([prompts[0]]), max_new_tokens=NEW, stop=None)
    assert out.token_ids == [references[0]]
    assert gen.generate(prompts[0], max_new_tokens=0).token_ids == []
