"""The side-by-side text benchmark on tiny random models saved to a temporary directory."""

import json
import shutil

import pytest

from benchmarks.text import (
    FAMILIES,
    BenchTextConfig,
    _replace_section,
    check_targets,
    heldout_prompts,
    load_prompts_jsonl,
    plot_speedup_vs_k,
    run_benchmark,
    to_markdown,
    write_report,
)
from benchmarks.text.corpus import corpus_files, stdlib_root
from benchmarks.text.report import round_table
from specvideo.cli import main
from tests.helpers import perturbed_copy, save_model_dir, tiny_tokenizer

NEW = 8
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    tok = tiny_tokenizer(300)
    target = save_model_dir(root / "target", len(tok), seed=0, tokenizer=tok, logit_scale=4.0)
    perturbed_copy(target, noise=0.1).save_pretrained(root / "draft")  # a draft that mostly agrees
    prompts = root / "prompts.jsonl"
    prompts.write_text('{"prompt": "def quicksort(arr):"}\n\n{"prompt": "for i in range(10):"}\n')
    return root


def config(dirs, **kwargs):
    base = dict(
        dtype="float32",  # the float32 reference: every method token-identical to HF generate()
        target=str(dirs / "target"),
        draft=str(dirs / "draft"),
        prompts=str(dirs / "prompts.jsonl"),
        max_new_tokens=NEW,
        drafters=("model",),
        ks=(4,),
        lookup_ks=(4,),
        ngram_ks=(),
        assistant_ks=(4,),
        assistant_schedules=("heuristic",),
        verifiers=("transformers",),
        sampled_methods=FAMILIES,
        repeats=1,
    )
    return BenchTextConfig(**{**base, **kwargs})


@pytest.fixture(scope="module")
def reduced(dirs):
    cfg = config(
        dirs,
        methods=("hf-target", "ours-target", "hf-lookup", "ours-draft", "ours-ngram"),
        schedules=("constant", "heuristic"),
        ks=(2, 4),
    )
    return run_benchmark(cfg)


def test_rows_have_every_field_and_equal_work(reduced):
    names = [(r.method, r.temperature) for r in reduced.rows]
    assert len(names) == len(set(names)) == 2 * (3 + 2 * 2 + 1)
    for row in reduced.rows:
        assert row.new_tokens == [NEW, NEW]  # every method generated exactly max_new_tokens
        assert len(row.times_s) == 2 and all(t > 0 for t in row.times_s)
        assert row.tokens_per_s > 0 and row.speedup_vs_hf > 0 and row.speedup_vs_loop > 0
        assert row.target_calls >= 1 and row.tokens_per_target_call >= 1
        if row.family.startswith("ours") and row.family != "ours-target":
            # None only where nothing was drafted: a sampled row whose text never repeated itself
            assert (row.acceptance_rate is None and row.temperature > 0) or 0 <= row.acceptance_rate <= 1
        assert (row.exact_match is None) == (row.temperature != 0)
    assert reduced.row("hf-target", 0.0).speedup_vs_hf == 1.0
    json.dumps(reduced.to_dict())  # JSON-ready


def test_ours_rows_split_a_round_into_draft_forward_check_and_bookkeeping(reduced):
    ours = [r for r in reduced.rows if r.family.startswith("ours")]
    assert ours and all(r.round_ms is not None for r in ours)
    assert all(r.round_ms is None for r in reduced.rows if r.family.startswith("hf"))
    for r in ours:
        m = r.round_ms
        assert m["forward"] > 0 and m["total"] >= m["forward"]
        parts = m["draft"] + m["forward"] + m["check"] + m["bookkeeping"]
        assert abs(parts - m["total"]) < 0.05  # rounded to 0.01 ms each
    table = round_table(reduced)
    assert table.count("\n| code |") == len(ours) and "forward share" in table


def test_greedy_ours_matches_hf_target_exactly(reduced):
    ours = [r for r in reduced.rows if r.temperature == 0 and r.family.startswith("ours")]
    assert len(ours) == 6 and all(r.exact_match == 1.0 for r in ours)
    drafted = [r for r in ours if r.family == "ours-draft"]
    assert any(r.acceptance_rate > 0 for r in drafted)  # drafts were really accepted, not all rejected
    assert reduced.row("ours-target", 0.0).tokens_per_target_call == 1.0


def test_markdown_plot_and_report(reduced, tmp_path):
    table = to_markdown(reduced)
    assert "### code, greedy" in table and "| ours-model-heuristic-k4 |" in table
    plot = plot_speedup_vs_k(reduced, tmp_path / "plot.png")
    assert plot.read_bytes().startswith(PNG_MAGIC)

    report = tmp_path / "docs" / "BENCHMARKS.md"
    report.parent.mkdir()
    report.write_text("# Benchmarks\n\n## Text\n\nold numbers\n\n## Video\n\nkeep me\n")
    write_report(reduced, "specvideo bench text --max-new-tokens 8", report)
    text = report.read_text()
    assert "old numbers" not in text and "## Video\n\nkeep me" in text and text.count("## Text") == 1
    assert "specvideo bench text --max-new-tokens 8" in text and "![" in text
    assert "(text_speedup_vs_k.png)" in text and "transformers" in text
    assert (report.parent / "text_speedup_vs_k.png").read_bytes().startswith(PNG_MAGIC)
    assert sorted(p.name for p in report.parent.iterdir()) == ["BENCHMARKS.md", "text_speedup_vs_k.png"]
    checks = check_targets(reduced)
    assert len(checks) == 3 and all(c.line() in text for c in checks)
    versus = next(c for c in checks if c.key == "greedy_vs_hf_speculative")
    assert versus.value is not None and "vs hf-lookup-k4" in versus.detail  # the only HF speculative row


def test_full_method_list(dirs, tmp_path):
    full = run_benchmark(config(dirs, max_new_tokens=4))
    assert {r.family for r in full.rows} == set(FAMILIES)
    assert len(full.rows) == 2 * 6
    assisted = full.row("hf-assisted-heuristic-k4", 0.0)
    assert assisted.exact_match == 1.0 and assisted.acceptance_rate is None
    assert all(r.exact_match == 1.0 for r in full.rows if r.temperature == 0 and r.family.startswith("ours"))
    assert all(c.value is not None for c in check_targets(full))
    write_report(full, "specvideo bench text", tmp_path / "BENCHMARKS.md")


def test_second_drafter_adds_a_second_set_of_rows(dirs):
    cfg = config(
        dirs,
        methods=("hf-target", "ours-draft"),
        drafters=("model", "ngram", "model"),
        schedules=("constant",),
        ks=(2, 3),
        temperatures=(0.0,),
        max_new_tokens=4,
    )
    results = run_benchmark(cfg, prompts=["def f(x):"])
    assert [r.method for r in results.rows] == [
        "hf-target",
        "ours-model-constant-k2",
        "ours-model-constant-k3",
        "ours-ngram-constant-k2",
        "ours-ngram-constant-k3",
    ]
    assert all(r.exact_match == 1.0 for r in results.rows)
    assert "| ours-ngram-constant-k3 |" in to_markdown(results)


def test_lean_drafter_with_a_ranked_vocabulary_adds_rows_and_a_decode_cost(dirs, tmp_path):
    from specvideo.text.models.vocab import save_token_ranking

    draft = tmp_path / "draft"
    shutil.copytree(dirs / "draft", draft)
    vocab_size = json.loads((draft / "config.json").read_text())["vocab_size"]
    save_token_ranking(draft, list(range(vocab_size - 1, -1, -1)), "test")  # high ids "most frequent"
    cfg = config(
        dirs,
        draft=str(draft),
        methods=("hf-target", "ours-draft"),
        drafters=("lean", "lean@64", "hybrid@64"),
        schedules=("constant",),
        ks=(3,),
        temperatures=(0.0,),
        max_new_tokens=6,
    )
    results = run_benchmark(cfg, prompts=["def f(x):"])
    assert [r.method for r in results.rows] == [
        "hf-target",
        "ours-lean-constant-k3",
        "ours-lean@64-constant-k3",
        "ours-hybrid@64-constant-k3",
    ]
    assert all(r.exact_match == 1.0 for r in results.rows)
    decode = results.settings["decode_ms"]
    assert {"draft_lean", "draft_lean@64", "draft_lean@64_over_target"} <= set(decode)
    assert "| draft lean@64, 1 token |" in write_report(results, "cmd", tmp_path / "B.md").read_text()

    with pytest.raises(ValueError, match="needs the token ranking beside its model"):
        run_benchmark(config(dirs, drafters=("lean@64",), methods=("ours-draft",)), prompts=["x"])


def test_heldout_prompts_come_from_heldout_functions():
    prompts = heldout_prompts(24)
    assert len(prompts) == 24 and len({p.text for p in prompts}) == 24
    root = stdlib_root()
    heldout = {f.relative_to(root).as_posix() for f in corpus_files("heldout")}
    for p in prompts:
        file, line = p.source.split(" ")[0].rsplit(":", 1)
        assert file in heldout
        source_lines = (root / file).read_text(encoding="utf-8").splitlines()
        assert p.text.split("\n")[0] == source_lines[int(line) - 1].rstrip()  # the def line, indented
        assert p.text.lstrip().startswith(("def ", "async def ")) and not p.text.endswith("\n")
        assert p.text.count("\n") >= 2


@pytest.mark.parametrize(
    "content,message",
    [
        ("", "no prompts in"),
        ("\n  \n", "no prompts in"),
        ('{"prompt": "ok"}\n{"prompt": \n', ":2: not valid JSON"),
        ("[1, 2]\n", ':1: expected an object like {"prompt": "..."}'),
        ('{"text": "x"}\n', ":1: expected an object"),
        ('{"prompt": ""}\n', ':1: "prompt" must be a non-empty string'),
        ('{"prompt": 3}\n', ':1: "prompt" must be a non-empty string'),
    ],
)
def test_jsonl_loader_errors(tmp_path, content, message):
    path = tmp_path / "p.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError) as err:
        load_prompts_jsonl(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_jsonl_loader_reads_prompts_and_missing_file_is_oserror(dirs, tmp_path):
    prompts = load_prompts_jsonl(dirs / "prompts.jsonl")
    assert [p.text for p in prompts] == ["def quicksort(arr):", "for i in range(10):"]
    assert prompts[1].source.endswith("prompts.jsonl:3")
    with pytest.raises(OSError):
        load_prompts_jsonl(tmp_path / "missing.jsonl")


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"methods": ("hf-target", "fast")}, "unknown method 'fast'"),
        ({"schedules": ("linear",)}, "unknown schedule 'linear'"),
        ({"ks": (0,)}, "k must be an integer >= 1"),
        ({"max_new_tokens": 0}, "max_new_tokens must be an integer >= 1"),
        ({"temperatures": (-1.0,)}, "temperature must be a finite number >= 0"),
        ({"drafters": ("model@64",)}, "a vocabulary size goes with the lean, hybrid, tree and head drafters"),
        ({"drafters": ("lean@0",)}, "lean@N, hybrid@N, tree@N or head@N"),
        ({"ngram_ks": (0,)}, "k must be an integer >= 1"),
    ],
)
def test_config_validation(kwargs, message):
    with pytest.raises(ValueError) as err:
        BenchTextConfig(**kwargs)
    assert message in str(err.value)


def test_cli_bench_text_json(dirs, tmp_path, capsys):
    report = tmp_path / "docs" / "BENCHMARKS.md"
    argv = ["bench", "text", "--target", str(dirs / "target"), "--draft", str(dirs / "draft")]
    argv += [
        "--prompts",
        str(dirs / "prompts.jsonl"),
        "--num-prompts",
        "1",
        "--max-new-tokens",
        "4",
        "--repeats",
        "1",
    ]
    argv += ["--methods", "hf-target,ours-target,ours-draft", "--schedules", "constant", "--k-values", "2,3"]
    argv += ["--drafter", "hybrid"]  # the default hybrid@2048 needs a token ranking this draft lacks
    code = main([*argv, "--report", str(report), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [r["method"] for r in out["rows"] if r["temperature"] == 0] == [  # the default verifier: lean
        "hf-target",
        "ours-target+lean",
        "ours-hybrid-constant-k2+lean",
        "ours-hybrid-constant-k3+lean",
    ]
    assert [r["method"] for r in out["rows"] if r["temperature"] > 0] == [  # the default sampled families
        "hf-target",
        "ours-hybrid-constant-k2+lean",
        "ours-hybrid-constant-k3+lean",
    ]
    assert len(out["prompts"]) == 1 and out["command"].startswith("specvideo bench text --prompts ")
    assert "--k-values 2,3" in out["command"] and out["report"] == str(report)
    assert report.exists() and (report.parent / "text_speedup_vs_k.png").exists()
    assert out["command"] in report.read_text()

    assert main([*argv, "--no-report"]) == 0  # the plain table
    assert "| ours-hybrid-constant-k3+lean |" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--target", "/nonexistent/target"], "target model directory '/nonexistent/target' does not exist"),
        (["--draft", "/nonexistent/draft"], "draft model directory '/nonexistent/draft' does not exist"),
        (["--prompts", "BAD"], "not valid JSON"),
        (["--prompts", "/nonexistent/p.jsonl"], "No such file or directory"),
        (["--methods", "hf-target,turbo"], "unknown method 'turbo'"),
        (["--drafter", "warp"], "unknown drafter 'warp'"),
        (["--max-new-tokens", "300"], "exceeds the context length of 256 tokens"),
    ],
)
def test_cli_bench_text_errors_are_one_line_and_exit_2(dirs, tmp_path, capsys, extra, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{oops\n")
    extra = [str(bad) if e == "BAD" else e for e in extra]
    argv = ["bench", "text", "--target", str(dirs / "target"), "--draft", str(dirs / "draft")]
    argv += ["--prompts", str(dirs / "prompts.jsonl"), "--max-new-tokens", "2", "--no-report"]
    code = main([*argv, *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_ngram_k_values_apart_from_hf_lookup_and_in_the_command(dirs):
    from benchmarks.cli.text import reproducing_argv

    cfg = config(
        dirs,
        methods=("hf-target", "hf-lookup", "ours-ngram"),
        lookup_ks=(5,),
        ngram_ks=(2, 3),
        temperatures=(0.0,),
        max_new_tokens=4,
    )
    results = run_benchmark(cfg, prompts=["def f(x):"])
    assert [r.method for r in results.rows] == ["hf-target", "hf-lookup-k5", "ours-ngram-k2", "ours-ngram-k3"]
    assert "--ngram-k-values 2,3" in " ".join(reproducing_argv(cfg))
    same = config(dirs, methods=("ours-ngram",), lookup_ks=(5,))  # ngram_ks=(): the lookup values
    assert same.ngram_k_values == (5,) and "--ngram-k-values 5" in " ".join(reproducing_argv(same))


def test_lean_verifier_alone_on_a_non_llama_target_falls_back_to_transformers():
    from transformers import GPT2Config, GPT2LMHeadModel

    from benchmarks.text.methods import build_methods

    tok = tiny_tokenizer(300)
    gpt2 = GPT2LMHeadModel(
        GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2, n_positions=64)
    ).eval()
    cfg = BenchTextConfig(methods=("ours-target", "ours-ngram"), verifiers=("lean",), ngram_ks=(3,))
    assert [m.name for m in build_methods(cfg, gpt2, None, tok)] == ["ours-target", "ours-ngram-k3"]


def test_replace_section_appends_when_missing():
    doc = _replace_section("# Benchmarks\n\n## Video\n\nv\n", "## Text", "## Text\n\nt\n")
    assert doc == "# Benchmarks\n\n## Video\n\nv\n\n## Text\n\nt\n"
    assert _replace_section(doc, "## Text", "## Text\n\nu\n") == doc.replace("\nt\n", "\nu\n")


def test_repeats_give_a_spread_and_sampled_methods_narrow_t_above_0(dirs):
    cfg = config(
        dirs,
        methods=("hf-target", "ours-draft"),
        sampled_methods=("hf-target",),
        ks=(3,),
        temperatures=(0.0, 0.7),
        repeats=3,
        max_new_tokens=4,
    )
    results = run_benchmark(cfg)
    assert [(r.method, r.temperature) for r in results.rows] == [
        ("hf-target", 0.0),
        ("ours-model-heuristic-k3", 0.0),
        ("hf-target", 0.7),
    ]
    ours = results.rows[1]
    assert len(ours.times_s) == 3 * 2 and sorted(set(ours.repeat)) == [0, 1, 2]
    lo, hi = ours.speedup_vs_hf_spread
    assert lo <= ours.speedup_vs_hf <= hi


def test_chat_prompts_go_through_the_chat_template(dirs, tmp_path):
    from benchmarks.text.run import encode
    from specvideo.text.models.loading import load_tokenizer as _load_tokenizer

    path = tmp_path / "chat.jsonl"
    path.write_text('{"prompt": "sort this", "chat": true}\n{"prompt": "def f(x):"}\n')
    prompts = load_prompts_jsonl(path)
    assert [p.workload for p in prompts] == ["chat", "code"]
    tok = _load_tokenizer(str(dirs / "target"))
    ids = encode(prompts[0], tok, 256, 4, "cpu")[0].tolist()
    assert tok.decode(ids) == "user: sort this</s>\nassistant: "
    results = run_benchmark(
        config(
            dirs,
            prompts=str(path),
            methods=("hf-target", "ours-draft"),
            temperatures=(0.0,),
            max_new_tokens=4,
        )
    )
    assert results.workloads == ["chat", "code"] and all(r.exact_match == 1.0 for r in results.rows)


def test_splits_are_disjoint_and_never_the_drafts_training_prompts():
    from benchmarks.text import CHAT_HELDOUT, CHAT_TUNING, code_prompts
    from recipes.draft_prompts import chat_prompts as training_chat

    assert len(CHAT_TUNING) >= 8 and len(CHAT_HELDOUT) >= 16 and not set(CHAT_TUNING) & set(CHAT_HELDOUT)
    tuning, heldout = code_prompts("tuning"), code_prompts("heldout")
    assert len(tuning) >= 8 and len(heldout) >= 16
    assert not {p.text for p in tuning} & {p.text for p in heldout}
    trained = set(training_chat(5000, seed=0)) | set(training_chat(5000, seed=1000))
    assert not trained & (set(CHAT_TUNING) | set(CHAT_HELDOUT))


def test_lean_verifier_rows_are_exact_and_decode_costs_list_both_runners(dirs):
    cfg = config(
        dirs,
        methods=("hf-target", "ours-target", "ours-draft", "ours-ngram"),
        verifiers=("transformers", "lean"),
        ks=(3,),
        temperatures=(0.0,),
        max_new_tokens=6,
    )
    results = run_benchmark(cfg)
    names = [r.method for r in results.rows]
    assert names == [
        "hf-target",
        "ours-target",
        "ours-target+lean",
        "ours-model-heuristic-k3",
        "ours-model-heuristic-k3+lean",
        "ours-ngram-k4",
        "ours-ngram-k4+lean",
    ]
    assert all(r.exact_match == 1.0 for r in results.rows)
    # "x our target-only" compares with our loop run by the same verifier
    same = {r.method: r for r in results.rows}
    assert same["ours-target+lean"].speedup_vs_loop == pytest.approx(1.0)
    assert same["ours-target"].speedup_vs_loop == pytest.approx(1.0)
    assert all(r.speedup_vs_loop is not None for r in results.rows if r.family.startswith("ours"))
    decode = results.settings["decode_ms"]
    assert {"target@1", "target@8", "target_lean@1", "target_lean@4"} <= set(decode)
    from benchmarks.text.report import decode_table

    assert "| target (LeanLlama), 4 tokens at once |" in decode_table(decode)


def test_fim_prompts_are_cut_from_installed_packages_and_laid_out_with_fim_tokens(tmp_path):
    """The code pair's fill-in-the-middle workload: prefix + hidden middle + suffix from real files of
    installed packages, disjoint splits, and an exact greedy run on a tiny FIM-capable target."""
    from benchmarks.text.fim import fim_prompts
    from benchmarks.text.run import encode
    from specvideo.text.prompts import FIM_TOKENS

    tuning, heldout = fim_prompts("tuning"), fim_prompts("heldout")
    assert len(tuning) > 20 and len(heldout) > 20
    assert not {p.source for p in tuning} & {p.source for p in heldout}
    assert all(
        p.workload == "fim" and p.text.lstrip().startswith(("def ", "async def ")) and p.suffix
        for p in heldout
    )
    picked = fim_prompts("heldout", 3)
    assert picked == fim_prompts("heldout", 3) and len(picked) == 3  # deterministic
    tok = tiny_tokenizer(300)
    tok.add_special_tokens({"additional_special_tokens": list(FIM_TOKENS)})
    ids = encode(picked[0], tok, 4096, 4, "cpu")[0].tolist()
    assert ids[0] == tok.convert_tokens_to_ids(FIM_TOKENS[0]) and ids[-1] == tok.convert_tokens_to_ids(
        FIM_TOKENS[2]
    )
    with pytest.raises(ValueError, match="has no FIM tokens"):
        encode(picked[0], tiny_tokenizer(300), 4096, 4, "cpu")
    root = tmp_path / "fim"
    save_model_dir(root / "target", len(tok), seed=0, tokenizer=tok, logit_scale=4.0, context=4096)
    cfg = BenchTextConfig(
        target=str(root / "target"),
        workloads=("fim",),
        num_prompts=2,
        max_new_tokens=4,
        verifiers=("transformers",),
        methods=("hf-target", "ours-ngram"),
        temperatures=(0.0,),
        lookup_ks=(3,),
        repeats=1,
    )
    results = run_benchmark(cfg)
    assert results.workloads == ["fim"] and all(r.exact_match == 1.0 for r in results.rows)


def test_pair_excludes_a_target_directory():
    with pytest.raises(ValueError, match="pair must be 'qwen-coder'"):
        BenchTextConfig(pair="qwen-coder", target="somewhere")
    with pytest.raises(ValueError, match="pair must be 'qwen-coder'"):
        BenchTextConfig(pair="gpt")


def test_packed_verifier_rows_are_exact_and_in_the_decode_cost_table(dirs):
    from benchmarks.text.report import decode_table

    results = run_benchmark(
        config(dirs, verifiers=("packed",), methods=("hf-target", "ours-ngram"), temperatures=(0.0,))
    )
    ours = [r for r in results.rows if r.family == "ours-ngram"]
    assert ours and all(r.method.endswith("+packed") and r.exact_match == 1.0 for r in ours)
    import torch
    from transformers import AutoModelForCausalLM

    from benchmarks.text.run import decode_costs

    target, draft = (AutoModelForCausalLM.from_pretrained(dirs / d).eval() for d in ("target", "draft"))
    decode = decode_costs(target, draft, torch.tensor([[5, 6, 7]]), tokens=2, repeats=1)
    assert {"target@4", "target_lean@4", "target_packed@4"} <= set(decode)
    assert "oneDNN pre-packed weights" in decode_table(decode)


def test_a_named_pair_reports_into_its_own_sections():
    from benchmarks.text.report import section_heading

    assert section_heading({"split": "heldout", "pair": None}) == "## Text"
    assert section_heading({"split": "tuning"}) == "## Text: tuning split"
    assert section_heading({"split": "heldout", "pair": "qwen-coder"}) == "## Text, code pair (Qwen2.5-Coder-1.5B)"
    assert section_heading({"split": "tuning", "pair": "qwen-coder"}) == "## Text, code pair: tuning split"


def test_head_drafters_add_rows_per_tree_shape_and_a_head_decode_cost(dirs, tmp_path):
    import torch

    from specvideo.text.models.head import DraftHead, save_head
    from specvideo.text.models.loading import load_causal_lm
    from specvideo.text.models.vocab import save_token_ranking

    target = load_causal_lm(str(dirs / "target"))
    head = DraftHead.from_target(target, init_layer=1)
    save_head(head, tmp_path / "head")
    save_token_ranking(tmp_path / "head", list(range(target.config.vocab_size)), "test")
    cfg = config(
        dirs,
        head=str(tmp_path / "head"),
        methods=("hf-target", "ours-draft"),
        drafters=("head@64", "head-hybrid-tree@64"),
        tree_shapes=("1x3", "2x5"),
        schedules=("constant",),
        ks=(3,),
        temperatures=(0.0,),
        max_new_tokens=6,
    )
    results = run_benchmark(cfg, prompts=["def f(x):"])
    assert [r.method for r in results.rows] == [
        "hf-target",
        "ours-head@64-constant-k3",
        "ours-head-hybrid-tree@64/1x3-constant-k3",
        "ours-head-hybrid-tree@64/2x5-constant-k3",
    ]
    assert all(r.exact_match == 1.0 for r in results.rows)
    decode = results.settings["decode_ms"]
    assert {"head_lean@64", "head_lean@64_over_target", "target_lean@12", "target_packed@8"} <= set(decode)
    assert torch.isfinite(torch.tensor(decode["head_lean@64"]))
    with pytest.raises(ValueError, match="tree shape"):
        config(dirs, tree_shapes=("2by8",))
    with pytest.raises(ValueError, match="is none"):
        run_benchmark(config(dirs, head=str(dirs / "draft"), drafters=("head",), methods=("ours-draft",)), prompts=["x"])


def test_bf16_rows_are_exact_to_our_own_loop_and_name_the_gap_where_hf_differs(dirs):
    """In bf16 the lean verifier is invariant: every greedy row equals our own target-only loop;
    rows that differ from transformers' generate() report the float32 target's logit gap there; the
    decode-cost table has the invariant runner (and no float32-only packed rows)."""
    cfg = config(
        dirs, dtype="bfloat16", methods=("hf-target", "ours-target", "ours-draft", "ours-ngram"), verifiers=("lean",),
        temperatures=(0.0,), max_new_tokens=12, decode_forwards=2, decode_repeats=1,
    )
    results = run_benchmark(cfg)
    ours = [r for r in results.rows if r.method.startswith("ours")]
    assert ours and all(r.exact_vs_loop == 1.0 for r in ours)
    for r in ours:
        assert (r.tie_margins is None) == (r.exact_match == 1.0)
        assert r.tie_margins is None or all(m >= 0 for m in r.tie_margins)
    from benchmarks.cli.text import reproducing_argv

    assert "--dtype bfloat16" in " ".join(reproducing_argv(cfg))
    decode = results.settings["decode_ms"]
    assert "target_invariant@4" in decode and not any(k.startswith("target_packed") for k in decode)
