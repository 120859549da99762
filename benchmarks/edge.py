"""``specvideo bench edge``: drafting on the client, verifying on the server, against the server
streaming its own answer, at added round-trip delays (#68 item 4).

Against a running ``specvideo serve`` (``url``; the script ``scripts/edge_bench.sh`` starts one
with one torch thread, the client gets the other core): for each delay d in ``delays_ms`` and each
held-out prompt (``benchmarks.text.prompts``: chat requests through the chat template, or code
completions), ``repeats`` times, side by side:

- **edge**: ``specvideo.serve.edge.EdgeClient`` with the local drafter, d added to every round trip
  (a client-inserted delay, as a slower link would add);
- **server**: the same request to the server's streaming route (its own drafter), d added once to
  the request (streamed tokens follow without a round trip each).

Per mode and delay: tokens per second at the client (tokens over wall time, the median over runs,
[min-max] of the per-repeat totals), the server's target forwards per generated token (plain
decoding is 1.0), bytes sent and received per token, the mean k, and whether every edge text equals
the server's own answer.

With ``load`` > 0, that many other users (threads streaming the server's own answers to the tuning
split's prompts, back to back) keep the server's batch busy meanwhile: per mode, their tokens per
second (each of their requests' tokens spread evenly over its time, the part inside the mode's
windows, over their time) and the server's
target forwards per second and per token delivered to everyone (its /metrics
``specvideo_target_forwards`` over the mode's windows): what a client's rounds cost the others.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from dataclasses import dataclass, field

import httpx

from benchmarks.text.prompts import chat_prompts, code_prompts, load_prompts_jsonl


@dataclass(frozen=True)
class BenchEdgeConfig:
    url: str = "http://127.0.0.1:8090"
    model: str = "smollm2"
    workload: str = "chat"  # chat or code
    split: str = "heldout"
    num_prompts: int = 6
    max_tokens: int = 64
    delays_ms: tuple[float, ...] = (0.0, 20.0, 80.0)
    repeats: int = 2
    local_draft: str = "lookup"  # specvideo.serve.edge.local_drafter's names
    local_dtype: str = "auto"
    temperature: float = 0.0
    seed: int = 0
    prompts: str | None = None  # a JSON Lines file of prompts instead of the workload's split
    load: int = 0  # other users streaming the server's own answers meanwhile

    def __post_init__(self) -> None:
        if self.workload not in ("chat", "code"):
            raise ValueError(f"workload must be chat or code, got {self.workload!r}")
        if self.num_prompts < 1 or self.max_tokens < 1 or self.repeats < 1 or min(self.delays_ms) < 0:
            raise ValueError("num_prompts, max_tokens and repeats must be >= 1, delays >= 0")


@dataclass
class Row:
    mode: str
    delay_ms: float
    tokens: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    bytes: list[int] = field(default_factory=list)
    ks: list[float] = field(default_factory=list)
    equal: list[bool] = field(default_factory=list)
    totals: list[float] = field(default_factory=list)  # per repeat: all prompts' tokens over their time
    windows: list[tuple[float, float, float]] = field(default_factory=list)  # (start, end, server forwards) per request
    load: Load | None = None  # the other users meanwhile

    def summary(self) -> dict:
        rates = [t / s for t, s in zip(self.tokens, self.seconds) if s]
        tokens = sum(self.tokens)
        return {
            "mode": self.mode, "delay_ms": self.delay_ms, "tokens_per_s": statistics.median(rates) if rates else None,
            "spread": (min(self.totals), max(self.totals)) if self.totals else None,
            "calls_per_token": sum(self.calls) / tokens if tokens else None,
            "bytes_per_token": sum(self.bytes) / tokens if tokens else None,
            "mean_k": statistics.mean(self.ks) if self.ks else None,
            "equal": f"{sum(self.equal)}/{len(self.equal)}" if self.equal else "-",
            **(self.load.during(self.windows, tokens) if self.load is not None and self.windows else {}),
        }


class Load:
    """``users`` threads streaming the server's own answers back to back (other users of the server),
    each request kept as (start, end, tokens). It returns once every user has finished a first
    request, so the load runs from the first measured window on."""

    def __init__(self, config: BenchEdgeConfig, users: int):
        self.config, self.ended, self.stop = config, [], threading.Event()
        prompts = code_prompts("tuning", 8) if config.workload == "code" else chat_prompts("tuning", 8)
        self.warm = [threading.Event() for _ in range(users)]
        self.threads = [
            threading.Thread(target=self._user, args=(prompts[i::users] or prompts, self.warm[i]), daemon=True) for i in range(users)
        ]
        for thread in self.threads:
            thread.start()
        for event in self.warm:
            event.wait(timeout=600)

    def _user(self, prompts, warm: threading.Event) -> None:
        try:
            with httpx.Client(timeout=600) as http:
                while not self.stop.is_set():
                    for prompt in prompts:
                        start = time.perf_counter()
                        tokens = server_stream(http, self.config, prompt, 0.0)[1]
                        self.ended.append((start, time.perf_counter(), tokens))
                        warm.set()
                        if self.stop.is_set():
                            return
        finally:
            warm.set()  # a user that failed holds nobody up

    def during(self, windows: list[tuple[float, float, float]], mine: int) -> dict:
        """The others' tokens per second over ``windows`` (start, end, server forwards), and the
        server's forwards per second and per token delivered (``mine`` the measured user's)."""
        seconds = sum(end - start for start, end, _ in windows)
        theirs = sum(
            n * max(0.0, min(end, e) - max(start, s)) / max(e - s, 1e-9) for s, e, n in self.ended for start, end, _ in windows
        )
        forwards = sum(f for _, _, f in windows)
        return {"others_per_s": theirs / seconds, "forwards_per_s": forwards / seconds, "forwards_per_token": forwards / (mine + theirs)}

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()


def forwards(http: httpx.Client, url: str) -> float:
    """The server's target forwards so far (its /metrics)."""
    for line in http.get(url + "/metrics").text.splitlines():
        if line.startswith("specvideo_target_forwards_total"):
            return float(line.split()[-1])
    raise ValueError("the server's /metrics has no specvideo_target_forwards (an older server)")


def settings(config: BenchEdgeConfig) -> dict:
    out = {"max_tokens": config.max_tokens, "temperature": config.temperature}
    return {**out, "seed": config.seed} if config.temperature > 0 else out


def server_stream(http: httpx.Client, config: BenchEdgeConfig, prompt, delay_s: float) -> tuple[str, int, float, int, int]:
    """(text, tokens, seconds, target forwards, bytes) of the server streaming its own answer."""
    chat = prompt.chat
    body = {"model": config.model, "stream": True, **settings(config)}
    body.update({"messages": [{"role": "user", "content": prompt.text}]} if chat else {"prompt": prompt.text})
    payload = json.dumps(body).encode()
    start = time.perf_counter()
    time.sleep(delay_s)
    text, tokens, per_call, size = "", 0, None, len(payload)
    route = "/v1/chat/completions" if chat else "/v1/completions"
    with http.stream("POST", config.url + route, content=payload, headers={"Content-Type": "application/json"}) as r:
        for line in r.iter_lines():
            size += len(line) + 1
            if not line.startswith("data: {"):
                continue
            event = json.loads(line[6:])
            choice = event["choices"][0]
            text += (choice["delta"].get("content") if chat else choice.get("text")) or ""
            if event.get("usage"):
                tokens = event["usage"]["completion_tokens"]
                per_call = (event.get("speculative") or {}).get("tokens_per_target_call")
    seconds = time.perf_counter() - start
    return text, tokens, seconds, round(tokens / per_call) if per_call else tokens, size


def run_benchmark(config: BenchEdgeConfig, progress=print) -> list[Row]:
    from specvideo.serve.edge import EdgeClient, local_drafter

    if config.prompts:
        prompts = load_prompts_jsonl(config.prompts)[: config.num_prompts]
    elif config.workload == "chat":
        prompts = chat_prompts(config.split, config.num_prompts)
    else:
        prompts = code_prompts(config.split, config.num_prompts)
    drafter, tokenizer = local_drafter(config.local_draft, dtype=config.local_dtype)
    http = httpx.Client(timeout=600)
    load = Load(config, config.load) if config.load else None
    rows = []
    for delay_ms in config.delays_ms:
        edge, own = Row("edge", delay_ms), Row("server", delay_ms)
        for _ in range(config.repeats):
            totals = {"edge": [0, 0.0], "server": [0, 0.0]}
            for prompt in prompts:
                start, before = time.perf_counter(), forwards(http, config.url) if load else 0.0
                text, tokens, seconds, calls, size = server_stream(http, config, prompt, delay_ms / 1e3)
                if load:
                    own.windows.append((start, time.perf_counter(), forwards(http, config.url) - before))
                    start, before = time.perf_counter(), forwards(http, config.url)
                own.tokens.append(tokens), own.seconds.append(seconds), own.calls.append(calls), own.bytes.append(size)
                totals["server"][0] += tokens
                totals["server"][1] += seconds
                client = EdgeClient(config.url, config.model, drafter, tokenizer, delay_s=delay_ms / 1e3)
                chat = [{"role": "user", "content": prompt.text}] if prompt.chat else None
                mine = "".join(client.stream(prompt=None if chat else prompt.text, messages=chat, **settings(config)))
                client.close()
                if load:
                    edge.windows.append((start, time.perf_counter(), forwards(http, config.url) - before))
                s = client.stats
                edge.tokens.append(s.tokens), edge.seconds.append(s.wall_s), edge.calls.append(s.target_calls)
                edge.bytes.append(s.bytes_sent + s.bytes_received), edge.ks.append(statistics.mean(s.ks) if s.ks else 0)
                edge.equal.append(mine == text)
                totals["edge"][0] += s.tokens
                totals["edge"][1] += s.wall_s
            for row in (edge, own):
                n, t = totals[row.mode]
                row.totals.append(n / t if t else 0.0)
        rows += [own, edge]
        progress(f"delay {delay_ms:g} ms: " + "; ".join(f"{r.mode} {r.summary()['tokens_per_s']:.1f} tok/s" for r in (own, edge)))
    if load:
        series = dict(line.split()[:2] for line in http.get(config.url + "/metrics").text.splitlines() if line.startswith("specvideo_verify_rounds"))
        progress(f"verify rounds: {series.get('specvideo_verify_rounds_batched_total', '0')} of {series.get('specvideo_verify_rounds_total', '?')} in the running batch")
    http.close()
    for row in rows:
        row.load = load
    if load:
        load.close()
    return rows


def to_markdown(rows: list[Row]) -> list[str]:
    loaded = any(r.load for r in rows)
    lines = [
        "| round trip added | mode | tok/s at the client (median) [min-max of repeats] | vs server | target forwards / token | bytes / token | mean k | text = server's |"
        + (" others' tok/s | server forwards / s | forwards / token delivered |" if loaded else ""),
        "|---:|---|---:|---:|---:|---:|---:|---:|" + ("---:|---:|---:|" if loaded else ""),
    ]
    server = {r.delay_ms: r.summary() for r in rows if r.mode == "server"}
    for row in rows:
        s = row.summary()
        base = server[row.delay_ms]["tokens_per_s"]
        ratio = f"{s['tokens_per_s'] / base:.2f}x" if base and s["tokens_per_s"] else "-"
        mean_k = "-" if s["mean_k"] is None else f"{s['mean_k']:.1f}"
        lines.append(
            f"| {row.delay_ms:g} ms | {row.mode} | {s['tokens_per_s']:.1f} [{s['spread'][0]:.1f}-{s['spread'][1]:.1f}] | {ratio} | "
            f"{s['calls_per_token']:.2f} | {s['bytes_per_token']:.0f} | {mean_k} | {s['equal']} |"
            + (f" {s['others_per_s']:.1f} | {s['forwards_per_s']:.1f} | {s['forwards_per_token']:.2f} |" if loaded else "")
        )
    return lines
