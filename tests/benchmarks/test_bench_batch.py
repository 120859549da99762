"""specvideo bench batch end to end on tiny sizes (the shipped models; a private Ray instance)."""

import pytest

from benchmarks.batch import BenchBatchConfig
from specvideo.cli import main

pytest.importorskip("ray")


def test_bench_batch_writes_its_section(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SPECVIDEO_MODELS", raising=False)
    doc = tmp_path / "SCALING.md"
    doc.write_text("# Scaling\n\n## How to start a cluster\n\nkeep me\n")
    argv = [
        "bench",
        "batch",
        "--num-clips",
        "2",
        "--clip-frames",
        "3",
        "--num-frames",
        "2",
        "--num-prompts",
        "2",
    ]
    argv += ["--max-new-tokens", "2", "--actors", "1", "--repeats", "1", "--report", str(doc)]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "| video | local | 2 |" in table and "| text | ray-1 | 2 |" in table
    written = doc.read_text()
    assert (
        "keep me" in written
        and "## Measured on this machine" in written
        and "specvideo bench batch" in written
    )


def test_bench_batch_config_is_checked():
    with pytest.raises(ValueError, match="actors must be an integer >= 1"):
        BenchBatchConfig(actors=0)
