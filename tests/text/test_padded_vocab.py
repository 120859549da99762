"""A draft and a target of one tokenizer whose vocab_size is padded differently (as Qwen2.5 0.5B and
7B are): accepted, q padded with zeros / cut to the target's size, output still exact."""

import pytest
import torch

from specvideo.text import SpeculativeGenerator
from tests.helpers import perturbed_copy, random_prompts, target_greedy, tiny_llama, tiny_tokenizer


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer(300)


def padded_draft(target, vocab_size: int):
    """The target's weights with the vocabulary rows cut or padded to ``vocab_size`` (plus noise)."""
    draft = tiny_llama(vocab_size, seed=5)
    source = perturbed_copy(target, 0.2)
    with torch.no_grad():
        for name, param in draft.named_parameters():
            src = dict(source.named_parameters())[name]
            if param.shape == src.shape:
                param.copy_(src)
            else:  # embed_tokens / lm_head: (V, d)
                n = min(param.shape[0], src.shape[0])
                param[:n] = src[:n]
    return draft


@pytest.mark.parametrize("draft_vocab", [320, 302])  # bigger, and smaller, than the target's 304
@pytest.mark.parametrize("drafter", ["model", "lean"])
def test_padded_pair_is_exact(tok, draft_vocab, drafter):
    target = tiny_llama(304, seed=0, logit_scale=4.0)
    gen = SpeculativeGenerator.from_models(
        target, tok, padded_draft(target, draft_vocab), drafter=drafter, num_draft_tokens=4
    )
    for prompt in random_prompts(3, 300, seed=2):
        out = gen.generate([prompt], max_new_tokens=16, stop=None)
        assert out.token_ids[0] == target_greedy(target, prompt, 16)
        assert out.stats.accepted > 0  # the draft agrees with the target often: the padding costs nothing
    sampled = gen.generate(
        random_prompts(2, 300, seed=3),
        max_new_tokens=8,
        temperature=1.0,
        generator=torch.Generator().manual_seed(0),
        stop=None,
    )
    assert all(0 <= t < 304 for row in sampled.token_ids for t in row)


def test_padding_needs_a_tokenizer_that_fits_both(tok):
    target = tiny_llama(304, seed=0)
    with pytest.raises(ValueError, match="sizes may differ only by padding"):
        SpeculativeGenerator.from_models(target, None, tiny_llama(320))  # no tokenizer: cannot tell
    with pytest.raises(ValueError, match="draft vocabulary size 290 does not match"):
        SpeculativeGenerator.from_models(target, tok, tiny_llama(290))  # 300 tokens do not fit 290 rows
