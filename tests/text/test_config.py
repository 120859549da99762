"""One TextConfig: handed whole to from_pretrained, kept by the generator, its call settings the
defaults of generate; keyword arguments of the same names go over it; unknown names are refused."""

import pytest

from specvideo.text import TEXT_DEFAULTS, SpeculativeGenerator, TextConfig
from specvideo.text.drafting.catalog import DRAFTER_SPECS
from tests.helpers import save_model_dir, tiny_tokenizer


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("pair")
    tok = tiny_tokenizer(300)
    save_model_dir(root / "target", len(tok), seed=0, tokenizer=tok, logit_scale=4.0)
    save_model_dir(root / "draft", len(tok), seed=1, tokenizer=tok)
    return str(root / "target"), str(root / "draft")


def test_the_config_goes_whole_and_its_call_settings_are_the_defaults(pair):
    target, draft = pair
    config = TextConfig(num_draft_tokens=5, schedule="heuristic", max_new_tokens=7)
    gen = SpeculativeGenerator.from_pretrained(target, draft, dtype="float32", config=config)
    assert gen.config.num_draft_tokens == 5 and gen.config.schedule == "heuristic"
    assert gen.config.drafter == "model"  # no drafter named: the draft model's
    out = gen.generate("def f(x):", stop=None)
    assert len(out.token_ids) == 7  # config.max_new_tokens
    assert len(gen.generate("def f(x):", stop=None, max_new_tokens=3).token_ids) == 3  # a call's own wins


def test_keyword_arguments_go_over_the_config_by_the_same_names(pair):
    target, draft = pair
    gen = SpeculativeGenerator.from_pretrained(
        target, draft, dtype="float32", config=TextConfig(num_draft_tokens=5), num_draft_tokens=2, drafter="lean"
    )
    assert (gen.config.num_draft_tokens, gen.config.drafter) == (2, "lean")
    ngram = SpeculativeGenerator.from_pretrained(target, dtype="float32")
    assert ngram.config.drafter == TEXT_DEFAULTS.drafter_for() == "ngram"  # no draft: prompt lookup


def test_an_unknown_setting_is_named():
    with pytest.raises(ValueError, match=r"unknown text setting\(s\) \['num_draft_token'\]"):
        TEXT_DEFAULTS.updated(num_draft_token=3)


def test_the_registry_says_what_each_drafter_needs():
    from specvideo.text import trees
    from specvideo.text.config import (
        HEAD_DRAFTERS,
        MODEL_DRAFTERS,
        NO_MODEL_DRAFTERS,
        SELF_DRAFTERS,
    )

    assert set(HEAD_DRAFTERS) == {"head", "head-tree", "head-hybrid", "head-hybrid-tree"}
    # the self drafters load no second model: they draft with a quantised copy of the target
    assert set(NO_MODEL_DRAFTERS) == {"ngram", "ngram-tree", "none", "self", "self-hybrid"}
    assert set(SELF_DRAFTERS) == {"self", "self-hybrid"} and all(DRAFTER_SPECS[n].copy == "int4" for n in SELF_DRAFTERS)
    assert set(MODEL_DRAFTERS) | set(NO_MODEL_DRAFTERS) == set(DRAFTER_SPECS)
    # the token-tree extension's rows joined the one table; each names the chain a batch drafts with
    assert set(trees.DRAFTERS) == {"tree", "ngram-tree", "head-tree", "head-hybrid-tree"}
    for name, spec in trees.DRAFTERS.items():
        assert DRAFTER_SPECS[name] is spec and spec.float32 and spec.chain in DRAFTER_SPECS
        assert DRAFTER_SPECS[spec.chain].verifier != spec.verifier  # a chain's check, not a tree's
    assert [n for n, s in DRAFTER_SPECS.items() if s.one_row] == ["tree", "ngram-tree"]


def test_every_drafter_speaks_the_one_contract():
    from specvideo.text.drafting import drafters, head_drafters
    from specvideo.text.drafting.base import Drafter
    from specvideo.text.trees import drafters as tree_drafters

    chains = [drafters.ModelDrafter, drafters.NGramDrafter, drafters.NullDrafter]
    one_row = [head_drafters.HeadDrafter, tree_drafters.HeadTreeDrafter, tree_drafters.NGramTreeDrafter, tree_drafters.ModelTreeDrafter]
    assert all(issubclass(c, Drafter) for c in [*chains, *one_row, drafters.HybridDrafter])
    assert all(c.batched for c in chains) and not any(c.batched for c in one_row)  # a batch swaps these out
    lookup = drafters.NGramDrafter(3, rows=None)
    assert drafters.HybridDrafter(drafters.NullDrafter(), lookup).batched
