"""Speculative sampling must reproduce the target's distribution exactly, whatever the draft.

The joint distribution of the first two generated tokens is enumerated from the target alone and
compared with N samples drawn as one batch of N identical prompts (each row independent), with a
chi-square test. Accepting every drafted token instead must fail the same test.
"""

import math

import pytest
import torch

from specvideo.core.types import Verdict
from specvideo.text import SamplingConfig, SpeculativeGenerator
from specvideo.text.sampling import to_probs
from specvideo.text.verifier import TargetVerifier
from tests.helpers import tiny_llama

VOCAB, N = 8, 20_000
PROMPT = [3, 5, 3, 5, 3]  # repetitive, so the n-gram drafter finds matches


@pytest.fixture(scope="module")
def models():
    target = tiny_llama(VOCAB, seed=0, logit_scale=6.0)
    draft = tiny_llama(VOCAB, seed=7, logit_scale=6.0)  # deliberately a different model
    return target, draft


def exact_joint(target, sampling: SamplingConfig) -> torch.Tensor:
    """p(t1, t2 | prompt) by enumeration, with plain full forwards (no cache, no speculation)."""
    warpers = sampling.warpers()
    with torch.no_grad():
        p1 = to_probs(target(torch.tensor([PROMPT])).logits[0, -1], warpers)  # (V,)
        seqs = torch.tensor([PROMPT + [t] for t in range(VOCAB)])  # (V, T+1)
        p2 = to_probs(target(seqs).logits[:, -1], warpers)  # (V, V)
    return p1[:, None] * p2  # (V, V)


def sampled_joint(gen, sampling: SamplingConfig, seed: int) -> torch.Tensor:
    out = gen.generate(
        torch.tensor([PROMPT] * N),
        max_new_tokens=4,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        generator=torch.Generator().manual_seed(seed),
        stop=None,
    )
    pairs = torch.tensor([ids[:2] for ids in out.token_ids])  # (N, 2)
    counts = torch.bincount(pairs[:, 0] * VOCAB + pairs[:, 1], minlength=VOCAB * VOCAB).float()
    return counts.reshape(VOCAB, VOCAB), out.stats


def chi_square(observed: torch.Tensor, probs: torch.Tensor) -> tuple[float, float]:
    """Statistic and its 1e-4 critical value; cells expected below 5 are pooled, and an observation
    in a cell of probability zero is an outright failure."""
    observed, probs = observed.flatten(), probs.flatten()
    if observed[probs == 0].sum() > 0:
        return math.inf, 0.0
    expected = probs * observed.sum()
    big = expected >= 5
    obs = torch.cat([observed[big], observed[~big].sum()[None]])
    exp = torch.cat([expected[big], expected[~big].sum()[None]])
    keep = exp > 0
    stat = float(((obs[keep] - exp[keep]) ** 2 / exp[keep]).sum())
    df = int(keep.sum()) - 1
    z = 3.719  # one-sided 1e-4 quantile of N(0, 1); Wilson-Hilferty approximation of chi2
    critical = df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3
    return stat, critical


CASES = [
    ("model", SamplingConfig(temperature=1.0)),
    ("model-rejection", SamplingConfig(temperature=1.0)),  # the rejection rule (sampling_rule)
    ("model", SamplingConfig(temperature=0.7, top_p=0.9)),
    ("ngram", SamplingConfig(temperature=1.0)),
    ("hybrid", SamplingConfig(temperature=1.0)),  # a lookup round first (one-hot q), then model rounds
]


@pytest.mark.parametrize(
    "drafter,sampling", CASES, ids=["model-t1", "model-rejection-t1", "model-t0.7-p0.9", "ngram-t1", "hybrid-t1"]
)
def test_first_two_tokens_follow_the_target_distribution(models, drafter, sampling):
    target, draft = models
    drafter, _, rule = drafter.partition("-")
    gen = SpeculativeGenerator.from_models(
        target, draft=draft, drafter=drafter, num_draft_tokens=3, schedule="constant", sampling_rule=rule or "gumbel"
    )
    exact = exact_joint(target, sampling)
    observed, stats = sampled_joint(gen, sampling, seed=11)
    assert stats.accepted > 0.1 * N and stats.accepted < stats.drafted  # drafts matter, some rejected
    stat, critical = chi_square(observed, exact)
    assert stat < critical, f"chi2 {stat:.1f} >= {critical:.1f}"
    if drafter == "model":
        # the control: the draft's own distribution is far from the target's
        draft_joint = exact_joint(draft, sampling)
        assert (draft_joint - exact).abs().sum() > 0.2


def test_a_draft_restricted_to_some_tokens_keeps_the_target_distribution(models):
    """The lean drafter proposes only 5 of the 8 tokens (q = 0 elsewhere): still exact."""
    target, draft = models
    sampling = SamplingConfig(temperature=1.0)
    gen = SpeculativeGenerator.from_models(
        target,
        draft=draft,
        drafter="lean",
        draft_vocab=[0, 2, 3, 5, 6],
        num_draft_tokens=3,
        schedule="constant",
    )
    exact = exact_joint(target, sampling)
    observed, stats = sampled_joint(gen, sampling, seed=12)
    assert stats.accepted > 0.1 * N and stats.accepted < stats.drafted
    assert observed[[1, 4, 7]].sum() > 0.05 * N  # first tokens the draft can never propose
    stat, critical = chi_square(observed, exact)
    assert stat < critical, f"chi2 {stat:.1f} >= {critical:.1f}"


def test_accepting_every_draft_token_fails_the_same_test(models, monkeypatch):
    target, draft = models
    sampling = SamplingConfig(temperature=1.0)

    def accept_all(self, draft, target_tokens):
        bonus = target_tokens.gather(1, draft.lengths[:, None]).squeeze(1)  # the target's own after the draft
        return Verdict(num_accepted=draft.lengths.clone(), next_item=bonus)

    monkeypatch.setattr(TargetVerifier, "accept", accept_all)
    gen = SpeculativeGenerator.from_models(target, draft=draft, num_draft_tokens=3, schedule="constant")
    observed, stats = sampled_joint(gen, sampling, seed=11)
    assert stats.acceptance_rate == 1.0
    stat, critical = chi_square(observed, exact_joint(target, sampling))
    assert stat > critical, f"accept-all passed: chi2 {stat:.1f} < {critical:.1f}"
