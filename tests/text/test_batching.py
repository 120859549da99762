"""Continuous batching (``specvideo.text.batching``): rows join a running batch between rounds and
leave when they finish, and every row decodes exactly what it decodes alone, greedy or sampled."""

from __future__ import annotations

import pytest
import torch

from specvideo.text import SpeculativeGenerator
from specvideo.text.book import RowBook, RowRequest
from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.prompt_cache import PromptCache
from specvideo.text.runtime.state import CausalLMState
from specvideo.text.sampling import RowSampler, SamplingConfig, gumbel_noise, to_probs
from tests.helpers import perturbed_copy, random_prompts, tiny_llama
from tests.text.test_head import exact_head, target_greedy

VOCAB = 64
HOT = SamplingConfig(0.9, top_p=0.95)


def generator(drafter: str, lean_target: bool = False) -> SpeculativeGenerator:
    target = tiny_llama(VOCAB, seed=0, logit_scale=4.0)
    draft = None if drafter in ("ngram", "none") else perturbed_copy(target, noise=0.3)
    return SpeculativeGenerator.from_models(
        target, draft=draft, drafter=drafter, num_draft_tokens=3, schedule="constant", lean_target=lean_target
    )


def requests() -> list[RowRequest]:
    prompts = random_prompts(4, VOCAB, seed=3, min_len=4, max_len=12)
    prompts[1] = prompts[1] + prompts[1][:5]  # a repeat: prompt lookup finds something
    return [
        RowRequest(prompts[0], 14),
        RowRequest(prompts[1], 9, HOT, seed=7),
        RowRequest(prompts[2], 17),
        RowRequest(prompts[3], 11, SamplingConfig(1.3, top_k=20), seed=8),
    ]


def decode(gen, first: RowRequest, joining: list[tuple[int, RowRequest]] = ()) -> dict:
    """Run ``first``; each (round, request) of ``joining`` is admitted after that round. Returns
    every request's tokens by its index (0: first)."""
    run, out, joining, joined = gen.open_rows(first, tag=0), {}, list(joining), 0
    for r, _ in enumerate(run.steps()):
        out.update({tag: list(run.rows.outputs[b]) for b, tag in enumerate(run.tags)})
        while joining and joining[0][0] == r:
            joined += 1
            run.admit(joining.pop(0)[1], tag=joined)
    assert not joining, "the run ended before every request joined"
    out.update({tag: list(run.rows.outputs[b]) for b, tag in enumerate(run.tags)})
    return out


@pytest.mark.parametrize(
    "drafter,lean", [("model", False), ("lean", True), ("hybrid", True), ("ngram", False), ("none", True)]
)
def test_rows_that_join_a_running_batch_decode_what_they_decode_alone(drafter, lean):
    gen = generator(drafter, lean)
    reqs = requests()
    alone = [decode(gen, r)[0] for r in reqs]
    # the second joins after the first round, the third and fourth after the second: rows of
    # different lengths, greedy and sampled, finishing at different rounds
    together = decode(gen, reqs[0], [(0, reqs[1]), (1, reqs[2]), (1, reqs[3])])
    assert [together[i] for i in range(4)] == alone
    assert all(0 < len(t) <= r.max_new_tokens for t, r in zip(alone, reqs))
    prompt = reqs[0].prompt_ids
    assert alone[0] == target_greedy(gen.target, prompt, 14)  # greedy rows are the target's greedy


def test_a_sampled_row_depends_on_its_seed_only():
    gen = generator("lean", lean_target=True)
    r = requests()[1]
    same = [decode(gen, RowRequest(r.prompt_ids, 9, HOT, seed=7))[0] for _ in range(2)]
    other = decode(gen, RowRequest(r.prompt_ids, 9, HOT, seed=99))[0]
    assert same[0] == same[1] and other != same[0]
    # the same noise without any draft (target-only decoding) gives the same tokens
    assert decode(generator("none", lean_target=True), RowRequest(r.prompt_ids, 9, HOT, seed=7))[0] == same[0]


@pytest.mark.parametrize("drafter", ["lean", "ngram"])
def test_a_batch_of_prompts_decodes_each_row_as_it_decodes_alone(drafter):
    """generate() over a batch is the same run as a continuous batch: each sampled row draws with
    its own seed, so its tokens do not depend on its neighbours, their lengths or their budgets."""
    gen = generator(drafter)
    prompts = [r.prompt_ids for r in requests()]
    seeds = [5, 6, 7, 8]
    together = gen.generate(prompts, max_new_tokens=12, temperature=0.9, top_p=0.95, seed=seeds, stop=None)
    alone = [gen.generate(p, max_new_tokens=12, temperature=0.9, top_p=0.95, seed=s, stop=None) for p, s in zip(prompts, seeds)]
    assert together.token_ids == [out.token_ids for out in alone]
    eos = gen.models.eos_ids()
    through_eos = [next((t[: i + 1] for i, x in enumerate(t) if x in eos), t) for t in together.token_ids]
    rows = [RowRequest(p, 12, HOT, seed=s) for p, s in zip(prompts, seeds)]
    assert [decode(gen, r)[0] for r in rows] == through_eos  # and as a continuous batch's row (to its eos)
    assert len(set(map(tuple, together.token_ids))) == 4


def test_the_rejection_rule_runs_the_same_rows():
    """sampling_rule="rejection": rows join and leave as under the default rule; a greedy row is the
    target's greedy, a sampled row is reproducible from its seed alone when it runs alone."""
    target = tiny_llama(VOCAB, seed=0, logit_scale=4.0)
    gen = SpeculativeGenerator.from_models(
        target, draft=perturbed_copy(target, noise=0.3), drafter="lean", num_draft_tokens=3,
        schedule="constant", sampling_rule="rejection",
    )
    reqs = requests()
    together = decode(gen, reqs[0], [(0, reqs[1]), (1, reqs[2]), (1, reqs[3])])
    assert together[0] == target_greedy(target, reqs[0].prompt_ids, 14)
    assert together[2] == target_greedy(target, reqs[2].prompt_ids, 17)[: len(together[2])]
    assert all(0 < len(together[i]) <= r.max_new_tokens for i, r in enumerate(reqs))
    assert decode(gen, reqs[1])[0] == decode(gen, reqs[1])[0]
    with pytest.raises(ValueError, match="sampling_rule"):
        SpeculativeGenerator.from_models(target, drafter="ngram", sampling_rule="maximal")


def test_the_row_sampler_draws_from_the_warped_distribution():
    torch.manual_seed(0)
    logits = torch.randn(1, 1, 12) * 2
    sampling = SamplingConfig(0.8, top_k=6)
    p = to_probs(logits[0, 0], sampling.warpers())
    counts = torch.zeros(12)
    for seed in range(3000):
        sampler = RowSampler(rows=RowBook([RowRequest([1], 4, sampling, seed)]))
        counts[int(sampler.tokens(logits)[0, 0])] += 1
    assert float((counts / 3000 - p).abs().max()) < 0.03  # ~3 standard errors at p = 0.5
    assert bool((counts[p == 0] == 0).all())  # nothing outside the top-k
    assert torch.equal(gumbel_noise(5, 3, 12), gumbel_noise(5, 3, 12))


def test_a_joining_row_reuses_the_prompt_cache_and_decodes_the_same():
    gen = generator("lean", lean_target=True)
    gen.prompt_cache = PromptCache(1 << 20)
    reqs = requests()
    prefix = reqs[2].prompt_ids
    cold = decode(gen, reqs[0], [(0, reqs[2])])[1]
    edited = RowRequest(prefix[:-2] + [(prefix[-2] + 1) % VOCAB, prefix[-1]], 17)  # one token edited
    run = gen.open_rows(reqs[0], tag=0)
    for r, _ in enumerate(run.steps()):
        if r == 0:
            run.admit(RowRequest(prefix, 17), tag=1)
            assert run.last_cached == len(prefix) - 1  # stored by the cold run above
            run.admit(edited, tag=2)
            assert run.last_cached == len(prefix) - 2
        if r == 1:
            warm = list(run.rows.outputs[run.tags.index(1)])
    assert warm == cold[:len(warm)] and len(warm) > 0


def test_a_head_run_drafts_by_lookup_once_a_second_row_joins():
    target = tiny_llama(VOCAB, seed=4, layers=1)
    gen = SpeculativeGenerator.from_models(target, draft=exact_head(target), drafter="head-hybrid", num_draft_tokens=3)
    prompts = random_prompts(2, VOCAB, seed=5, min_len=6, max_len=8)
    first, second = RowRequest(prompts[0], 20), RowRequest(prompts[1], 12)
    run = gen.open_rows(first, tag=0)
    kinds = []
    for r, _ in enumerate(run.steps()):
        kinds.append(type(run.drafter).__name__)
        if r == 1:
            run.admit(second, tag=1)
    assert kinds[0] == "HybridDrafter" and kinds[-1] == "NGramDrafter"
    out = {tag: run.rows.outputs[b] for b, tag in enumerate(run.tags)}
    assert out[0] == target_greedy(target, prompts[0], 20)
    assert out[1] == target_greedy(target, prompts[1], 12)


def test_finish_frees_a_row_before_the_next_round():
    gen = generator("ngram")
    reqs = requests()
    run = gen.open_rows(RowRequest(reqs[0].prompt_ids, 40), tag=0)
    for r, _ in enumerate(run.steps()):
        if r == 0:
            run.admit(RowRequest(reqs[2].prompt_ids, 40), tag=1)
        if r == 1:
            run.finish([0])
            assert run.size == 1 and len(run.verifier.state.live) == 1  # its cache rows are gone
    assert len(run.rows.outputs[run.tags.index(1)]) == 40


def test_admitted_state_rows_compute_what_they_compute_alone():
    for lean in (False, True):
        model = tiny_llama(VOCAB, seed=1)
        runner = LeanLlama(model) if lean else model
        a, b = [5, 6, 7, 8, 9, 10], [11, 12, 13]
        batch = CausalLMState(runner, torch.tensor([a[:-1]]), torch.ones(1, 5, dtype=torch.long))
        batch.forward()
        row = CausalLMState(runner, torch.tensor([b]), torch.ones(1, 3, dtype=torch.long))
        row.prefill()  # all but the last prompt token
        batch.admit(row)
        logits = batch.forward(torch.tensor([[a[-1], 20], [21, 22]]), num_logits=2)  # (2, 2, V)
        with torch.inference_mode():
            for got, tokens in ((logits[0], a + [20]), (logits[1], b + [21, 22])):
                alone = model(torch.tensor([tokens])).logits[0, -2:]
                torch.testing.assert_close(got, alone, atol=1e-4, rtol=1e-4)


def test_a_request_past_the_context_is_refused_and_the_batch_goes_on():
    gen = generator("ngram")
    reqs = requests()
    run = gen.open_rows(reqs[0], tag=0)
    for r, _ in enumerate(run.steps()):
        if r == 0:
            with pytest.raises(ValueError, match="context length"):
                run.admit(RowRequest(reqs[2].prompt_ids, 10_000), tag=1)
    assert run.rows.outputs[0] == target_greedy(gen.target, reqs[0].prompt_ids, 14)


@pytest.mark.parametrize("drafter,lean", [("model", False), ("lean", True)])
def test_a_one_token_prompt_joins_with_nothing_prefilled(drafter, lean):
    gen = generator(drafter, lean)
    reqs = requests()
    short = RowRequest([7], 10)
    assert decode(gen, reqs[0], [(0, short)])[1] == decode(gen, short)[0]


def test_a_joining_row_has_its_first_token_before_the_next_round():
    gen = generator("lean", lean_target=True)
    reqs = requests()
    alone = decode(gen, reqs[3])[0]
    run = gen.open_rows(reqs[0], tag=0)
    for r, _ in enumerate(run.steps()):
        if r == 0:
            b = run.admit(reqs[3], tag=3)
            assert run.rows.outputs[b] == alone[:1]  # picked from its prefill's last logits
            break


@pytest.mark.parametrize("drafter,lean", [("model", False), ("hybrid", True)])
def test_a_row_joins_a_run_whose_rows_have_all_finished(drafter, lean):
    gen = generator(drafter, lean)
    reqs = requests()
    run, joined = gen.open_rows(RowRequest(reqs[0].prompt_ids, 2), tag=0), False
    for _ in run.steps():
        if run.size == 0 and not joined:  # the last round of the first row: the run goes on with the next
            run.admit(reqs[2], tag=2)
            joined = True
    assert joined and run.rows.outputs[run.tags.index(2)] == decode(gen, reqs[2])[0]


def test_a_model_drafter_draws_with_the_noise_of_the_positions_the_target_checks():
    """Coupled drafting: a draft identical to the target, drawing with the target's noise at the
    same output positions, proposes the very tokens the target samples (a joining row included)."""
    target = tiny_llama(VOCAB, seed=0, logit_scale=4.0)
    gen = SpeculativeGenerator.from_models(target, draft=perturbed_copy(target, noise=0.0), drafter="model", num_draft_tokens=3)
    reqs = requests()
    run = gen.open_rows(RowRequest(reqs[1].prompt_ids, 24, HOT, seed=11), tag=0)
    for r, _ in enumerate(run.steps()):
        if r == 0:
            run.admit(RowRequest(reqs[3].prompt_ids, 24, HOT, seed=8), tag=1)
    assert run.stats.acceptance_rate > 0.95


def test_prefill_readies_one_row_only():
    model = tiny_llama(VOCAB, seed=1)
    ids = torch.tensor([[5, 6, 7], [8, 9, 10]])
    with pytest.raises(ValueError, match="one row to join a batch, got a batch of 2"):
        CausalLMState(model, ids, torch.ones_like(ids)).prefill()


@pytest.mark.parametrize("drafter,lean", [("ngram", False), ("ngram", True), ("model", False), ("lean", True)])
def test_a_row_moved_between_runs_mid_answer_decodes_what_it_decodes_alone(drafter, lean):
    """A row taken out of its run after a round and put into another run (checking drafts given
    for it, right and wrong ones) and back again keeps its cache, output and noise: its text is
    its text alone, and the host row's is unchanged."""
    gen = generator(drafter, lean)
    reqs = requests()
    host_req, guest_req = RowRequest(reqs[2].prompt_ids, 30), RowRequest(reqs[1].prompt_ids, 24, HOT, seed=11)
    alone = {name: decode(gen, r)[0] for name, r in (("host", host_req), ("guest", guest_req))}
    host, home = gen.open_rows(host_req, tag="host"), gen.open_rows(guest_req, tag="guest")
    home.round(), host.round()
    moved, guest = 0, None
    for r in range(40):
        parked = home.take(0)
        if parked.state is None:  # it ended at home
            guest = parked.book.output
            break
        done = len(parked.book.output)
        good = alone["guest"][done : done + 3]
        draft = good[:2] + [(good[2] + 1) % VOCAB] if len(good) == 3 and r % 2 else good
        if not host.size:  # the host ended: the guest goes on at home
            home.put(parked)
            home.round()
            continue
        b = host.put(parked, draft)
        host.round()
        moved += 1
        back = host.take(b)
        if back.state is None:  # it ended in the host's round
            guest = back.book.output
            break
        home.put(back)
        if r % 3 == 0:
            home.round()  # a round at home, drafting by its own drafter
    while host.size:
        host.round()
    assert guest == alone["guest"] and moved >= 3
    assert host.rows.outputs[0] == alone["host"]
