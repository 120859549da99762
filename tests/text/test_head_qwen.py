"""The draft head on a Qwen2 target (the code pair's): a Qwen2 layer with its q/k/v biases, a
narrowed MLP for the size budget, files that load back, exact drafting and a training step."""

import pytest
import torch

from specvideo.text import SpeculativeGenerator
from specvideo.text.models.head import DraftHead, _narrow_mlp, load_head, save_head
from tests.helpers import random_prompts, target_greedy, tiny_qwen


def exact_qwen_head(target) -> DraftHead:
    """A one-layer target's own layer reading only the token embedding: it predicts exactly."""
    head = DraftHead.from_target(target, init_layer=0)
    d = target.config.hidden_size
    with torch.no_grad():
        head.fc.weight.copy_(torch.cat([torch.eye(d), torch.zeros(d, d)], dim=1))
    return head.eval()


@pytest.mark.parametrize("lean", [False, True])
@pytest.mark.parametrize("drafter", ["head", "head-hybrid"])
def test_a_qwen_head_drafts_exactly_and_is_accepted(drafter, lean):
    target = tiny_qwen(layers=1, seed=5)
    head = exact_qwen_head(target)
    assert type(head.llama).__name__ == "Qwen2ForCausalLM" and head.llama.model.layers[0].self_attn.q_proj.bias is not None
    prompt = random_prompts(1, 64, seed=6, min_len=6, max_len=6)[0]
    gen = SpeculativeGenerator.from_models(target, draft=head, drafter=drafter, num_draft_tokens=3, schedule="constant", lean_target=lean)
    out = gen.generate(prompt, max_new_tokens=20, stop=None)
    assert out.token_ids == target_greedy(target, prompt, 20)
    assert out.stats.acceptance_rate > (0.6 if "hybrid" in drafter else 0.9)


def test_a_narrowed_head_keeps_the_strongest_units_and_its_files_load_back(tmp_path):
    target = tiny_qwen(layers=2, seed=7)
    layer = target.model.layers[1].state_dict()
    narrowed = _narrow_mlp(layer, 16)
    strength = (
        layer["mlp.gate_proj.weight"].norm(dim=1)
        * layer["mlp.up_proj.weight"].norm(dim=1)
        * layer["mlp.down_proj.weight"].norm(dim=0)
    )
    kept = {tuple(r.tolist()) for r in narrowed["mlp.up_proj.weight"]}
    strongest = {tuple(layer["mlp.up_proj.weight"][i].tolist()) for i in strength.topk(16).indices}
    assert kept == strongest and narrowed["mlp.down_proj.weight"].shape == (32, 16)
    assert _narrow_mlp(layer, 64) is layer  # already that narrow

    head = DraftHead.from_target(target, init_layer=1, intermediate_size=16)
    assert head.config.intermediate_size == 16 and head.config.num_hidden_layers == 1
    assert len(getattr(head.config, "layer_types", None) or [None]) == 1
    save_head(head, tmp_path / "head")
    back = load_head(tmp_path / "head", target)
    ids, f = torch.tensor([[4, 5, 6, 7]]), torch.randn(1, 4, 32)
    with torch.no_grad():
        torch.testing.assert_close(back(ids, f), head(ids, f), atol=2e-2, rtol=1e-2)  # fp16 files
    assert type(back.llama).__name__ == "Qwen2ForCausalLM"


def test_a_qwen_head_trains_with_the_training_time_test():
    from recipes.head import collate, head_loss

    target = tiny_qwen(layers=2, seed=8)
    head = DraftHead.from_target(target, init_layer=1, intermediate_size=16)
    rows = []
    for prompt in random_prompts(2, 64, seed=9, min_len=8, max_len=10):
        ids = torch.tensor(prompt)
        with torch.no_grad():
            result = target(ids[None], output_hidden_states=True)
        top_logp, top_ids = torch.log_softmax(result.logits[0], -1).topk(4, dim=-1)
        rows.append({"ids": ids, "start": 2, "features": result.hidden_states[-1][0], "top_ids": top_ids, "top_logp": top_logp})
    full_to_sub = torch.arange(64)
    batch = collate(rows, full_to_sub, 0.0, None)
    params = [p for n, p in head.named_parameters() if "embed_tokens" not in n and "lm_head" not in n]
    opt = torch.optim.AdamW(params, lr=1e-2)
    losses = []
    for _ in range(5):
        out = head_loss(head, target.lm_head.weight.detach(), batch, 1.0, steps=2)
        opt.zero_grad()
        out["loss"].backward()
        opt.step()
        losses.append(out["loss"].item())
    assert "top1_s1" in out and losses[-1] < losses[0]


def test_a_named_pair_drafts_with_its_head_by_default_and_its_model_otherwise(tmp_path, monkeypatch):
    from specvideo.text.models.names import QWEN_CODER_DRAFTER, ModelChoice, pair_draft

    assert QWEN_CODER_DRAFTER == "head-hybrid"
    (tmp_path / "a-head").mkdir()
    monkeypatch.setenv("SPECVIDEO_MODELS", str(tmp_path))
    choice = ModelChoice("pair", "target-dir", "draft-dir", "a-head", "head-hybrid")
    kwargs = {}
    assert pair_draft(choice, kwargs) == str(tmp_path / "a-head") and kwargs["drafter"] == "head-hybrid"
    assert pair_draft(choice, {"drafter": "head-tree"}) == str(tmp_path / "a-head")
    assert pair_draft(choice, {"drafter": "hybrid"}) == "draft-dir"
    assert pair_draft(choice, {"drafter": "ngram"}) is None
