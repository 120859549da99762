"""The SmolLM2 draft recipe end to end on a tiny target: data shards, distillation, export, load."""

from dataclasses import replace

from recipes.draft import DraftConfig, export, load_shards, train
from recipes.draft_data import DataConfig, run_data
from recipes.draft_prompts import chat_prompts, code_prefixes
from specvideo.text import SpeculativeGenerator
from specvideo.text.models.shared_draft import is_shared_draft, load_shared_draft
from tests.helpers import save_model_dir, tiny_tokenizer


def test_prompts_are_reproducible_and_distinct():
    assert chat_prompts(50, seed=3) == chat_prompts(50, seed=3)
    assert len(set(chat_prompts(200))) == 200
    code = code_prefixes(5, seed=1)
    assert len(code) == 5 and all(p.endswith("\n") for p in code)


def test_recipe_runs_and_the_draft_loads_with_the_targets_embeddings(tmp_path):
    tok = tiny_tokenizer(300)
    target_dir = tmp_path / "target"
    target = save_model_dir(target_dir, len(tok), seed=0, tokenizer=tok, layers=3, context=8192)
    data = DataConfig(
        work=str(tmp_path / "work"),
        num_chat=3,
        num_code=3,
        batch_size=4,
        max_new_tokens=5,
        valid_prompts=2,
        top_k=4,
    )
    run_data(data, str(target_dir))
    rows = load_shards(data.work, "train")
    assert len(rows) == 6 and all(len(r["top_ids"]) == len(r["ids"]) - r["start"] for r in rows)
    row = rows[0]  # the stored top-1 is the greedy reply token
    assert row["top_ids"][:, 0].tolist() == row["ids"][row["start"] :].tolist()[: len(row["top_ids"])]
    config = DraftConfig(
        work=data.work,
        out=str(tmp_path / "draft"),
        init_layers=(0, 2),
        vocab_size=200,
        batch_size=2,
        steps=3,
        eval_every=1,
        warmup=1,
    )
    train(config, str(target_dir))
    train(replace(config, steps=4), str(target_dir))  # resumes from step 3
    log = (tmp_path / "work" / "train" / "log.jsonl").read_text().splitlines()
    assert len(log) == 1 + 3 + 1 and '"step": 4' in log[-1]
    out = export(config, str(target_dir))
    assert is_shared_draft(out) and (out / "token_ranking.json").is_file()
    names = set(__import__("safetensors.torch").torch.load_file(out / "model.safetensors"))
    assert not any("embed_tokens" in n or "lm_head" in n for n in names)  # not shipped twice
    draft = load_shared_draft(out, target)
    assert draft.model.embed_tokens.weight is target.model.embed_tokens.weight
    gen = SpeculativeGenerator.from_pretrained(str(target_dir), str(out), drafter="hybrid")
    plain = SpeculativeGenerator.from_models(gen.target, gen.tokenizer, drafter="none")
    prompt = [{"role": "user", "content": "sort a list"}]
    assert (
        gen.generate(prompt, max_new_tokens=12).token_ids
        == plain.generate(prompt, max_new_tokens=12).token_ids
    )


def test_a_shared_draft_refuses_a_target_of_another_width(tmp_path):
    import pytest

    from specvideo.text.models.shared_draft import save_shared_draft, shared_draft_from_target
    from tests.helpers import tiny_llama

    target = tiny_llama(64, seed=0)
    save_shared_draft(shared_draft_from_target(target, (1,)), tmp_path / "d")
    with pytest.raises(ValueError, match="hidden_size=32"):
        load_shared_draft(tmp_path / "d", tiny_llama(64, seed=0, hidden=16))
    with pytest.raises(ValueError, match="indices into the target's 2 layers"):
        shared_draft_from_target(target, (5,))
