"""``specvideo bench serve``: load on a running ``specvideo serve``, N concurrent clients.

For each concurrency N (default 1, 2, 4, 8), N clients each send ``repeats`` streaming chat requests
one after another (a closed loop: a client asks again as soon as its answer is complete, so requests
arrive while others decode), greedy, with the official ``openai`` client; ``max_tokens`` may list
several lengths, taken in turn, so requests end at different times as real ones do. Per
request it records the time to the first text, the total latency and the tokens received (the final
chunk's ``usage``); refused requests (429) and failures are counted, never dropped. Reported per N:
median and p95 time to first token, p50 / p95 latency, aggregate tokens per second (tokens received
over the wave's wall time), refusals. ``flood`` sends that many requests at once, past the queue:
each must be answered or refused with 429. ``seeded`` makes every second request sample
(temperature 0.8, top-p 0.95, a seed fixed by its place in the run) so answers stay reproducible.
``compare`` (another server's URL, a single server of the same model) sends every request once more
there, whole, one at a time, and counts the answers that are not the same text: with a replica
killed mid-flood, every stream must end whole and equal (the replicas' entry replays cut streams).
Results go to docs/SCALING.md, under a section named by ``label`` (the server's batching mode, say).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from benchmarks.report import atomic_write, command_block, replace_section

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
    max_tokens: tuple[int, ...] = (64,)  # request r of client c asks max_tokens[(c + r) % len]: mixed lengths
    repeats: int = 2
    report: str = "docs/SCALING.md"
    flood: int = 0  # requests sent at once after the waves (0: none)
    label: str = ""  # the report section's name after "Serving load"
    seeded: bool = False  # every second request samples with a seed
    compare: str | None = None  # a single server's /v1 URL: every request's text compared with its answer there


@dataclass
class RequestResult:
    ok: bool
    refused: bool = False
    ttft_s: float | None = None
    latency_s: float | None = None
    tokens: int = 0
    error: str | None = None
    prompt: str = ""
    text: str = ""
    max_tokens: int = 0
    temperature: float = 0.0
    seed: int | None = None
    single: bool | None = None  # equal to the compared server's answer (None: not compared)


@dataclass
class WaveResult:
    concurrency: int
    flood: bool = False  # sent at once (past the queue), not by clients in a loop
    requests: list[RequestResult] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)

    def summary(self, alone: dict[str, str] | None = None) -> dict:
        """alone: each prompt's answer with one client (greedy: every answer should agree with it)."""
        ok = [r for r in self.requests if r.ok]
        compared = [r for r in ok if alone and r.prompt in alone and r.temperature == 0]
        lat = sorted(r.latency_s for r in ok)
        tokens = sum(r.tokens for r in ok)
        return {
            "concurrency": self.concurrency,
            "requests": len(self.requests),
            "answered": len(ok),
            "refused": sum(r.refused for r in self.requests),
            "failed": sum(not r.ok and not r.refused for r in self.requests),
            "ttft_s_median": _percentile(sorted(r.ttft_s for r in ok if r.ttft_s is not None), 50),
            "ttft_s_p95": _percentile(sorted(r.ttft_s for r in ok if r.ttft_s is not None), 95),
            "latency_s_p50": _percentile(lat, 50),
            "latency_s_p95": _percentile(lat, 95),
            "tokens_per_s": tokens / sum(self.wall_s) if self.wall_s and sum(self.wall_s) else None,
            "equal_to_alone": f"{sum(_agree(r.text, alone[r.prompt]) for r in compared)}/{len(compared)}" if compared else None,
            "equal_to_single": _share(r.single for r in self.requests if r.ok and r.single is not None),
            "cut": sum(bool(r.error and "mid-stream" in r.error) for r in self.requests),
        }


def _agree(text: str, reference: str) -> bool:
    """Greedy answers of one prompt agree when the shorter is the start of the longer (lengths may differ)."""
    return text.startswith(reference) or reference.startswith(text)


def _share(flags) -> str | None:
    flags = list(flags)
    return f"{sum(flags)}/{len(flags)}" if flags else None


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    k = (len(values) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


SAMPLED = {"temperature": 0.8, "top_p": 0.95}


def settings(config: BenchServeConfig, index: int) -> dict:
    """Request ``index``'s sampling: greedy, or (seeded runs, odd indices) sampled with seed 1000 + index."""
    if config.seeded and index % 2:
        return {**SAMPLED, "seed": 1000 + index}
    return {"temperature": 0}


def one_request(client, config: BenchServeConfig, prompt: str, max_tokens: int, sampling: dict | None = None) -> RequestResult:
    import openai

    sampling = sampling or {"temperature": 0}
    asked = {"prompt": prompt, "max_tokens": max_tokens, "temperature": sampling["temperature"], "seed": sampling.get("seed")}
    start = time.perf_counter()
    first = None
    try:
        stream = client.chat.completions.create(
            model=config.model, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, stream=True, **sampling
        )
        usage, text = None, []
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                first = first if first is not None else time.perf_counter() - start
                text.append(chunk.choices[0].delta.content)
            usage = chunk.usage or usage
        tokens = usage.completion_tokens if usage else 0
        latency = time.perf_counter() - start
        return RequestResult(True, ttft_s=first, latency_s=latency, tokens=tokens, text="".join(text), **asked)
    except openai.RateLimitError as err:
        return RequestResult(False, refused=True, error=err.message, **asked)
    except openai.OpenAIError as err:  # a stream that ended with an error event raises here too
        return RequestResult(False, error=str(err).splitlines()[0], **asked)


def compare_with(config: BenchServeConfig, waves: list[WaveResult]) -> None:
    """Each answered request sent again to ``config.compare``, whole; ``single`` says if it agrees."""
    import openai

    client = openai.OpenAI(base_url=config.compare, api_key=config.api_key, max_retries=2, timeout=600)
    for r in (r for w in waves for r in w.requests if r.ok):
        sampling = {"temperature": r.temperature, **({"top_p": SAMPLED["top_p"], "seed": r.seed} if r.seed is not None else {})}
        answer = client.chat.completions.create(
            model=config.model, messages=[{"role": "user", "content": r.prompt}], max_tokens=r.max_tokens, **sampling
        )
        r.single = answer.choices[0].message.content == r.text


def run_benchmark(config: BenchServeConfig) -> list[WaveResult]:
    import openai

    client = openai.OpenAI(base_url=config.url, api_key=config.api_key, max_retries=0, timeout=600)

    def client_loop(c: int, n: int) -> list[RequestResult]:  # one client's requests, one after another
        lengths = config.max_tokens
        return [
            one_request(
                client, config, PROMPTS[(r * n + c) % len(PROMPTS)], lengths[(c + r) % len(lengths)],
                settings(config, r * n + c),
            )
            for r in range(config.repeats)
        ]

    waves = []
    for n in config.concurrency:
        wave = WaveResult(n)
        start = time.perf_counter()
        with ThreadPoolExecutor(n) as pool:
            for results in pool.map(lambda c, n=n: client_loop(c, n), range(n)):
                wave.requests += results
        wave.wall_s.append(time.perf_counter() - start)
        waves.append(wave)
    if config.flood:
        wave = WaveResult(config.flood, flood=True)
        start = time.perf_counter()
        with ThreadPoolExecutor(config.flood) as pool:
            wave.requests += list(pool.map(
                lambda i: one_request(
                    client, config, PROMPTS[i % len(PROMPTS)], config.max_tokens[i % len(config.max_tokens)], settings(config, i)
                ),
                range(config.flood),
            ))
        wave.wall_s.append(time.perf_counter() - start)
        waves.append(wave)
    if config.compare:
        compare_with(config, waves)
    return waves


def to_markdown(waves: list[WaveResult]) -> str:
    lines = [
        "| clients | answered / sent | refused | failed (cut mid-stream) | TTFT median (s) | TTFT p95 (s) | latency p50 (s) | "
        "latency p95 (s) | tokens / s (all requests) | = 1 client (greedy) | = single server |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    alone = reference_answers(waves)
    for w in waves:
        s = w.summary(alone)
        who = f"flood of {w.concurrency} at once" if w.flood else str(s["concurrency"])
        lines.append(
            f"| {who} | {s['answered']} / {s['requests']} | {s['refused']} | {s['failed']} ({s['cut']}) | "
            f"{_fmt(s['ttft_s_median'])} | {_fmt(s['ttft_s_p95'])} | {_fmt(s['latency_s_p50'])} | "
            f"{_fmt(s['latency_s_p95'])} | {_fmt(s['tokens_per_s'], '{:.1f}')} | {s['equal_to_alone'] or '-'} | "
            f"{s['equal_to_single'] or '-'} |"
        )
    return "\n".join(lines)


def reference_answers(waves: list[WaveResult]) -> dict[str, str]:
    """Each prompt's first answer in the one-client wave (none without one)."""
    single = next((w for w in waves if w.concurrency == 1 and not w.flood), None)
    answers: dict[str, str] = {}
    for r in single.requests if single else []:
        if r.ok and r.temperature == 0:
            answers.setdefault(r.prompt, r.text)
    return answers


def write_report(waves: list[WaveResult], command: str, path: str, label: str = "") -> str:
    from pathlib import Path

    path, heading = Path(path), f"{SECTION}: {label}" if label else SECTION
    section = "\n".join([*command_block(heading, command), to_markdown(waves), ""])
    old = path.read_text(encoding="utf-8") if path.exists() else "# Scaling\n"
    atomic_write(path, lambda f: f.write(replace_section(old, heading, section)))
    return str(path)


def _fmt(value, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)
