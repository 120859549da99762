"""Drafting on the user's machine, verifying on a server: a generator whose target is remote.

``EdgeClient`` drafts tokens locally (``LookupDrafter``: prompt lookup over the prompt and answer so
far; ``ModelDrafter``: a small local model, greedy) and sends each draft to the server's
``POST /v1/verify``, which checks it in one target forward of the request's session and answers the
accepted tokens, its own next token and the new text (``specvideo.serve.verify``). The text it
streams is exactly the server's own answer to the same request, greedy or seeded: the server checks
by equality, so a draft only changes how many tokens a round yields.

A round costs a round trip, the server's forward and the local draft, and yields on average
(1 - a^(k+1)) / (1 - a) tokens at acceptance a per drafted token (the speculative-decoding sum, Leviathan et
al. 2023), so ``KChooser`` picks each round's k from the measured round trip, per-token draft cost and
acceptance: a longer round trip calls for longer drafts. A server without the route (404) is asked
for the answer whole, streamed (``/v1/completions`` or ``/v1/chat/completions``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx

MAX_K = 16


class LookupDrafter:
    """Prompt lookup (Saxena 2023): the tokens that followed the latest earlier occurrence of the
    longest n-gram (n <= ``max_ngram``) ending the context."""

    name = "lookup"

    def __init__(self, max_ngram: int = 3):
        self.max_ngram = max_ngram

    def draft(self, ids: list[int], k: int) -> list[int]:
        for n in range(min(self.max_ngram, len(ids) - 1), 0, -1):
            tail = ids[-n:]
            for start in range(len(ids) - n - 1, -1, -1):  # latest earlier occurrence first
                if ids[start : start + n] == tail:
                    return ids[start + n : start + n + k]
        return []


class ModelDrafter:
    """A local model's greedy continuation (a ``SpeculativeGenerator`` with a prompt cache, so each
    round prefills only the tokens new since the last)."""

    name = "model"

    def __init__(self, generator):
        from specvideo.text.runtime.prompt_cache import PromptCache

        self.generator = generator
        if generator.prompt_cache is None:
            generator.prompt_cache = PromptCache(256 << 20)

    def draft(self, ids: list[int], k: int) -> list[int]:
        if k <= 0:
            return []
        return list(self.generator.generate([ids], max_new_tokens=k, temperature=0.0, stop=None).token_ids[0])


def local_drafter(spec: str, device: str | None = None, dtype: str = "auto"):
    """(drafter, tokenizer) by name: "lookup" (no model, no tokenizer), "none", "pair:NAME" (the draft
    model of the named pair, e.g. pair:smollm2, its shared embeddings from the pair's target), or a
    model to run whole (a name, a FILE.gguf such as the code pair's 0.5B sibling, a directory) in
    ``dtype`` ("auto": a GGUF file's own blocks on the k-quant kernel where it runs them, the 0.5B's
    Q5_0 included; "int4": a weight-only int4 copy). A local drafter runs without batch invariance
    (its tokens are only proposals; the server's check keeps the answer exact): its state restores
    any cached prefix, so a round prefills only its new tokens."""
    from specvideo.text import SpeculativeGenerator

    if spec == "lookup":
        return LookupDrafter(), None
    if spec == "none":
        return None, None
    if spec.startswith("pair:"):
        pair = SpeculativeGenerator.from_pretrained(spec.removeprefix("pair:"), drafter="lean", device=device)
        if pair.models.draft is None:
            raise ValueError(f"{spec}: that pair has no draft model")
        local = SpeculativeGenerator.from_models(pair.models.draft, tokenizer=pair.tokenizer, drafter="ngram")
    else:
        local = SpeculativeGenerator.from_pretrained(spec, drafter="ngram", device=device, dtype=dtype, invariant=False)
    return ModelDrafter(local), local.tokenizer


@dataclass
class KChooser:
    """Each round's draft length: the k in [1, max_k] with the most tokens per second, given the
    acceptance per drafted token, the round trip and the per-token costs measured so far (moving
    averages; ``fixed`` skips the choice)."""

    max_k: int = MAX_K
    fixed: int | None = None
    acceptance: float = 0.5  # a prior until rounds are measured
    trip_s: float = 0.0  # round trip without the server's forward
    server_s: float = 0.02  # the server's round, one forward
    draft_s: float = 0.0  # local draft per token

    def choose(self) -> int:
        if self.fixed is not None:
            return self.fixed
        a = min(self.acceptance, 0.98)

        def rate(k: int) -> float:
            tokens = (1 - a ** (k + 1)) / (1 - a)
            return tokens / (self.trip_s + self.server_s + k * self.draft_s)

        return max(range(1, self.max_k + 1), key=rate)

    def update(self, checked: int, accepted: int, trip_s: float, server_s: float, draft_s: float) -> None:
        w = 0.3
        if checked:
            # per drafted token: accepted a^1 + ... solves roughly as accepted / checked of a chain
            self.acceptance = (1 - w) * self.acceptance + w * min(accepted / checked, 0.98)
            self.draft_s = (1 - w) * self.draft_s + w * draft_s / checked
        self.trip_s = (1 - w) * self.trip_s + w * trip_s
        self.server_s = (1 - w) * self.server_s + w * server_s


@dataclass
class EdgeStats:
    rounds: int = 0
    tokens: int = 0
    drafted: int = 0
    accepted: int = 0
    target_calls: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    wall_s: float = 0.0
    first_s: float | None = None  # to the first text
    fallback: bool = False  # the server had no /v1/verify: answered whole
    ks: list[int] = field(default_factory=list)

    def summary(self) -> dict:
        per = lambda x: x / self.tokens if self.tokens else None  # noqa: E731
        return {
            "tokens": self.tokens, "rounds": self.rounds, "tokens_per_s": self.tokens / self.wall_s if self.wall_s else None,
            "acceptance": self.accepted / self.drafted if self.drafted else None,
            "target_calls_per_token": per(self.target_calls), "bytes_per_token": per(self.bytes_sent + self.bytes_received),
            "mean_k": sum(self.ks) / len(self.ks) if self.ks else None, "fallback": self.fallback, "first_s": self.first_s,
        }


class EdgeClient:
    """Generates through a server's /v1/verify with a local drafter (None: nothing drafted)."""

    def __init__(self, url: str, model: str, drafter=None, tokenizer=None, api_key: str | None = None,
                 delay_s: float = 0.0, k: int | None = None, max_k: int = MAX_K, timeout_s: float = 600.0):
        self.url, self.model, self.drafter, self.tokenizer = url.rstrip("/"), model, drafter, tokenizer
        self.delay_s = delay_s  # added to every round trip (a measured link, or a simulated one)
        self.k, self.max_k = k, max_k
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(timeout=timeout_s, headers=headers)
        self.stats = EdgeStats()

    def close(self) -> None:
        self.http.close()

    def stream(self, prompt: str | None = None, messages: list[dict] | None = None, **settings) -> Iterator[str]:
        """The answer's text as rounds accept it. settings: max_tokens, temperature, top_p, seed, stop."""
        self.stats = stats = EdgeStats()
        chooser = KChooser(self.max_k, self.k)
        start = time.perf_counter()
        ids = self._local_ids(prompt, messages)
        body = {"model": self.model, **({"messages": messages} if messages is not None else {"prompt": prompt}), **settings}
        while True:
            k = chooser.choose()
            t0 = time.perf_counter()
            draft = self.drafter.draft(ids, k) if self.drafter is not None and ids else []
            draft_s = time.perf_counter() - t0
            answer, trip_s = self._post(stats, "/v1/verify", {**body, "draft": draft})
            if answer is None:  # no /v1/verify here: the answer whole, streamed
                yield from self._whole(stats, prompt, messages, settings, start)
                return
            ids = (ids or answer.get("prompt_ids", [])) + answer["tokens"]
            server_s = answer["usage"].get("round_ms", 0.0) / 1e3
            chooser.update(answer["checked"], answer["accepted"], max(0.0, trip_s - server_s), server_s, draft_s)
            stats.rounds += 1
            stats.ks.append(k)
            stats.drafted += answer["checked"]
            stats.accepted += answer["accepted"]
            stats.tokens = answer["position"]
            stats.target_calls = answer["usage"]["target_calls"]
            body = {"model": self.model, "session": answer["session"]}
            if answer["text"]:
                stats.first_s = stats.first_s or time.perf_counter() - start
                yield answer["text"]
            if answer["finished"]:
                stats.wall_s = time.perf_counter() - start
                return

    def _local_ids(self, prompt, messages) -> list[int]:
        """The prompt's ids here, for a first draft (none without a tokenizer: the server sends them)."""
        if self.tokenizer is None or self.drafter is None:
            return []
        from specvideo.text.prompts import chat_ids

        if messages is not None:
            return chat_ids(messages, self.tokenizer)
        return list(self.tokenizer(prompt)["input_ids"])

    def _post(self, stats: EdgeStats, path: str, body: dict) -> tuple[dict | None, float]:
        payload = json.dumps(body).encode()
        t0 = time.perf_counter()
        if self.delay_s:
            time.sleep(self.delay_s)
        r = self.http.post(self.url + path, content=payload, headers={"Content-Type": "application/json"})
        trip_s = time.perf_counter() - t0
        stats.bytes_sent += len(payload)
        stats.bytes_received += len(r.content)
        if r.status_code == 404 and path == "/v1/verify" and "session" not in body:
            return None, trip_s
        if r.status_code != 200:
            raise RuntimeError(f"{path} answered {r.status_code}: {_message(r)}")
        return r.json(), trip_s

    def _whole(self, stats: EdgeStats, prompt, messages, settings: dict, start: float) -> Iterator[str]:
        stats.fallback = True
        chat = messages is not None
        body = {"model": self.model, "stream": True, **settings, **({"messages": messages} if chat else {"prompt": prompt})}
        if self.delay_s:
            time.sleep(self.delay_s)
        with self.http.stream("POST", self.url + ("/v1/chat/completions" if chat else "/v1/completions"), json=body) as r:
            if r.status_code != 200:
                raise RuntimeError(f"the server answered {r.status_code}: {r.read().decode(errors='replace')[:200]}")
            for line in r.iter_lines():
                stats.bytes_received += len(line) + 1
                if not line.startswith("data: {"):
                    continue
                event = json.loads(line[6:])
                if "error" in event:
                    raise RuntimeError(f"the server failed: {event['error'].get('message')}")
                choice = event["choices"][0]
                text = choice["delta"].get("content") if chat else choice.get("text")
                if text:
                    stats.first_s = stats.first_s or time.perf_counter() - start
                    yield text
                if event.get("usage"):
                    stats.tokens = event["usage"]["completion_tokens"]
                    stats.target_calls = stats.tokens
        stats.wall_s = time.perf_counter() - start


def _message(response) -> str:
    try:
        return response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return response.text[:200]
