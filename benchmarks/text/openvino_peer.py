"""OpenVINO GenAI as a peer in ``specvideo bench text``: its LLMPipeline on int4 exports of the same
local weights (``scripts/build_openvino_peer.sh``: optimum-intel's ``export openvino --weight-format
int4`` of the code pair's bf16 directories, in a virtual environment of its own), fed the same token
ids for the same number of new tokens, timed the same way (wall clock around one request).

Nothing here imports OpenVINO: each mode runs ``openvino_worker.py`` under the peer environment's
Python, one process per mode, started before the timed runs and stopped after. Modes:

    plain    its own generation, no speculation
    lookup   prompt lookup decoding (n-gram matches, as ours-ngram)
    draft    speculative decoding with the 0.5B draft, exported the same way

Greedy ignores EOS as every other method; its tokens come from its own int4 weights and are not
compared for exactness.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import torch

from specvideo.paths import cache_root

OPENVINO_MODES = ("plain", "lookup", "draft")
BUILD_HINT = "scripts/build_openvino_peer.sh"
WORKER = Path(__file__).with_name("openvino_worker.py")


def peer_root() -> Path:
    return cache_root() / "openvino"


def peer_python() -> Path:
    python = peer_root() / "venv" / "bin" / "python"
    if not python.exists():
        raise ValueError(f"OpenVINO rows need the peer environment: run {BUILD_HINT} once (about 10 min)")
    return python


def export_dir(name: str) -> Path:
    """The int4 export of the code pair's model ``name`` ("1.5b" or "0.5b")."""
    path = peer_root() / f"qwen2.5-coder-{name}-int4"
    if not (path / "openvino_model.xml").exists():
        raise ValueError(f"OpenVINO rows need the int4 export {path}: run {BUILD_HINT} once")
    return path


class OpenVINOWorker:
    """One worker process: an LLMPipeline over the target's export in ``mode`` (k drafted tokens)."""

    def __init__(self, mode: str, k: int, threads: int):
        if mode not in OPENVINO_MODES:
            raise ValueError(f"unknown OpenVINO mode {mode!r}; choose from {', '.join(OPENVINO_MODES)}")
        command = [str(peer_python()), str(WORKER), str(export_dir("1.5b")), mode, str(k)]
        if mode == "draft":
            command.append(str(export_dir("0.5b")))
        env = {"OMP_NUM_THREADS": str(threads), "PATH": "/usr/bin:/bin"}
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        self._reply()  # {"ready": true} once the pipeline is compiled

    def _reply(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the OpenVINO worker exited: {self.process.stderr.read()[-2000:]}")
        return json.loads(line)

    def complete(self, ids: list[int], n: int, temperature: float, top_p: float, seed: int) -> dict:
        request = {"ids": ids, "n": n, "temperature": float(temperature), "top_p": float(top_p), "seed": seed}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._reply()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


def openvino_runner(worker: OpenVINOWorker, n: int, top_p: float) -> Callable:
    """A bench method's run(ids, temperature, seed) -> (tokens, None) over ``worker``."""

    def run(ids: torch.Tensor, temperature: float, seed: int):
        tokens = worker.complete(ids[0].tolist(), n, temperature, top_p, seed)["tokens"]
        if len(tokens) != n:  # equal work: a short reply would time less than the others do
            raise RuntimeError(f"OpenVINO returned {len(tokens)} tokens for a request of {n}")
        return tokens, None

    return run
