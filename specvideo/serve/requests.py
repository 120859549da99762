"""What every HTTP route of ``specvideo serve`` does with a queued job: submit it with its log line
(``Trace``), then read its events until Done or Failed, cancelling it when the client goes. Shared
by the OpenAI routes (``specvideo.serve.app``) and the editor routes (``specvideo.serve.editor``)."""

from __future__ import annotations

import asyncio
import logging
import queue
import time
from collections.abc import AsyncIterator

from fastapi import Request

from specvideo.serve.engine import Done, Engine, Failed, Job, Piece
from specvideo.serve.protocol import APIError

POLL_S = 0.25  # how often a waiting stream checks that its client is still there
log = logging.getLogger("specvideo.serve")


class Trace:
    """One request's log line: id, route, outcome, prompt/completion tokens, TTFT, tok/s, acceptance."""

    def __init__(self, rid: str, route: str, prompt_tokens: int, metrics=None):
        """metrics: the engine's ``ServeMetrics``, told of every finished request."""
        self.rid, self.route, self.prompt_tokens, self.metrics = rid, route, prompt_tokens, metrics
        self.start, self.first = time.perf_counter(), None

    def piece(self) -> None:
        self.first = self.first or time.perf_counter()

    def end(self, outcome: str, event=None) -> None:
        now = time.perf_counter()
        usage, extra = getattr(event, "usage", None), getattr(event, "speculative", None) or {}
        tokens = usage.completion_tokens if usage is not None else 0
        acceptance = extra.get("acceptance_rate")
        timings = getattr(event, "timings", None) or {}
        joined = (  # a row that joined a running batch: its own prefill and the batch's round then
            f" prefill={timings['prefill_ms'] / 1e3:.3f}s round={timings['round_ms'] / 1e3:.3f}s"
            f" joined_after={timings.get('joined_after', 0)}"
            if timings.get("round_ms") is not None else ""
        )
        if self.metrics is not None and isinstance(event, Done):
            ttft = None if self.first is None else self.first - self.start
            self.metrics.finished(self.prompt_tokens, tokens, ttft, now - self.start, event)
        log.info(
            "%s %s %s prompt=%d completion=%d ttft=%.3fs tok/s=%.1f acceptance=%s%s",
            self.rid, self.route, outcome, self.prompt_tokens, tokens, (self.first or now) - self.start,
            tokens / (now - self.start) if now > self.start else 0.0,
            "-" if acceptance is None else f"{acceptance:.3f}", joined,
        )


# set in the ASGI scope (never from a header, so no HTTP client can ask for it) by the replicas'
# in-process call for a replayed stream's request: it goes to the head of the engine's queue
REPLAY_EXTENSION = "specvideo.replay"


def submit(engine: Engine, job: Job, request: Request, rid: str) -> Trace:
    """Queue the job; its trace is this request's log line (a refusal logs and raises)."""
    trace = Trace(rid, request.url.path, len(job.prompt_ids), engine.metrics)
    request.state.traced = True
    try:
        engine.submit(job, first=bool(request.scope.get("extensions", {}).get(REPLAY_EXTENSION)))
    except APIError as err:
        trace.end(f"refused {err.status}")
        raise
    return trace


async def job_events(job: Job, request: Request, trace: Trace) -> AsyncIterator[Piece | Failed | Done]:
    """The job's events through its Done or Failed, traced; however it ends otherwise (the client
    gone, the task cancelled by the server on disconnect), the unfinished job is cancelled."""
    finished = False
    try:
        while not finished:
            event = await _next(job, request)
            if event is None:
                return
            if isinstance(event, Piece):
                trace.piece()
            else:
                finished = True
                failed = isinstance(event, Failed)
                trace.end(f"failed {event.error.status}" if failed else event.finish_reason, None if failed else event)
            yield event
    finally:
        if not finished:
            trace.end("disconnected")
            job.cancelled.set()


async def _next(job: Job, request: Request):
    """The job's next event; None (and the job cancelled) once the client has disconnected."""
    while True:
        try:
            return await asyncio.to_thread(job.events.get, timeout=POLL_S)
        except queue.Empty:
            if await request.is_disconnected():
                job.cancelled.set()
                return None
