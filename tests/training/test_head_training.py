"""The draft head recipe end to end on a tiny target: cached features, training (resumed), export,
and the exported head drafting through SpeculativeGenerator with greedy output unchanged."""

from dataclasses import replace

import torch

from specvideo.text import SpeculativeGenerator
from specvideo.text.head import is_draft_head
from specvideo.training.draft_data import DataConfig, run_data
from specvideo.training.head import HeadConfig, compute_features, export, train
from tests.helpers import save_model_dir, tiny_tokenizer


def test_head_recipe_runs_and_the_head_drafts(tmp_path):
    tok = tiny_tokenizer(300)
    target_dir = tmp_path / "target"
    target = save_model_dir(target_dir, len(tok), seed=0, tokenizer=tok, layers=2, context=8192)
    data = DataConfig(work=str(tmp_path / "work"), num_chat=3, num_code=3, batch_size=4, max_new_tokens=5, valid_prompts=2)
    run_data(data, str(target_dir))
    config = HeadConfig(
        data=data.work, work=data.work, out=str(tmp_path / "head"), init_layer=1, vocab_size=200,
        batch_size=2, steps=3, eval_every=1, warmup=1, valid_rows=2, threads=1,
    )
    compute_features(config, target)
    rows = torch.load(tmp_path / "work" / "features" / "train.pt")["rows"]
    assert len(rows) == 6 and all(r["features"].shape == (len(r["ids"]), 32) for r in rows)
    with torch.no_grad():  # the cached features are the target's final-normed hidden states
        ids = rows[0]["ids"].long()[None]
        expected = target(ids, output_hidden_states=True).hidden_states[-1][0]
    torch.testing.assert_close(rows[0]["features"].float(), expected, atol=1e-2, rtol=1e-2)
    train(config, target)
    train(replace(config, steps=4), target)  # resumes from step 3
    log = (tmp_path / "work" / "train" / "log.jsonl").read_text().splitlines()
    assert len(log) == 1 + 3 + 1 and '"step": 4' in log[-1]
    out = export(config, target)
    assert is_draft_head(out) and (out / "token_ranking.json").is_file()
    gen = SpeculativeGenerator.from_pretrained(str(target_dir), str(out), drafter="head-hybrid")
    plain = SpeculativeGenerator(gen.target, gen.tokenizer, drafter="none")
    prompt = [{"role": "user", "content": "sort a list"}]
    assert gen.generate(prompt, max_new_tokens=12).token_ids == plain.generate(prompt, max_new_tokens=12).token_ids
