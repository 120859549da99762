"""llama.cpp as a peer in ``specvideo bench text``: its own server on the same GGUF files, fed the same
token ids for the same number of new tokens, timed the same way (wall clock around one request).

``scripts/build_llama_cpp.sh`` builds ``llama-server`` once into the cache; nothing here builds,
downloads or imports llama.cpp, and the bench refuses llama.cpp rows when the binary is missing.
Modes (one server process each, started before the timed runs and stopped after):

    plain   its own generation, no speculation
    ngram   its n-gram speculation (``--spec-type ngram-simple``: prompt lookup, as ours-ngram)
    draft   a draft model (``--spec-type draft-simple --model-draft``; the code pair's 0.5B)

Requests go to ``POST /completion`` with the prompt as token ids, ``n_predict`` tokens,
``ignore_eos`` (never stop early, as every other method) and ``cache_prompt: false`` (each run
prefills, as ours do). Greedy is ``top_k 1``; sampling temperature T with top-p, as the others.
llama.cpp computes on the quantized GGUF weights: its tokens are not compared for exactness.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import torch

from specvideo.paths import cache_root

LLAMA_MODES = ("plain", "ngram", "draft")
BUILD_HINT = "scripts/build_llama_cpp.sh"


def binary(name: str) -> Path:
    """A tool scripts/build_llama_cpp.sh built into the cache (llama-server, llama-bench, llama-perplexity)."""
    found = sorted((cache_root() / "llama.cpp").glob(f"*/bin/{name}"))
    if not found:
        raise ValueError(f"llama.cpp rows need {name}: run {BUILD_HINT} once (about 12 min)")
    return found[-1]


def llama_server_binary() -> Path:
    """The llama-server that scripts/build_llama_cpp.sh built into the cache."""
    return binary("llama-server")


def mode_args(mode: str, draft_gguf: Path | None, k: int) -> list[str]:
    """llama-server's speculative flags for ``mode`` (k tokens drafted at most)."""
    if mode == "plain":
        return []
    if mode == "ngram":
        return ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", str(k)]
    if mode == "draft":
        if draft_gguf is None:
            raise ValueError("llama.cpp's draft mode needs a draft GGUF file (the code pair has one)")
        return ["--spec-type", "draft-simple", "--model-draft", str(draft_gguf), "--spec-draft-n-max", str(k)]
    raise ValueError(f"unknown llama.cpp mode {mode!r}; choose from {', '.join(LLAMA_MODES)}")


class LlamaServer:
    """One llama-server process on 127.0.0.1 over ``gguf`` with ``threads`` threads."""

    def __init__(self, gguf: Path, args: list[str], threads: int, context: int, timeout_s: float = 120.0):
        self.port = _free_port()
        command = [
            str(llama_server_binary()), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(self.port),
            "-t", str(threads), "-tb", str(threads), "-c", str(context), "-np", "1", "--no-webui", *args,
        ]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self._wait_ready(timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama-server exited: {self.process.stderr.read()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.25)
        self.close()
        raise RuntimeError(f"llama-server did not get ready within {timeout_s:.0f} s")

    def complete(self, ids: list[int], n: int, temperature: float, top_p: float, seed: int) -> dict:
        body = {"prompt": ids, "n_predict": n, "ignore_eos": True, "cache_prompt": False, "seed": seed,
                "return_tokens": True, "temperature": float(temperature)}
        body.update({"top_k": 1} if temperature == 0 else {"top_k": 0, "top_p": float(top_p), "min_p": 0.0})
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/completion", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=600) as r:
            return json.loads(r.read())

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()


def llama_runner(server: LlamaServer, n: int, top_p: float) -> Callable:
    """A bench method's run(ids, temperature, seed) -> (tokens, None) over ``server``."""

    def run(ids: torch.Tensor, temperature: float, seed: int):
        reply = server.complete(ids[0].tolist(), n, temperature, top_p, seed)
        tokens = reply.get("tokens") or [0] * int(reply.get("tokens_predicted", 0))
        return list(tokens), None

    return run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
