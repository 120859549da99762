"""The Python API does what the CLI and the server do: stop strings and fill-in-the-middle."""

import pytest
import torch

from specvideo.text import SpeculativeGenerator
from specvideo.text.book import cut_at_stop, stop_rules
from specvideo.text.prompts import FIM_TOKENS, fim_ids
from tests.helpers import tiny_llama, tiny_tokenizer

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def gen():
    tok = tiny_tokenizer(300)
    tok.add_special_tokens({"additional_special_tokens": list(FIM_TOKENS)})
    target = tiny_llama(len(tok), seed=0, logit_scale=4.0)
    return SpeculativeGenerator.from_models(target, tokenizer=tok, drafter="ngram", num_draft_tokens=3)


def test_stop_rules_read_ids_strings_and_eos():
    eos = frozenset({2})
    assert stop_rules("eos", eos, None) == (eos, ())
    assert stop_rules(None, eos, None) == (frozenset(), ())
    assert stop_rules(7, eos, None) == ({7}, ())
    assert stop_rules([7, 8], eos, None) == ({7, 8}, ())
    assert stop_rules("\n\n", eos, object()) == (eos, ("\n\n",))
    assert stop_rules(["a", "b"], eos, object()) == (eos, ("a", "b"))
    assert stop_rules([7, "a"], eos, object()) == ({7}, ("a",))  # ids given: only those
    assert stop_rules([7, "eos", "a"], eos, object()) == ({7, 2}, ("a",))
    for bad, message in (("", "not be empty"), ([1.5], "stop must be"), (True, "stop must be")):
        with pytest.raises(ValueError, match=message):
            stop_rules(bad, eos, object())
    with pytest.raises(ValueError, match="need a tokenizer"):
        stop_rules("x", eos, None)
    assert cut_at_stop("abc\n\ndef", ("\n\n", "c")) == ("ab", True)
    assert cut_at_stop("abc", ("z",)) == ("abc", False)


def test_a_stop_string_ends_the_text_before_it_and_the_tokens_at_it(gen):
    free = gen.generate("def quicksort(arr):", max_new_tokens=24, stop=None)
    assert len(free.text) > 6
    stop = free.text[3:5]  # a string the free run produces
    at = free.text.find(stop)
    out = gen.generate("def quicksort(arr):", max_new_tokens=24, stop=stop)
    assert out.text == free.text[:at]
    assert out.token_ids == free.token_ids[: len(out.token_ids)]  # the same tokens, cut
    decoded = gen.tokenizer.decode(out.token_ids, skip_special_tokens=True)
    assert stop in decoded and stop not in gen.tokenizer.decode(out.token_ids[:-1], skip_special_tokens=True)
    streamed = "".join(gen.stream("def quicksort(arr):", max_new_tokens=24, stop=stop))
    assert streamed == out.text
    batch = gen.generate(["def quicksort(arr):", "for i in"], max_new_tokens=24, stop=[stop])
    assert batch.text[0] == out.text


def test_suffix_fills_in_the_middle_as_the_fim_token_ids_do(gen):
    ids = fim_ids(gen.tokenizer, "def f(x):", "    return y")
    by_ids = gen.generate(ids, max_new_tokens=8, stop=None)
    by_suffix = gen.generate("def f(x):", max_new_tokens=8, stop=None, suffix="    return y")
    assert by_suffix.token_ids == by_ids.token_ids
    both = gen.generate(["def f(x):", "for i"], max_new_tokens=8, stop=None, suffix=["    return y", "print(i)"])
    assert both.token_ids[0] == by_ids.token_ids
    with pytest.raises(ValueError, match="as many suffixes"):
        gen.generate(["a", "b"], suffix="c")
    plain = SpeculativeGenerator.from_models(gen.target, tokenizer=tiny_tokenizer(300), drafter="ngram")
    with pytest.raises(ValueError, match="no fill-in-the-middle tokens"):
        plain.generate("def f(x):", suffix="y")


def test_one_hold_back_rule_for_streams_and_the_server():
    from specvideo.text.book import first_stop, shown_length

    assert first_stop("a END b STOP", ["STOP", "END"]) == (2, "END")  # the earliest, whichever is listed first
    assert first_stop("nothing", ["STOP"]) is None
    assert shown_length("hello wor", ["world!"], final=False) == len("hello wor") - 5  # could still become one
    assert shown_length("hello wor", ["world!"], final=True) == len("hello wor")
    assert shown_length("caf\ufffd", [], final=False) == 3  # an incomplete character waits for its bytes


def test_the_book_finds_a_stop_string_from_a_row_s_tail_as_from_its_whole_text():
    """The stop-string check decodes only the tail of a row's output; over a long output emitted a
    few tokens at a time it ends the row at the same token as a search of the whole decoded text."""
    from specvideo.text.book import RowBook, RowRequest

    tok = tiny_tokenizer(300)
    out = torch.randint(3, 300, (400,), generator=torch.Generator().manual_seed(0)).tolist()
    text = tok.decode(out, skip_special_tokens=True)
    for stop in (text[300:306], text[-5:], text[5:9]):  # late, at the very end, early
        whole = next(i for i in range(len(out)) if stop in tok.decode(out[: i + 1], skip_special_tokens=True))
        rows = RowBook([RowRequest([1], len(out))])
        rows.stop_on_text((stop,), tok)
        for at in range(0, len(out), 3):
            if bool(rows.active[0]):  # the verifier emits for generating rows only
                rows.emit(0, out[at : at + 3])
        assert rows.outputs[0] == out[: whole + 1] and not bool(rows.active[0])
        assert len(rows._tails[0]) < 40  # a tail, not the whole output
