"""The draft head recipe end to end on a tiny target: cached features, training (resumed), export,
and the exported head drafting through SpeculativeGenerator with greedy output unchanged."""

from dataclasses import replace

import pytest
import torch

from recipes.draft_data import DataConfig, run_data
from recipes.head import HeadConfig, compute_features, export, train
from specvideo.text import SpeculativeGenerator
from specvideo.text.models.head import is_draft_head
from specvideo.text.runtime.contract import layer_features
from tests.helpers import save_model_dir, tiny_tokenizer


@pytest.mark.parametrize("feature_layers", [None, (1, 2)])
def test_head_recipe_runs_and_the_head_drafts(tmp_path, feature_layers):
    """Also EAGLE-3's head: the cached features are the low and the final layer side by side."""
    tok = tiny_tokenizer(300)
    target_dir = tmp_path / "target"
    target = save_model_dir(target_dir, len(tok), seed=0, tokenizer=tok, layers=2, context=8192)
    data = DataConfig(
        work=str(tmp_path / "work"), num_chat=3, num_code=3, batch_size=4, max_new_tokens=5, valid_prompts=2
    )
    run_data(data, str(target_dir))
    config = HeadConfig(
        data=data.work,
        work=data.work,
        out=str(tmp_path / "head"),
        init_layer=1,
        vocab_size=200,
        batch_size=2,
        steps=3,
        eval_every=1,
        warmup=1,
        valid_rows=2,
        threads=1,
        feature_layers=feature_layers,
        reg_weight=0.0 if feature_layers else 1.0,
        ttt_steps=2 if feature_layers else 1,
    )
    compute_features(config, target)
    rows = torch.load(tmp_path / "work" / "features" / "train.pt")["rows"]
    width = 32 * len(feature_layers or (1,))
    assert len(rows) == 6 and all(r["features"].shape == (len(r["ids"]), width) for r in rows)
    with torch.no_grad():  # the cached features are the target's final-normed hidden states (and a lower layer's)
        ids = rows[0]["ids"].long()[None]
        states = target(ids, output_hidden_states=True).hidden_states
        expected = layer_features(states, feature_layers)[0] if feature_layers else states[-1][0]
    torch.testing.assert_close(rows[0]["features"].float(), expected, atol=1e-2, rtol=1e-2)
    train(config, target)
    train(replace(config, steps=4), target)  # resumes from step 3
    log = (tmp_path / "work" / "train" / "log.jsonl").read_text().splitlines()
    assert len(log) == 1 + 3 + 1 and '"step": 4' in log[-1]
    out = export(config, target)
    assert is_draft_head(out) and (out / "token_ranking.json").is_file()
    assert '"specvideo_feature_layers"' in (out / "config.json").read_text() if feature_layers else True
    gen = SpeculativeGenerator.from_pretrained(str(target_dir), str(out), drafter="head-hybrid")
    plain = SpeculativeGenerator.from_models(gen.target, gen.tokenizer, drafter="none")
    prompt = [{"role": "user", "content": "sort a list"}]
    assert (
        gen.generate(prompt, max_new_tokens=12).token_ids
        == plain.generate(prompt, max_new_tokens=12).token_ids
    )


def test_unrolled_steps_see_what_a_chain_of_own_features_sees(tmp_path):
    """EAGLE-3's training-time test: step s at position j equals drafting from the prefix ending at
    j - s with true features, feeding the head its own features after it (recomputed naively)."""
    from recipes.head import head_loss, unroll, unroll_mask
    from specvideo.text.models.head import DraftHead

    target = save_model_dir(tmp_path / "t", 300, seed=0, tokenizer=tiny_tokenizer(300), layers=2)
    head = DraftHead.from_target(target, 1).eval()
    T, d, steps = 7, 32, 3
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 300, (2, T), generator=g)
    inputs = torch.randn(2, T, d, generator=g)
    mask = torch.ones(2, T, dtype=torch.long)
    mask[1, 5:] = 0  # a right-padded row
    m = unroll_mask(mask, 2)[0, 0]
    assert m.shape == (T, 3 * T) and m[4].nonzero().flatten().tolist() == [0, 1, 2, T + 3, 2 * T + 4]
    with torch.no_grad():
        hs = unroll(head, ids, inputs, mask, steps)
        for b, length in ((0, T), (1, 5)):
            for s in range(steps):
                for j in range(s, length):
                    cur = inputs[b : b + 1, : j - s + 1]
                    for p in range(j - s + 1, j + 1):  # own features after the true prefix
                        cur = torch.cat([cur, head(ids[b : b + 1, :p], cur)[:, -1:]], dim=1)
                    naive = head(ids[b : b + 1, : j + 1], cur)[0, -1]
                    torch.testing.assert_close(hs[s][b, j], naive, atol=1e-4, rtol=1e-4)
    top_ids = torch.randint(0, 50, (2, T, 4), generator=g)
    batch = (ids, mask, inputs, torch.randn(2, T, d), top_ids, torch.full((2, T, 4), 0.25))
    rows_w = torch.randn(50, d)
    out = head_loss(head.train(), rows_w, batch, 1.0, steps)
    out["loss"].backward()
    assert {"top1", "top1_s1", "top1_s2"} <= set(out) and head.fc.weight.grad is not None


def test_head_cli_refuses_out_of_range_flags(capsys):
    from specvideo.cli import main

    assert main(["train", "smollm2-head", "--ttt-steps", "0"]) == 2
    assert "--ttt-steps is out of range: 0" in capsys.readouterr().err
    assert main(["train", "smollm2-head", "--lr", "-1"]) == 2
    assert "--lr is out of range: -1.0" in capsys.readouterr().err
    assert main(["train", "smollm2-head", "--init-head", "/nonexistent/head"]) == 2
    assert "--init-head /nonexistent/head is not an exported draft head" in capsys.readouterr().err
    assert main(["train", "smollm2-head", "--reg-weight", "-1"]) == 2
    assert "--reg-weight is out of range: -1.0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "smollm2-head", "--feature-layers", "15,3"])
    assert "two or more increasing layer numbers" in capsys.readouterr().err
