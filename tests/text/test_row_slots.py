"""A row's bits do not depend on the rows beside it: in an invariant model every row keeps its keys
in its own contiguous slots (slot = position), whatever holes the batch's shared slot axis has."""

import pytest
import torch

from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.state import CausalLMState
from tests.helpers import random_prompts, tiny_llama

# (drafted tokens, kept) per round: rows keep different counts, so the shared slot axis gets holes
ROUNDS = [(4, 1), (4, 4), (4, 0), (4, 2), (4, 3)]


def _decode(lean, prompt, keeps, joining=None):
    """Logits (rounds, 4, V) of ``prompt`` verified round by round; ``joining``: (prompt, keeps) of a
    second row admitted before the first round, whose keeps leave holes in the first row's axis."""
    state = CausalLMState(lean, torch.tensor([prompt]), torch.ones(1, len(prompt), dtype=torch.long))
    state.prefill()
    if joining is not None:
        other = CausalLMState(lean, torch.tensor([joining[0]]), torch.ones(1, len(joining[0]), dtype=torch.long))
        other.prefill()
        state.admit(other)
    mine, theirs, out = torch.Generator().manual_seed(5), torch.Generator().manual_seed(6), []
    for r, keep in enumerate(keeps):
        mark = state.num_tokens.clone()
        block = torch.randint(3, 64, (1, 4), generator=mine)  # (1, 4) the same alone and together
        if joining is not None:
            block = torch.cat([block, torch.randint(3, 64, (1, 4), generator=theirs)])  # (2, 4)
        logits = state.forward(block, num_logits=4 + (r == 0))[:, -4:]  # (B, 4, V)
        out.append(logits[0])
        state.truncate(mark + torch.tensor([keep] + ([joining[1][r]] if joining else [])))
    return torch.stack(out)


@pytest.mark.parametrize("fmt", [None, "int4"])
@pytest.mark.parametrize("lengths", [(40, 90), (530, 300), (300, 600)])
def test_a_rows_logits_do_not_depend_on_holes_left_by_the_rows_beside_it(fmt, lengths):
    # past 512 keys the CPU's attention splits the keys into blocks: a hole moves a key across them
    target = tiny_llama(seed=0, hidden=512, context=1024)  # head dim 128, as the shipped models
    target = target.to(torch.bfloat16)
    lean = LeanLlama(target, invariant=True, weights=fmt)
    mine, theirs = random_prompts(2, 64, seed=3, min_len=lengths[0], max_len=lengths[0] + 1)[0], random_prompts(
        1, 64, seed=4, min_len=lengths[1], max_len=lengths[1] + 1
    )[0]
    alone = _decode(lean, mine, [k for _, k in ROUNDS])
    together = _decode(lean, mine, [k for _, k in ROUNDS], joining=(theirs, [4 - k for _, k in ROUNDS]))
    assert torch.equal(together, alone)


@pytest.mark.parametrize("fmt", [None, "int4"])
def test_a_batch_of_prompts_decodes_each_as_it_decodes_alone(fmt):
    from specvideo.text.generator import SpeculativeGenerator
    from tests.helpers import perturbed_copy

    target = tiny_llama(seed=0, hidden=512, context=1024, logit_scale=4.0)
    draft = perturbed_copy(target, 0.2).to(torch.bfloat16)  # accepts some drafts: rows keep different counts
    gen = SpeculativeGenerator.from_models(
        target.to(torch.bfloat16), draft=draft, drafter="lean", num_draft_tokens=4, **({"weights": fmt} if fmt else {})
    )
    # left padding: the short prompt's chunks would end elsewhere in the padded batch than alone
    prompts = [random_prompts(1, 64, seed=s, min_len=n, max_len=n + 1)[0] for s, n in ((1, 300), (2, 560), (3, 40))]
    alone = [gen.generate([p], max_new_tokens=40).token_ids[0] for p in prompts]
    assert gen.generate(prompts, max_new_tokens=40).token_ids == alone
