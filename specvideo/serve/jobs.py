"""What a request hands the engine and gets back: the ``Job`` (prompt ids and settings), its
events (``Piece`` as the text grows, then ``Done`` or ``Failed``) and ``JobRow``, the job's progress
inside a run (text sent so far, stop sequences held back and cut, timings)."""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field

from specvideo.serve.protocol import APIError, Usage
from specvideo.text.book import first_stop, shown_length


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


@dataclass(frozen=True)
class Answered:
    """The answer of a ``/v1/verify`` round (a job's ``turn``): its JSON body."""

    body: dict
    usage: Usage | None = None
    finish_reason: str = "answered"


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
    # a /v1/verify round instead of a row of its own (``specvideo.serve.verify.Turn``): taken between
    # rounds, run alone or as a row of the running batch for one round; an APIError it raises is the answer
    turn: object | None = None
    events: queue.Queue = field(default_factory=queue.Queue)
    cancelled: threading.Event = field(default_factory=threading.Event)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


class JobRow:
    """One job's progress inside a run: decoded text so far, what was sent, whether it ended."""

    def __init__(self, job: Job, started: float, cached: int = 0):
        self.job, self.sent, self.done = job, "", False
        self.started, self.cached, self.first = started, cached, None
        self.measured: dict = {}  # more timings for Done (a joining row's prefill_ms, the batch's round_ms)

    def update(self, text: str, final: bool, eos: bool, tokens: int, speculative: dict) -> None:
        stops = self.job.stops
        stop_at, word = first_stop(text, stops) or (None, None)
        if stop_at is not None:
            text, final, eos = text[:stop_at], True, True
        self.first = self.first or (time.monotonic() if tokens else None)
        if self._past_deadline(text):
            final = True
        visible = text[: max(len(self.sent), shown_length(text, stops, final))]
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
                **self.measured,
            }
            self.job.events.put(Done("stop" if eos else "length", usage, speculative, word, timings))

    def _past_deadline(self, text: str) -> bool:
        limit = self.job.max_predict_ms
        return limit is not None and self.first is not None and "\n" in text and (
            1e3 * (time.monotonic() - self.first) > limit
        )
