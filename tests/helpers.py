"""Tiny random causal LMs built inside the tests (no downloads)."""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM


def tiny_llama(
    vocab_size: int = 64,
    seed: int = 0,
    hidden: int = 32,
    layers: int = 2,
    context: int = 256,
    logit_scale: float = 1.0,
) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=context,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(logit_scale)
    return model


def tiny_qwen(vocab_size: int = 64, layers: int = 2, seed: int = 3) -> Qwen2ForCausalLM:
    """A random Qwen2 (a Llama with q/k/v biases, here non-zero)."""
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
    )
    model = Qwen2ForCausalLM(config).eval()
    with torch.no_grad():  # non-zero biases, so the test sees them
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0, 0.5)
    return model


def perturbed_copy(model: LlamaForCausalLM, noise: float, seed: int = 1) -> LlamaForCausalLM:
    """A draft that mostly agrees with the target: the target's weights plus Gaussian noise."""
    draft = LlamaForCausalLM(model.config).eval()
    draft.load_state_dict(model.state_dict())
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(noise * p.std() * torch.randn(p.shape, generator=g))
    return draft


def random_prompts(
    n: int, vocab_size: int, seed: int, min_len: int = 1, max_len: int = 12
) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    prompts = []
    for _ in range(n):
        length = int(torch.randint(min_len, max_len + 1, (1,), generator=g))
        prompts.append(torch.randint(3, vocab_size, (length,), generator=g).tolist())
    return prompts


def tiny_tokenizer(vocab_size: int = 300):
    """A byte-level BPE tokenizer trained on a few lines, wrapped as a transformers fast tokenizer."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    text = ["def quicksort(arr):\n    return sorted(arr)\n", "for i in range(10):\n    print(i)\n"] * 20
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        text, vocab_size=vocab_size, min_frequency=1, special_tokens=["<pad>", "<s>", "</s>"]
    )
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token="<pad>", bos_token="<s>", eos_token="</s>")
    tok.chat_template = CHAT_TEMPLATE
    return tok


# a ChatML-like template over plain text; the reply's end of turn is the EOS token </s>
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}</s>\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def save_model_dir(path, vocab_size: int, seed: int, tokenizer=None, **kwargs):
    model = tiny_llama(vocab_size, seed=seed, **kwargs)
    model.save_pretrained(path)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
    return model


def tiny_unet(size: int = 16, context_frames: int = 2, seed: int = 0, norm_num_groups: int = 8):
    """A tiny verifier UNet2DModel (no attention): in_channels = 3 (P + 1), two levels of 8/16."""
    from diffusers import UNet2DModel

    torch.manual_seed(seed)
    return UNet2DModel(
        sample_size=size,
        in_channels=3 * (context_frames + 1),
        out_channels=3,
        block_out_channels=(8, 16),
        layers_per_block=1,
        down_block_types=("DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D"),
        norm_num_groups=norm_num_groups,
        add_attention=False,
    ).eval()


def target_greedy(target, prompt: list[int], new_tokens: int) -> list[int]:
    """The target's own greedy continuation of one token-id prompt (transformers generate())."""
    ids = torch.tensor([prompt])
    out = target.generate(
        ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=0
    )
    return out[0, len(prompt) :].tolist()


def own_greedy(gen, prompt: list[int], new_tokens: int) -> list[int]:
    """The target's own greedy continuation as ``gen`` runs it: target-only decoding, one token a
    step, through the same runner (in bf16 that is the invariant LeanLlama, whose rounding is the
    model's; in float32 it equals transformers' generate(), test_greedy_exact)."""
    from specvideo.text import SpeculativeGenerator

    alone = SpeculativeGenerator.from_models(
        gen.target, drafter="none", lean_target=gen.models.target_runner if gen.models.lean_target else False, invariant=gen.models.invariant,
        weights=gen.models.weights,
    )
    return alone.generate([prompt], max_new_tokens=new_tokens, stop=None).token_ids[0]


def equal_or_near_tie(gen, prompt: list[int], got: list[int], reference: list[int]) -> bool:
    """Token-identical, or the first differing position is a near tie of the target (the two
    tokens' logits within ``NEAR_TIE``, measured on the float32 target)."""
    import copy

    from benchmarks.text.divergence import NEAR_TIE, divergence

    if got == reference:
        return True
    fp32 = copy.deepcopy(gen.target).float()
    where = divergence(fp32, prompt, got, reference)
    return where is not None and where[1] <= NEAR_TIE


def decode_joining(gen, first, joining=()) -> dict:
    """Every row's tokens by tag: a continuous Run of ``first`` (tag 0) that the (tag, RowRequest)
    pairs of ``joining`` join after its second round."""

    run, out = gen.open_rows(first, tag=0), {}
    for r, _ in enumerate(run.steps()):
        out.update({t: list(run.rows.outputs[b]) for b, t in enumerate(run.tags)})
        if r == 1:
            for i, req in joining:
                run.admit(req, tag=i)
    out.update({t: list(run.rows.outputs[b]) for b, t in enumerate(run.tags)})
    return out
