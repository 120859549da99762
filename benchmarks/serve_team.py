"""``specvideo bench serve --team``: a team's editors against a server's replicas, for the prompt
cache's hit rate under a routing.

``files`` real files (standard-library modules, the list below, fixed before any run) are typed in
turn, as ``serve_editor.session`` types one: round r sends, for each file in order, its window up
to the cursor plus r typed lines, as one request of ``n_predict`` greedy tokens (``/completion``
with the text before the cursor, or ``/infill`` with the text after it as well, for models with
fill-in-the-middle tokens). Requests go one at a time, so the routing alone decides which replica's
cache each meets. Per request the server reports the prompt tokens it reused (``tokens_cached``);
reported: the requests that reused at least half their prompt (hits) and the share of all prompt
tokens reused, with the time to the answer's end.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field, replace

from benchmarks.serve_editor import EditorReplayConfig, _fmt, session

TEAM_FILES = ("textwrap.py", "difflib.py", "shlex.py", "argparse.py", "csv.py", "fractions.py", "heapq.py", "statistics.py")
ROUTES = ("completion", "infill")


@dataclass(frozen=True)
class TeamReplayConfig:
    url: str = "http://127.0.0.1:8000"  # the server's root
    files: int = 8
    edits: int = 6
    context_tokens: int = 1000
    n_predict: int = 16
    route: str = "completion"
    api_key: str = "none"


@dataclass
class TeamRequest:
    file: str
    edit: int
    prompt_tokens: int = 0
    cached_tokens: int = 0
    latency_s: float | None = None
    error: str | None = None


@dataclass
class TeamReplay:
    config: TeamReplayConfig
    requests: list[TeamRequest] = field(default_factory=list)

    def summary(self) -> dict:
        done = [r for r in self.requests if r.error is None]
        prompt = sum(r.prompt_tokens for r in done)
        hits = sum(r.cached_tokens >= r.prompt_tokens / 2 for r in done)
        return {
            "files": self.config.files, "edits": self.config.edits, "route": self.config.route,
            "requests": len(self.requests), "answered": len(done), "failed": len(self.requests) - len(done),
            "hits": hits,
            "hit_rate": hits / len(done) if done else None,
            "token_hit_rate": sum(r.cached_tokens for r in done) / prompt if prompt else None,
            "prompt_tokens_median": statistics.median(r.prompt_tokens for r in done) if done else None,
            "latency_s_median": statistics.median(r.latency_s for r in done) if done else None,
        }


def team_steps(config: TeamReplayConfig) -> dict[str, list[tuple[str, str]]]:
    """{file: [(text before the cursor, text after it)] per edit} of the team's files."""
    if not 1 <= config.files <= len(TEAM_FILES):
        raise ValueError(f"--files must be in 1..{len(TEAM_FILES)}, got {config.files}")
    import sysconfig
    from pathlib import Path

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    one = EditorReplayConfig(config.url, None, config.context_tokens, config.edits, config.n_predict, config.api_key)
    return {name: session(replace(one, file=str(stdlib / name)))[1] for name in TEAM_FILES[: config.files]}


def run_team_replay(config: TeamReplayConfig) -> TeamReplay:
    if config.route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, got {config.route!r}")
    steps = team_steps(config)
    replay = TeamReplay(config)
    for edit in range(config.edits):
        for name, per_edit in steps.items():
            replay.requests.append(_request(config, name, edit, *per_edit[edit]))
    return replay


def _request(config: TeamReplayConfig, name: str, edit: int, prefix: str, suffix: str) -> TeamRequest:
    import httpx

    if config.route == "infill":
        path, body = "/infill", {"input_prefix": prefix, "input_suffix": suffix, "input_extra": []}
    else:
        path, body = "/completion", {"prompt": prefix}
    body |= {"n_predict": config.n_predict, "temperature": 0, "cache_prompt": True}
    out, start = TeamRequest(name, edit), time.perf_counter()
    try:
        response = httpx.post(
            config.url.rstrip("/") + path, json=body, timeout=600, headers={"Authorization": f"Bearer {config.api_key}"}
        )
        if response.status_code != 200:
            out.error = f"HTTP {response.status_code}: {response.text[:200]}"
        else:
            final = response.json()
            out.prompt_tokens, out.cached_tokens = final["tokens_evaluated"], final["tokens_cached"]
    except httpx.HTTPError as err:
        out.error = str(err).splitlines()[0] if str(err) else type(err).__name__
    out.latency_s = time.perf_counter() - start
    return out


def to_markdown(replay: TeamReplay, label: str) -> str:
    s = replay.summary()
    return "\n".join([
        f"Team editor replay, {label}: {s['files']} files typed in turn, {s['edits']} edits each, one "
        f"`/{s['route']}` per edit ({replay.config.n_predict} tokens, greedy), one request at a time:",
        "",
        "| requests | answered | failed | hits (≥ half the prompt reused) | hit rate | prompt tokens reused | prompt tokens (median) | latency median (s) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {s['requests']} | {s['answered']} | {s['failed']} | {s['hits']} | {_fmt(s['hit_rate'])} | "
        f"{_fmt(s['token_hit_rate'])} | {_fmt(s['prompt_tokens_median'], '{:.0f}')} | {_fmt(s['latency_s_median'])} |",
    ])
