"""The draft head on the target's features: its lean run equals its training forward, the target's
features are its final-normed hidden states, and every head drafter (chain, tree, behind lookup)
keeps greedy output identical to the target's and sampled output distributed as the target's."""

import pytest
import torch

from specvideo.text import SamplingConfig, SpeculativeGenerator
from specvideo.text.models.head import DraftHead, load_head, save_head
from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.state import CausalLMState
from specvideo.text.sampling import to_probs
from tests.helpers import random_prompts, tiny_llama

HEAD_DRAFTERS = ["head", "head-tree", "head-hybrid", "head-hybrid-tree"]


def exact_head(target, noise: float = 0.0, seed: int = 0) -> DraftHead:
    """For a one-layer target, a head that copies its layer and reads only the token embedding
    (fc = [I, 0]) computes the target's own features: it predicts the target exactly. ``noise``
    perturbs its layer, so it is right only sometimes."""
    head = DraftHead.from_target(target, init_layer=0)
    d = target.config.hidden_size
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        head.fc.weight.copy_(torch.cat([torch.eye(d), torch.zeros(d, d)], dim=1))
        for p in head.llama.model.layers.parameters():
            p.add_(noise * p.std() * torch.randn(p.shape, generator=g))
    return head.eval()


def target_greedy(target, prompt, n):
    with torch.inference_mode():
        out = target.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False, pad_token_id=0)
    return out[0, len(prompt) :].tolist()


def test_lean_head_equals_its_training_forward_and_features_are_normed_hidden_states():
    target = tiny_llama(64, seed=1, layers=2)
    head = DraftHead.from_target(target, init_layer=1)
    ids = torch.tensor([random_prompts(1, 64, seed=2, min_len=9, max_len=9)[0]])
    with torch.inference_mode():
        hf = target(ids, output_hidden_states=True).hidden_states[-1]  # (1, 9, d)
        lean_target = LeanLlama(target)
        lean_out = lean_target(ids, None, torch.arange(9)[None], lean_target.make_cache(1), output_hidden_states=True)
        torch.testing.assert_close(lean_out.hidden_states[-1], hf, atol=1e-5, rtol=1e-4)
        # the target's logits are its LM head over these features
        torch.testing.assert_close(hf @ target.lm_head.weight.T, target(ids).logits, atol=1e-4, rtol=1e-4)
        features = torch.randn(1, 9, 32)
        expected = head(ids, features)  # (1, 9, d)
        lean_head = LeanLlama(head.llama, fc=head.fc)
        out = lean_head(ids, None, torch.arange(9)[None], lean_head.make_cache(1), features=features, output_hidden_states=True)
        torch.testing.assert_close(out.hidden_states[-1], expected, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(out.logits, expected @ target.lm_head.weight.T, atol=1e-4, rtol=1e-4)
        with pytest.raises(ValueError, match="feature beside each"):
            lean_head(ids, None, torch.arange(9)[None], lean_head.make_cache(1))


def test_state_queues_features_with_tokens_and_keeps_hidden_states():
    target = tiny_llama(64, seed=3, layers=1)
    head = exact_head(target)
    lean = LeanLlama(head.llama, fc=head.fc)
    ids = torch.tensor([[5, 6, 7, 8]])
    f = torch.randn(1, 4, 32)
    whole = CausalLMState(lean, ids, torch.ones_like(ids), features=f)
    whole.keep_hidden = True
    logits = whole.forward(num_logits=4)
    parts = CausalLMState(lean, ids[:, :2], torch.ones(1, 2, dtype=torch.long), features=f[:, :2])
    parts.keep_hidden = True
    parts.push(ids[:, 2:3], features=f[:, 2:3])
    parts.forward()
    last = parts.forward(ids[:, 3:], features=f[:, 3:])
    torch.testing.assert_close(last[0, -1], logits[0, -1], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(parts.hidden[0, -1], whole.hidden[0, -1], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("lean", [False, True])
@pytest.mark.parametrize("drafter", HEAD_DRAFTERS)
def test_an_exact_head_is_accepted_and_output_is_the_targets_greedy(drafter, lean):
    target = tiny_llama(64, seed=4, layers=1)
    prompt = random_prompts(1, 64, seed=5, min_len=6, max_len=6)[0]
    gen = SpeculativeGenerator.from_models(
        target, draft=exact_head(target), drafter=drafter, num_draft_tokens=3, schedule="constant", lean_target=lean
    )
    out = gen.generate(prompt, max_new_tokens=25, stop=None)
    assert out.token_ids == target_greedy(target, prompt, 25)
    # near-ties between the lean and the transformers path aside; the hybrids' lookups may miss
    assert out.stats.acceptance_rate > (0.6 if "hybrid" in drafter else 0.9)
    assert out.stats.target_calls <= 9  # 1 prefill round, then about 4 tokens a round


@pytest.mark.parametrize("lean", [False, True])
@pytest.mark.parametrize("drafter", HEAD_DRAFTERS)
def test_a_noisy_head_keeps_greedy_output_exact(drafter, lean):
    """Right only sometimes: rounds end at every depth and at siblings, the head's cache is
    rolled back and caught up with the target's features, and output stays the target's."""
    target = tiny_llama(64, seed=6, layers=1)
    prompt = [40, 41, 42, 40, 41, 43, 40, 41, 42, 44, 40, 41]  # repeats: lookup rounds for the hybrids
    gen = SpeculativeGenerator.from_models(
        target,
        draft=exact_head(target, noise=1.0, seed=7),
        drafter=drafter,
        num_draft_tokens=4,
        schedule="constant",
        lean_target=lean,
        tree_nodes=6,
        head_tree_width=2,
    )
    out = gen.generate(prompt, max_new_tokens=40, stop=None)
    assert out.token_ids == target_greedy(target, prompt, 40)
    assert 0 < out.stats.accepted < out.stats.drafted


def test_head_tree_keeps_the_most_likely_nodes_in_topological_order():
    target = tiny_llama(64, seed=8, layers=1)
    gen = SpeculativeGenerator.from_models(
        target, draft=exact_head(target, noise=0.5), drafter="head-tree", num_draft_tokens=3, tree_nodes=5, head_tree_width=2
    )
    run = gen.start([20, 21, 22, 23], max_new_tokens=12, stop=None)
    steps = iter(run.steps())
    first = next(steps)
    assert first.draft.k == 0  # the head needs the target's features of the prompt first
    tree = next(steps).draft.tree
    assert tree.size == 5 and tree.depth <= 3
    assert all(p < i for i, p in enumerate(tree.parents.tolist()))
    assert (tree.parents == -1).sum() <= 2  # at most head_tree_width candidates at depth 1


def exact_joint_after_first(target, prompt, sampling) -> torch.Tensor:
    """p(t2, t3 | prompt), the first token marginalised: the head drafts from the second token on."""
    warpers = sampling.warpers()
    V = target.config.vocab_size
    with torch.no_grad():
        p1 = to_probs(target(torch.tensor([prompt])).logits[0, -1], warpers)  # (V,)
        joint = torch.zeros(V, V)
        for t1 in range(V):
            p2 = to_probs(target(torch.tensor([prompt + [t1]])).logits[0, -1], warpers)  # (V,)
            p3 = to_probs(target(torch.tensor([[*prompt, t1, t2] for t2 in range(V)])).logits[:, -1], warpers)
            joint += p1[t1] * p2[:, None] * p3  # (V, V)
    return joint


@pytest.mark.parametrize("drafter", ["head", "head-tree"])
def test_head_sampling_follows_the_target_distribution(drafter):
    from tests.text.test_sampling_exact import chi_square

    V = 8
    target = tiny_llama(V, seed=0, logit_scale=6.0, layers=1)
    sampling = SamplingConfig(temperature=1.0)
    gen = SpeculativeGenerator.from_models(
        target, draft=exact_head(target, noise=1.0, seed=3), drafter=drafter, num_draft_tokens=2, schedule="constant"
    )
    prompt, g, runs = [3, 5, 3, 5], torch.Generator().manual_seed(4), 1500
    counts, accepted = torch.zeros(V * V), 0
    for _ in range(runs):
        out = gen.generate(prompt, max_new_tokens=3, temperature=1.0, generator=g, stop=None)
        counts[out.token_ids[1] * V + out.token_ids[2]] += 1
        accepted += out.stats.accepted
    assert accepted > 0.05 * runs
    stat, critical = chi_square(counts.reshape(V, V), exact_joint_after_first(target, prompt, sampling))
    assert stat < critical, f"chi2 {stat:.1f} >= {critical:.1f}"


def test_head_files_round_trip_and_refusals(tmp_path):
    target = tiny_llama(64, seed=9, layers=1)
    head = exact_head(target, noise=0.3)
    save_head(head, tmp_path / "head")
    back = load_head(tmp_path / "head", target)
    ids, f = torch.tensor([[4, 5, 6]]), torch.randn(1, 3, 32)
    with torch.no_grad():
        torch.testing.assert_close(back(ids, f), head(ids, f), atol=2e-2, rtol=1e-2)  # fp16 files
    assert back.llama.model.embed_tokens.weight is target.model.embed_tokens.weight
    with pytest.raises(ValueError, match="hidden_size=32"):
        load_head(tmp_path / "head", tiny_llama(64, seed=9, hidden=48, layers=1))
    with pytest.raises(ValueError, match="draft head"):
        SpeculativeGenerator.from_models(target, draft=back, drafter="lean")
    with pytest.raises(ValueError, match="need a draft head"):
        SpeculativeGenerator.from_models(target, draft=tiny_llama(64, seed=2), drafter="head")
    gen = SpeculativeGenerator.from_models(target, draft=back, drafter="head")
    batch = [[4, 5, 4, 5, 4], [6, 7, 6, 7, 6, 7]]
    out = gen.generate(batch, max_new_tokens=6, stop=None)  # a batch: drafted by prompt lookup
    assert out.token_ids == [target_greedy(target, row, 6) for row in batch]
    assert out.stats.drafted > 0
    from specvideo.text.drafting.head_drafters import HeadDrafter

    with pytest.raises(ValueError, match="batch 1"):
        HeadDrafter(LeanLlama(back.llama, fc=back.fc), None).start(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long))


def test_chain_acceptance_on_stored_replies_counts_each_position():
    from recipes.head import chain_acceptance

    target = tiny_llama(64, seed=11, layers=1)
    rows = []
    for prompt in random_prompts(3, 64, seed=12, min_len=4, max_len=6):
        ids = torch.tensor(prompt + target_greedy(target, prompt, 12))
        with torch.no_grad():
            features = target(ids[None], output_hidden_states=True).hidden_states[-1][0]
        rows.append({"ids": ids, "start": len(prompt), "features": features})
    exact = chain_acceptance(exact_head(target), rows, None, k=3, stride=1)
    assert exact == [1.0, 1.0, 1.0]
    noisy = chain_acceptance(exact_head(target, noise=1.0, seed=7), rows, None, k=3, stride=1)
    assert noisy[0] < 1.0 and noisy[0] >= noisy[1] >= noisy[2]
