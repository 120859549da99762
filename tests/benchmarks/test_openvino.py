"""OpenVINO GenAI as a bench peer: clear refusals when its environment is not made, its config
checks, and the worker protocol (a stand-in worker: the default test run never installs OpenVINO)."""

import sys

import pytest
import torch

from benchmarks.text import BenchTextConfig
from benchmarks.text import openvino_peer as openvino
from benchmarks.text.openvino_peer import OpenVINOWorker, openvino_runner, peer_python


def test_a_missing_peer_environment_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECVIDEO_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match="run scripts/build_openvino_peer.sh once"):
        peer_python()
    with pytest.raises(ValueError, match="int4 export .* run scripts/build_openvino_peer.sh once"):
        openvino.export_dir("1.5b")


def test_config_checks_modes_and_the_pair():
    with pytest.raises(ValueError, match="unknown OpenVINO mode 'fast'"):
        BenchTextConfig(methods=("openvino",), pair="qwen-coder", openvino_modes=("fast",))
    from benchmarks.text.methods import openvino_methods

    with pytest.raises(ValueError, match="OpenVINO rows run the code pair's int4 exports"):
        openvino_methods(BenchTextConfig(methods=("hf-target", "openvino")))


def test_the_worker_answers_each_request_with_its_tokens(tmp_path, monkeypatch):
    fake = tmp_path / "worker.py"  # what openvino_worker.py says: ready, then one reply per request
    fake.write_text(
        "import json, sys\n"
        "print(json.dumps({'ready': True}), flush=True)\n"
        "for line in sys.stdin:\n"
        "    r = json.loads(line)\n"
        "    print(json.dumps({'tokens': [len(r['ids']) + i for i in range(r['n'])]}), flush=True)\n"
    )
    monkeypatch.setattr(openvino, "peer_python", lambda: sys.executable)
    monkeypatch.setattr(openvino, "WORKER", fake)
    monkeypatch.setattr(openvino, "export_dir", lambda name: tmp_path / name)
    worker = OpenVINOWorker("lookup", 3, threads=1)
    try:
        run = openvino_runner(worker, 4, 0.9)
        assert run(torch.tensor([[5, 6, 7]]), 0.0, 0) == ([3, 4, 5, 6], None)
        worker.complete([1], 2, 0.0, 0.9, 0)  # the stand-in answers n tokens; a runner asking 4 gets 2:
        with pytest.raises(RuntimeError, match="returned 2 tokens for a request of 4"):
            openvino_runner(type("Short", (), {"complete": lambda self, *a: {"tokens": [1, 2]}})(), 4, 0.9)(
                torch.tensor([[1]]), 0.0, 0
            )
    finally:
        worker.close()
    assert worker.process.poll() is not None
    with pytest.raises(ValueError, match="unknown OpenVINO mode"):
        OpenVINOWorker("fast", 3, threads=1)


def test_the_test_split_is_third_party_and_apart_from_every_other_source():
    from benchmarks.text.fim import FIM_PACKAGES, TEST_PACKAGES
    from benchmarks.text.workloads import workload_prompts
    from recipes.code_data import EXTRA_PACKAGES

    assert not set(TEST_PACKAGES) & (set(FIM_PACKAGES) | set(EXTRA_PACKAGES))  # never trained on
    fim, chat = workload_prompts("fim", "test", 0), workload_prompts("chat", "test", 0)
    assert len(fim) > 50 and len(chat) > 50
    assert all(p.source.split("-")[0] in TEST_PACKAGES for p in fim)
    assert all(p.text.startswith("Write a Python function `") and p.chat for p in chat)
    others = {p.source for s in ("tuning", "heldout") for p in workload_prompts("fim", s, 0)}
    assert not others & {p.source for p in fim}
    with pytest.raises(ValueError, match="code workload has no test split"):
        workload_prompts("code", "test", 3)


def test_every_split_has_its_report_section_and_plot():
    from benchmarks.text.config import SPLITS
    from benchmarks.text.report import PLOT_NAMES, section_heading

    headings = {section_heading({"split": s, "pair": p}) for s in SPLITS for p in (None, "qwen-coder")}
    assert len(headings) == 2 * len(SPLITS) and set(PLOT_NAMES) == set(SPLITS)
