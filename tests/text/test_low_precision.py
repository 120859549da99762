"""The text pair in bf16 on the CPU: every drafter runs, with the right shapes, counters and stops.

Token identity with the target's own decoding is claimed and tested in fp32 only (test_greedy_exact):
in bf16 a k-token forward and a 1-token forward round differently, so near-ties can flip.
"""

import pytest
import torch

from specvideo.text import SpeculativeGenerator
from tests.helpers import perturbed_copy, random_prompts, tiny_llama

EOS = 2


def bf16_pair():
    target = tiny_llama(seed=0)
    return target.to(torch.bfloat16), perturbed_copy(target, 0.1).to(torch.bfloat16)


@pytest.mark.parametrize("drafter", ["model", "lean", "hybrid", "ngram", "none"])
def test_bf16_pair_runs_every_drafter(drafter):
    target, draft = bf16_pair()
    uses_draft = drafter in ("model", "lean", "hybrid")
    gen = SpeculativeGenerator.from_models(
        target, draft=draft if uses_draft else None, drafter=drafter, num_draft_tokens=4
    )
    prompts = random_prompts(3, 64, seed=0)
    out = gen.generate(prompts, max_new_tokens=12, stop=None)
    assert [len(t) for t in out.token_ids] == [12, 12, 12]
    assert all(0 <= i < 64 for t in out.token_ids for i in t)
    stats = out.stats
    assert stats.emitted == 36 and 1 <= stats.target_calls <= 12 and stats.accepted <= stats.drafted
    sampled = gen.generate(
        prompts[:2], max_new_tokens=8, temperature=0.8, generator=torch.Generator().manual_seed(0), stop=None
    )
    assert [len(t) for t in sampled.token_ids] == [8, 8]


def test_bf16_pair_stops_at_eos_in_a_batch():
    target, draft = bf16_pair()
    with torch.no_grad():
        target.lm_head.weight[EOS] += 5.0  # the target ends every reply at once
    gen = SpeculativeGenerator.from_models(target, draft=draft, drafter="lean", num_draft_tokens=4)
    out = gen.generate(random_prompts(3, 64, seed=1), max_new_tokens=12)
    assert all(t[-1] == EOS and len(t) <= 12 for t in out.token_ids)
    assert out.stats.emitted == sum(len(t) for t in out.token_ids)
