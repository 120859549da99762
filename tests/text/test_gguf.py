"""GGUF models converted once to transformers directories: a tiny Qwen2 GGUF file written in the
test (float tensors, a byte-level BPE tokenizer with FIM tokens and a chat template) round-trips to
the same logits and tokens; the conversion is cached and redone when the file changes."""

import json

import pytest
import torch
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import quantize as quantize_blocks
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

from specvideo.text.models import gguf as gguf_module
from specvideo.text.models.gguf import converted_dir
from tests.helpers import tiny_tokenizer

FIM = ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"]
PER_LAYER = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}
TOP = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}


def write_tiny_qwen2_gguf(path, fim: bool = True, seed: int = 0, quant: dict | None = None):
    """A tiny Qwen2ForCausalLM and its tokenizer, written as a GGUF file the way llama.cpp lays one out.
    quant: block type per layer tensor kind (``{"attn_v": "Q8_0", "*": "Q4_1"}``; float32 where not
    named); the model returned keeps its float weights."""
    tok = tiny_tokenizer(300)
    if fim:
        tok.add_special_tokens({"additional_special_tokens": FIM})
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    model = Qwen2ForCausalLM(config).eval()
    w = GGUFWriter(str(path), "qwen2")
    w.add_context_length(256)
    w.add_embedding_length(32)
    w.add_block_count(2)
    w.add_feed_forward_length(64)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(config.rms_norm_eps)
    tokens = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in set(tok.all_special_tokens) else 1 for t in tokens])
    merges = json.loads(tok.backend_tokenizer.to_str())["model"]["merges"]
    w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    w.add_bos_token_id(tok.bos_token_id)
    w.add_eos_token_id(tok.eos_token_id)
    w.add_chat_template(tok.chat_template)
    for name, tensor in model.state_dict().items():
        if name in TOP:
            key = TOP[name]
        else:
            parts = name.split(".")  # model.layers.<i>.<module...>.<weight|bias>
            key = f"blk.{parts[2]}.{PER_LAYER['.'.join(parts[3:-1])]}.{parts[-1]}"
        kind = key.split(".")[2] if key.startswith("blk.") else None
        block = None if kind is None or tensor.dim() != 2 else (quant or {}).get(kind, (quant or {}).get("*"))
        if block is None:
            w.add_tensor(key, tensor.float().numpy())
        else:
            qtype = getattr(GGMLQuantizationType, block)
            w.add_tensor(key, quantize_blocks(tensor.float().numpy(), qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return model, tok


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_gguf_file_round_trips_to_the_same_model(tmp_path, dtype):
    model, tok = write_tiny_qwen2_gguf(tmp_path / "tiny.gguf")
    out = converted_dir(tmp_path / "tiny.gguf", tmp_path / "converted", dtype=dtype)
    loaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    reloaded_tok = AutoTokenizer.from_pretrained(out)
    ids = torch.tensor([tok("def quicksort(arr):")["input_ids"]])
    assert type(loaded).__name__ == "Qwen2ForCausalLM"
    tolerance = 0 if dtype == "float32" else 0.05
    assert (loaded(ids).logits - model(ids).logits).abs().max() <= tolerance
    assert reloaded_tok("def quicksort(arr):")["input_ids"] == ids[0].tolist()
    assert [reloaded_tok.convert_tokens_to_ids(t) for t in FIM] == [tok.convert_tokens_to_ids(t) for t in FIM]
    assert reloaded_tok.chat_template


def test_the_conversion_is_cached_and_redone_when_the_file_changes(tmp_path, monkeypatch):
    source = tmp_path / "model.gguf"
    source.write_bytes(b"fake")
    monkeypatch.setenv("SPECVIDEO_CACHE", str(tmp_path / "cache"))
    calls = []

    def fake_convert(src, out, stamp, dtype):
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text("{}")
        (out / gguf_module.SOURCE_FILE).write_text(json.dumps(stamp))
        calls.append(src)

    monkeypatch.setattr(gguf_module, "_convert", fake_convert)
    first = converted_dir(source)
    assert (
        converted_dir(source) == first
        and len(calls) == 1
        and first == tmp_path / "cache" / "converted" / "model"
    )
    source.write_bytes(b"another file")
    converted_dir(source)
    assert len(calls) == 2
    converted_dir(source, dtype="bfloat16")  # another stored dtype converts again
    assert len(calls) == 3


def test_a_file_that_is_not_a_model_is_refused(tmp_path):
    (tmp_path / "notes.gguf").write_bytes(b"not a gguf file")
    with pytest.raises(ValueError, match="cannot read .*notes.gguf as a causal LM"):
        converted_dir(tmp_path / "notes.gguf", tmp_path / "out")
    with pytest.raises(ValueError, match="GGUF file not found"):
        converted_dir(tmp_path / "missing.gguf")


def test_the_code_pairs_target_is_read_as_it_is_and_its_draft_converted_only_when_asked(monkeypatch, tmp_path):
    """`--dtype gguf` reads the target from the file as it is (its metadata only, no weights written)
    and converts the draft only when a model drafter asks for it, in auto's dtype (no float32 copy
    of the 0.5B written for a drafter that runs none)."""
    from specvideo.text.models import names

    files = [tmp_path / "target.gguf", tmp_path / "draft.gguf"]
    asked, read = {}, []
    monkeypatch.setattr(names, "_runs_as_it_is", lambda f, device: False)
    monkeypatch.setattr(names, "_qwen_coder_files", lambda: files)
    monkeypatch.setattr(names, "_stored", lambda f, dtype, device: {"gguf": "float32", "auto": "bfloat16", "float32": "float32"}[dtype])
    monkeypatch.setattr(names, "converted_dir", lambda f, dtype: asked.setdefault(f.stem, dtype) and tmp_path / f.stem)
    monkeypatch.setattr(names, "metadata_dir", lambda f: read.append(f.stem) or tmp_path / f"{f.stem}-meta")
    choice = names.resolve_model("qwen-coder", "gguf")
    assert (read, asked, choice.target) == (["target"], {}, str(tmp_path / "target-meta"))
    assert names.pair_draft(choice, {"drafter": "ngram"}) is None and asked == {}
    assert choice.draft == str(tmp_path / "draft") and asked == {"draft": "bfloat16"}
    assert names.resolve_model("qwen-coder", "float32").draft == str(tmp_path / "draft")
    assert asked == {"draft": "bfloat16", "target": "float32"}
    # where the kernel runs the draft's blocks (every tensor type mapped), it is read as it is too
    monkeypatch.setattr(names, "_runs_as_it_is", lambda f, device: True)
    assert choice.draft == str(tmp_path / "draft-meta") and read[-1] == "draft"
