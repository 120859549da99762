"""Property-based tests (hypothesis) of the acceptance rules and of the loop's invariants.

The acceptance rules are checked against a few-line reference on random small batches; the loop
runs the real text and video stacks on tiny random models and checks exact output lengths and
statistics that add up.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specvideo.core.acceptance import greedy_match, rejection_sample, sample_categorical, threshold_accept
from specvideo.core.types import SpecStats
from specvideo.text import SpeculativeGenerator
from specvideo.video.config import VIDEO_DEFAULTS as D
from specvideo.video.drafters import LinearDrafter
from specvideo.video.pipeline import SpeculativeVideoPipeline
from specvideo.video.verifier import DiffusionVerifier
from tests.helpers import perturbed_copy, tiny_llama
from tests.video.test_pipeline import SIZE, context_uint8, tiny_unet

FAST = settings(max_examples=100, deadline=None, database=None)
MODELS = settings(max_examples=50, deadline=None, database=None)  # each example runs tiny real models


# ------------------------------------------------------------------------------ strategies


@st.composite
def shapes(draw, max_batch: int = 3, max_k: int = 5) -> tuple[int, int, list[int]]:
    """(B, k, lengths): a batch of drafts, row b really proposing lengths[b] <= k items."""
    batch, k = draw(st.integers(1, max_batch)), draw(st.integers(0, max_k))
    return batch, k, draw(st.lists(st.integers(0, k), min_size=batch, max_size=batch))


@st.composite
def distributions(draw, vocab: int) -> list[float]:
    """A probability vector with some exact zeros (never all zero)."""
    weights = draw(st.lists(st.sampled_from([0.0, 0.0, 0.01, 0.2, 0.5, 1.0]), min_size=vocab, max_size=vocab))
    if sum(weights) == 0:
        weights[draw(st.integers(0, vocab - 1))] = 1.0
    return [w / sum(weights) for w in weights]


def tensor(values, dtype=torch.long) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


def prefix_length(ok: list[bool], length: int) -> int:
    n = 0
    while n < length and ok[n]:
        n += 1
    return n


# ---------------------------------------------------------------------------- greedy_match


@FAST
@given(shape=shapes(), data=st.data())
def test_greedy_match_returns_the_longest_matching_prefix(shape, data):
    batch, k, lengths = shape
    tokens = st.integers(0, 2)  # a small alphabet, so that drafts often match
    target = data.draw(
        st.lists(st.lists(tokens, min_size=k + 1, max_size=k + 1), min_size=batch, max_size=batch)
    )
    draft = data.draw(st.lists(st.lists(tokens, min_size=k, max_size=k), min_size=batch, max_size=batch))
    verdict = greedy_match(tensor(target), tensor(draft).reshape(batch, k), tensor(lengths))
    for b in range(batch):
        n = prefix_length([d == t for d, t in zip(draft[b], target[b])], lengths[b])
        assert int(verdict.num_accepted[b]) == n
        assert int(verdict.next_item[b]) == target[b][n]  # the target's own token (or the bonus)


# ------------------------------------------------------------------------- threshold_accept

SCORES = st.floats(-2, 2) | st.sampled_from([math.nan, math.inf, -math.inf])


@FAST
@given(shape=shapes(), tau=st.floats(-2, 2) | st.sampled_from([math.inf, -math.inf]), data=st.data())
def test_threshold_accept_returns_the_longest_prefix_at_or_above_tau(shape, tau, data):
    batch, k, lengths = shape
    scores = data.draw(st.lists(st.lists(SCORES, min_size=k, max_size=k), min_size=batch, max_size=batch))
    verdict = threshold_accept(tensor(scores, torch.float32).reshape(batch, k), tau, tensor(lengths))
    for b in range(batch):
        # torch compares a float32 tensor with a Python float in float32, so the reference does too
        passed = [np.float32(s) >= np.float32(tau) for s in scores[b]]
        expected = prefix_length(passed, lengths[b])
        assert int(verdict.num_accepted[b]) == expected  # NaN never passes; tau=-inf passes the rest
    assert verdict.next_item is None


# ------------------------------------------------------------------------- rejection_sample


@st.composite
def speculative_rounds(draw):
    """p (B, k+1, V), q (B, k, V) or None, drafts sampled where q > 0, lengths, and a mode name."""
    batch, k, lengths = draw(shapes())
    vocab = draw(st.integers(2, 6))
    p = [[draw(distributions(vocab)) for _ in range(k + 1)] for _ in range(batch)]
    mode = draw(st.sampled_from(["deterministic", "q-equals-p", "random-q"]))
    if mode == "deterministic":  # q is one-hot at the drafted token (n-gram lookup)
        q = None
        drafts = [[draw(st.integers(0, vocab - 1)) for _ in range(k)] for _ in range(batch)]
    else:
        q = (
            [row[:k] for row in p]
            if mode == "q-equals-p"
            else [[draw(distributions(vocab)) for _ in range(k)] for _ in range(batch)]
        )
        drafts = [
            [draw(st.sampled_from([v for v in range(vocab) if dist[v] > 0])) for dist in row] for row in q
        ]
    return dict(p=p, q=q, drafts=drafts, lengths=lengths, mode=mode, shape=(batch, k, vocab))


@FAST
@given(case=speculative_rounds(), seed=st.integers(0, 2**32 - 1))
def test_rejection_sample_never_emits_a_token_the_target_rules_out(case, seed):
    batch, k, vocab = case["shape"]
    p = tensor(case["p"], torch.float32)  # (B, k+1, V)
    q = None if case["q"] is None else tensor(case["q"], torch.float32).reshape(batch, k, vocab)
    drafts = tensor(case["drafts"]).reshape(batch, k)
    lengths = case["lengths"]
    verdict = rejection_sample(p, q, drafts, tensor(lengths), torch.Generator().manual_seed(seed))
    for b in range(batch):
        n, x = int(verdict.num_accepted[b]), int(verdict.next_item[b])
        assert 0 <= n <= lengths[b]
        assert all(p[b, i, drafts[b, i]] > 0 for i in range(n))  # accepted tokens are possible under p
        assert p[b, n, x] > 0  # so is the correction / bonus token
        if n < lengths[b]:  # rejected at position n: x comes from the residual max(0, p - q)
            q_n = torch.zeros(vocab).index_fill_(0, drafts[b, n], 1.0) if q is None else q[b, n]
            assert p[b, n, x] > q_n[x]
        if case["mode"] == "q-equals-p":
            assert n == lengths[b]  # p / q = 1: every real draft passes


@FAST
@given(
    rows=st.lists(
        st.lists(st.sampled_from([0.0, 0.0, 1e-6, 0.3, 1.0, 7.0]), min_size=1, max_size=8),
        min_size=1,
        max_size=4,
    ),
    seed=st.integers(0, 2**32 - 1),
)
def test_sample_categorical_never_returns_a_zero_probability_index(rows, seed):
    width = max(len(r) for r in rows)
    rows = [r + [0.0] * (width - len(r)) for r in rows]
    rows = [r if any(r) else [0.0] * (width - 1) + [1.0] for r in rows]  # unnormalised, never all zero
    probs = tensor(rows, torch.float32)
    index = sample_categorical(probs, torch.Generator().manual_seed(seed))
    assert index.shape == (len(rows),)
    assert all(probs[i, int(j)] > 0 for i, j in enumerate(index))
    again = sample_categorical(probs, torch.Generator().manual_seed(seed))
    assert torch.equal(index, again)  # the generator is the only randomness


# ------------------------------------------------------------------------- loop invariants


def assert_stats_add_up(stats: SpecStats) -> None:
    hist = stats.accepted_length_hist
    assert 0 <= stats.accepted <= stats.drafted
    assert sum(stats.position_drafted) == stats.drafted
    assert sum(stats.position_accepted) == stats.accepted
    assert sum(n * count for n, count in enumerate(hist)) == stats.accepted
    assert all(a <= d for a, d in zip(stats.position_accepted, stats.position_drafted))
    for counts in (stats.position_drafted, stats.position_accepted):  # position i needs position i-1
        assert all(later <= earlier for earlier, later in zip(counts, counts[1:]))
    assert stats.rounds <= sum(hist)  # every round has at least one active row


@pytest.fixture(scope="module")
def text_models():
    target = tiny_llama(32, seed=0, context=64, logit_scale=3.0)
    return target, perturbed_copy(target, 0.3)


@MODELS
@given(
    drafter=st.sampled_from(["model", "lean", "ngram", "none"]),
    k=st.integers(1, 5),
    schedule=st.sampled_from(["constant", "heuristic", "confidence"]),
    prompts=st.lists(st.lists(st.integers(3, 31), min_size=1, max_size=8), min_size=1, max_size=3),
    max_new_tokens=st.integers(1, 12),
    temperature=st.sampled_from([0.0, 1.0]),
    seed=st.integers(0, 1000),
)
def test_text_loop_emits_exactly_max_new_tokens_and_stats_add_up(
    text_models, drafter, k, schedule, prompts, max_new_tokens, temperature, seed
):
    target, draft = text_models
    gen = SpeculativeGenerator.from_models(target, draft=draft, drafter=drafter, num_draft_tokens=k, schedule=schedule)
    out = gen.generate(
        prompts,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        stop=None,
        generator=torch.Generator().manual_seed(seed),
    )
    stats = out.stats
    assert [len(row) for row in out.token_ids] == [max_new_tokens] * len(prompts)
    assert all(0 <= t < 32 for row in out.token_ids for t in row)
    assert stats.emitted == max_new_tokens * len(prompts)
    assert_stats_add_up(stats)
    assert stats.target_calls == stats.rounds  # one target forward verifies a whole round
    assert stats.target_only_calls == max_new_tokens
    if len(prompts) == 1:  # k + 1 never overshoots a lone row's budget: accepted + correction each round
        assert stats.emitted == stats.accepted + stats.rounds
    if drafter == "none":
        assert stats.drafted == 0 and stats.target_calls == max_new_tokens


@pytest.fixture(scope="module")
def video_pipe():
    return SpeculativeVideoPipeline(DiffusionVerifier(tiny_unet()), LinearDrafter())


def check_evals(metric: str, drafted: int, refine_steps: int) -> int:
    if metric != "typicality":
        return drafted * refine_steps
    levels = len(D.check_levels)
    return levels * (drafted + 1) if drafted else 0


@MODELS
@given(
    mode=st.sampled_from(["speculative", "speculative", "target", "draft"]),
    num_frames=st.integers(1, 6),
    k=st.integers(1, 4),
    threshold=st.sampled_from([-math.inf, 0.0, 0.3, 0.9, math.inf]),
    refine_steps=st.integers(1, 2),
    schedule=st.sampled_from(["constant", "heuristic"]),
    seed=st.integers(0, 1000),
    metric=st.sampled_from(["typicality", "ssim"]),
)
def test_video_loop_emits_exactly_num_frames_and_stats_add_up(
    video_pipe, mode, num_frames, k, threshold, refine_steps, schedule, seed, metric
):
    steps = 2  # N, the full sampler's steps
    out = video_pipe(
        context_uint8(),
        num_frames=num_frames,
        mode=mode,
        num_draft_frames=k,
        threshold=threshold,
        num_refine_steps=refine_steps,
        num_inference_steps=steps,
        schedule=schedule,
        metric=metric,
        generator=torch.Generator().manual_seed(seed),
        progress=False,
    )
    stats = out.stats
    assert out.frames.shape == (num_frames, SIZE, SIZE, 3)
    assert len(stats.frame_accepted) == len(out.drafts) == stats.emitted == num_frames
    assert_stats_add_up(stats)
    assert sum(stats.frame_accepted) == stats.accepted  # every accepted draft is emitted
    assert stats.target_only_calls == num_frames * steps
    expected_evals = {
        "target": num_frames * steps,
        "draft": 0,
        # the check of every draft (m refinement steps, or one evaluation per typicality level plus the
        # reference frame's once), and a full sample for every frame that is not an accepted draft
        "speculative": check_evals(metric, stats.drafted, refine_steps)
        + (num_frames - stats.accepted) * steps,
    }
    assert stats.unet_evals == stats.target_calls == expected_evals[mode]
    if mode == "draft":
        assert stats.accepted == stats.drafted == num_frames
    if mode == "target":
        assert stats.drafted == 0
    if mode == "speculative" and threshold == math.inf:
        assert stats.accepted == 0
