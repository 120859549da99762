"""PackedLinears: a transformers model's linear layers on oneDNN pre-packed weights, only inside
``with``; the same logits to float rounding, and the same greedy tokens on a tiny Qwen2 (biased
q/k/v projections) through the speculative loop."""

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from specvideo.text.runtime.packing import PackedLinears


def tiny_qwen2() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=False,
    )
    return Qwen2ForCausalLM(config).eval()


def test_packed_logits_match_dense_and_only_inside_with():
    model = tiny_qwen2()
    ids = torch.randint(0, 96, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        dense = model(ids).logits
        packed = PackedLinears(model)
        with packed:
            with packed:  # re-entrant: the inner exit leaves the packed path in place
                pass
            assert "forward" in vars(model.lm_head)
            inside = model(ids).logits
        assert "forward" not in vars(model.lm_head)  # back to nn.Linear.forward
        after = model(ids).logits
    assert torch.allclose(inside, dense, atol=1e-5) and not torch.equal(inside, torch.zeros_like(inside))
    assert torch.equal(after, dense)


@pytest.mark.parametrize("drafter", ["ngram", "model"])
def test_packed_greedy_equals_the_targets_own_greedy(drafter):
    from specvideo.text import SpeculativeGenerator

    target, draft = tiny_qwen2(), tiny_qwen2()
    ids = torch.randint(0, 96, (1, 6), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        own = target.generate(ids, max_new_tokens=12, do_sample=False, pad_token_id=0)[0, 6:]
        gen = SpeculativeGenerator.from_models(target, None, draft=draft if drafter == "model" else None, drafter=drafter,
                                   num_draft_tokens=3, packed=True)
        assert len(gen.models.packed_models(gen.drafter_spec)) == (2 if drafter == "model" else 1)
        seen = []
        hook = target.lm_head.register_forward_pre_hook(lambda m, a: seen.append("forward" in vars(m)))
        ours = gen.generate(ids, max_new_tokens=12).token_ids
        hook.remove()
    assert ours == [own.tolist()]
    assert seen and all(seen)  # the prefill and every check ran on the packed weights
    assert "forward" not in vars(target.lm_head)  # and only while generating


def test_packing_refuses_half_precision():
    with pytest.raises(ValueError, match="float32 weights on a CPU"):
        PackedLinears(tiny_qwen2().half())
