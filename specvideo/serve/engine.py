"""The serving engine: one worker thread that runs the shared speculative loop for queued requests.

Requests wait in a bounded queue (``max_queue``; a full queue is refused with 429). The worker takes
the oldest request; a greedy one gathers the greedy requests that arrived with it (within
``batch_window_s``, up to ``max_batch``) into one ragged batch, so concurrent editors share every
target forward (each row accepts its own number of drafted tokens per round). A sampled request runs
alone with its own seeded generator, so its output does not depend on what else is being served.

Each request receives ``Piece`` events as its text grows (held back while it could still become a
stop sequence, cut at the first one), then one ``Done`` (or ``Failed``). A request whose client went
away is cancelled: its row stops being reported, and a batch whose rows are all cancelled or done
stops generating.

``state`` tells the truth about serving: "loading" until ``attach`` hands over the generator,
"ready" while the worker thread runs, "failed" once loading failed or the worker died (every job it
held or that waits is then answered 503). Refusals carry ``Retry-After``: the seconds the queue ahead
should take, from the mean wall time of recent batches.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from dataclasses import dataclass, field

import torch

from specvideo.errors import first_line
from specvideo.serve.protocol import APIError, Usage


@dataclass(frozen=True)
class Piece:
    text: str


@dataclass(frozen=True)
class Done:
    finish_reason: str  # "stop" (end of turn or a stop sequence) or "length"
    usage: Usage
    speculative: dict
    stop_word: str | None = None  # the stop sequence that ended it
    timings: dict = field(default_factory=dict)  # prompt_ms (to the first token), predicted_ms, cached_tokens


@dataclass(frozen=True)
class Failed:
    error: APIError


@dataclass
class Job:
    prompt_ids: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None = None
    stops: list[str] = field(default_factory=list)
    top_k: int | None = None
    # llama.cpp's t_max_predict_ms: once a line is complete, stop after this long since the first token
    max_predict_ms: float | None = None
    cache_prompt: bool = True  # llama.cpp's cache_prompt: false neither reuses nor keeps its prompt
    events: queue.Queue = field(default_factory=queue.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


class _Row:
    """One job's progress inside a run: decoded text so far, what was sent, whether it ended."""

    def __init__(self, job: Job, started: float, cached: int = 0):
        self.job, self.sent, self.done = job, "", False
        self.started, self.cached, self.first = started, cached, None

    def update(self, text: str, final: bool, eos: bool, tokens: int, speculative: dict) -> None:
        stops = self.job.stops
        stop_at, word = min(((text.find(s), s) for s in stops if s in text), default=(None, None))
        if stop_at is not None:
            text, final, eos = text[:stop_at], True, True
        self.first = self.first or (time.monotonic() if tokens else None)
        if self._past_deadline(text):
            final = True
        hold = 0 if final else max((len(s) - 1 for s in stops), default=0)
        visible = text[: max(len(self.sent), len(text) - hold)] if hold else text
        if len(visible) > len(self.sent) and not self.job.cancelled.is_set():
            self.job.events.put(Piece(visible[len(self.sent) :]))
            self.sent = visible
        if final:
            self.done = True
            usage = Usage(len(self.job.prompt_ids), tokens)
            now = time.monotonic()
            first = self.first or now
            timings = {  # prompt: to the first token (prefill and first round); predicted: the rest
                "prompt_ms": 1e3 * (first - self.started),
                "predicted_ms": 1e3 * (now - first),
                "cached_tokens": self.cached,
            }
            self.job.events.put(Done("stop" if eos else "length", usage, speculative, word, timings))

    def _past_deadline(self, text: str) -> bool:
        limit = self.job.max_predict_ms
        return limit is not None and self.first is not None and "\n" in text and (
            1e3 * (time.monotonic() - self.first) > limit
        )


class Engine:
    def __init__(
        self,
        generator,
        model_name: str,
        max_queue: int = 16,
        max_batch: int = 4,
        batch_window_s: float = 0.02,
        max_tokens: int | None = None,
        prompt_cache_bytes: int = 512 << 20,
    ):
        """generator: a SpeculativeGenerator, or None while it loads (``attach`` it then).
        max_tokens: the most tokens one request may generate (a larger ask is cut to it).
        prompt_cache_bytes: the memory bound of the keys and values kept of recent prompts
        (``specvideo.text.prompt_cache``; 0: none kept)."""
        if max_queue < 1 or max_batch < 1:
            raise ValueError(f"max_queue and max_batch must be >= 1, got {max_queue} and {max_batch}")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        self.model_name, self.max_tokens = model_name, max_tokens
        self.prompt_cache_bytes = prompt_cache_bytes
        self.max_batch, self.batch_window_s = max_batch, batch_window_s
        self.queue: queue.Queue[Job] = queue.Queue(maxsize=max_queue)
        self.batches: list[int] = []  # the size of every batch run: what concurrency bought
        self.generator, self.error, self._thread = None, None, None
        self.batch_seconds = 1.0  # running mean wall time of a batch (Retry-After)
        if generator is not None:
            self.attach(generator)

    def attach(self, generator) -> None:
        """Start serving with ``generator`` (the end of loading). A drafter that verifies one row
        at a time (``ONE_ROW_DRAFTERS``: token trees) gets batches of one."""
        from specvideo.text.config import ONE_ROW_DRAFTERS
        from specvideo.text.prompt_cache import PromptCache

        if getattr(generator, "drafter_name", None) in ONE_ROW_DRAFTERS:
            self.max_batch = 1
        if self.prompt_cache_bytes and getattr(generator, "prompt_cache", False) is None:
            generator.prompt_cache = PromptCache(self.prompt_cache_bytes)
        self.generator = generator
        self._thread = threading.Thread(target=self._loop, name="specvideo-serve", daemon=True)
        self._thread.start()

    def fail(self, message: str) -> None:
        """Loading failed: every request is answered 503 with ``message``."""
        self.error = message

    @property
    def state(self) -> str:
        if self.error is not None:
            return "failed"
        if self._thread is None:
            return "loading"
        return "ready" if self._thread.is_alive() else "failed"

    def retry_after(self) -> str:
        ahead = self.queue.qsize() + 1
        return str(max(1, math.ceil(self.batch_seconds * ahead / self.max_batch)))

    def unavailable(self) -> APIError | None:
        """The 503 to answer while the engine cannot serve (None when it can)."""
        state = self.state
        if state == "ready":
            return None
        if state == "loading":
            message, code = f"model {self.model_name!r} is loading: retry shortly", "model_loading"
        else:
            message, code = f"the server cannot generate: {self.error or 'its worker thread stopped'}", "worker_failed"
        return APIError(503, message, "unavailable_error", code=code, headers={"Retry-After": self.retry_after()})

    def submit(self, job: Job) -> Job:
        if (error := self.unavailable()) is not None:
            raise error
        try:
            self.queue.put_nowait(job)
        except queue.Full:
            raise APIError(
                429,
                f"the server's queue is full ({self.queue.maxsize} requests waiting): retry later",
                "rate_limit_error",
                code="queue_full",
                headers={"Retry-After": self.retry_after()},
            ) from None
        return job

    def _loop(self) -> None:
        held: list[Job] = []
        try:
            while True:
                batch, later = [self.queue.get()], []
                held = batch
                if batch[0].greedy and self.max_batch > 1:
                    deadline = time.monotonic() + self.batch_window_s
                    while len(batch) < self.max_batch and (left := deadline - time.monotonic()) > 0:
                        try:
                            job = self.queue.get(timeout=left)
                        except queue.Empty:
                            break
                        (batch if job.greedy else later).append(job)  # a sampled request runs alone, next
                held = batch + later
                for jobs in [batch, *([j] for j in later)]:
                    self._run([j for j in jobs if not j.cancelled.is_set()])
                held = []
        except BaseException as err:  # the worker dies: nobody waiting is left without an answer
            self.error = f"its worker thread stopped ({first_line(err) or type(err).__name__})"
            self._drain(held)
            raise

    def _drain(self, held: list[Job]) -> None:
        error = self.unavailable()
        while True:
            for job in held:
                job.events.put(Failed(error))
            try:
                held = [self.queue.get_nowait()]
            except queue.Empty:
                return

    def _run(self, jobs: list[Job]) -> None:
        if not jobs:
            return
        self.batches.append(len(jobs))
        start = time.monotonic()
        try:
            self._generate(jobs)
            self.batch_seconds = 0.8 * self.batch_seconds + 0.2 * (time.monotonic() - start)
        except Exception as err:  # noqa: BLE001 - every waiting client gets an answer
            error = (
                err
                if isinstance(err, APIError)
                else APIError(500, f"generation failed: {first_line(err)}", "server_error")
            )
            for job in jobs:
                job.events.put(Failed(error))

    def _generate(self, jobs: list[Job]) -> None:
        g, first = self.generator, jobs[0]
        seeded = torch.Generator().manual_seed(
            first.seed if first.seed is not None else int(time.time_ns() % 2**31)
        )
        prompt = [j.prompt_ids for j in jobs] if len(jobs) > 1 else first.prompt_ids
        start = time.monotonic()
        cache = getattr(g, "prompt_cache", None)
        if cache is not None and not all(j.cache_prompt for j in jobs):
            g.prompt_cache = None  # for this run (the worker runs one at a time)
        try:
            run = self._start(g, prompt, jobs, seeded)
        finally:
            if cache is not None:
                g.prompt_cache = cache
        if all(j.max_tokens == 0 for j in jobs) and g.prompt_cache is not None and first.cache_prompt:
            run.verifier.state.forward()  # a warm-up (n_predict 0): prefill, so the prompt is cached
        rows = [_Row(j, start, run.cached_tokens) for j in jobs]
        stop_ids = run.verifier.stop_ids
        for _ in run.steps():
            self._report(rows, run, stop_ids)
            if all(r.done or r.job.cancelled.is_set() for r in rows):
                return
        self._report(rows, run, stop_ids, end=True)

    @staticmethod
    def _start(g, prompt, jobs: list[Job], seeded):
        first = jobs[0]
        return g.start(
            prompt,
            max_new_tokens=max(j.max_tokens for j in jobs),
            temperature=first.temperature,
            top_k=None if first.greedy else first.top_k,
            top_p=None if first.top_p >= 1 else first.top_p,
            generator=None if first.greedy else seeded,
        )

    def _report(self, rows: list[_Row], run, stop_ids, end: bool = False) -> None:
        stats = run.stats
        speculative = {
            "acceptance_rate": stats.acceptance_rate,
            "tokens_per_target_call": stats.emitted / stats.target_calls if stats.target_calls else None,
            "batch_size": len(rows),
        }
        for b, row in enumerate(rows):
            if row.done:
                continue
            tokens = run.verifier.outputs[b][: row.job.max_tokens]
            eos = bool(tokens) and tokens[-1] in stop_ids
            final = end or eos or len(tokens) >= row.job.max_tokens or not bool(run.verifier.active[b])
            text = self.generator.tokenizer.decode(tokens, skip_special_tokens=True)
            if not final:
                text = text.rstrip("\ufffd")  # a multi-byte character still arriving
            row.update(text, final, eos, len(tokens), speculative)
