"""``specvideo bench serve``: load on a running ``specvideo serve``, N concurrent streaming requests.

For each concurrency N (default 1, 2, 4, 8) it sends N streaming chat requests at once (the same
fixed prompts, greedy, ``max_tokens``), ``repeats`` times, with the official ``openai`` client, and
records per request the time to the first text, the total latency and the tokens it received (the
final chunk's ``usage``); refused requests (429) and failures are counted, never dropped. Reported
per N: median time to first token, p50 / p95 latency, aggregate tokens per second (tokens received
over the wall time of the wave), refusals. Results go to docs/SCALING.md.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from specvideo.bench.report import atomic_write, command_block, replace_section

SECTION = "## Serving load"
PROMPTS = (
    "How do I reverse a list in Python?",
    "Write a function that checks whether a string is a palindrome.",
    "What is the difference between a tuple and a list?",
    "Explain what a Python generator is in two sentences.",
    "How do I read a file line by line?",
    "Give an example of a dictionary comprehension.",
    "What does the 'with' statement do?",
    "How can I sort a list of dictionaries by a key?",
)


@dataclass(frozen=True)
class BenchServeConfig:
    url: str = "http://127.0.0.1:8000/v1"
    model: str = "smollm2"
    api_key: str = "none"
    concurrency: tuple[int, ...] = (1, 2, 4, 8)
    max_tokens: int = 64
    repeats: int = 2
    report: str = "docs/SCALING.md"


@dataclass
class RequestResult:
    ok: bool
    refused: bool = False
    ttft_s: float | None = None
    latency_s: float | None = None
    tokens: int = 0
    error: str | None = None


@dataclass
class WaveResult:
    concurrency: int
    requests: list[RequestResult] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)

    def summary(self) -> dict:
        ok = [r for r in self.requests if r.ok]
        lat = sorted(r.latency_s for r in ok)
        tokens = sum(r.tokens for r in ok)
        return {
            "concurrency": self.concurrency,
            "requests": len(self.requests),
            "answered": len(ok),
            "refused": sum(r.refused for r in self.requests),
            "failed": sum(not r.ok and not r.refused for r in self.requests),
            "ttft_s_median": statistics.median(r.ttft_s for r in ok if r.ttft_s is not None) if ok else None,
            "latency_s_p50": _percentile(lat, 50),
            "latency_s_p95": _percentile(lat, 95),
            "tokens_per_s": tokens / sum(self.wall_s) if self.wall_s and sum(self.wall_s) else None,
        }


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    k = (len(values) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def one_request(client, config: BenchServeConfig, prompt: str) -> RequestResult:
    import openai

    start = time.perf_counter()
    first = None
    try:
        stream = client.chat.completions.create(
            model=config.model,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=config.max_tokens,
            temperature=0,
            stream=True,
        )
        usage = None
        for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - start
            usage = chunk.usage or usage
        tokens = usage.completion_tokens if usage else 0
        return RequestResult(True, ttft_s=first, latency_s=time.perf_counter() - start, tokens=tokens)
    except openai.RateLimitError as err:
        return RequestResult(False, refused=True, error=err.message)
    except openai.OpenAIError as err:
        return RequestResult(False, error=str(err).splitlines()[0])


def run_benchmark(config: BenchServeConfig) -> list[WaveResult]:
    import openai

    client = openai.OpenAI(base_url=config.url, api_key=config.api_key, max_retries=0, timeout=600)
    waves = []
    for n in config.concurrency:
        wave = WaveResult(n)
        for r in range(config.repeats):
            prompts = [PROMPTS[(r * n + i) % len(PROMPTS)] for i in range(n)]
            start = time.perf_counter()
            with ThreadPoolExecutor(n) as pool:
                wave.requests += list(pool.map(lambda p: one_request(client, config, p), prompts))
            wave.wall_s.append(time.perf_counter() - start)
        waves.append(wave)
    return waves


def to_markdown(waves: list[WaveResult]) -> str:
    lines = [
        "| concurrent requests | answered / sent | refused | failed | TTFT median (s) | latency p50 (s) | latency p95 (s) | tokens / s (all requests) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for w in waves:
        s = w.summary()
        lines.append(
            f"| {s['concurrency']} | {s['answered']} / {s['requests']} | {s['refused']} | {s['failed']} | "
            f"{_fmt(s['ttft_s_median'])} | {_fmt(s['latency_s_p50'])} | {_fmt(s['latency_s_p95'])} | {_fmt(s['tokens_per_s'], '{:.1f}')} |"
        )
    return "\n".join(lines)


def write_report(waves: list[WaveResult], command: str, path: str) -> str:
    from pathlib import Path

    path = Path(path)
    section = "\n".join([*command_block(SECTION, command), to_markdown(waves), ""])
    old = path.read_text(encoding="utf-8") if path.exists() else "# Scaling\n"
    atomic_write(path, lambda f: f.write(replace_section(old, SECTION, section)))
    return str(path)


def _fmt(value, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)
