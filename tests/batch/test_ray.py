"""Batch jobs on a local Ray cluster started by the test: the same outputs as local mode, a killed
actor's items retried with every item done exactly once. Skipped without ray (pip install -e ".[ray]")."""

import json

import numpy as np
import pytest

from specvideo.batch import run_text, run_video
from tests.batch.conftest import VIDEO_SETTINGS, frames_of

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def test_video_on_two_actors_equals_local_mode(cluster, models, clips, tmp_path):
    kwargs = dict(model=str(models / "video"), batch_size=1, progress=False, **VIDEO_SETTINGS)
    local = run_video([str(clips)], str(tmp_path / "local"), **kwargs)
    seen = []
    on_ray = run_video(
        [str(clips)],
        str(tmp_path / "ray"),
        ray="auto",
        num_actors=2,
        on_item=lambda row, ctx: seen.append(len(ctx.actors)),
        **kwargs,
    )
    assert seen and set(seen) == {2}
    assert [r["status"] for r in on_ray] == [r["status"] for r in local] == ["ok", "ok", "error", "ok"]
    for a, b in zip(local, on_ray):
        if a["status"] == "ok":
            np.testing.assert_array_equal(frames_of(a["output"]), frames_of(b["output"]))
            assert a["stats"] == b["stats"]


def test_a_killed_actor_has_its_items_retried(cluster, models, clips, tmp_path):
    good = [str(clips / f"clip{i}.mp4") for i in (0, 1, 3)] * 1
    killed = []

    def kill_once(row, context):
        if not killed:
            ray.kill(context.actors[0], no_restart=False)
            killed.append(row["id"])

    rows = run_video(
        good,
        str(tmp_path / "out"),
        ray="auto",
        num_actors=2,
        batch_size=1,
        progress=False,
        model=str(models / "video"),
        on_item=kill_once,
        **VIDEO_SETTINGS,
    )
    assert killed and [r["status"] for r in rows] == ["ok"] * 3
    lines = [json.loads(line) for line in (tmp_path / "out" / "manifest.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in lines) == sorted(set(good)) and len(lines) == 3  # each once


def test_text_on_two_actors_equals_local_mode(cluster, models, prompts, tmp_path):
    kwargs = dict(
        target=str(models / "text" / "target"),
        draft=str(models / "text" / "draft"),
        drafter="model",
        max_new_tokens=6,
        batch_size=2,
        progress=False,
    )
    local = run_text(str(prompts), str(tmp_path / "local.jsonl"), **kwargs)
    on_ray = run_text(str(prompts), str(tmp_path / "ray.jsonl"), ray="auto", num_actors=2, **kwargs)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]  # noqa: E731
    assert [r.get("text") for r in strip(on_ray)] == [r.get("text") for r in strip(local)]
    assert [r["status"] for r in on_ray] == ["ok", "ok", "error", "ok", "ok", "ok"]
