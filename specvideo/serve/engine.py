"""The serving engine: one worker thread that runs the shared speculative loop for queued requests.

Requests wait in a bounded queue (``max_queue``; a full queue is refused with 429). The worker
batches them continuously: it runs one ``Run`` (``SpeculativeGenerator.open_rows``); a request that
arrives while it decodes joins it at the next round (prefilled on its own first, through the prompt
cache), up to ``max_batch`` rows, and a row leaves as soon as it finishes, is cut by a stop sequence
or its client goes away. Greedy and sampled rows mix, each with its own temperature, top-k / top-p
and seed, and each decodes the tokens it would decode alone. A request for no tokens is a warm-up:
its prompt is prefilled into the prompt cache, nothing is generated.

Each request receives ``Piece`` events as its text grows (held back while it could still become a
stop sequence, cut at the first one), then one ``Done`` (or ``Failed``): ``specvideo.serve.jobs``.

``state`` tells the truth about serving: "loading" until ``attach`` hands over the generator,
"ready" while the worker thread runs, "failed" once loading failed or the worker died (every job it
held or that waits is then answered 503). Refusals carry ``Retry-After``: the seconds the queue ahead
should take, from the mean wall time of recent requests.
"""

from __future__ import annotations

import math
import queue
import threading
import time

from specvideo.errors import first_line
from specvideo.serve.jobs import Answered, Done, Failed, Job, JobRow, Piece
from specvideo.serve.metrics import ServeMetrics
from specvideo.serve.protocol import APIError

__all__ = ["Done", "Engine", "Failed", "Job", "Piece"]


class JobQueue(queue.Queue):
    """The engine's FIFO of jobs, with a front door: ``put_first`` goes ahead of every waiting job
    and past the size limit."""

    def put_first(self, job: Job) -> None:
        with self.not_full:
            self.queue.appendleft(job)
            self.unfinished_tasks += 1
            self.not_empty.notify()


class Engine:
    def __init__(
        self,
        generator,
        model_name: str,
        max_queue: int = 16,
        max_batch: int = 4,
        max_tokens: int | None = None,
        prompt_cache_bytes: int = 512 << 20,
    ):
        """generator: a SpeculativeGenerator, or None while it loads (``attach`` it then).
        max_tokens: the most tokens one request may generate (a larger ask is cut to it).
        prompt_cache_bytes: the memory bound of the keys and values kept of recent prompts
        (``specvideo.text.runtime.prompt_cache``; 0: none kept)."""
        if max_queue < 1 or max_batch < 1:
            raise ValueError(f"max_queue and max_batch must be >= 1, got {max_queue} and {max_batch}")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        self.model_name, self.max_tokens, self.max_batch = model_name, max_tokens, max_batch
        self.prompt_cache_bytes = prompt_cache_bytes
        self.queue: JobQueue = JobQueue(maxsize=max_queue)
        self.batches: list[int] = []  # the size of every batch run: what concurrency bought
        self.generator, self.error, self._thread = None, None, None
        self.batch_seconds = 1.0  # running mean wall time of a request (Retry-After)
        self.round_ms = None  # running mean wall time of a continuous batch's round
        self.rows_running = 0  # rows of the running batch (0 between batches)
        self.costs = RoundCosts()
        self.metrics = ServeMetrics(queue_depth=self.queue.qsize, batch_rows=lambda: self.rows_running)
        if generator is not None:
            self.attach(generator)

    def room(self, ids: list[int], asked: int) -> int:
        """The tokens a prompt ``ids`` leaves in the target's context, after the library's one check
        (``TextModels.check_room``: the target's positions and the draft's) that ``asked`` new
        tokens fit, answered as a 413."""
        from specvideo.text.runtime.contract import context_length

        g = self.generator
        try:
            g.models.check_room(len(ids), asked, g.drafter_spec)
        except ValueError as err:
            raise APIError(413, str(err), param="prompt", code="context_length_exceeded") from None
        return context_length(g.target) - len(ids)

    def attach(self, generator) -> None:
        """Start serving with ``generator`` (the end of loading; a tree drafter's batch drafts
        with its chain, ``SpeculativeGenerator.open_rows``)."""
        from specvideo.text.runtime.prompt_cache import PromptCache

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

    def submit(self, job: Job, first: bool = False) -> Job:
        """Queue ``job`` (``first``: at the head, past the limit: a replay whose client is mid-answer)."""
        if (error := self.unavailable()) is not None:
            raise error
        if first:
            self.queue.put_first(job)
            return job
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
                held = [self.queue.get()]
                self._continuous(held[0], held)
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

    def _continuous(self, first: Job, held: list[Job]) -> None:
        """Serve ``first`` and every request that arrives while it runs, in one ``Run``;
        ``held`` collects the jobs taken off the queue (answered if the worker dies)."""
        run = self._open(first)
        if run is None:
            return
        widest, index = 1, len(self.batches)
        self.batches.append(widest)  # kept current as rows join: a client may read it once answered
        self.round_ms, last = None, time.monotonic()
        try:
            for step in run.steps():
                now = time.monotonic()
                ms = 1e3 * (now - last)  # this round's wall time (the joins before it excluded)
                self.round_ms = ms if self.round_ms is None else 0.8 * self.round_ms + 0.2 * ms
                self.costs.round(int(step.active.sum()), ms)
                self._turns_back(run, step)  # a /v1/verify round's row leaves after its round
                self.metrics.target_forwards.inc()
                self.rows_running = run.size
                self.metrics.batch_width.observe(run.size)
                self._report_rows(run)
                run.finish([b for b, row in run.generating() if row.done or row.job.cancelled.is_set()])
                joined = 0  # rows admitted at this round boundary so far (each prefill delays the next)
                while run.size < self.max_batch:
                    try:
                        job = self.queue.get_nowait()
                    except queue.Empty:
                        break
                    held.append(job)
                    joined += self._join(run, job, joined)
                    self._report_rows(run)  # a joining row's first token, from its prefill
                widest = self.batches[index] = max(widest, run.size)
                held[:] = [row.job for _, row in run.generating()]  # the answered ones need no keeping
                last = time.monotonic()
            self._report_rows(run, end=True)
        except Exception as err:  # noqa: BLE001 - every row still running gets an answer
            error = APIError(500, f"generation failed: {first_line(err)}", "server_error")
            for _, row in run.generating():
                row.job.events.put(Failed(error))
        finally:
            self.rows_running = 0

    def _open(self, job: Job):
        """A run that more rows join, started with ``job`` (None: nothing to run; the job was answered)."""
        if job.cancelled.is_set():
            return None
        if job.turn is not None:
            self._turn(job)
            return None
        if job.max_tokens == 0:  # a warm-up: prefill into the prompt cache, nothing to generate
            self._warm(job)
            return None
        row = JobRow(job, time.monotonic())
        try:
            run = self.generator.open_rows(_request(job), tag=row)
        except Exception as err:  # noqa: BLE001
            job.events.put(Failed(_failure(err)))
            return None
        row.cached = run.cached_tokens
        return run

    def _join(self, run, job: Job, before: int = 0) -> int:
        """``job`` joins the running batch before its next round, after ``before`` others joined
        at this boundary; returns 1 when it joined."""
        if job.cancelled.is_set():
            return 0
        if job.turn is not None:
            return self._turn(job, run)
        if job.max_tokens == 0:
            self._warm(job)
            return 0
        row = JobRow(job, time.monotonic())
        try:
            run.admit(_request(job), tag=row)
        except Exception as err:  # noqa: BLE001 - this request fails, the batch goes on
            job.events.put(Failed(_failure(err)))
            return 0
        row.cached = run.last_cached
        prefill_ms = 1e3 * (time.monotonic() - row.started)
        row.measured = {"prefill_ms": prefill_ms, "round_ms": self.round_ms, "joined_after": before}
        return 1

    def _report_rows(self, run, end: bool = False) -> None:
        """Send every running row's new text (``JobRow.update``)."""
        speculative = _speculative(run.stats, run.size)
        for b, row in enumerate(run.tags):
            if row is None or row.job.turn is not None or row.done:
                continue
            out = run.row_output(b)
            self._update(row, out.token_ids, end or out.finished, out.eos, speculative)
            if row.done:  # Retry-After: a continuous run may never end, its requests do
                self.batch_seconds = 0.8 * self.batch_seconds + 0.2 * (time.monotonic() - row.started)

    def _update(self, row: JobRow, tokens: list[int], final: bool, eos: bool, speculative: dict) -> None:
        text = self.generator.tokenizer.decode(tokens, skip_special_tokens=True)
        if not final:
            text = text.rstrip("\ufffd")  # a multi-byte character still arriving
        row.update(text, final, eos, len(tokens), speculative)

    def _turn(self, job: Job, run=None) -> int:
        """A /v1/verify round: its session's row joins ``run`` for the next round when it can (its
        answer then comes with ``_turns_back``), else the round runs now, alone; returns 1 when it joined."""
        turn = job.turn
        try:
            turn.open(self.generator)
            if run is not None and turn.joinable(run) and self.costs.join_pays(run.size):
                started = time.monotonic()
                turn.join(run)
                self.costs.move(1e3 * (time.monotonic() - started))
                return 1
            first, started = turn.session.rounds == 0, time.monotonic()
            job.events.put(Answered(turn.alone(self.generator)))
            self.metrics.target_forwards.inc()
            if not first:  # a first round holds the prompt's prefill
                self.costs.alone(1e3 * (time.monotonic() - started))
        except APIError as err:
            job.events.put(Failed(err))
        except Exception as err:  # noqa: BLE001 - the client gets an answer
            job.events.put(Failed(_failure(err)))
        return 0

    def _turns_back(self, run, step) -> None:
        """Every /v1/verify row of ``run`` leaves it after its round, its job answered."""
        for b, tag in enumerate(run.tags):
            if tag is None or tag.job.turn is not tag or not tag.here(b):
                continue
            try:
                started = time.monotonic()
                answer = tag.back(run, step, self.generator)
                self.costs.move(1e3 * (time.monotonic() - started))
                tag.job.events.put(Answered(answer))
            except Exception as err:  # noqa: BLE001 - the client gets an answer
                tag.job.events.put(Failed(_failure(err)))

    def _warm(self, job: Job) -> None:
        """A request for no tokens: prefill its prompt into the prompt cache (when it asks for the
        cache) and answer it with the empty text."""
        g, cache = self.generator, self.generator.prompt_cache
        self.batches.append(1)
        if not job.cache_prompt:
            g.prompt_cache = None  # for this call (the worker runs one at a time)
        try:
            run = g.start(job.prompt_ids, max_new_tokens=0)
            if g.prompt_cache is not None:
                run.prefill()
            self._update(JobRow(job, time.monotonic(), run.cached_tokens), [], True, False, _speculative(run.stats, 1))
        except Exception as err:  # noqa: BLE001 - the client gets an answer
            job.events.put(Failed(_failure(err)))
        finally:
            g.prompt_cache = cache


class RoundCosts:
    """What rounds have cost: the batch's by its rows, a /v1/verify round run alone, and moving a
    session's row into the batch and out again (running means). A verify round joins the batch when
    that saves at least ``JOIN_SAVING`` of an alone round: the client then waits for the batch's wider
    round instead of its own forward, so a join must buy compute. Where a round's cost grows with
    its rows as much as an alone round costs (a CPU whose kernels are compute bound), rounds run
    alone; where rows come nearly free, they join."""

    JOIN_SAVING = 0.5

    def __init__(self):
        self.by_rows: dict[int, float] = {}
        self.alone_ms: float | None = None
        self.one_move_ms: float | None = None  # moving a row into the batch, or out of it

    def round(self, rows: int, ms: float) -> None:
        self.by_rows[rows] = _mean(self.by_rows.get(rows), ms)

    def alone(self, ms: float) -> None:
        self.alone_ms = _mean(self.alone_ms, ms)

    def move(self, ms: float) -> None:
        """One of a join's two moves (in, out) took ``ms``."""
        self.one_move_ms = _mean(self.one_move_ms, ms)

    def join_pays(self, rows: int) -> bool:
        """Whether a verify round should join a batch of ``rows`` rows (yes until measured)."""
        wider, now = self.by_rows.get(rows + 1), self.by_rows.get(rows)
        alone = self.alone_ms if self.alone_ms is not None else self.by_rows.get(1)
        if wider is None or now is None or alone is None:
            return True
        moves = 2 * (self.one_move_ms or 0.0)
        return wider - now + moves <= (1 - self.JOIN_SAVING) * alone


def _mean(old: float | None, new: float) -> float:
    """A running mean that follows recent values."""
    return new if old is None else 0.8 * old + 0.2 * new


def _speculative(stats, batch_size: int) -> dict:
    """The ``speculative`` field of an answer: how the run it was in has gone so far."""
    return {
        "acceptance_rate": stats.acceptance_rate,
        "tokens_per_target_call": stats.emitted / stats.target_calls if stats.target_calls else None,
        "batch_size": batch_size,
    }


def _request(job: Job):
    """The row request of a job (a seed drawn from the clock when it names none)."""
    from specvideo.text.book import RowRequest
    from specvideo.text.sampling import SamplingConfig

    sampling = SamplingConfig(
        job.temperature,
        None if job.greedy else job.top_k,
        None if job.greedy or job.top_p >= 1 else job.top_p,
    )
    seed = job.seed if job.seed is not None else int(time.time_ns() % 2**31)
    return RowRequest(job.prompt_ids, job.max_tokens, sampling, seed, job.cache_prompt)


def _failure(err: Exception) -> APIError:
    if isinstance(err, APIError):
        return err
    if isinstance(err, ValueError):  # the request's own problem (a prompt past the context)
        return APIError(400, first_line(err), "invalid_request_error")
    return APIError(500, f"generation failed: {first_line(err)}", "server_error")
