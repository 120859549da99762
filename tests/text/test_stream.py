import torch

from specvideo.text import SpeculativeGenerator
from tests.helpers import perturbed_copy, tiny_llama, tiny_tokenizer


def test_stream_pieces_add_up_to_generate_text():
    tok = tiny_tokenizer(300)
    target = tiny_llama(len(tok), seed=0, logit_scale=4.0)
    gen = SpeculativeGenerator.from_models(target, tokenizer=tok, draft=perturbed_copy(target, 0.1), num_draft_tokens=3)
    full = gen.generate("def quicksort(arr):", max_new_tokens=30, stop=None)
    pieces = list(gen.stream("def quicksort(arr):", max_new_tokens=30, stop=None))
    assert len(pieces) > 1 and all(isinstance(p, str) for p in pieces)
    assert "".join(pieces) == full.text
    assert full.text == tok.decode(full.token_ids, skip_special_tokens=True)


def test_stream_batch_yields_one_piece_per_row():
    tok = tiny_tokenizer(300)
    target = tiny_llama(len(tok), seed=0, logit_scale=4.0)
    gen = SpeculativeGenerator.from_models(target, tokenizer=tok, drafter="ngram")
    prompts = ["for i in", "def quicksort(arr):\n    return"]
    rows = ["", ""]
    for pieces in gen.stream(
        prompts, max_new_tokens=12, stop=None, temperature=0.9, generator=torch.Generator().manual_seed(1)
    ):
        assert isinstance(pieces, list) and len(pieces) == 2
        rows = [r + p for r, p in zip(rows, pieces)]
    out = gen.generate(
        prompts, max_new_tokens=12, stop=None, temperature=0.9, generator=torch.Generator().manual_seed(1)
    )
    assert rows == out.text
