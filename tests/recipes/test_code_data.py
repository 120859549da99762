"""The code pair's head data: no benchmark source is trained on, FIM rows are laid out as the
model reads them, and the split by file is stable."""

import random

from benchmarks.text.corpus import HELD_OUT_MODULES
from benchmarks.text.fim import fim_prompts
from recipes.code_data import (
    CodeDataConfig,
    benchmark_files,
    code_rows,
    fim_row,
    is_valid,
    source_files,
)
from specvideo.text.prompts import FIM_TOKENS

SPECIAL = {t: 1000 + i for i, t in enumerate(FIM_TOKENS)}


class CharTokenizer:
    """One id per character; the FIM tokens as single ids."""

    def __call__(self, text, add_special_tokens=False):
        ids, i = [], 0
        while i < len(text):
            token = next((t for t in SPECIAL if text.startswith(t, i)), None)
            ids.append(SPECIAL[token] if token else ord(text[i]) % 900)
            i += len(token) if token else 1
        return {"input_ids": ids}

    def convert_tokens_to_ids(self, tokens):
        return [SPECIAL[t] for t in tokens]


def test_no_benchmark_file_and_no_held_out_module_is_a_source():
    names = [name for name, _ in source_files()]
    benchmark = benchmark_files()
    assert benchmark and not benchmark & set(names)
    # every candidate of both FIM splits comes from a benchmark file
    for split in ("tuning", "heldout"):
        assert all(p.source.split(":")[0] in benchmark for p in fim_prompts(split, 6))
    stdlib = [n.split("/")[1] for n in names if n.startswith("stdlib/")]
    assert stdlib and not {m.removesuffix(".py") for m in stdlib} & set(HELD_OUT_MODULES)
    assert is_valid(names[0], 16) == is_valid(names[0], 16)  # by the name, not by chance


def test_a_fim_row_keeps_the_tokens_in_order_and_cuts_prefix_start_and_suffix_end():
    tok = CharTokenizer()
    prefix, middle, suffix = ["a" * 50 + "\n"], ["mid\n"], ["z" * 80 + "\n"]
    ids, start = fim_row(tok, prefix, middle, suffix, size=64)
    pre, suf, mid = SPECIAL.values()
    assert len(ids) <= 64 and ids[0] == pre and ids[start - 1] == mid
    assert ids[start:] == tok("mid\n")["input_ids"]
    s = ids.index(suf)
    assert ids[s - 1] == tok("\n")["input_ids"][0]  # the prefix keeps its end
    assert ids[s + 1] == ord("z") % 900 and ids[start - 2] == ord("z") % 900  # the suffix keeps its start
    short, at = fim_row(tok, ["x\n"], ["y\n"], ["w\n"], size=64)
    assert short == [
        pre,
        *tok("x\n")["input_ids"],
        suf,
        *tok("w\n")["input_ids"],
        mid,
        *tok("y\n")["input_ids"],
    ]
    assert at == 7


def test_code_rows_fill_both_splits_with_plain_and_fim_rows():
    rows = code_rows(CharTokenizer(), CodeDataConfig(train_rows=12, valid_rows=3, row_tokens=128))
    assert len(rows["train"]) == 12 and len(rows["valid"]) == 3
    assert not {r["source"] for r in rows["train"]} & {r["source"] for r in rows["valid"]}
    assert all(len(r["ids"]) <= 128 and 0 < r["start"] < len(r["ids"]) for rs in rows.values() for r in rs)
    assert any(int(r["ids"][0]) == SPECIAL["<|fim_prefix|>"] for r in rows["train"])
    assert any(int(r["ids"][0]) != SPECIAL["<|fim_prefix|>"] for r in rows["train"])
    random.seed(0)  # code_rows draws from its own generator: the global one does not matter
    again = code_rows(CharTokenizer(), CodeDataConfig(train_rows=12, valid_rows=3, row_tokens=128))
    assert [r["ids"].tolist() for r in again["train"]] == [r["ids"].tolist() for r in rows["train"]]


def test_chat_requests_are_no_benchmark_prompt_and_the_splits_share_none():
    from benchmarks.text.fim import TEST_PACKAGES
    from benchmarks.text.prompts import CHAT_HELDOUT, CHAT_TUNING
    from recipes.code_data import chat_requests

    config = CodeDataConfig()
    train, valid = chat_requests(40, "train", config), chat_requests(12, "valid", config)
    assert len(train) == 40 and len(valid) == 12
    assert not set(train) & set(valid)
    assert not (set(train) | set(valid)) & set(CHAT_TUNING + CHAT_HELDOUT)
    requests = [t for t in train + valid if t.startswith("Write a Python function `")]
    assert 0 < len(requests) < len(train + valid)  # both kinds, composed and docstring requests
    # the test split's requests are functions of other packages (its docstrings are not these)
    from benchmarks.text.fim import docstring_requests

    test = {p.text for p in docstring_requests(0, packages=TEST_PACKAGES[:1])}
    assert test and not test & set(train + valid)
    assert chat_requests(40, "train", config) == train  # seeded


def test_prose_rows_are_package_descriptions_split_by_distribution_and_never_the_test_packages():
    from benchmarks.text.fim import TEST_PACKAGES
    from recipes.code_data import prose_rows, prose_texts

    texts = prose_texts()
    assert texts and not {name for name, _ in texts} & set(TEST_PACKAGES)
    rows = prose_rows(CharTokenizer(), CodeDataConfig(row_tokens=128), {"train": 10, "valid": 2})
    assert len(rows["train"]) == 10 and len(rows["valid"]) == 2
    assert not {r["source"] for r in rows["train"]} & {r["source"] for r in rows["valid"]}
    assert all(
        len(r["ids"]) == 128 and r["start"] == 32 and r["source"].startswith("prose:")
        for rs in rows.values()
        for r in rs
    )
