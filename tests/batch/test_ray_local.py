"""--ray local: a private Ray instance for the job alone, shut down at its end."""

import pytest

from specvideo.batch import run_text

ray = pytest.importorskip("ray")


def test_ray_local_starts_and_stops_its_own_instance(models, tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "def f(x):"}\n{"prompt": "class A:"}\n')
    assert not ray.is_initialized()
    rows = run_text(
        str(path),
        str(tmp_path / "r.jsonl"),
        ray="local",
        num_actors=1,
        progress=False,
        target=str(models / "text" / "target"),
        draft=str(models / "text" / "draft"),
        drafter="model",
        max_new_tokens=4,
    )
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert not ray.is_initialized()
