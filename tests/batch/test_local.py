"""Batch jobs in this process: outputs, manifest, bad items in the middle, resume, force."""

import json
import os

import pytest

from specvideo.batch import run_text, run_video, video_job
from specvideo.cli import main
from tests.batch.conftest import VIDEO_SETTINGS, frames_of


def manifest_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_video_local_outputs_manifest_and_a_corrupt_input(models, clips, tmp_path):
    out = tmp_path / "out"
    rows = run_video([str(clips)], str(out), model=str(models / "video"), progress=False, **VIDEO_SETTINGS)
    assert [r["status"] for r in rows] == ["ok", "ok", "error", "ok"]
    assert "clip2.mp4" in rows[2]["reason"] and "\n" not in rows[2]["reason"]
    for row in (rows[0], rows[1], rows[3]):
        assert frames_of(row["output"]).shape == (3, 16, 16, 3)
        assert (
            row["settings"]["num_frames"] == 3
            and row["wall_s"] > 0
            and 0 <= row["stats"]["acceptance_rate"] <= 1
        )
    lines = manifest_lines(out / "manifest.jsonl")
    assert [r["id"] for r in lines] == [r["id"] for r in rows]  # one line per item, in input order
    assert not any(name.endswith(".tmp") or name.startswith(".") for name in os.listdir(out))


def test_video_rerun_does_no_work_and_force_or_new_settings_redo(models, clips, tmp_path):
    good = [str(clips / f"clip{i}.mp4") for i in (0, 1, 3)]
    out, model = str(tmp_path / "out"), str(models / "video")
    rows, summary = video_job(good, out, model=model, progress=False, **VIDEO_SETTINGS)
    assert summary.ok == 3 and summary.skipped == 0
    mtimes = [os.stat(r["output"]).st_mtime_ns for r in rows]
    again, summary = video_job(good, out, model=model, progress=False, **VIDEO_SETTINGS)
    assert summary.skipped == 3 and again == rows
    assert [os.stat(r["output"]).st_mtime_ns for r in again] == mtimes  # nothing rewritten
    _, summary = video_job(good, out, model=model, progress=False, force=True, **VIDEO_SETTINGS)
    assert summary.skipped == 0 and summary.ok == 3
    _, summary = video_job(good, out, model=model, progress=False, **{**VIDEO_SETTINGS, "seed": 7})
    assert summary.skipped == 0  # other settings: other outputs
    assert len(manifest_lines(tmp_path / "out" / "manifest.jsonl")) == 3


def test_video_resume_after_an_interruption(models, clips, tmp_path):
    good = [str(clips / f"clip{i}.mp4") for i in (0, 1, 3)]
    out, model = str(tmp_path / "out"), str(models / "video")

    def stop_after_first(row, context):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_video(
            good, out, model=model, batch_size=1, progress=False, on_item=stop_after_first, **VIDEO_SETTINGS
        )
    assert len(manifest_lines(tmp_path / "out" / "manifest.jsonl")) == 1  # what finished was kept
    rows, summary = video_job(good, out, model=model, batch_size=1, progress=False, **VIDEO_SETTINGS)
    assert summary.skipped == 1 and summary.ok == 3
    assert [r["id"] for r in manifest_lines(tmp_path / "out" / "manifest.jsonl")] == [r["id"] for r in rows]


def test_text_local_results_with_bad_lines(models, prompts, tmp_path):
    out = tmp_path / "results.jsonl"
    target, draft = str(models / "text" / "target"), str(models / "text" / "draft")
    rows = run_text(
        str(prompts), str(out), target=target, draft=draft, drafter="model", max_new_tokens=6, progress=False
    )
    assert [r["status"] for r in rows] == ["ok", "ok", "error", "ok", "ok", "ok"]
    assert "line 3 is not JSON" in rows[2]["reason"]  # line 5 is chat messages, through the chat template
    assert rows[1]["new_tokens"] <= 4 and rows[1]["settings"]["max_new_tokens"] == 4
    assert all(isinstance(r["text"], str) for r in rows if r["status"] == "ok")
    assert manifest_lines(out) == rows
    again = run_text(
        str(prompts), str(out), target=target, draft=draft, drafter="model", max_new_tokens=6, progress=False
    )
    assert [r for r in again if r["status"] == "ok"] == [r for r in rows if r["status"] == "ok"]


def test_a_tree_drafter_runs_its_lines_one_at_a_time(models, prompts, tmp_path, monkeypatch):
    """The drafter's spec says it verifies one row a call (token trees): greedy lines of one setting
    are not even tried together then, and each equals the line run on its own."""
    from specvideo.batch.workers import TextWorker

    calls, generate = [], TextWorker._generate
    monkeypatch.setattr(TextWorker, "_generate", lambda self, group: calls.append(len(group)) or generate(self, group))
    target = str(models / "text" / "target")
    kwargs = dict(target=target, drafter="ngram-tree", max_new_tokens=6, progress=False)
    rows = run_text(str(prompts), str(tmp_path / "tree.jsonl"), **kwargs)
    assert calls == [1] * 5
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == 5 and all(r["stats"]["batch_rows"] == 1 for r in ok)
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"prompt": "def f(x):"}) + "\n")
    alone = run_text(str(one), str(tmp_path / "alone.jsonl"), **kwargs)
    assert alone[0]["text"] == ok[0]["text"]


def test_cli_batch_video_and_text(models, clips, prompts, tmp_path, capsys):
    argv = [
        "batch",
        "video",
        str(clips / "clip0.mp4"),
        str(clips / "clip1.mp4"),
        "--out-dir",
        str(tmp_path / "v"),
    ]
    argv += [
        "--model",
        str(models / "video"),
        "--num-frames",
        "2",
        "--steps",
        "2",
        "--side-by-side",
        "--json",
    ]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["ok"] == 2 and all(os.path.isfile(r["side_by_side"]) for r in out["rows"])
    assert main(argv) == 0 and json.loads(capsys.readouterr().out)["summary"]["skipped"] == 2
    text = [
        "batch",
        "text",
        str(prompts),
        "--out",
        str(tmp_path / "r.jsonl"),
        "--target",
        str(models / "text" / "target"),
    ]
    text += ["--draft", str(models / "text" / "draft"), "--drafter", "model", "--max-new-tokens", "4"]
    assert main(text) == 1  # two lines fail: the exit code says so, the rest is done
    captured = capsys.readouterr()
    assert "6 items: 5 ok, 1 failed" in captured.out and "line 3 is not JSON" in captured.err


def test_bad_job_settings_are_clear_errors(models, clips, tmp_path, capsys):
    with pytest.raises(ValueError, match="unknown video setting"):
        run_video([str(clips)], str(tmp_path), frames=3)
    with pytest.raises(ValueError, match="threshold 25 is outside the ssim range"):
        run_video([str(clips)], str(tmp_path), threshold=25.0, metric="ssim")
    with pytest.raises(ValueError, match=r"threshold -1 is outside the typicality range \[0, inf\)"):
        run_video([str(clips)], str(tmp_path), threshold=-1.0)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        run_video([str(clips)], str(tmp_path), batch_size=0)
    with pytest.raises(ValueError, match="no video files found"):
        run_video([str(tmp_path / "empty*")], str(tmp_path / "o"))
    assert main(["batch", "text", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "r.jsonl")]) == 2
    assert "cannot read prompts file" in capsys.readouterr().err


def test_ray_flag_without_ray_says_how_to_install_it(models, clips, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    with pytest.raises(ValueError, match=r'pip install -e "\.\[ray\]"'):
        run_video(
            [str(clips / "clip0.mp4")],
            str(tmp_path / "o"),
            ray="local",
            model=str(models / "video"),
            progress=False,
            **VIDEO_SETTINGS,
        )
