"""The hybrid drafter: prompt lookup when the context repeats, the lean draft otherwise."""

import torch

from specvideo.core.types import Verdict
from specvideo.text import SpeculativeGenerator
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
        assert run.verifier.outputs[0] == reference(target, prompt, NEW)
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


def test_the_draft_catches_up_on_the_rounds_it_sat_out():
    """After rounds with lookups, the draft's cache + pending tokens hold exactly the prompt and the
    output so far: its next logits equal a fresh forward over that sequence."""
    target, draft = models()
    gen = SpeculativeGenerator.from_models(target, draft=draft, drafter="hybrid", num_draft_tokens=4, schedule="constant")
    prompt = [5, 6, 7, 5, 6, 7, 5, 6]
    run = gen.start(prompt, max_new_tokens=4 * NEW, stop=None)
    for _ in run.steps():
        if run.drafter.lookup_rounds > 0 and len(run.verifier.outputs[0]) >= NEW:
            break  # still generating: the row is in the draft's cache
    assert run.drafter.lookup_rounds > 0 and not run.verifier.finished
    sequence = torch.tensor([prompt + run.verifier.outputs[0]])  # (1, T)
    fresh = CausalLMState(gen.runner, sequence, torch.ones_like(sequence)).forward()
    torch.testing.assert_close(run.drafter.model.state.forward(), fresh, atol=1e-4, rtol=1e-4)


def test_lookup_only_when_every_row_matches():
    _, draft = models()
    lean = LeanLlama(draft)
    hybrid = HybridDrafter(ModelDrafter(lean, RowSampler.of(2)), NGramDrafter(3, min_ngram=2))
    ids = torch.tensor([[9, 3, 4, 9, 3, 4, 9, 3], [9, 10, 11, 12, 13, 14, 15, 16]])  # row 1 never repeats
    hybrid.start(ids, torch.ones_like(ids))
    draft_1 = hybrid.propose(3, None)
    assert hybrid.lookup_rounds == 0 and hybrid.calls == 3  # the model drafted for both rows
    verdict = Verdict(num_accepted=torch.tensor([0, 0]), next_item=torch.tensor([4, 9]))
    hybrid.commit(draft_1, verdict)  # row 1 now ends in "16 9": still no 2-token match
    hybrid.propose(3, None)
    assert hybrid.lookup_rounds == 0 and hybrid.calls == 6  # the model again, after its own round

    repeating = torch.tensor([[9, 3, 4, 9, 3, 4, 9, 3], [7, 8, 1, 7, 8, 1, 7, 8]])
    hybrid.start(repeating, torch.ones_like(repeating))
    draft_2 = hybrid.propose(3, None)
    assert hybrid.lookup_rounds == 1 and hybrid.calls == 6  # no new draft forward
    assert draft_2.items.tolist() == [[4, 9, 3], [1, 7, 8]]
