"""lean / hybrid with a draft LeanLlama does not run (GPT-2): the transformers drafter runs it
instead, exactly. Qwen2 drafts and targets run on LeanLlama (its q/k/v biases), exactly."""

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from specvideo.text import SpeculativeGenerator
from specvideo.text.runtime.lean import LeanLlama
from tests.helpers import random_prompts, target_greedy, tiny_llama, tiny_qwen


def tiny_gpt2(vocab_size: int = 64) -> GPT2LMHeadModel:
    torch.manual_seed(3)
    config = GPT2Config(vocab_size=vocab_size, n_embd=32, n_layer=2, n_head=4, n_positions=256)
    return GPT2LMHeadModel(config).eval()


def test_lean_llama_runs_qwen2_with_its_biases():
    """LeanLlama over a Qwen2 model gives transformers' logits (float32 rounding)."""
    model = tiny_qwen()
    lean = LeanLlama(model)
    ids = torch.tensor([[5, 9, 11, 3, 7]])
    from specvideo.text.runtime.state import CausalLMState

    state = CausalLMState(lean, ids, torch.ones_like(ids))
    logits = state.forward(num_logits=5)
    with torch.no_grad():
        reference = model(ids).logits
    assert torch.allclose(logits, reference, atol=1e-4)


@pytest.mark.parametrize("drafter", ["lean", "hybrid"])
def test_a_qwen2_draft_runs_lean_and_stays_exact(drafter):
    target, draft = tiny_llama(), tiny_qwen()
    gen = SpeculativeGenerator.from_models(target, draft=draft, drafter=drafter, num_draft_tokens=3)
    assert not lean_fallback(gen) and gen.runner is not gen.draft
    for prompt in random_prompts(3, 64, seed=4):
        out = gen.generate([prompt], max_new_tokens=12, stop=None)
        assert out.token_ids[0] == target_greedy(target, prompt, 12) and out.stats.drafted > 0


@pytest.mark.parametrize("drafter", ["lean", "hybrid"])
def test_non_llama_draft_falls_back_and_stays_exact(drafter):
    target, draft = tiny_llama(), tiny_gpt2()
    gen = SpeculativeGenerator.from_models(target, draft=draft, drafter=drafter, num_draft_tokens=3)
    assert lean_fallback(gen) and gen.runner is gen.draft
    for prompt in random_prompts(3, 64, seed=4):
        out = gen.generate([prompt], max_new_tokens=12, stop=None)
        assert out.token_ids[0] == target_greedy(target, prompt, 12) and out.stats.drafted > 0


def test_llama_draft_still_runs_lean():
    gen = SpeculativeGenerator.from_models(tiny_llama(), draft=tiny_llama(seed=1), drafter="lean")
    assert not lean_fallback(gen) and gen.runner is not gen.draft


@pytest.mark.parametrize("drafter", ["model", "lean", "hybrid"])
def test_a_draft_with_a_shorter_context_is_refused_not_clamped(drafter):
    target, draft = tiny_llama(context=256), tiny_llama(seed=1, context=32)
    gen = SpeculativeGenerator.from_models(target, draft=draft, drafter=drafter)
    with pytest.raises(
        ValueError,
        match=r"prompt of 20 tokens \+ max_new_tokens=20 = 40 exceeds the draft's context length of 32",
    ):
        gen.generate([list(range(3, 23))], max_new_tokens=20)
    assert (
        len(gen.generate([list(range(3, 13))], max_new_tokens=20, stop=None).token_ids[0]) == 20
    )  # 30 <= 32
    ngram = SpeculativeGenerator.from_models(target, drafter="ngram")  # no draft model: only the target's context counts
    assert len(ngram.generate([list(range(3, 23))], max_new_tokens=20, stop=None).token_ids[0]) == 20


def lean_fallback(gen) -> bool:
    """A lean drafter whose draft LeanLlama cannot run: it drafts through transformers."""
    spec = gen.drafter_spec
    return spec.lean and not spec.copy and not gen.models.lean_draft(spec)
