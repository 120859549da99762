"""The video benchmark end to end on a tiny random pipeline built in the test (no doc writing)."""

import json
import math
import re
from dataclasses import replace

import numpy as np
import pytest
import torch

from benchmarks.cli.video import argv_of
from benchmarks.video import (
    DEFAULT_SETTING,
    BenchVideoConfig,
    build_methods,
    check_targets,
    choose_default,
    estimate_runtime,
    load_workloads,
    reference_steps,
    roc_auc,
    run_benchmark,
    run_method,
    spearman,
    to_markdown,
    write_report,
)
from benchmarks.video.realism_report import check_sampler_targets
from benchmarks.video.scoring import _previous_ssim
from benchmarks.video.workloads import BenchClip
from specvideo.cli import main
from specvideo.video.config import VIDEO_DEFAULTS as D
from specvideo.video.data import moving_shapes
from specvideo.video.drafters import FramePredictor, LearnedDrafter, LinearDrafter
from specvideo.video.io import write_video
from specvideo.video.pipeline import SpeculativeVideoPipeline
from specvideo.video.real import RealVideo
from specvideo.video.verifier import DiffusionVerifier
from tests.helpers import tiny_unet

P, SIZE, N, F = 2, 16, 3, 3  # context frames, resolution, full-sampler steps, generated frames
M = D.num_refine_steps  # refinement steps of every speculative row
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def tiny_pipe(drafter=None) -> SpeculativeVideoPipeline:
    unet = tiny_unet(SIZE, P)
    learned = LearnedDrafter(FramePredictor(context_frames=P, hidden=8, dilations=(1, 2)))
    return SpeculativeVideoPipeline(DiffusionVerifier(unet), drafter or learned)


def config(**kwargs) -> BenchVideoConfig:
    base = dict(
        num_synthetic=2,
        num_real=1,
        num_frames=F,
        thresholds=(0.0, D.tau),  # typicality >= 0 always: every draft accepted
        strengths=(D.strength,),
        num_refine_steps=D.num_refine_steps,
        target_steps=(1, N),
        num_inference_steps=N,
        num_seeds=2,
        synthetic_size=SIZE,
    )
    return BenchVideoConfig(**{**base, **kwargs})


def fake_real_videos(split, max_side, opencv=None, train_only=True):
    """Stands in for the real clips (decoding the sample videos takes seconds): other shapes."""
    return [RealVideo(f"fake{i}.mp4", moving_shapes(100 + i, 12, SIZE)) for i in range(2)]


@pytest.fixture(scope="module")
def results():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("benchmarks.video.workloads.load_real_videos", fake_real_videos)
        return run_benchmark(config(), pipe=tiny_pipe())


EXPECTED = [
    "target-N1",
    f"target-N{N}",
    "draft-copy",
    "draft-linear",
    "draft-flow",
    "draft-learned",
    "first-target+flow",
    "first-target+learned",
    "refine-all-flow",
    "refine-all-learned",
    f"spec-flow-s{D.strength:g}-t0",
    DEFAULT_NAME := f"spec-flow-s{D.strength:g}-t{D.tau}",
    f"spec-learned-s{D.strength:g}-t0",
    f"spec-learned-s{D.strength:g}-t{D.tau}",
    f"spec-copy-s{D.strength:g}-t{D.tau:g}",  # the default with the other drafters: pooled check
    f"spec-linear-s{D.strength:g}-t{D.tau:g}",
]


def test_every_method_on_every_workload(results):
    assert results.workloads == ["synthetic", "real"]
    assert len(results.clips["synthetic"]) == 2 and len(results.clips["real"]) == 1
    for workload in results.workloads:
        assert [r.method for r in results.rows if r.workload == workload] == EXPECTED
    table = to_markdown(results)
    assert "### Synthetic" in table and "### Real" in table
    assert all(f"| {name} |" in table or f"**{name}**" in table for name in EXPECTED)
    # the default setting (VIDEO_DEFAULTS) is in the sweep and marked, once per workload
    defaults = [r for r in results.rows if r.is_default]
    assert [r.method for r in defaults] == [DEFAULT_NAME] * 2
    assert f"**{DEFAULT_NAME}** (default)" in table


def test_numbers_add_up(results):
    for r in results.rows:
        assert len(r.seconds) == len(results.clips[r.workload]) and all(s > 0 for s in r.seconds)
        assert -1 <= r.ssim_gt <= 1 and math.isfinite(r.psnr_gt)
        assert r.reference_steps in (1, N)
        if r.family == "target":
            assert r.unet_evals_per_frame == r.steps == r.unet_passes_per_frame
            assert r.pass_ratio == pytest.approx(r.reference_steps / r.steps)
        elif r.family == "draft":
            assert r.unet_evals_per_frame == 0 and r.acceptance_rate is None and r.spearman is None
            assert r.pass_ratio is None
        elif r.family == "first-target":
            assert r.unet_evals_per_frame == pytest.approx(N / F)
        elif r.family == "refine-all":  # every draft refined and kept: m evaluations per frame
            assert r.acceptance_rate == 1.0 and r.unet_evals_per_frame == M and r.threshold is None
        else:
            assert 0 <= r.acceptance_rate <= 1 and r.num_scored > 0
            assert r.spearman is None or -1 <= r.spearman <= 1
            assert r.auc is None or 0 <= r.auc <= 1
            assert r.unet_passes_per_frame <= r.unet_evals_per_frame  # a round's k drafts share passes
        if r.threshold == 0.0:  # every draft accepted, the draft kept: one evaluation per draft and level
            levels = len(D.check_levels)  # and the reference frame's, once per clip
            assert r.acceptance_rate == 1.0 and r.unet_evals_per_frame == pytest.approx(levels * (F + 1) / F)
            assert all(a == 1.0 for a in r.per_position_acceptance)
            assert r.num_scored == F * len(r.seconds)
    for w in results.workloads:
        ref = results.reference(w)
        assert ref.steps == ref.reference_steps and ref.ssim_target == pytest.approx(1.0)
        assert ref.speedup == 1.0 and ref.pass_ratio == 1.0


def test_reference_target_is_the_cheapest_within_one_percent():
    assert reference_steps({1: 0.80, 5: 0.805, 25: 0.806}) == 1
    assert reference_steps({1: 0.70, 5: 0.80, 25: 0.801}) == 5
    assert reference_steps({2: 0.5}) == 2


def test_first_frame_by_target_and_same_seed_for_every_method():
    pipe = tiny_pipe(LinearDrafter())
    cfg = config(num_real=0, num_synthetic=1, drafters=("linear",), sweep_drafters=("linear",))
    clip = load_workloads(cfg, P)["synthetic"][0]
    methods = {m.name: m for m in build_methods(cfg, ("linear", "flow"))}
    pipes = {"linear": pipe}
    target = run_method(methods[f"target-N{N}"], pipe, pipes, clip, cfg, seed=5)
    again = run_method(methods[f"target-N{N}"], pipe, pipes, clip, cfg, seed=5)
    routed = run_method(methods["first-target+linear"], pipe, pipes, clip, cfg, seed=5)
    torch.testing.assert_close(again.frames, target.frames, rtol=0, atol=0)
    torch.testing.assert_close(routed.frames[0], target.frames[0], rtol=0, atol=0)
    assert routed.unet_evals == N and target.unet_evals == F * N == target.unet_passes
    expected = LinearDrafter().propose(torch.cat([clip.context, target.frames[:1]])[None], F - 1)[0]
    torch.testing.assert_close(routed.frames[1:], expected)


def test_sampling_methods_need_their_n():
    cfg = config(
        num_real=0, num_synthetic=1, num_inference_steps=None, drafters=("flow",), sweep_drafters=("flow",)
    )
    clip = load_workloads(cfg, P)["synthetic"][0]
    methods = {m.name: m for m in build_methods(cfg, ("flow",))}
    pipe = tiny_pipe(LinearDrafter())
    with pytest.raises(ValueError, match="first-target\\+flow needs the full sampler's N"):
        run_method(methods["first-target+flow"], pipe, {"flow": pipe}, clip, cfg, seed=0)
    assert run_method(methods["draft-flow"], pipe, {"flow": pipe}, clip, cfg, seed=0).unet_evals == 0
    assert (
        run_method(methods["first-target+flow"], pipe, {"flow": pipe}, clip, cfg, seed=0, steps=2).unet_evals
        == 2
    )


@pytest.mark.parametrize("metric", ["typicality", "ssim", "psnr"])
def test_the_default_sweep_is_around_the_metrics_own_default(metric):
    from benchmarks.video.config import THRESHOLD_SWEEPS, BenchVideoConfig
    from specvideo.video.config import default_threshold

    sweep = BenchVideoConfig(metric=metric).thresholds
    assert sweep == THRESHOLD_SWEEPS[metric] and min(sweep) <= default_threshold(metric) <= max(sweep)
    assert BenchVideoConfig(metric=metric, thresholds=(0.5,)).thresholds == (0.5,)


def test_default_setting_added_when_the_sweep_misses_it():
    cfg = config(thresholds=(0.5,), strengths=(0.6,))
    methods = build_methods(cfg, ("copy", "flow"))
    assert [m.name for m in methods] == [
        "target-N1",
        f"target-N{N}",
        "draft-copy",
        "draft-flow",
        "first-target+flow",
        "refine-all-flow",
        "spec-flow-s0.6-t0.5",
        "default",
        f"spec-copy-s{D.strength:g}-t{D.tau:g}",  # the default with the other drafters (pooled check)
    ]
    assert methods[-2].setting == DEFAULT_SETTING and methods[-2].is_default
    assert methods[-1].setting == replace(DEFAULT_SETTING, drafter="copy") and not methods[-1].is_default


def test_learned_is_skipped_without_weights():
    results = run_benchmark(
        config(num_real=0, num_synthetic=1, num_frames=1, drafters=("learned",)),
        pipe=tiny_pipe(LinearDrafter()),
    )
    assert not any(r.drafter == "learned" for r in results.rows)
    assert any("learned drafter was skipped" in n for n in results.notes)


def test_targets_json_and_report(results, tmp_path):
    checks = check_targets(results)
    assert len(checks) == 8 * len(results.workloads)
    assert [c.workload for c in checks] == ["synthetic"] * 8 + ["real"] * 8
    json.dumps(results.to_dict(checks), allow_nan=False)
    doc = tmp_path / "BENCHMARKS.md"
    text_section = "## Text\n\nCommand:\n\n```bash\nspecvideo bench text\n```\n\n| a | b |\n"
    doc.write_text(f"# Benchmarks\n\n{text_section}\n## Video\n\nold video\n")
    write_report(results, "specvideo bench video --num-synthetic 2", doc)
    written = doc.read_text()
    assert written.startswith(f"# Benchmarks\n\n{text_section}\n## Video\n")
    assert "old video" not in written and "specvideo bench video --num-synthetic 2" in written
    assert "![speedup against SSIM to the ground truth](video_pareto.png)" in written
    assert "| target-only N | 1 | 3 |" in written and "** (reference) |" in written
    assert (tmp_path / "video_pareto.png").read_bytes().startswith(PNG_MAGIC)
    assert (tmp_path / "video_realism.png").read_bytes().startswith(PNG_MAGIC)
    assert "![KID against seconds per frame](video_realism.png)" in written
    assert "| KID↔GT ×10³ [seeds] |" in written and "Targets of the sampler:" in written
    assert "| method | Inception KID ×10³ per frame [seeds] | realism per frame: KID ×10³ [seeds] |" in written  # the pretrained yardstick
    sampler = check_sampler_targets(results)
    assert {text for _, text, _, _ in sampler} >= {
        "reference N >= 4",
        "the target beats every drafter on KID",
    }
    assert [w for w, *_ in sampler].count("synthetic") == len(sampler) // 2  # the same targets each
    pooled = results.pooled_check["synthetic"]
    assert pooled[1] > 0 and set(pooled[2]) >= {DEFAULT_NAME, f"spec-copy-s{D.strength:g}-t{D.tau:g}"}
    true_context = [t for w, t, *_ in sampler if w == "synthetic" and "true-context" in t]
    assert len(true_context) == 1 and "true-context rounds" in written


def test_tuning_split_gets_its_own_section_and_a_default_choice(tmp_path):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("benchmarks.video.workloads.load_real_videos", fake_real_videos)
        tuning = run_benchmark(
            config(split="tuning", num_synthetic=1, num_inference_steps=None), pipe=tiny_pipe()
        )
    assert tuning.clips["synthetic"][0].startswith("seed 20000500")  # TUNING_SEEDS
    for w in tuning.workloads:  # without --steps, corrections and routing use the reference target's N
        ref = tuning.reference(w).steps
        assert tuning.settings["correction_steps"][w] == ref
        assert tuning.row(w, "first-target+flow").unet_evals_per_frame == pytest.approx(ref / F)
    row, why = choose_default(tuning)
    assert row is not None and row.family == "speculative" and row.method in why
    doc = tmp_path / "BENCHMARKS.md"
    write_report(tuning, "specvideo bench video --split tuning", doc)
    written = doc.read_text()
    assert "## Video: tuning split" in written and "Default chosen on this split" in written
    assert (tmp_path / "video_pareto_tuning.png").is_file()


def test_choose_default_counts_the_targets_before_speed(results):
    """The tuning rule: most of the default's targets reached over the workloads, then wall clock."""
    ref = {w: results.generative[(w, results.reference(w).method)] for w in results.workloads}
    slow, fast = f"spec-flow-s{D.strength:g}-t0", DEFAULT_NAME

    def shaped(speedup, passes, rate, kid):  # a setting's figures on every workload; kid(workload)
        return {w: (speedup, passes, rate, kid(w)) for w in results.workloads}

    def bound(w):  # the better of flow's and the target's KID plus the target's seed-to-seed spread
        g, flow = ref[w], results.generative[(w, "draft-flow")]
        return min(g.kid_truth, flow.kid_truth) + g.kid_truth_spread[1] - g.kid_truth_spread[0]

    def pick(settings):
        rows, gen = [], dict(results.generative)
        for r in results.rows:
            if r.family == "speculative":
                s = settings.get(r.method)  # the other settings: slow and unrealistic
                speedup, passes, rate, kid = s[r.workload] if s else (0.1, 0.1, 1.0, math.inf)
                r = replace(r, speedup=speedup, pass_ratio=passes, acceptance_rate=rate)
                g = ref[r.workload]  # best-of-K SSIM and fidelity as the target's: reached alike
                gen[(r.workload, r.method)] = replace(g, kid_truth=kid)
            rows.append(r)
        row, why = choose_default(replace(results, rows=rows, generative=gen))
        return row.method, why

    keeps = bound  # at the bound: kept
    loses = lambda w: bound(w) + 1.0  # noqa: E731
    method, why = pick({slow: shaped(2.0, 8.0, 0.9, keeps), fast: shaped(10.0, 20.0, 1.0, loses)})
    assert method == slow and "wall >= 3x" in why and "acceptance" not in why  # realism, range: 2 more
    method, why = pick({slow: shaped(2.0, 8.0, 0.9, keeps), fast: shaped(4.0, 8.0, 0.9, keeps)})
    assert method == fast and "4.00x the reference's wall clock" in why  # as many targets: the faster


def test_rank_statistics():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1], [2]) is None and spearman([1, 1], [1, 2]) is None
    assert roc_auc([True, True, False, False], [0.9, 0.8, 0.2, 0.1]) == 1.0
    assert roc_auc([True, False], [0.5, 0.5]) == 0.5  # ties count a half
    assert roc_auc([True, True], [0.1, 0.2]) is None


def test_runtime_estimate_bounds():
    cfg = config()
    methods = build_methods(cfg, ("copy", "flow"))
    est = estimate_runtime(cfg, methods, num_clips=2, unet_s=1.0, draft_s={"copy": 0.0, "flow": 0.0})
    spec = sum(m.family == "speculative" for m in methods)
    refine_all = sum(m.family == "refine-all" for m in methods)
    K = cfg.num_seeds  # every stochastic method runs K seeds; the drafters alone once
    assert est.baselines_s == 2 * K * (F * 1 + F * N + N)  # target-only at N = 1 and N + first-target+flow
    # speculative rows add the in-place check: N evaluations for each of >= F scored drafts
    assert est.sweep_low_s == 2 * K * (spec * F * (N + M) + refine_all * F * M)
    assert est.sweep_high_s == 2 * K * (spec * F * (2 * N + M) + refine_all * F * (N + M))
    drafts = sum(m.family == "draft" for m in methods)
    assert "runs" in est.line() and est.runs == 2 * (K * (len(methods) - drafts) + drafts)
    assert est.unet_time_ratio(1, 0.25, 1.0) is None and est.pass_time(4) is None  # no curve measured
    curve = {1: 0.01, 2: 0.015, 4: 0.03, 8: 0.05}  # seconds of one pass over n frames
    timed = estimate_runtime(cfg, methods, 2, unet_s=0.01, draft_s={"copy": 0.0}, pass_s=curve)
    assert timed.pass_time(4) == pytest.approx(0.03) and timed.pass_time(6) == pytest.approx(0.04)
    assert timed.pass_time(16) == pytest.approx(0.09)  # beyond the curve: its last segment
    # the reference target's own row (one evaluation per pass) is bound at 1x
    assert timed.unet_time_ratio(1, 1.0, 1.0) == pytest.approx(1.0)
    # one evaluation per frame in passes of 4: 4 frames in 0.03 s against 4 x 0.01 s; N = 5 scales it
    assert timed.unet_time_ratio(1, 0.25, 1.0) == pytest.approx(4 / 3)
    assert timed.unet_time_ratio(5, 0.25, 1.0) == pytest.approx(20 / 3)
    assert timed.unet_time_ratio(1, 0.125, 1.0) == pytest.approx(8 / 5)
    assert "2: 1.50, 4: 3.00, 8: 5.00" in timed.line()


def test_draft_length_sweep():
    cfg = config(thresholds=(0.5,), strengths=(0.6,), sweep_draft_frames=(8, D.num_draft_frames, 8))
    assert cfg.sweep_draft_frames == (8,)  # the base k and repeats dropped
    methods = build_methods(cfg, ("flow",))
    names = [m.name for m in methods]
    assert names[-5:] == [
        "refine-all-flow",
        "refine-all-flow-k8",
        "spec-flow-s0.6-t0.5",
        "spec-flow-s0.6-t0.5-k8",
        "default",
    ]
    assert [m.setting.num_draft_frames for m in methods[-5:-1]] == [
        D.num_draft_frames,
        8,
        D.num_draft_frames,
        8,
    ]
    with pytest.raises(ValueError, match="sweep_draft_frames"):
        config(sweep_draft_frames=(0,))
    with pytest.raises(ValueError, match="check_levels must be noise levels"):
        config(check_levels=(1000,))
    with pytest.raises(ValueError, match="check_center must be a number > 0"):
        config(check_center=0.0)
    argv = " ".join(argv_of(cfg))  # the report's command reproduces the sweep
    assert f"--num-draft-frames 4 --refine-steps {M} --sweep-draft-frames 8" in argv


def test_refine_steps_sweep():
    """m beside the base refinement steps: every (k, m) pair gets refine-all and the tau x s rows."""
    base, m = M, M + 1
    cfg = config(
        thresholds=(0.5,), strengths=(0.6,), sweep_draft_frames=(8,), sweep_refine_steps=(m, base, m)
    )
    assert cfg.sweep_refine_steps == (m,)  # the base m and repeats dropped
    methods = build_methods(cfg, ("flow",))
    rows = [r for r in methods if r.family in ("refine-all", "speculative") and r.drafter == "flow"]
    named = {r.name: (r.setting.num_draft_frames, r.setting.num_refine_steps) for r in rows}
    k = D.num_draft_frames
    assert named == {
        "refine-all-flow": (k, base),
        f"refine-all-flow-m{m}": (k, m),
        "refine-all-flow-k8": (8, base),
        f"refine-all-flow-k8-m{m}": (8, m),
        "spec-flow-s0.6-t0.5": (k, base),
        f"spec-flow-s0.6-t0.5-m{m}": (k, m),
        "spec-flow-s0.6-t0.5-k8": (8, base),
        f"spec-flow-s0.6-t0.5-k8-m{m}": (8, m),
        "default": (k, base),
    }
    with pytest.raises(ValueError, match="sweep_refine_steps"):
        config(sweep_refine_steps=(0,))
    argv = " ".join(argv_of(cfg))
    assert f"--refine-steps {base} --sweep-draft-frames 8 --sweep-refine-steps {m}" in argv


def test_the_error_a_draft_inherits():
    """previous_ssim is the SSIM to the truth of the output frame before each scored draft (the
    true context frame for the first), and inherited_spearman ranks draft quality against it."""
    clip = BenchClip("c", torch.zeros(2, 3, 16, 16), torch.zeros(3, 3, 16, 16))
    frames = torch.zeros(3, 3, 16, 16)
    frames[1] = torch.rand(3, 16, 16, generator=torch.Generator().manual_seed(0)) * 2 - 1  # a wrong frame
    got = _previous_ssim(frames, clip, torch.tensor([0, 1, 2]))
    assert got[0] == pytest.approx(1.0) and got[1] == pytest.approx(1.0)  # context[-1], then frame 0
    assert got[2] < 0.5  # frame 1 is far from the truth


def test_inherited_spearman_is_reported(results):
    for w in results.workloads:
        d = results.default_row(w)
        assert d.inherited_spearman is None or -1 <= d.inherited_spearman <= 1
        assert d.num_scored > 0
    lines = [c.line() for c in check_targets(results)]
    assert any("frame before it" in line for line in lines)
    assert any(re.search(r"UNet-time ratio \d+\.\d+x", line) for line in lines)
    assert set(results.estimate.pass_s) == {1, 2, 4, 8, 16} and all(
        t > 0 for t in results.estimate.pass_s.values()
    )


def exit_code(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exit:  # argparse's own errors
        return exit.code


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench_video") / "model"
    tiny_pipe().save_pretrained(path)
    return path


def test_cli_json_with_clip_files(model_dir, tmp_path, capsys):
    video = tmp_path / "in.mp4"
    frames = np.random.default_rng(0).integers(0, 256, (9, 24, 32, 3), dtype=np.uint8)
    write_video(frames, video, fps=8)
    argv = ["bench", "video", "--model", str(model_dir), "--no-write", "--json", "--clips", str(video)]
    argv += [
        "--num-frames",
        "2",
        "--steps",
        "2",
        "--thresholds",
        str(D.tau),
        "--strengths",
        str(D.strength),
    ]
    argv += ["--drafters", "copy", "--sweep-drafters", "flow", "--band-center", "1.5"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    # windows of P + 1 context frames (the typicality check's reference frame) and 2 generated ones
    assert out["report"] is None and out["clips"]["clips"] == ["in.mp4 [0:5]"]
    assert [r["method"] for r in out["rows"]] == [
        "target-N1",
        "target-N2",
        "target-N4",
        "target-N8",
        "target-N16",
        "draft-copy",
        "first-target+flow",
        "refine-all-flow",
        DEFAULT_NAME,
        f"spec-copy-s{D.strength:g}-t{D.tau:g}",
    ]
    assert out["command"].startswith("specvideo bench video --model ")
    assert "--num-seeds 4" in out["command"] and "--max-side 128" in out["command"]
    generative = {(g["workload"], g["method"]): g for g in out["generative"]}
    target = generative[("clips", "target-N1")]
    assert (
        target["num_seeds"] == 4
        and target["kid_truth_spread"][0] <= target["kid_truth"] <= target["kid_truth_spread"][1]
    )
    assert target["ssim_best_of_k"] >= target["ssim_gt"] - 1e-9  # the best seed is at least the mean
    copy = generative[("clips", "draft-copy")]
    assert copy["kid_truth_spread"][0] == copy["kid_truth_spread"][1]  # deterministic: one run, no spread
    # judged with pretrained eyes too: a copy of the last frame has no motion, the truth's has some
    assert target["fidelity_best_of_k"] <= target["fidelity"] + 1e-9 and target["kid_frames"] == target["kid_frames"]
    assert copy["motion"] > 0 and copy["kid_time_spread"][0] == copy["kid_time_spread"][1]
    injected = {c["kind"]: c for c in out["injected"]}  # the check's AUC per kind of wrong draft
    assert injected["truth"]["auc"] is None and {"frozen", "shifted", "blurred", "flow-worst"} <= set(
        injected
    )
    candidates = ("auc", "auc_compare", "auc_compare_hint", "auc_band")
    assert all(0 <= c[a] <= 1 for kind, c in injected.items() if kind != "truth" for a in candidates)
    assert injected["frozen"]["auc_learned"] is None  # the model directory has no check/
    assert "--band-center 1.5" in out["command"]
    assert not (tmp_path / "video_pareto.png").exists()


def test_cli_runs_the_learned_check_as_a_method_and_scores_it_on_injected_drafts(model_dir, tmp_path, capsys):
    from specvideo.video.feature_check import FeatureCheck, FeatureCheckConfig

    FeatureCheck(FeatureCheckConfig(hidden=4, threshold=0.5)).save_pretrained(tmp_path / "check")
    video = tmp_path / "in.mp4"
    write_video(np.random.default_rng(1).integers(0, 256, (8, 24, 32, 3), dtype=np.uint8), video, fps=8)
    argv = ["bench", "video", "--model", str(model_dir), "--no-write", "--json", "--clips", str(video)]
    argv += ["--num-frames", "2", "--num-seeds", "1", "--target-steps", "1", "--metric", "features"]
    argv += ["--thresholds", "0.5", "--strengths", "0.6", "--drafters", "copy", "--sweep-drafters", "flow"]
    argv += ["--feature-check", str(tmp_path / "check"), "--windows", "moving", "--windows-per-clip", "1"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["clips"]["clips"]) == 1  # --clips files in moving windows too: the one of most motion
    assert "spec-flow-s0.6-t0.5" in [r["method"] for r in out["rows"]]  # the learned check's own row
    injected = {c["kind"]: c for c in out["injected"]}
    assert 0 <= injected["frozen"]["auc_learned"] <= 1 and 0 <= injected["frozen"]["auc"] <= 1
    assert f"--feature-check {tmp_path / 'check'}" in out["command"]
    assert "--windows moving --windows-per-clip 1" in out["command"]  # the command reproduces the windows


def test_a_clips_run_names_its_files_and_windows_not_a_split():
    from benchmarks.video.report import _split_line

    settings = {"clips": ["/x/a.mp4", "/y/b.mp4"], "windows": "moving", "windows_per_clip": 2, "max_side": 320}
    line = _split_line("validation", "4 clips", "whole frames 85-100 %", settings)
    assert "a.mp4, b.mp4" in line and "Split" not in line and "85-100" not in line
    assert "the 2 non-overlapping windows of most motion" in line
    split = _split_line("validation", "3 synthetic", "whole frames 85-100 %", {**settings, "clips": None, "synthetic_size": 64})
    assert split.startswith("- Split **validation**") and "85-100" in split


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--thresholds", "nan"], "thresholds must be finite numbers"),
        (["--strengths", "0"], r"strengths must be in \(0, 1\]"),
        (["--num-synthetic", "0", "--num-real", "0"], "num_synthetic \\+ num_real must be >= 1"),
        (["--split", "train"], "invalid choice: 'train'"),
        (["--target-steps", "0"], "target_steps must be an integer >= 1"),
        (["--thresholds", "high"], "expected comma-separated numbers"),
        (["--drafters", "magic"], "unknown drafter 'magic'"),
        (["--sweep-refine-steps", "0"], "sweep_refine_steps must be an integer >= 1, got 0"),
    ],
)
def test_cli_bad_arguments(model_dir, capsys, extra, message):
    assert exit_code(["bench", "video", "--model", str(model_dir), "--no-write", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and re.search(message, err)


def test_cli_clip_too_short(model_dir, tmp_path, capsys):
    video = tmp_path / "short.mp4"
    write_video(np.zeros((3, 16, 16, 3), dtype=np.uint8), video, fps=8)
    assert main(["bench", "video", "--model", str(model_dir), "--no-write", "--clips", str(video)]) == 2
    assert "short.mp4 has 3 frames; a clip needs 3 context + 32 frames = 35" in capsys.readouterr().err


def test_true_context_checks(results):
    """One check per workload x drafter x strength over rounds cut from the true clips, then the
    drafts of every drafter pooled: the check ranking one drafter's drafts against another's."""
    from benchmarks.video.local import POOLED
    from benchmarks.video.report import local_section

    checks = results.local_checks
    drafters = ("copy", "linear", "flow", "learned")
    assert [(c.workload, c.drafter, c.strength) for c in checks] == [
        (w, d, D.strength) for w in results.workloads for d in (*drafters, POOLED)
    ]
    for c in checks:
        clips = len(results.clips[c.workload])
        # k = 4 > F: one round of F frames per clip
        assert c.num_drafts == clips * F * (len(drafters) if c.drafter == POOLED else 1)
        assert 0 <= c.worse_share <= 1
        assert c.spearman is None or -1 <= c.spearman <= 1
        assert c.auc is None or 0 <= c.auc <= 1
    text = "\n".join(local_section(results))
    assert "true context" in text and text.count(f"| flow | {D.strength:g} |") == 2
    assert len(results.to_dict()["local_checks"]) == len(checks)


def test_draft_windows_are_the_windows_the_check_used():
    """A draft at position i of a round starting at output index r was checked after the frames
    before r and the round's drafts 0..i-1."""
    from benchmarks.video.inplace import draft_windows
    from specvideo.video.rounds import ScoredDraft, VideoSpecStats

    def flat(v):
        return torch.full((3, 4, 4), float(v))

    context, frames = torch.stack([flat(-1), flat(-0.9)]), torch.stack([flat(i / 10) for i in range(4)])
    stats = VideoSpecStats()
    stats.scored_drafts = [
        ScoredDraft(r + i, 0.0, True, flat(0.5 + r / 10 + i / 100), position=i)
        for r, n in ((0, 3), (2, 2))
        for i in range(n)
    ]
    windows = draft_windows(stats, context, frames, P=2)  # (5, 2, 3, 4, 4)
    want = torch.tensor([[-1, -0.9], [-0.9, 0.5], [0.5, 0.51], [0.0, 0.1], [0.1, 0.7]])
    torch.testing.assert_close(windows[:, :, 0, 0, 0], want)
    stats.scored_drafts[0].row = 1
    with pytest.raises(ValueError, match="one-row"):
        draft_windows(stats, context, frames, P=2)


def test_target_in_place_of_target_frames_is_the_target_only_run():
    """Given the target-only run's own windows and its seed, the in-place target frames are that
    run's frames exactly: the same windows, the same per-frame noise."""
    from benchmarks.video.inplace import draft_windows, target_in_place
    from specvideo.video.rounds import ScoredDraft, VideoSpecStats

    pipe = tiny_pipe()
    clip = load_workloads(config(num_real=0), P)["synthetic"][0]
    out = pipe(
        clip.context,
        num_frames=F,
        mode="target",
        num_inference_steps=N,
        generator=torch.Generator().manual_seed(7),
        output_type="pt",
        progress=False,
    )
    stats = VideoSpecStats()
    stats.scored_drafts = [ScoredDraft(j, 0.0, True, out.frames[j]) for j in range(F)]  # rounds of 1
    windows = draft_windows(stats, clip.context, out.frames, P)
    made = target_in_place(pipe.verifier, windows, list(range(F)), N, seed=7)
    torch.testing.assert_close(made, out.frames.float(), atol=1e-5, rtol=0)
    other = target_in_place(pipe.verifier, windows, list(range(F)), N, seed=8)
    assert not torch.allclose(other, made)


def test_in_place_check_is_reported(results):
    from benchmarks.video.report import in_place_section

    for r in results.rows:
        if r.family == "speculative":
            assert 0 <= r.in_place_worse_share <= 1
            assert r.in_place_auc is None or 0 <= r.in_place_auc <= 1
            assert r.in_place_spearman is None or -1 <= r.in_place_spearman <= 1
        else:
            assert r.in_place_worse_share is None and r.in_place_auc is None
    text = "\n".join(in_place_section(results))
    assert "in the draft's place" in text and text.count(f"**{DEFAULT_NAME}** (default)") == 2
    assert any("target in the draft's place" in c.line() for c in check_targets(results))


def test_check_scores_script_candidates():
    """scripts/check_scores.py: every candidate gives one score per draft, finite where defined."""
    import importlib.util
    from pathlib import Path

    from specvideo.video.metrics import ssim

    path = Path(__file__).resolve().parents[2] / "scripts" / "check_scores.py"
    spec = importlib.util.spec_from_file_location("check_scores", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    verifier = DiffusionVerifier(tiny_unet(SIZE, P))
    g = torch.Generator().manual_seed(0)
    windows = torch.rand(3, P, 3, SIZE, SIZE, generator=g) * 2 - 1
    drafts, target = (torch.rand(3, 3, SIZE, SIZE, generator=g) * 2 - 1 for _ in range(2))
    got = module.candidates(verifier, windows, drafts, target, torch.Generator().manual_seed(1))
    assert len(got) == 3 + 2 * len(module.STRENGTHS) + 4
    assert all(len(v) == 3 and all(math.isfinite(x) for x in v) for v in got.values())
    assert got["SSIM(draft, target)"] == ssim(drafts, target, data_range=2.0).tolist()


def test_in_place_aggregation_arithmetic():
    """AUC, share and margin Spearman are pooled over the clips that measured the in-place frames;
    a clip whose in-place values do not match its scored drafts is refused."""
    from benchmarks.video.scoring import ClipResult, _in_place

    def clip(scores, draft, place):
        return ClipResult(1.0, 1, 1, 20.0, 0.5, scores=scores, draft_ssim=draft, in_place_ssim=place)

    # margins -0.2, 0.1, -0.1, 0.3: the two below the target have the two lowest scores
    runs = [clip([0.1, 0.8], [0.5, 0.6], [0.7, 0.5]), clip([0.3, 0.9], [0.4, 0.9], [0.5, 0.6])]
    runs.append(clip([0.2], [0.1], []))  # not measured: left out
    auc, share, rho = _in_place(runs)
    assert auc == 1.0 and share == 0.5 and rho == pytest.approx(1.0)
    with pytest.raises(ValueError, match="one value per scored draft"):
        _in_place([clip([0.1, 0.2], [0.5, 0.6], [0.7])])
    assert _in_place([clip([0.1], [0.5], [])]) == (None, None, None)


def test_a_truncated_clip_file_is_benchmarked_on_what_decodes(tmp_path, capsys):
    from benchmarks.video.workloads import _read_clip

    whole = tmp_path / "whole.mp4"
    write_video(np.random.default_rng(0).integers(0, 256, (12, 24, 32, 3), dtype=np.uint8), whole, fps=8)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(whole.read_bytes()[: int(whole.stat().st_size * 0.99)])  # the last frames are gone
    clip = _read_clip(str(cut), max_side=128)
    assert clip.name == "cut.mp4" and 1 <= len(clip.frames) < 12
    assert "of the 12 frames its metadata lists decode" in capsys.readouterr().err


def test_bench_kid_floors_the_reference_spread_as_the_measure_does():
    """The bench pools features and standardises them itself: with a feature the reference barely
    fires (a still real clip), its KID stays the size of the others (it was 3e17 for flow)."""
    from benchmarks.video.generative import _kid

    g = torch.Generator().manual_seed(0)
    reference, x = torch.randn(600, 224, generator=g), torch.randn(600, 224, generator=g)
    reference[:, :8] = 1e-9 * torch.randn(600, 8, generator=g)
    x[:, :8] = 0.05
    assert abs(_kid(x, reference)) < 1000


def test_moving_windows_are_the_clips_fastest_non_overlapping_stretches():
    from benchmarks.video.workloads import _moving_windows, frame_speeds
    from specvideo.video.real import RealVideo

    rng = np.random.default_rng(0)
    still = np.repeat(rng.integers(0, 256, (1, 48, 48, 3), dtype=np.uint8), 40, axis=0)  # (40, 48, 48, 3)
    texture = rng.integers(0, 256, (48, 96, 3), dtype=np.uint8)
    moving = np.stack([texture[:, i * 2 : i * 2 + 48] for i in range(20)])  # 2 px a frame
    frames = np.concatenate([still[:20], moving, still[20:]])  # moves in frames 20..39 only
    speed = frame_speeds(frames)
    assert speed[25] > 1.0 and speed[5] < 0.1
    clips = _moving_windows(RealVideo("pan", frames), P=2, total=10, per_clip=2)
    starts = [int(c.name.split("[")[1].split(":")[0]) for c in clips]
    # a window counts as moving when most of its 9 frame pairs move: it starts in 15..31
    assert len(clips) == 2 and all(15 <= s <= 31 for s in starts) and abs(starts[0] - starts[1]) >= 10
    assert clips[0].context.shape == (2, 3, 48, 48) and clips[0].truth.shape == (8, 3, 48, 48)
    with pytest.raises(ValueError, match="windows must be one of"):
        BenchVideoConfig(windows="random")


def test_the_comparing_check_scores_standing_still_exactly_one():
    """local.compare_round: a draft equal to its context's last frame is exactly as typical as
    standing still (the same condition and noise draws); other drafts score a finite ratio."""
    from benchmarks.video.local import compare_round

    verifier = DiffusionVerifier(tiny_unet(SIZE, P))
    g = torch.Generator().manual_seed(0)
    window = torch.rand(P, 3, SIZE, SIZE, generator=g) * 2 - 1
    frozen = window[-1:].expand(3, -1, -1, -1)
    assert compare_round(verifier, window, frozen, seed=3, levels=(300,)) == pytest.approx([1.0, 1.0, 1.0])
    moved = torch.rand(3, 3, SIZE, SIZE, generator=g) * 2 - 1
    scores = compare_round(verifier, window, moved, seed=3, levels=(100, 300))
    assert len(scores) == 3 and all(math.isfinite(s) and s > 0 for s in scores)
    # against the flow frame as well: a draft that is the flow frame scores at most 1, never above
    hinted = compare_round(verifier, window, moved, seed=3, levels=(100, 300), hint=moved)
    assert all(h <= min(s, 1.0) + 1e-6 for h, s in zip(hinted, scores))
