"""The hybrid drafter: prompt lookup when the context repeats, the lean draft otherwise."""

import torch

from specvideo.text import SpeculativeGenerator
from specvideo.text.book import RowBook, RowRequest
from specvideo.text.drafting.drafters import HybridDrafter, ModelDrafter, NGramDrafter
from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.state import CausalLMState
from specvideo.text.sampling import RowSampler
from tests.helpers import perturbed_copy, random_prompts, tiny_llama
from tests.text.test_greedy_exact import reference

VOCAB, NEW = 64, 24


def models():
    target = tiny_llama(VOCAB, seed=0, logit_scale=8.0)
    return target, perturbed_copy(target, noise=0.15)


def run_to_end(gen, prompt, **kwargs):
    run = gen.start(prompt, max_new_tokens=NEW, stop=None, **kwargs)
    for _ in run.steps():
        pass
    return run


def test_greedy_output_equals_the_target_and_both_sources_draft():
    target, draft = models()
    gen = SpeculativeGenerator.from_models(target, draft=draft, drafter="hybrid", num_draft_tokens=4, schedule="constant")
    lookups = model_calls = 0
    for prompt in random_prompts(8, VOCAB, seed=3, max_len=16):
        run = run_to_end(gen, prompt)
        assert run.rows.outputs[0] == reference(target, prompt, NEW)
        lookups += run.drafter.lookup_rounds
        model_calls += run.drafter.calls
    assert lookups > 0 and model_calls > 0  # greedy continuations repeat, so lookups happen


def test_ragged_batch_equals_each_prompt_alone():
    target, draft = models()
    gen = SpeculativeGenerator.from_models(
        target, draft=draft, drafter="hybrid", num_draft_tokens=3, schedule="heuristic"
    )
    prompts = [[7, 8, 9, 7, 8], [4, 5, 6, 4, 5, 6, 4, 5], [11, 12], [30, 31, 32, 30, 31, 33, 30]]
    out = gen.generate(prompts, max_new_tokens=NEW, stop=None)
    assert out.token_ids == [reference(target, p, NEW) for p in prompts]


def test_the_draft_re_syncs_to_the_rounds_it_sat_out():
    """After rounds with lookups, the draft re-synced to the row's history holds exactly the prompt
    and the output so far: its next logits equal a fresh forward over that sequence."""
    target, draft = models()
    gen = SpeculativeGenerator.from_models(target, draft=draft, drafter="hybrid", num_draft_tokens=4, schedule="constant")
    prompt = [5, 6, 7, 5, 6, 7, 5, 6]
    run = gen.start(prompt, max_new_tokens=4 * NEW, stop=None)
    for _ in run.steps():
        if run.drafter.lookup_rounds > 0 and len(run.rows.outputs[0]) >= NEW:
            break  # still generating: the row is in the draft's cache
    assert run.drafter.lookup_rounds > 0 and not run.rows.finished
    sequence = torch.tensor([prompt + run.rows.outputs[0]])  # (1, T)
    fresh = CausalLMState(gen.runner, sequence, torch.ones_like(sequence)).forward()
    run.drafter.model.sync()
    torch.testing.assert_close(run.drafter.model.state.forward(), fresh, atol=1e-4, rtol=1e-4)


def hybrid_of(lean, prompts: list[list[int]]):
    """A hybrid drafter over a book of ``prompts`` (one run's rows), started on them."""
    rows = RowBook([RowRequest(p, 16) for p in prompts])
    hybrid = HybridDrafter(ModelDrafter(lean, RowSampler(rows=rows)), NGramDrafter(3, min_ngram=2, rows=rows))
    ids = torch.tensor(prompts)
    hybrid.start(ids, torch.ones_like(ids))
    return hybrid, rows


def test_lookup_only_when_every_row_matches():
    _, draft = models()
    lean = LeanLlama(draft)
    hybrid, rows = hybrid_of(lean, [[9, 3, 4, 9, 3, 4, 9, 3], [9, 10, 11, 12, 13, 14, 15, 16]])  # row 1 never repeats
    hybrid.propose(3, None)
    assert hybrid.lookup_rounds == 0 and hybrid.calls == 3  # the model drafted for both rows
    rows.emit(0, [4])  # the target rejected both drafts; row 1 now ends in "16 9": still no 2-token match
    rows.emit(1, [9])
    hybrid.propose(3, None)
    assert hybrid.lookup_rounds == 0 and hybrid.calls == 6  # the model again, re-synced to its rows

    hybrid, _ = hybrid_of(lean, [[9, 3, 4, 9, 3, 4, 9, 3], [7, 8, 1, 7, 8, 1, 7, 8]])
    draft_2 = hybrid.propose(3, None)
    assert hybrid.lookup_rounds == 1 and hybrid.calls == 0  # no draft forward
    assert draft_2.items.tolist() == [[4, 9, 3], [1, 7, 8]]
