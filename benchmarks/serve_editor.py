"""``specvideo bench serve --editor``: an editor session replayed against a running server.

A real source file is typed in ``edits`` steps: at step i the lines ``cursor .. cursor + i`` have
been typed, and one llama.cpp ``/infill`` asks for the continuation (the text before the cursor as
``input_prefix``, the file after the typed region as ``input_suffix``, greedy, ``n_predict``
tokens, streamed), as llama.vscode sends on a keystroke. The session runs twice, without the
prompt cache (``cache_prompt: false``) and with it; per request it records the time to the first
text, the completion latency and the tokens the server reused (``tokens_cached``).
"""

from __future__ import annotations

import json
import statistics
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_FILE = "textwrap.py"  # in the standard library: a real file every machine has


@dataclass(frozen=True)
class EditorReplayConfig:
    url: str = "http://127.0.0.1:8000"  # the server's root (its /infill)
    file: str | None = None  # default: the standard library's textwrap.py
    context_tokens: int = 2000  # about this many tokens of prefix + suffix (4 characters a token)
    edits: int = 20
    n_predict: int = 32
    api_key: str = "none"


@dataclass
class Keystroke:
    cache: bool
    ttft_s: float | None = None
    latency_s: float | None = None
    tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    error: str | None = None


@dataclass
class Replay:
    config: EditorReplayConfig
    source: str
    strokes: list[Keystroke] = field(default_factory=list)

    def summary(self) -> dict:
        out = {"source": self.source, "edits": self.config.edits, "n_predict": self.config.n_predict}
        for cache in (False, True):
            done = [s for s in self.strokes if s.cache == cache and s.error is None]
            key = "cache" if cache else "cold"
            out[key] = {
                "answered": len(done),
                "failed": sum(s.cache == cache and s.error is not None for s in self.strokes),
                "prompt_tokens_median": _median([s.prompt_tokens for s in done]),
                "cached_tokens_median": _median([s.cached_tokens for s in done]),
                "ttft_s_median": _median([s.ttft_s for s in done if s.ttft_s is not None]),
                "latency_s_median": _median([s.latency_s for s in done]),
                "latency_s_max": max((s.latency_s for s in done), default=None),
            }
        cold, warm = out["cold"]["ttft_s_median"], out["cache"]["ttft_s_median"]
        out["ttft_ratio"] = cold / warm if cold and warm else None
        return out


def session(config: EditorReplayConfig) -> tuple[str, list[tuple[str, str]]]:
    """(source name, [(input_prefix, input_suffix)] per edit) cut from a real file: the prefix
    starts at a fixed line (as a plugin's window does while the user types within it) and grows a
    line an edit; the suffix is the file after the typed lines."""
    path = Path(config.file) if config.file else Path(sysconfig.get_paths()["stdlib"]) / DEFAULT_FILE
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    chars = 4 * config.context_tokens  # about 4 characters a token in code
    if len(lines) < config.edits + 10:
        raise ValueError(f"{path} has {len(lines)} lines: too short to type {config.edits} edits in")
    cursor, before = 0, 0  # the cursor where about 4/5 of the context lies before it
    while cursor < len(lines) - config.edits - 1 and before < 0.8 * chars:
        before += len(lines[cursor])
        cursor += 1
    start = max(0, cursor - 1)
    while start > 0 and sum(map(len, lines[start - 1 : cursor])) < 0.8 * chars:
        start -= 1
    suffix = "".join(lines[cursor + config.edits :])[: chars // 5]
    return path.name, [("".join(lines[start : cursor + i]), suffix) for i in range(config.edits)]


def run_replay(config: EditorReplayConfig) -> Replay:
    name, steps = session(config)
    replay = Replay(config, name)
    for cache in (False, True):
        for prefix, suffix in steps:
            replay.strokes.append(_infill(config, prefix, suffix, cache))
    return replay


def _infill(config: EditorReplayConfig, prefix: str, suffix: str, cache: bool) -> Keystroke:
    import httpx

    body = {
        "input_prefix": prefix, "input_suffix": suffix, "input_extra": [], "prompt": "",
        "n_predict": config.n_predict, "temperature": 0, "stream": True, "cache_prompt": cache,
        "samplers": ["top_k", "top_p", "infill"], "t_max_prompt_ms": 10000, "t_max_predict_ms": 60000,
    }
    stroke, start = Keystroke(cache), time.perf_counter()
    try:
        with httpx.stream(
            "POST", config.url.rstrip("/") + "/infill", json=body, timeout=600,
            headers={"Authorization": f"Bearer {config.api_key}"},
        ) as response:
            if response.status_code != 200:
                stroke.error = f"HTTP {response.status_code}: {response.read().decode()[:200]}"
                return stroke
            for line in response.iter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    stroke.error = str(event["error"])
                    return stroke
                if stroke.ttft_s is None and event.get("content"):
                    stroke.ttft_s = time.perf_counter() - start
                if event.get("stop"):
                    stroke.tokens = event["tokens_predicted"]
                    stroke.prompt_tokens = event["tokens_evaluated"]
                    stroke.cached_tokens = event["tokens_cached"]
    except httpx.HTTPError as err:
        stroke.error = str(err).splitlines()[0] if str(err) else type(err).__name__
    stroke.latency_s = time.perf_counter() - start
    return stroke


def to_markdown(replay: Replay) -> str:
    s = replay.summary()
    lines = [
        f"Editor replay: {s['source']} typed in {s['edits']} edits, one streamed `/infill` each "
        f"({s['n_predict']} tokens, greedy), without and with the prompt cache:",
        "",
        "| prompt cache | answered | failed | prompt tokens (median) | reused (median) | TTFT median (s) | latency median (s) | latency max (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label in (("cold", "off"), ("cache", "on")):
        r = s[key]
        lines.append(
            f"| {label} | {r['answered']} | {r['failed']} | {_fmt(r['prompt_tokens_median'], '{:.0f}')} | "
            f"{_fmt(r['cached_tokens_median'], '{:.0f}')} | {_fmt(r['ttft_s_median'])} | "
            f"{_fmt(r['latency_s_median'])} | {_fmt(r['latency_s_max'])} |"
        )
    lines += ["", f"TTFT without / with the cache: {_fmt(s['ttft_ratio'])}×"]
    return "\n".join(lines)


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _fmt(value, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)
