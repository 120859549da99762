"""A GGUF target's decoder layers in one C++ call each (``runtime.fused_layer``): built over k-quant
blocks only, a k-token block's logits equal to k 1-token steps' bit for bit with no padded rows, close
to the PyTorch ops' (the int8 rounding of activations makes any two float paths differ a little), and
rows of a batch that stand apart decoded exactly as each alone."""

import pytest
import torch

from specvideo.text.models import gguf as gguf_models
from specvideo.text.models.gguf_weights import load_layers
from specvideo.text.runtime import fused_layer, kernels
from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.state import CausalLMState
from tests.text.test_gguf import write_tiny_qwen2_gguf

pytestmark = pytest.mark.skipif(not kernels.built(), reason=f"the k-quant kernel does not run here: {kernels.why_not()}")
BLOCKS = {"attn_v": "Q8_0", "ffn_down": "Q8_0", "*": "Q4_1"}  # q/k and v in two formats: a stacked q/k/v
FILE = {}  # the fixture's shell model and GGUF path


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("fused") / "tiny.gguf"
    _, tok = write_tiny_qwen2_gguf(path, quant=BLOCKS)
    shell = gguf_models.load_gguf_target(gguf_models.metadata_dir(path, path.parent / "meta"))
    FILE.update(shell=shell, path=str(path))
    return LeanLlama(shell, invariant=True, weights="gguf", gguf=load_layers(str(path), shell.config)), tok, str(path.parent / "meta")


def logits(lean, prompt: torch.Tensor, block: torch.Tensor, steps: bool) -> torch.Tensor:
    state = CausalLMState(lean, prompt, torch.ones_like(prompt))
    state.forward()  # the prompt but its last token
    if not steps:
        return state.forward(block, num_logits=block.shape[1])
    return torch.cat([state.forward(block[:, j : j + 1], num_logits=1) for j in range(block.shape[1])], 1)


def test_layers_run_in_one_call_and_a_block_is_its_steps_bit_for_bit(tiny):
    lean, _, _ = tiny
    assert lean._fused is not None and len(lean._fused) == 2 and type(lean.layers[0].qkv).__name__ == "Stacked"
    prompt = torch.randint(5, 290, (1, 70), generator=torch.Generator().manual_seed(0))  # past a key tile
    block = torch.randint(5, 290, (1, 5), generator=torch.Generator().manual_seed(1))
    fused_block, fused_steps = logits(lean, prompt, block, False), logits(lean, prompt, block, True)
    assert torch.equal(fused_block, fused_steps)
    layers, lean._fused = lean._fused, None
    try:
        torch_steps = logits(lean, prompt, block, True)
    finally:
        lean._fused = layers
    cosine = torch.nn.functional.cosine_similarity(fused_steps.flatten(), torch_steps.flatten(), dim=0)
    assert cosine > 0.999 and not torch.equal(fused_steps, torch_steps)  # two float paths, one model


def test_a_projection_not_in_blocks_keeps_the_pytorch_ops(tiny):
    lean, _, _ = tiny
    dense = lean.layers[1].o_proj
    lean.layers[1].o_proj = dense.dequantize()
    try:
        assert fused_layer.build(lean) is None
    finally:
        lean.layers[1].o_proj = dense


def test_rows_that_stand_apart_decode_as_each_alone(tiny, monkeypatch):
    from specvideo.text import SpeculativeGenerator
    from tests.helpers import own_greedy

    _, tok, meta = tiny
    apart, run = [], fused_layer.run

    def recorded(layers, lean, x, positions, slot, *rest):  # slot (B, n): rows at different slots?
        apart.append(bool((slot[:, -1] != slot[0, -1]).any()))
        return run(layers, lean, x, positions, slot, *rest)

    monkeypatch.setattr(fused_layer, "run", recorded)
    gen = SpeculativeGenerator.from_pretrained(meta, dtype="gguf", drafter="ngram", num_draft_tokens=3)
    assert gen.models.target_runner._fused is not None
    prompts = [tok("def quicksort(arr): return arr")["input_ids"], tok("x = 1")["input_ids"]]
    out = gen.generate(prompts, max_new_tokens=10, stop=None)
    assert any(apart)  # the batch's rows ran through the layers at their own slots
    assert out.token_ids == [own_greedy(gen, p, 10) for p in prompts]


def test_a_runner_built_without_invariance_lets_its_state_restore_any_prefix(tiny):
    """Its calls are invariant either way; asked for no invariance (a local draft), its state prefills
    in one call and a prompt cache may restore any prefix, not whole 128-token chunks only."""
    lean, _, _ = tiny
    loose = LeanLlama(FILE["shell"], weights="gguf", gguf=load_layers(FILE["path"], FILE["shell"].config))
    prompt = torch.randint(5, 290, (1, 150), generator=torch.Generator().manual_seed(3))
    exact, free = CausalLMState(lean, prompt, torch.ones_like(prompt)), CausalLMState(loose, prompt, torch.ones_like(prompt))
    assert loose.invariant and loose._fused is not None  # the same calls
    assert (exact.restorable(149), free.restorable(149)) == (128, 149)


def test_a_gguf_target_is_told_self_speculation_needs_its_dense_weights(tiny):
    """An int4 copy is made from dense weights; a target on its file's blocks keeps none."""
    from specvideo.text import SpeculativeGenerator

    with pytest.raises(ValueError, match="a GGUF target keeps none"):
        SpeculativeGenerator.from_pretrained(tiny[2], dtype="gguf", drafter="self-hybrid")
