"""Finished rows leave the batch (no memory, no compute) and holes are repacked."""

import torch

from specvideo.text import SpeculativeGenerator
from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.state import CausalLMState
from tests.helpers import perturbed_copy, tiny_llama
from tests.text.test_greedy_exact import reference

VOCAB = 64


def test_a_retired_row_leaves_the_cache_and_the_others_are_unchanged():
    model = tiny_llama(VOCAB, seed=0)
    ids = torch.tensor([[0, 5, 6, 7], [8, 9, 10, 11], [0, 0, 12, 13]])
    mask = (ids != 0).long()
    state = CausalLMState(model, ids, mask)
    state.forward()
    state.retire(torch.tensor([False, True, False]))
    assert state.cache.layers[0].keys.shape[0] == 2 and state.live.tolist() == [0, 2]
    logits = state.forward(torch.tensor([[20], [21], [22]]))  # (B, 1, V): the caller's rows
    assert logits.shape[0] == 3 and bool((logits[1] == 0).all())
    for b in (0, 2):
        row = ids[b][mask[b].bool()].tolist() + [20 + b]
        alone = model(torch.tensor([row])).logits[0, -1]
        torch.testing.assert_close(logits[b, 0], alone, atol=1e-5, rtol=1e-5)


def test_repacking_holes_keeps_the_logits():
    """transformers' cache: holes on its shared slot axis, repacked or not, give the logits of
    LeanLlama's cache, where each row's keys lie at their positions."""
    model = tiny_llama(VOCAB, seed=1)
    logits = []
    for runner, repack in ((model, False), (model, True), (LeanLlama(model), False)):
        ids = torch.tensor([[5, 6, 7], [8, 9, 10]])
        state = CausalLMState(runner, ids, torch.ones_like(ids))
        state.forward()
        state.forward(torch.tensor([[11, 12, 13, 14], [15, 16, 17, 18]]))
        state.truncate(torch.tensor([7, 4]))  # row 1 keeps one of the four
        assert state.num_tokens.tolist() == [7, 4]
        if repack:
            assert state.cache.mask[1].tolist() == [True] * 4 + [False] * 3  # three holes
            state.cache.repack()
            assert state.cache.length == 7 and state.cache.mask[1].tolist() == [False] * 3 + [True] * 4
        logits.append(state.forward(torch.tensor([[30], [31]])))
    torch.testing.assert_close(logits[1], logits[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits[2], logits[0], atol=1e-4, rtol=1e-4)


def test_a_ragged_batch_keeps_its_cache_near_the_longest_row():
    """The review's case: rows that stop early or accept less must not grow the cache past what
    the longest row needs (it had grown 7x and past the context)."""
    target = tiny_llama(VOCAB, seed=0, logit_scale=8.0, context=512)
    draft = perturbed_copy(target, noise=0.3)
    gen = SpeculativeGenerator.from_models(target, draft=draft, drafter="model", num_draft_tokens=8, schedule="constant")
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12], [13], [14, 15]]
    budgets_stop = 2  # id 2 is EOS: rows stop at different times
    run = gen.start(prompts, max_new_tokens=150, stop=[budgets_stop])
    longest = 0
    for _ in run.steps():
        state = run.verifier.state
        need = int(state.num_tokens.max()) if len(state.live) else 0
        assert state.cache.length <= 2 * need + 16 + 9  # the shared slot axis, holes included
        longest = max(longest, state.cache.length)
    for prompt, out in zip(prompts, run.rows.outputs):
        ref = reference(target, prompt, 150, eos=[budgets_stop])
        assert out == ref[: len(out)] and len(out) == len(ref)
    assert longest <= 5 + 150 + 16 + 2 * 150
