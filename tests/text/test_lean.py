"""The lean Llama drafter: same logits as transformers, and exact generation through it."""

import pytest
import torch

from specvideo.text import SpeculativeGenerator
from specvideo.text.prompts import encode_prompt
from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.state import CausalLMState
from tests.helpers import perturbed_copy, random_prompts, tiny_llama


def left_padded(prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T) input ids and attention mask of token rows, left-padded as the generator pads them."""
    encoded = encode_prompt(prompts, None, 64, torch.device("cpu"))
    return encoded.input_ids, encoded.attention_mask


def test_logits_match_transformers_over_a_ragged_batch_with_rollback():
    model = tiny_llama(64, seed=0)
    lean = LeanLlama(model)
    prompts = random_prompts(3, 64, seed=1, min_len=2, max_len=9)
    hf, fast = (CausalLMState(m, *left_padded(prompts)) for m in (model, lean))
    assert not hf.full  # padding: the models get an attention mask
    torch.testing.assert_close(fast.forward(), hf.forward(), atol=1e-4, rtol=1e-4)
    for step in range(6):
        extra = torch.randint(3, 64, (3, 3), generator=torch.Generator().manual_seed(step))
        marks = [state.num_tokens.clone() for state in (hf, fast)]
        torch.testing.assert_close(
            fast.forward(extra, num_logits=3), hf.forward(extra, num_logits=3), atol=1e-4, rtol=1e-4
        )
        keep = torch.tensor([1, 3, 2])  # rows keep different numbers of the new slots
        for state, mark in zip((hf, fast), marks):
            state.truncate(mark + keep)
            state.push(torch.tensor([[5], [6], [7]]))


def test_holes_left_by_a_rollback_bring_the_attention_mask_back():
    """No padding, so no mask at first; rows then keep different numbers of tokens, which leaves
    holes: from there on both models must get the mask, and still agree."""
    model = tiny_llama(64, seed=4)
    lean = LeanLlama(model)
    ids = torch.tensor(random_prompts(2, 64, seed=6, min_len=5, max_len=5))
    hf, fast = CausalLMState(model, ids, torch.ones_like(ids)), CausalLMState(lean, ids, torch.ones_like(ids))
    assert hf.full
    torch.testing.assert_close(fast.forward(), hf.forward(), atol=1e-4, rtol=1e-4)
    marks = [state.num_tokens.clone() for state in (hf, fast)]
    extra = torch.tensor([[7, 8, 9], [10, 11, 12]])
    torch.testing.assert_close(fast.forward(extra, num_logits=3), hf.forward(extra, num_logits=3))
    for state, mark in zip((hf, fast), marks):
        state.truncate(mark + torch.tensor([1, 3]))
        assert not state.full  # row 0 dropped two slots that row 1 keeps
        state.push(torch.tensor([[5], [6]]))
    torch.testing.assert_close(fast.forward(), hf.forward(), atol=1e-4, rtol=1e-4)
    alone = CausalLMState(model, torch.tensor([ids[0].tolist() + [7, 5]]), torch.ones(1, 7, dtype=torch.long))
    torch.testing.assert_close(hf.forward(torch.tensor([[9], [9]]))[:1], alone.forward(torch.tensor([[9]])))


def test_a_lean_row_keeps_its_keys_at_its_positions_whatever_the_batch():
    """Rows rolled back to different lengths: LeanCache moves no key and keeps no mask; row b's
    first n_b slots hold the keys of its tokens at positions 0 .. n_b - 1, as they do alone, and
    transformers' adapter masks its holes on its shared slot axis."""
    model = tiny_llama(64, seed=7)
    lean = LeanLlama(model)
    prompts = random_prompts(2, 64, seed=8, min_len=3, max_len=6)
    hf, fast = (CausalLMState(m, *left_padded(prompts)) for m in (model, lean))
    rows = [list(p) for p in prompts]
    hf.forward(), fast.forward()
    for step, keep in enumerate(([2, 0], [0, 3], [1, 1])):
        extra = torch.tensor([[20 + step, 30 + step, 40 + step]] * 2)
        for state in (hf, fast):
            mark = state.num_tokens.clone()
            state.forward(extra, num_logits=3)
            state.truncate(mark + torch.tensor(keep))
        rows = [r + extra[0, :k].tolist() for r, k in zip(rows, keep)]
    assert fast.num_tokens.tolist() == [len(r) for r in rows] and not hasattr(fast.cache, "mask")
    assert hf.cache.mask is not None and hf.cache.mask.sum(1).tolist() == [len(r) for r in rows]
    for b, row in enumerate(rows):
        alone = CausalLMState(lean, torch.tensor([row]), torch.ones(1, len(row), dtype=torch.long))
        alone.forward()
        n = len(row)
        torch.testing.assert_close(fast.cache.kv[:, :, b, :, :n], alone.cache.kv[:, :, 0, :, :n], atol=1e-5, rtol=1e-5)


def test_single_token_decoding_without_a_mask_matches_transformers():
    """Batch 1, no padding: each one-token step runs the unmasked path; crops in between; the
    preallocated cache (256 slots) grows on the way."""
    model = tiny_llama(64, seed=2, context=512)
    lean = LeanLlama(model)
    ids = torch.tensor([random_prompts(1, 64, seed=3, min_len=250, max_len=250)[0]])
    hf, fast = CausalLMState(model, ids, torch.ones_like(ids)), CausalLMState(lean, ids, torch.ones_like(ids))
    torch.testing.assert_close(fast.forward(), hf.forward(), atol=1e-4, rtol=1e-4)
    assert hf.full and fast.full  # every slot real: no attention mask at all
    for step in range(8):
        token = torch.tensor([[3 + step]])
        marks = [state.num_tokens.clone() for state in (hf, fast)]
        torch.testing.assert_close(fast.forward(token), hf.forward(token), atol=1e-4, rtol=1e-4)
        if step % 3 == 2:  # drop the step's token again: the next step reuses its slot
            for state, mark in zip((hf, fast), marks):
                state.truncate(mark)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_generation_through_the_lean_drafter(temperature):
    target = tiny_llama(64, seed=0, logit_scale=8.0)
    draft = perturbed_copy(target, noise=0.1)
    model = SpeculativeGenerator.from_models(target, draft=draft, drafter="model", num_draft_tokens=4)
    lean = SpeculativeGenerator.from_models(target, draft=draft, drafter="lean", num_draft_tokens=4)
    prompts = random_prompts(4, 64, seed=5)
    kwargs = dict(max_new_tokens=20, stop=None, temperature=temperature)
    a = model.generate(prompts, generator=torch.Generator().manual_seed(0), **kwargs)
    b = lean.generate(prompts, generator=torch.Generator().manual_seed(0), **kwargs)
    assert a.token_ids == b.token_ids  # same weights, same draws: the same drafts and outputs
    assert a.stats.accepted == b.stats.accepted > 0


def test_lean_drafter_rejects_non_llama_drafts():
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=32, n_layer=1, n_head=2, n_positions=64))
    with pytest.raises(ValueError, match="LeanLlama runs llama and qwen2 architectures"):
        LeanLlama(gpt2)


def test_rope_tables_have_one_row_per_position_not_per_head():
    model = tiny_llama(context=512)
    lean = LeanLlama(model)
    D = lean.head_dim
    assert lean.cos.shape == lean.sin.shape == (512, D)
    cos, sin = lean._rope(torch.tensor([[0, 7, 511]]))
    assert cos.shape == (1, lean.heads + 2 * lean.kv_heads, 3, D)
    assert torch.equal(cos[0, -lean.kv_heads :], torch.ones(lean.kv_heads, 3, D))  # v heads unrotated
    assert torch.equal(sin[0, -lean.kv_heads :], torch.zeros(lean.kv_heads, 3, D))


@pytest.mark.parametrize("drafter", ["hybrid", "ngram", "none"])
def test_a_lean_target_verifies_exactly(drafter):
    """lean_target=True: the target's forwards run by LeanLlama too; greedy output still equals
    the target's own generate(), alone and in a ragged batch with early stops (rows retire)."""
    from tests.text.test_greedy_exact import reference

    target = tiny_llama(64, seed=0, logit_scale=8.0)
    draft = perturbed_copy(target, noise=0.2) if drafter == "hybrid" else None
    gen = SpeculativeGenerator.from_models(target, draft=draft, drafter=drafter, num_draft_tokens=4, lean_target=True)
    assert isinstance(gen.start([5, 6], max_new_tokens=2).verifier.model, LeanLlama)
    prompts = random_prompts(4, 64, seed=9, max_len=10)
    out = gen.generate(prompts, max_new_tokens=20, stop=[2])
    for prompt, ids in zip(prompts, out.token_ids):
        ref = reference(target, prompt, 20, eos=[2])
        assert ids == ref
    reused = SpeculativeGenerator.from_models(target, drafter="none", lean_target=gen.models.target_runner)
    assert reused.models.target_runner is gen.models.target_runner
    with pytest.raises(ValueError, match="run llama and qwen2 targets only"):
        from transformers import GPT2Config, GPT2LMHeadModel

        gpt = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_layer=1, n_embd=16, n_head=2)).eval()
        SpeculativeGenerator.from_models(gpt, drafter="none", lean_target=True)
