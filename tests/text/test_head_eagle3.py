"""EAGLE-3's draft head: it fuses a low, a middle and the final state of the target. The lean
runner gives transformers' hidden states, the verifier's state keeps the fused layers' features,
a fused head starts as the final-state head, and drafting with it keeps output exact."""

import pytest
import torch

from specvideo.text import SpeculativeGenerator
from specvideo.text.models.head import DraftHead, load_head, save_head
from specvideo.text.runtime.contract import layer_features
from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.state import CausalLMState
from tests.helpers import random_prompts, tiny_llama
from tests.text.test_head import target_greedy


def test_lean_hidden_states_are_transformers_and_the_state_keeps_the_fused_layers():
    target = tiny_llama(64, seed=1, layers=3)
    ids = torch.tensor([random_prompts(1, 64, seed=2, min_len=7, max_len=7)[0]])
    lean = LeanLlama(target)
    with torch.inference_mode():
        hf = target(ids, output_hidden_states=True).hidden_states
        out = lean(ids, None, torch.arange(7)[None], lean.make_cache(1), output_hidden_states=True)
    assert len(out.hidden_states) == len(hf) == 4
    for mine, theirs in zip(out.hidden_states, hf):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-4)
    state = CausalLMState(lean, ids, torch.ones_like(ids))
    state.keep_hidden, state.feature_layers = True, (1, 3)
    state.forward()
    assert state.hidden.shape == (1, 7, 64) and state.feature_width == 64
    torch.testing.assert_close(state.hidden, layer_features(hf, (1, 3)), atol=1e-4, rtol=1e-4)
    features = layer_features(hf, (1, 3))[0]  # the low state normalised, the final one as it is
    torch.testing.assert_close(features[:, :32].pow(2).mean(-1), torch.ones(7), atol=1e-2, rtol=1e-2)


def test_a_fused_head_starts_as_the_final_state_head_and_its_files_keep_the_fusion(tmp_path):
    target = tiny_llama(64, seed=3, layers=2)
    plain = DraftHead.from_target(target, init_layer=1)
    fused = DraftHead.from_target(target, init_layer=1, feature_layers=(1, 2))
    ids = torch.tensor([[4, 5, 6, 7]])
    with torch.no_grad():
        states = target(ids, output_hidden_states=True).hidden_states
        f = states[-1]
        torch.testing.assert_close(fused(ids, fused.fused(layer_features(states, (1, 2)))), plain(ids, f))
        fused.fuse.weight.normal_()
    save_head(fused, tmp_path / "head")
    back = load_head(tmp_path / "head", target)
    assert back.feature_layers == (1, 2)
    torch.testing.assert_close(back.fuse.weight, fused.fuse.weight.half().float())
    with pytest.raises(ValueError, match="final state"):
        DraftHead.from_target(target, feature_layers=(1, 3))
    with pytest.raises(ValueError, match="num_hidden_layers=2"):
        load_head(tmp_path / "head", tiny_llama(64, seed=3, layers=3))


@pytest.mark.parametrize("lean", [False, True])
@pytest.mark.parametrize("drafter", ["head", "head-hybrid", "head-tree"])
def test_a_fused_head_drafts_and_output_is_the_targets_greedy(drafter, lean):
    """A random fusion of the embeddings and the final state (a one-layer target) beside the exact
    head (fc reads the token alone): the fused features' widths pass through every catch-up, the
    head is accepted, output stays the target's."""
    target = tiny_llama(64, seed=4, layers=1)
    target.generation_config.eos_token_id = None  # 30 tokens whatever they are
    head = DraftHead.from_target(target, init_layer=0, feature_layers=(0, 1))
    d = target.config.hidden_size
    with torch.no_grad():
        head.fc.weight.copy_(torch.cat([torch.eye(d), torch.zeros(d, d)], dim=1))
        head.fuse.weight.normal_(std=0.2)
    prompt = [40, 41, 42, 40, 41, 43, 40, 41, 42, 44, 40, 41]
    gen = SpeculativeGenerator.from_models(
        target, draft=head.eval(), drafter=drafter, num_draft_tokens=3, schedule="constant", lean_target=lean
    )
    out = gen.generate(prompt, max_new_tokens=30, stop=None)
    assert out.token_ids == target_greedy(target, prompt, 30)
    assert out.stats.accepted > 0.6 * out.stats.drafted > 0
