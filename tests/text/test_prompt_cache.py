"""The prompt cache: a prompt that shares a prefix with a recent one prefills only the rest, and its
output equals the cold run's token for token (bit for bit on the invariant bf16 path)."""

import pytest
import torch

from specvideo.text import SpeculativeGenerator
from specvideo.text.runtime.invariant import PREFILL_CHUNK
from specvideo.text.runtime.prompt_cache import PromptCache
from tests.helpers import perturbed_copy, random_prompts, tiny_llama
from tests.text.test_head import exact_head

torch.set_num_threads(1)


def edited(prompt: list[int], at: int, token: int) -> list[int]:
    """The prompt with one token changed at ``at`` (an edit near the end of a file)."""
    return prompt[:at] + [token] + prompt[at + 1 :]


def pair(kind: str) -> tuple[SpeculativeGenerator, SpeculativeGenerator]:
    """(cold, cached) generators over the same models."""
    target = tiny_llama(seed=0, logit_scale=2.0, layers=1 if kind == "head" else 2)
    if kind == "bf16":
        target = target.to(torch.bfloat16)
        make = lambda: SpeculativeGenerator.from_models(target, draft=perturbed_copy(target, 0.2).to(torch.bfloat16), drafter="hybrid", num_draft_tokens=4)  # noqa: E731
    elif kind == "head":
        head = exact_head(target, noise=0.5, seed=3)
        make = lambda: SpeculativeGenerator.from_models(target, draft=head, drafter="head", num_draft_tokens=3)  # noqa: E731
    else:
        make = lambda: SpeculativeGenerator.from_models(target, draft=perturbed_copy(target, 0.2), drafter="model", num_draft_tokens=3)  # noqa: E731
    cold, cached = make(), make()
    cached.prompt_cache = PromptCache()
    return cold, cached


@pytest.mark.parametrize("kind", ["bf16", "float32", "head"])
def test_reused_prefixes_give_the_cold_output_and_prefill_only_the_tail(kind):
    cold, cached = pair(kind)
    chunk = PREFILL_CHUNK if kind == "bf16" else 1  # an invariant target reuses whole prefill chunks
    assert cached.models.invariant == (kind == "bf16")
    T = 200 if kind == "bf16" else 40
    prompt = random_prompts(1, 64, seed=5, min_len=T, max_len=T)[0]
    versions = [prompt, edited(prompt, T - 7, 7), prompt + [9, 10, 11], edited(prompt, T // 2, 8), prompt]
    reused_by = [0, T - 7, T, T // 2, T - 1]  # the longest prefix shared with a stored prompt
    for ids, shared in zip(versions, reused_by):
        run = cached.start([ids], max_new_tokens=16, stop=None)
        pending = run.verifier.state.pending_width
        for _ in run.steps():
            pass
        out = cached._output(run)
        assert out.token_ids[0] == cold.generate([ids], max_new_tokens=16, stop=None).token_ids[0]
        expected = shared - shared % chunk
        assert run.cached_tokens == expected and pending == len(ids) - expected
    assert cached.prompt_cache.lookups == 5 and cached.prompt_cache.hits == sum(r - r % chunk > 0 for r in reused_by)


def test_a_batch_and_a_padded_prompt_do_not_use_the_cache():
    cold, cached = pair("float32")
    prompts = random_prompts(2, 64, seed=6, min_len=10, max_len=14)
    cached.generate(prompts[0], max_new_tokens=4)
    out = cached.generate(prompts, max_new_tokens=6, stop=None)
    assert cached.prompt_cache.lookups == 1 and out.token_ids == cold.generate(prompts, max_new_tokens=6, stop=None).token_ids


def test_entries_past_the_bound_leave_least_recent_first():
    _, cached = pair("float32")
    prompts = random_prompts(3, 64, seed=7, min_len=20, max_len=20)
    cached.generate(prompts[0], max_new_tokens=2)
    one = cached.prompt_cache.nbytes
    cached.prompt_cache.max_bytes = 2 * one
    for p in prompts[1:]:
        cached.generate(p, max_new_tokens=2)
    assert list(cached.prompt_cache.entries) == [tuple(p) for p in prompts[1:]]
    assert cached.prompt_cache.nbytes <= 2 * one
    with pytest.raises(ValueError, match="max_bytes"):
        PromptCache(-1)


def test_a_prompt_typed_further_replaces_its_shorter_entry():
    _, cached = pair("float32")
    prompt, other = random_prompts(2, 64, seed=8, min_len=20, max_len=20)
    retyped = prompt + [5, 6 ^ 1, 7]  # the last token merged with what was typed next
    for ids in (prompt, other, prompt + [5, 6], retyped):
        cached.generate(ids, max_new_tokens=2)
    assert list(cached.prompt_cache.entries) == [tuple(other), tuple(retyped)]
    cached.generate(retyped[:-3] + [1] * 3, max_new_tokens=2)  # differs in its last 3 of 23: both kept
    assert len(cached.prompt_cache.entries) == 3
