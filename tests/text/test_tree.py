"""Token trees: mask and positions, the walk down a tree (greedy identity; sampled runs keep the
target's distribution), and the target's tree forward with cache compaction on the transformers and
LeanLlama paths."""

import pytest
import torch

from specvideo.text.book import RowBook, RowRequest
from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.state import CausalLMState
from specvideo.text.trees.verify import (
    TokenTree,
    forward_tree,
    keep_tree_path,
    tree_attention_mask,
    tree_depths,
    tree_walk,
)
from tests.helpers import perturbed_copy, random_prompts, tiny_llama

#        root
#       /    \
#      0      1
#     / \     |
#    2   3    4
#    |
#    5
PARENTS = torch.tensor([-1, -1, 0, 0, 1, 2])


def test_depths_and_ancestor_mask():
    assert tree_depths(PARENTS).tolist() == [1, 1, 2, 2, 2, 3]
    mask = tree_attention_mask(PARENTS)
    assert mask[5].nonzero()[:, 0].tolist() == [0, 2, 5]  # itself and its ancestors
    assert mask[4].nonzero()[:, 0].tolist() == [1, 4]
    assert mask[3].nonzero()[:, 0].tolist() == [0, 3]
    chain = TokenTree.chain(torch.tensor([7, 8, 9]))
    assert tree_attention_mask(chain.parents).equal(torch.ones(3, 3, dtype=torch.bool).tril())


def test_a_parent_must_come_first():
    with pytest.raises(ValueError, match="earlier node"):
        TokenTree(torch.tensor([1, 2]), torch.tensor([1, -1]))
    with pytest.raises(ValueError, match="must be \\(n,\\)"):
        TokenTree(torch.tensor([[1, 2]]), torch.tensor([-1, 0]))


def test_the_walk_follows_the_targets_tokens():
    tree = TokenTree(torch.tensor([10, 11, 12, 13, 14, 15]), PARENTS)
    # the target's token after the root, then after nodes 0..5
    assert tree_walk(torch.tensor([10, 13, 0, 0, 0, 0, 0]), tree) == ([0, 3], 0)
    assert tree_walk(torch.tensor([11, 0, 0, 0, 0, 0, 0]), tree) == ([1], 0)
    assert tree_walk(torch.tensor([10, 12, 0, 15, 0, 0, 9]), tree) == ([0, 2, 5], 9)
    assert tree_walk(torch.tensor([4, 0, 0, 0, 0, 0, 0]), tree) == ([], 4)  # no child: the target's own


def _sequential_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(torch.tensor([ids])).logits[0, -1].float()


@pytest.mark.parametrize("lean", [False, True])
def test_tree_forward_scores_every_path_and_compaction_keeps_the_cache_exact(lean):
    model = tiny_llama(64, seed=3)
    prompt = random_prompts(1, 64, seed=4, min_len=6, max_len=6)[0]
    state = CausalLMState(LeanLlama(model) if lean else model, torch.tensor([prompt]), torch.ones(1, 6, dtype=torch.long))
    state.forward()  # prefill
    state.push(torch.tensor([[9]]))  # the root: the last committed token, not yet cached
    tree = TokenTree(torch.tensor([20, 21, 22, 23, 24, 25]), PARENTS)
    logits = forward_tree(state, tree)  # (1, n + 1, V)
    context = prompt + [9]
    torch.testing.assert_close(logits[0, 0], _sequential_logits(model, context), atol=1e-4, rtol=1e-4)
    for node in range(tree.size):
        path, up = [], node
        while up >= 0:
            path.insert(0, int(tree.tokens[up]))
            up = int(tree.parents[up])
        torch.testing.assert_close(logits[0, node + 1], _sequential_logits(model, context + path), atol=1e-4, rtol=1e-4)
    keep_tree_path(state, tree, [1, 4])  # a path that is not the first branch
    assert state.length == len(context) + 2 and int(state.num_tokens) == len(context) + 2
    state.push(torch.tensor([[30]]))
    after = state.forward()[0, -1]
    torch.testing.assert_close(after, _sequential_logits(model, context + [21, 24, 30]), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("lean", [False, True])
def test_greedy_with_trees_equals_the_targets_own_greedy(lean):
    """Trees whose right branch (the target's greedy token) sits at varying places among wrong
    siblings, accepted and compacted round after round: the same 24 tokens as greedy decoding."""
    model = tiny_llama(64, seed=5)
    prompt = random_prompts(1, 64, seed=6, min_len=5, max_len=5)[0]
    with torch.inference_mode():
        own = model.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False, pad_token_id=0)
    own = own[0, len(prompt) :].tolist()
    state = CausalLMState(LeanLlama(model) if lean else model, torch.tensor([prompt]), torch.ones(1, 5, dtype=torch.long))
    out, g = [], torch.Generator().manual_seed(7)
    while len(out) < 24:
        truth = own[len(out) : len(out) + 3]
        tokens, parents, parent = [], [], -1
        for depth, right in enumerate(truth):  # at each depth a wrong sibling, then (maybe) the right one
            wrong = (right + 1 + int(torch.randint(0, 60, (), generator=g))) % 64
            tokens.append(wrong), parents.append(parent)
            if depth < 2 or bool(torch.rand((), generator=g) < 0.5):
                tokens.append(right), parents.append(parent)
                parent = len(tokens) - 1
            else:
                break
        tree = TokenTree(torch.tensor(tokens), torch.tensor(parents))
        argmax = forward_tree(state, tree)[0].argmax(-1)  # (n + 1,)
        path, nxt = tree_walk(argmax, tree)
        keep_tree_path(state, tree, path)
        state.push(torch.tensor([[nxt]]))
        out += [int(tree.tokens[i]) for i in path] + [nxt]
    assert out[:24] == own


def test_trees_refuse_a_batch():
    model = tiny_llama(64, seed=0)
    state = CausalLMState(model, torch.tensor([[1, 2], [3, 4]]), torch.ones(2, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="batch 1"):
        forward_tree(state, TokenTree.chain(torch.tensor([5])))


def test_lookup_tree_merges_the_continuations_of_several_occurrences():
    from specvideo.text.trees.drafters import NGramTreeDrafter

    # "7 8" occurred three times before, followed by (1 2 3), (1 4 5) and (6 ...)
    history = [7, 8, 1, 2, 3, 0, 7, 8, 1, 4, 5, 0, 7, 8, 6, 0, 7, 8]
    drafter = NGramTreeDrafter(max_ngram=2, branches=3, max_nodes=5, rows=RowBook([RowRequest(history, 8)]))
    drafter.start(torch.tensor([history]), torch.ones(1, len(history), dtype=torch.long))
    assert drafter.continuations(3) == [[6, 0, 7], [1, 4, 5], [1, 2, 3]]  # latest first
    tree = drafter.propose(3, None).tree
    # 6-0-7 (3 nodes), then 1-4 (the budget of 5 nodes cuts 5); 1 is shared with 1-2-3 (none left)
    assert tree.tokens.tolist() == [6, 0, 7, 1, 4] and tree.parents.tolist() == [-1, 0, 1, -1, 3]
    assert NGramTreeDrafter().tree([]) is None
    with pytest.raises(ValueError, match="batch 1"):
        drafter.start(torch.ones(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.long))


@pytest.mark.parametrize("lean", [False, True])
def test_ngram_tree_generation_equals_the_targets_own_greedy(lean):
    from specvideo.text import SpeculativeGenerator

    model = tiny_llama(64, seed=8)
    prompt = [5, 6, 7, 5, 6, 9, 5, 6, 7, 5, 6, 11, 5, 6]  # "5 6" with several continuations
    with torch.inference_mode():
        own = model.generate(torch.tensor([prompt]), max_new_tokens=30, do_sample=False, pad_token_id=0)
    gen = SpeculativeGenerator.from_models(model, drafter="ngram-tree", num_draft_tokens=4, schedule="constant", lean_target=lean)
    out = gen.generate(prompt, max_new_tokens=30, stop=None)
    assert out.token_ids == own[0, len(prompt) :].tolist()
    assert out.stats.drafted > 0 and out.stats.target_calls < 30


@pytest.mark.parametrize("drafter", ["ngram-tree", "tree"])
def test_tree_sampling_follows_the_target_distribution(drafter):
    """The first two tokens of sequential runs (a tree is one prompt at a time) against the exact
    joint of the target, as tests/text/test_sampling_exact.py checks the chains."""
    from specvideo.text import SamplingConfig, SpeculativeGenerator
    from tests.text.test_sampling_exact import PROMPT, VOCAB, chi_square, exact_joint

    target = tiny_llama(VOCAB, seed=0, logit_scale=6.0)
    draft = tiny_llama(VOCAB, seed=7, logit_scale=6.0) if drafter == "tree" else None
    sampling = SamplingConfig(temperature=1.0)
    gen = SpeculativeGenerator.from_models(
        target, draft=draft, drafter=drafter, num_draft_tokens=3, schedule="constant", max_ngram=2
    )
    g, runs = torch.Generator().manual_seed(3), 1500
    counts, accepted = torch.zeros(VOCAB * VOCAB), 0
    for _ in range(runs):
        out = gen.generate(PROMPT, max_new_tokens=2, temperature=1.0, generator=g, stop=None)
        counts[out.token_ids[0] * VOCAB + out.token_ids[1]] += 1
        accepted += out.stats.accepted
    assert accepted > 0.05 * runs  # the tree's candidates were taken (one token drafted: 2 new)
    stat, critical = chi_square(counts.reshape(VOCAB, VOCAB), exact_joint(target, sampling))
    assert stat < critical, f"chi2 {stat:.1f} >= {critical:.1f}"


@pytest.mark.parametrize("lean", [False, True])
def test_draft_model_tree_equals_the_targets_own_greedy(lean):
    """The draft's chain with its runner-up beside it: paths that leave the chain at a sibling
    bring the draft's cache back in step (a noisy copy of the target: often right, often not)."""
    from specvideo.text import SpeculativeGenerator

    target = tiny_llama(64, seed=9)
    draft = perturbed_copy(target, noise=0.5, seed=10)
    prompt = random_prompts(1, 64, seed=11, min_len=7, max_len=7)[0]
    with torch.inference_mode():
        own = target.generate(torch.tensor([prompt]), max_new_tokens=30, do_sample=False, pad_token_id=0)
    gen = SpeculativeGenerator.from_models(
        target, draft=draft, drafter="tree", num_draft_tokens=3, schedule="constant", lean_target=lean, tree_width=2
    )
    out = gen.generate(prompt, max_new_tokens=30, stop=None)
    assert out.token_ids == own[0, len(prompt) :].tolist()
    assert 0 < out.stats.accepted < out.stats.drafted
