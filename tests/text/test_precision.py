"""The number format: dtype="auto" by the CPU's flags with a float32 fallback, and bf16 exactness
through LeanLlama(invariant=True): a k-token block's logits equal the 1-token steps' bit for bit,
so speculative greedy output equals the model's own greedy decoding."""

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from specvideo.device import native_bf16
from specvideo.text import SpeculativeGenerator
from specvideo.text.models.precision import resolve_dtype
from specvideo.text.runtime.invariant import KEY_TILE
from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.state import CausalLMState
from tests.helpers import decode_joining, own_greedy, perturbed_copy, random_prompts, tiny_llama, tiny_qwen

ZEN4 = frozenset({"avx2", "avx512f", "avx512_bf16"})
AMX = frozenset({"avx512f", "amx_bf16", "amx_tile"})
OLD = frozenset({"avx2", "avx512f"})  # AVX-512 without bf16 dot products: oneDNN would emulate bf16


def test_auto_picks_bf16_where_the_cpu_has_bf16_units_else_float32():
    assert resolve_dtype("auto", "cpu", flags=ZEN4) == torch.bfloat16
    assert resolve_dtype("auto", "cpu", flags=AMX) == torch.bfloat16
    assert resolve_dtype("auto", "cpu", flags=OLD) == torch.float32
    assert resolve_dtype("auto", "cpu", flags=frozenset()) == torch.float32  # flags unreadable
    assert resolve_dtype(None, "cpu", flags=OLD) == torch.float32
    # an architecture LeanLlama cannot run invariantly keeps float32 (exactness first)
    assert resolve_dtype("auto", "cpu", architecture="gpt2", flags=ZEN4) == torch.float32
    assert resolve_dtype("auto", "cpu", architecture="qwen2", flags=ZEN4) == torch.bfloat16
    assert resolve_dtype("auto", "meta", flags=ZEN4) == torch.float32  # other devices
    assert not native_bf16("cpu", OLD) and native_bf16("cpu", ZEN4) == torch.backends.mkldnn.is_available()


def test_explicit_dtypes_and_exact():
    assert resolve_dtype("bfloat16", flags=OLD) == torch.bfloat16  # asked for: given, even if emulated
    assert resolve_dtype(torch.float16) == torch.float16
    assert resolve_dtype("auto", exact=True, flags=ZEN4) == torch.float32
    assert resolve_dtype("float32", exact=True) == torch.float32
    with pytest.raises(ValueError, match="exact=True runs float32; it cannot be combined with dtype='bfloat16'"):
        resolve_dtype("bfloat16", exact=True)
    with pytest.raises(ValueError, match="unknown dtype 'fp8'"):
        resolve_dtype("fp8")


def _block_equals_steps(model, prompt: list[int], tokens: list[int], width: int) -> bool:
    """Feed ``tokens`` one a step, then in blocks of ``width`` from the same prompt: equal logits?"""
    ids = torch.tensor([prompt])
    steps = CausalLMState(model, ids, torch.ones_like(ids))
    alone = [steps.forward()[0, 0]] + [steps.forward(torch.tensor([[t]]))[0, 0] for t in tokens]
    blocks = CausalLMState(model, ids, torch.ones_like(ids))
    got = [blocks.forward()[0, 0]]
    for start in range(0, len(tokens), width):
        chunk = tokens[start : start + width]
        got.extend(blocks.forward(torch.tensor([chunk]), num_logits=len(chunk))[0])
    return all(torch.equal(a, b) for a, b in zip(alone, got, strict=True))


@pytest.mark.parametrize("make", [tiny_llama, tiny_qwen], ids=["llama", "qwen2"])
def test_invariant_blocks_equal_one_token_steps_in_bf16(make):
    """Blocks of 2-9 tokens, across a KEY_TILE boundary of the attention calls."""
    model = make().to(torch.bfloat16)
    lean = LeanLlama(model, invariant=True)
    prompt = random_prompts(1, 64, seed=5, min_len=KEY_TILE - 3, max_len=KEY_TILE - 3)[0]  # blocks straddle slot KEY_TILE
    tokens = [int(t) for t in torch.randint(3, 64, (12,), generator=torch.Generator().manual_seed(1))]
    for width in (2, 3, 4, 5, 9):
        assert _block_equals_steps(lean, prompt, tokens, width), width


def test_invariant_mode_gives_the_model_float32_logits_up_to_bf16_rounding():
    model = tiny_llama(seed=2)
    ids = torch.tensor([[5, 9, 11, 3, 7, 8]])
    reference = CausalLMState(LeanLlama(model), ids, torch.ones_like(ids)).forward(num_logits=6)
    bf16 = LeanLlama(model.to(torch.bfloat16), invariant=True)
    got = CausalLMState(bf16, ids, torch.ones_like(ids)).forward(num_logits=6)
    assert (got - reference).abs().max() < 0.05 * reference.abs().max()


@pytest.mark.parametrize("drafter", ["model", "lean", "hybrid", "ngram"])
def test_bf16_speculative_output_is_the_models_own_greedy_decoding(drafter):
    target = tiny_llama(seed=0, logit_scale=2.0)
    draft = perturbed_copy(target, noise=0.2)
    target, draft = target.to(torch.bfloat16), draft.to(torch.bfloat16)
    uses_draft = drafter in ("model", "lean", "hybrid")
    gen = SpeculativeGenerator.from_models(target, draft=draft if uses_draft else None, drafter=drafter, num_draft_tokens=4)
    assert gen.models.invariant and gen.models.target_runner.invariant  # chosen for a bf16 target
    accepted = 0
    for prompt in random_prompts(4, 64, seed=3, max_len=12):
        out = gen.generate([prompt], max_new_tokens=24, stop=None)
        assert out.token_ids[0] == own_greedy(gen, prompt, 24)
        accepted += out.stats.accepted
    assert accepted > 0


def test_float32_targets_and_other_architectures_are_not_made_invariant():
    assert not SpeculativeGenerator.from_models(tiny_llama(), drafter="none").models.invariant
    gpt = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_layer=1, n_embd=16, n_head=2)).eval().to(torch.bfloat16)
    gen = SpeculativeGenerator.from_models(gpt, drafter="none")
    assert not gen.models.invariant and not gen.models.lean_target  # transformers runs it; exactness measured
    with pytest.raises(ValueError, match="run llama and qwen2 targets only"):
        SpeculativeGenerator.from_models(gpt, drafter="none", invariant=True)


@pytest.mark.parametrize("drafter", ["ngram-tree", "head-tree"])
def test_tree_drafters_are_refused_on_the_invariant_bf16_path(drafter):
    """A tree's attention mask is not computed canonically, so a bf16 tree check could round apart
    from 1-token steps (measured: 0 of 4 tuning prompts equal to our own loop): refused, with float32
    named; from_pretrained(dtype="auto") picks float32 for trees."""
    import copy

    from tests.text.test_head import exact_head

    target = tiny_llama(seed=0, layers=1)
    draft = exact_head(target) if drafter == "head-tree" else None
    bf16 = copy.deepcopy(target).to(torch.bfloat16)  # Module.to converts in place
    with pytest.raises(ValueError, match="float32"):
        SpeculativeGenerator.from_models(bf16, draft=None if draft is None else exact_head(bf16), drafter=drafter)
    assert not SpeculativeGenerator.from_models(target, draft=draft, drafter=drafter).models.invariant  # float32: allowed


def test_wide_calls_are_used_only_where_the_probe_found_them_bit_identical(monkeypatch):
    from specvideo.text.runtime import invariant

    weight = torch.randn(48, 32).to(torch.bfloat16)
    x = torch.randn(2, 7, 32).to(torch.bfloat16)  # 14 rows: one wide call or four tiles of 4
    tiles = invariant.tiled_linear(x, weight, invariant.ROW_TILE)
    if invariant.wide_tile(weight) == invariant.WIDE_TILE:
        assert torch.equal(invariant.tiled_linear(x, weight, invariant.WIDE_TILE), tiles)
    calls = []
    monkeypatch.setattr(invariant.F, "linear", lambda a, w: calls.append(a.shape[0]) or a @ w.T)
    invariant.tiled_linear(x, weight, invariant.WIDE_TILE)
    invariant.tiled_linear(x, weight, invariant.ROW_TILE)
    assert calls == [16, 4, 4, 4, 4]  # padded to a multiple of ROW_TILE, then one call or tiles
    monkeypatch.setattr(invariant, "_WIDE", {})
    monkeypatch.setattr(invariant, "_probe", lambda w, rows, dtype: False)  # a CPU whose kernels change with M
    lean = LeanLlama(tiny_llama().to(torch.bfloat16), invariant=True)
    assert set(lean._tiles.values()) == {(invariant.ROW_TILE, invariant.ROW_TILE)}  # (widest call, row unit)


def test_bf16_rows_of_a_continuous_batch_decode_what_they_decode_alone():
    from specvideo.text.book import RowRequest

    target = tiny_llama(seed=0, logit_scale=2.0).to(torch.bfloat16)
    gen = SpeculativeGenerator.from_models(target, drafter="ngram", num_draft_tokens=3)
    assert gen.models.invariant
    prompts = random_prompts(3, 64, seed=8, min_len=5, max_len=70)
    reqs = [RowRequest(p, n) for p, n in zip(prompts, (30, 12, 20))]

    alone = [decode_joining(gen, r)[0] for r in reqs]
    together = decode_joining(gen, reqs[0], [(1, reqs[1]), (2, reqs[2])])
    assert [together[i] for i in range(3)] == alone
    assert alone == [own_greedy(gen, r.prompt_ids, len(a)) for r, a in zip(reqs, alone)]
