"""``specvideo bench drafters`` and fast windows end to end on tiny synthetic workloads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks.video.config import BenchVideoConfig
from benchmarks.video.drafters import BenchDraftersConfig, run_drafters, to_markdown
from benchmarks.video.workloads import load_workloads
from specvideo.cli import main
from specvideo.video.data import split_synthetic
from specvideo.video.io import frames_to_tensor


def test_a_frame_step_reads_every_sth_frame_of_the_same_footage():
    config = BenchVideoConfig(split="tuning", num_synthetic=2, num_real=0, num_frames=4, synthetic_size=32, frame_step=3)
    clips = load_workloads(config, 2)["synthetic"]
    full = split_synthetic(2, 6 * 3, 32, split="tuning")
    for clip, frames in zip(clips, full):
        expected = frames_to_tensor(np.ascontiguousarray(frames[::3]))
        assert np.array_equal(np.concatenate([clip.context, clip.truth]), expected.numpy())
    with pytest.raises(ValueError, match="frame_step"):
        BenchVideoConfig(frame_step=0)


def test_the_drafter_bench_scores_each_drafter_on_normal_and_fast_windows():
    config = BenchDraftersConfig(
        split="tuning", drafters=("copy", "flow"), frame_steps=(1, 2), num_synthetic=3, num_real=0,
        num_frames=3, synthetic_size=48, repeats=1,
    )
    rows = run_drafters(config)
    assert [(r.workload, r.drafter) for r in rows] == [
        ("synthetic", "copy"), ("synthetic", "flow"),
        ("synthetic, frame step 2", "copy"), ("synthetic, frame step 2", "flow"),
    ]
    by = {(r.workload, r.drafter): r for r in rows}
    # moving shapes move: the flow drafter's motion is closer to the truth's than standing still
    assert by["synthetic", "flow"].motion < by["synthetic", "copy"].motion
    # the same footage twice as fast moves twice as far: standing still is further off
    assert by["synthetic, frame step 2", "copy"].motion > by["synthetic", "copy"].motion
    assert all(r.fidelity_worst_quarter >= r.fidelity and r.ms_per_frame >= 0 for r in rows)
    assert "| synthetic, frame step 2 | flow |" in to_markdown(rows)


def test_the_drafter_bench_names_a_bad_drafter_before_any_work(capsys, tmp_path):
    with pytest.raises(ValueError, match="unknown drafter"):
        BenchDraftersConfig(drafters=("flow:raft",))
    code = main(["bench", "drafters", "--split", "tuning", "--drafters", "copy", "--frame-steps", "1",
                 "--num-synthetic", "2", "--num-real", "0", "--num-frames", "2", "--synthetic-size", "32",
                 "--repeats", "1", "--no-report", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["command"].startswith("specvideo bench drafters --split tuning --drafters copy")
    assert [r["drafter"] for r in out["rows"]] == ["copy"]
    report = tmp_path / "BENCHMARKS.md"
    report.write_text("# Benchmarks\n\n## Text\n\nkept\n")
    args = ["bench", "drafters", "--split", "tuning", "--drafters", "copy", "--frame-steps", "1", "--num-synthetic", "2",
            "--num-real", "0", "--num-frames", "2", "--synthetic-size", "32", "--repeats", "1", "--report", str(report)]
    assert main(args) == 0
    written = report.read_text()
    assert "## Text\n\nkept" in written and "## Video: drafters alone on pretrained eyes (tuning)" in written
    assert "| synthetic | copy | 2 |" in written


def test_the_check_bench_scores_bad_drafts_with_both_checks(capsys, tmp_path):
    import torch

    from specvideo.video.conditioning import widen_for_hint
    from specvideo.video.feature_check import FeatureCheck, FeatureCheckConfig
    from specvideo.video.pipeline import SpeculativeVideoPipeline
    from specvideo.video.verifier import DiffusionVerifier
    from tests import helpers

    torch.manual_seed(0)
    verifier = DiffusionVerifier(widen_for_hint(helpers.tiny_unet(16, 2, 0, norm_num_groups=4)), hint="flow", residual=True)
    SpeculativeVideoPipeline(verifier, feature_check=FeatureCheck(FeatureCheckConfig(hidden=4))).save_pretrained(tmp_path / "model")
    args = ["bench", "checks", "--model", str(tmp_path / "model"), "--split", "tuning", "--frame-steps", "1,2",
            "--num-synthetic", "2", "--num-real", "0", "--num-frames", "4", "--synthetic-size", "32", "-k", "2", "--no-report"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "**synthetic** (2 windows)" in out and "**synthetic, frame step 2** (2 windows)" in out
    for kind in ("truth", "frozen", "shifted", "blurred", "other"):
        assert f"| {kind} |" in out
    assert "AUC, learned on pretrained features" in out
