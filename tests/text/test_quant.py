"""Weight-only int8 / int4 targets: the quantised products, their row independence, and exactness
against the same quantised model's own greedy decoding (speculative output bit for bit)."""

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from specvideo.text import SpeculativeGenerator
from specvideo.text.models.precision import resolve_dtype, weight_format
from specvideo.text.runtime import kernels
from specvideo.text.runtime.invariant import KEY_TILE, ROW_TILE, tiled_linear, wide_tile
from specvideo.text.runtime.kquant import KQuantWeight
from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.quant import Int4Weight, Int8Weight, quantize
from tests.helpers import decode_joining, own_greedy, perturbed_copy, random_prompts, tiny_llama, tiny_qwen
from tests.text.test_precision import AMX, _block_equals_steps

FORMATS = ("int8", "int4")


@pytest.mark.parametrize("fmt", FORMATS)
def test_quantised_products_follow_the_dense_weight(fmt):
    weight = torch.randn(64, 256, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    q = quantize(weight, fmt)
    int4 = KQuantWeight if kernels.available() else Int4Weight  # our kernel where it runs, else torch's
    assert isinstance(q, Int8Weight if fmt == "int8" else int4) and q.shape == weight.shape
    error = (q.dequantize() - weight.float()).abs().mean() / weight.float().abs().mean()
    assert error < (0.01 if fmt == "int8" else 0.12)  # round to nearest: 1/254 and 1/30 of a range
    x = torch.randn(8, 256, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    got, reference = q.linear(x).float(), x.float() @ q.dequantize().T  # the kernel reads the codes it holds
    assert (got - reference).abs().max() < 0.02 * reference.abs().max()
    assert q.nbytes < weight.nbytes * (0.55 if fmt == "int8" else 0.35)  # int4: scale and zero per 32


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_rows_product_does_not_depend_on_the_rows_beside_it(fmt):
    """Activations are rounded per row, if at all: a row's bits are the same beside random rows or zero padding,
    which is what lets a k-token check compute each position as a 1-token step does."""
    q = quantize(torch.randn(128, 192).to(torch.bfloat16), fmt)
    x = torch.randn(ROW_TILE, 192).to(torch.bfloat16)
    alone = torch.cat([x[:1], torch.zeros(ROW_TILE - 1, 192, dtype=x.dtype)])
    assert torch.equal(q.linear(alone)[0], q.linear(x)[0])
    tile = wide_tile(q, torch.bfloat16)
    assert torch.equal(tiled_linear(x[:1], q, tile)[0], tiled_linear(x, q, tile)[0])


def test_formats_that_cannot_hold_a_weight_are_refused_by_name():
    with pytest.raises(ValueError, match="int4 needs a weight whose output rows are a multiple of 16"):
        quantize(torch.randn(20, 128), "int4")
    with pytest.raises(ValueError, match="int4 needs .* input width is a multiple of 32"):
        quantize(torch.randn(32, 40), "int4")
    with pytest.raises(ValueError, match="unknown weight format 'int3'"):
        quantize(torch.randn(32, 64), "int3")
    with pytest.raises(ValueError, match="exact=True runs float32; it cannot be combined with dtype='int4'"):
        resolve_dtype("int4", exact=True)
    with pytest.raises(ValueError, match="dtype='int8' runs on LeanLlama"):
        resolve_dtype("int8", architecture="gpt2")
    assert resolve_dtype("int4", flags=AMX) == torch.bfloat16 and weight_format("int4") == "int4"
    assert weight_format("bfloat16") is None and weight_format(torch.bfloat16) is None
    gpt = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_layer=1, n_embd=16, n_head=2)).eval()
    with pytest.raises(ValueError, match="run llama and qwen2 targets only"):
        SpeculativeGenerator.from_models(gpt, drafter="none", weights="int8")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("make", [tiny_llama, tiny_qwen], ids=["llama", "qwen2"])
def test_quantised_blocks_equal_one_token_steps(make, fmt):
    """Blocks of 2-9 tokens across a KEY_TILE boundary: the logits of the 1-token steps, bit for bit."""
    lean = LeanLlama(make().to(torch.bfloat16), invariant=True, weights=fmt)
    prompt = random_prompts(1, 64, seed=5, min_len=KEY_TILE - 3, max_len=KEY_TILE - 3)[0]
    tokens = [int(t) for t in torch.randint(3, 64, (12,), generator=torch.Generator().manual_seed(1))]
    for width in (2, 4, 5, 9):
        assert _block_equals_steps(lean, prompt, tokens, width), width


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_quantised_target_is_close_to_its_dense_self(fmt):
    model = tiny_llama(seed=2).to(torch.bfloat16)
    ids = torch.tensor([[5, 9, 11, 3, 7, 8]])
    from specvideo.text.runtime.state import CausalLMState

    dense = CausalLMState(LeanLlama(model, invariant=True), ids, torch.ones_like(ids)).forward(num_logits=6).float()
    quant = LeanLlama(model, invariant=True, weights=fmt)
    got = CausalLMState(quant, ids, torch.ones_like(ids)).forward(num_logits=6).float()
    assert 0 < (got - dense).abs().max() < (0.05 if fmt == "int8" else 0.3) * dense.abs().max()
    assert quant.weight_bytes() < LeanLlama(model).weight_bytes()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("drafter", ["model", "lean", "hybrid", "ngram"])
def test_quantised_speculative_output_is_the_models_own_greedy_decoding(drafter, fmt):
    target = tiny_llama(seed=0, logit_scale=2.0)
    draft = perturbed_copy(target, noise=0.2).to(torch.bfloat16)
    target = target.to(torch.bfloat16)
    uses_draft = drafter in ("model", "lean", "hybrid")
    gen = SpeculativeGenerator.from_models(
        target, draft=draft if uses_draft else None, drafter=drafter, num_draft_tokens=4, weights=fmt
    )
    assert gen.models.invariant and gen.models.target_runner.weights == fmt
    assert all(p.device.type == "meta" for p in gen.target.model.layers.parameters())  # dense layers freed
    accepted = 0
    for prompt in random_prompts(4, 64, seed=3, max_len=12):
        out = gen.generate([prompt], max_new_tokens=24, stop=None)
        assert out.token_ids[0] == own_greedy(gen, prompt, 24)
        accepted += out.stats.accepted
    assert accepted > 0


@pytest.mark.parametrize("fmt", FORMATS)
def test_from_pretrained_loads_a_quantised_target(tmp_path, fmt):
    tiny_llama(seed=0).save_pretrained(tmp_path / "target")
    gen = SpeculativeGenerator.from_pretrained(str(tmp_path / "target"), dtype=fmt, drafter="ngram")
    assert gen.models.weights == fmt and gen.models.target_runner.weights == fmt
    prompt = random_prompts(1, 64, seed=4)[0]
    assert gen.generate([prompt], max_new_tokens=12, stop=None).token_ids[0] == own_greedy(gen, prompt, 12)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_quantised_step_is_not_padded_where_every_row_keeps_its_bits(fmt, monkeypatch):
    """Weight-only kernels cost in proportion to the rows: a 1-token step runs 1 row, not ROW_TILE,
    where the probe finds each row's bits the same in calls of any width; else it is padded."""
    from specvideo.text.runtime import invariant

    lean = LeanLlama(tiny_llama().to(torch.bfloat16), invariant=True, weights=fmt)
    assert {unit for _, unit in lean._tiles.values()} == {1}
    rows = []
    kind = type(lean.lm_head)
    real = kind.linear
    monkeypatch.setattr(kind, "linear", lambda w, x: rows.append(x.shape[0]) or real(w, x))
    ids = torch.tensor([[5, 9, 11]])
    from specvideo.text.runtime.state import CausalLMState

    state = CausalLMState(lean, ids, torch.ones_like(ids))
    state.forward()  # the prompt's last token alone
    assert rows and set(rows[-3:]) == {1}
    monkeypatch.setattr(invariant, "_ANY_ROWS", {})
    monkeypatch.setattr(invariant, "linear", lambda x, w: torch.zeros(x.shape[0], w.shape[0]) + x.shape[0])  # rows change bits
    assert invariant.row_unit(lean.lm_head, torch.bfloat16) == ROW_TILE


@pytest.mark.parametrize("fmt", FORMATS)
def test_quantised_rows_of_a_continuous_batch_decode_what_they_decode_alone(fmt):
    """What the server runs: rows that join a running batch decode their own tokens, bit for bit."""
    from specvideo.text.book import RowRequest

    gen = SpeculativeGenerator.from_models(tiny_llama(seed=0, logit_scale=2.0).to(torch.bfloat16), drafter="ngram", weights=fmt)
    reqs = [RowRequest(p, n) for p, n in zip(random_prompts(3, 64, seed=8, min_len=5, max_len=70), (30, 12, 20))]
    alone = [decode_joining(gen, r)[0] for r in reqs]
    together = decode_joining(gen, reqs[0], [(1, reqs[1]), (2, reqs[2])])
    assert [together[i] for i in range(3)] == alone
    assert alone == [own_greedy(gen, r.prompt_ids, len(a)) for r, a in zip(reqs, alone)]


@pytest.mark.parametrize("fmt", [None, "int8"])
@pytest.mark.parametrize("drafter", ["self", "self-hybrid"])
def test_an_int4_copy_of_the_target_drafts_for_it_exactly(drafter, fmt):
    target = tiny_llama(seed=0, logit_scale=2.0).to(torch.bfloat16)
    gen = SpeculativeGenerator.from_models(target, drafter=drafter, num_draft_tokens=4, weights=fmt)
    assert gen.draft is None and gen.runner.weights == "int4" and not gen.runner.invariant
    drafted = accepted = 0
    for prompt in random_prompts(4, 64, seed=3, max_len=12):
        out = gen.generate([prompt], max_new_tokens=24, stop=None)
        assert out.token_ids[0] == own_greedy(gen, prompt, 24)
        drafted, accepted = drafted + out.stats.drafted, accepted + out.stats.accepted
    assert accepted > drafted / 2  # the copy mostly agrees with the model it was quantised from


def test_an_int4_target_is_told_it_is_its_own_int4_copy():
    with pytest.raises(ValueError, match="int4 copy of the target, which an int4 target already is"):
        SpeculativeGenerator.from_models(tiny_llama(seed=0).to(torch.bfloat16), drafter="self", weights="int4")


def test_a_stale_build_lock_goes_and_a_fresh_one_stays(tmp_path):
    """A build killed mid-way leaves torch's lock, on which every later load would wait forever."""
    import os
    import time

    lock = tmp_path / "lock"
    lock.write_text("")
    kernels._clear_stale_lock(lock)
    assert lock.exists()  # another process may be building right now
    old = time.time() - kernels.STALE_LOCK_S - 60
    os.utime(lock, (old, old))
    with pytest.warns(UserWarning, match="stale kernel build lock"):
        kernels._clear_stale_lock(lock)
    assert not lock.exists()
    kernels._clear_stale_lock(lock)  # no lock: nothing to do
