import pytest
import torch

from specvideo.text import SpeculativeGenerator
from tests.helpers import tiny_llama


@pytest.fixture(scope="module")
def gen():
    target = tiny_llama(64, seed=0, context=32)
    return SpeculativeGenerator.from_models(target, draft=tiny_llama(64, seed=1, context=32))


def test_vocabulary_mismatch_names_both_sizes():
    with pytest.raises(
        ValueError, match=r"draft vocabulary size 80 does not match the target's vocabulary size 64"
    ):
        SpeculativeGenerator.from_models(tiny_llama(64), draft=tiny_llama(80))


def test_prompt_beyond_context_names_the_numbers(gen):
    with pytest.raises(
        ValueError,
        match=r"prompt of 20 tokens \+ max_new_tokens=13 = 33 exceeds the target's context length of 32",
    ):
        gen.generate([5] * 20, max_new_tokens=13)
    assert len(gen.generate([5] * 20, max_new_tokens=12, stop=None).token_ids) == 12  # exactly fits


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(temperature=-0.1), "temperature must be a finite number >= 0"),
        (dict(temperature=float("nan")), "temperature must be a finite number >= 0"),
        (dict(temperature=1.0, top_p=0.0), r"top_p must be in \(0, 1\]"),
        (dict(temperature=1.0, top_p=1.5), r"top_p must be in \(0, 1\]"),
        (dict(temperature=1.0, top_k=0), "top_k must be an integer >= 1"),
        (dict(max_new_tokens=-1), "max_new_tokens must be an integer >= 0"),
        (dict(stop=1.5, max_new_tokens=4), "stop must be 'eos', None"),
    ],
)
def test_bad_generation_parameters(gen, kwargs, message):
    with pytest.raises(ValueError, match=message):
        gen.generate([5, 6], **kwargs)


@pytest.mark.parametrize("k", [0, -3])
def test_bad_num_draft_tokens(k):
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        SpeculativeGenerator.from_models(tiny_llama(64), draft=tiny_llama(64), num_draft_tokens=k)


@pytest.mark.parametrize(
    "prompt,message",
    [
        ([], "the batch of prompts is empty"),
        ([[1, 2], []], "prompt 1 is empty"),
        ([5, 99], "token id 99 outside the vocabulary"),
        ("hello", "a text prompt needs a tokenizer"),
        (torch.zeros(2, 3), "must hold integer token ids"),
        (torch.zeros(1, 2, 3, dtype=torch.long), r"shape \(B, T\) or \(T,\)"),
        (3.5, "prompt must be a str"),
    ],
)
def test_bad_prompts(gen, prompt, message):
    with pytest.raises(ValueError, match=message):
        gen.generate(prompt)


def test_model_drafter_without_a_draft_model():
    with pytest.raises(ValueError, match="drafter=.model. needs a draft model"):
        SpeculativeGenerator.from_models(tiny_llama(64), drafter="model")


def test_the_drafter_follows_the_models_given_and_the_one_default():
    from specvideo.text.config import TEXT_DEFAULTS

    target = tiny_llama(64)
    assert SpeculativeGenerator.from_models(target).config.drafter == TEXT_DEFAULTS.drafter_for() == "ngram"
    assert SpeculativeGenerator.from_models(target, draft=tiny_llama(64, seed=1)).config.drafter == "model"


def test_unknown_drafter():
    with pytest.raises(ValueError, match="unknown drafter 'oracle'"):
        SpeculativeGenerator.from_models(tiny_llama(64), drafter="oracle")


def test_missing_model_directory(tmp_path):
    with pytest.raises(ValueError, match="cannot load a causal LM"):
        SpeculativeGenerator.from_pretrained(str(tmp_path / "nope"))


def test_corrupt_model_directory(tmp_path):
    tiny_llama(64).save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ValueError, match="cannot load a causal LM from model directory"):
        SpeculativeGenerator.from_pretrained(str(tmp_path))


def test_tensor_prompt_with_an_attention_mask_drops_its_padding():
    from tests.helpers import random_prompts

    gen = SpeculativeGenerator.from_models(tiny_llama(64), draft=tiny_llama(64, seed=1), num_draft_tokens=3)
    prompts = random_prompts(3, 64, seed=7, min_len=3, max_len=9)
    width = max(map(len, prompts)) + 2
    ids, mask = torch.zeros(3, width, dtype=torch.long), torch.zeros(3, width, dtype=torch.long)
    for b, p in enumerate(prompts):  # right, left and both-sided padding
        start = [0, width - len(p), 1][b]
        ids[b, start : start + len(p)], mask[b, start : start + len(p)] = torch.tensor(p), 1
        ids[b, mask[b] == 0] = 5  # padding ids that would change the output if they were read
    out = gen.generate(ids, attention_mask=mask, max_new_tokens=8, stop=None)
    assert out.token_ids == gen.generate(prompts, max_new_tokens=8, stop=None).token_ids
    holes = mask.clone()
    holes[0, 1] = 0
    with pytest.raises(ValueError, match="padding between real tokens"):
        gen.generate(ids, attention_mask=holes, max_new_tokens=2)
    with pytest.raises(ValueError, match="attention_mask has shape"):
        gen.generate(ids, attention_mask=mask[:, :-1], max_new_tokens=2)
    with pytest.raises(ValueError, match="goes with a"):
        gen.generate(prompts, attention_mask=mask, max_new_tokens=2)


def test_chat_messages_need_a_template_and_well_formed_turns():
    from specvideo.text import SpeculativeGenerator
    from tests.helpers import tiny_llama, tiny_tokenizer

    tok = tiny_tokenizer(300)
    gen = SpeculativeGenerator.from_models(tiny_llama(len(tok)), tok, drafter="ngram")
    out = gen.generate([{"role": "user", "content": "sort"}], max_new_tokens=3, stop=None)
    assert len(out.token_ids) == 3
    cases = [
        ([{"role": "user"}], "must have a str 'role' and a str 'content'"),
        ([{"role": "robot", "content": "x"}], "use system, user or assistant"),
        ([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "end with a user message"),
    ]
    for messages, message in cases:
        with pytest.raises(ValueError, match=message):
            gen.generate(messages, max_new_tokens=2)
    tok.chat_template = None
    with pytest.raises(ValueError, match="has no chat template"):
        gen.generate([{"role": "user", "content": "x"}], max_new_tokens=2)
