"""``POST /v1/verify``: the server's half of drafting on the user's machine.

A client drafts tokens with whatever it has (prompt lookup, a small local model) and sends them; the
server runs one target forward over them in the request's session and answers how many it accepted,
its own next token, whether the answer has ended, and the text so far. The first call opens a
session from a prompt (text, token ids or chat messages) and the settings; later calls name the
session and send only the new draft, so the prompt and every accepted token stay in the session's
cache. Because a row's token at each position is a function of its seed, its position and the
target's logits alone (greedy, or the default Gumbel sampling rule), checking the draft by equality
gives exactly the server's own answer to the same request (``specvideo.serve.verify_row``).

Sessions live on the engine's worker thread. A round (``Turn``) is taken there between the rounds of
the running batch: a session's first round runs alone (its prompt's prefill, as a joining row's
is); a later one joins the running batch as one of its rows, the client's tokens its draft, and
leaves it after that round; with no batch running it runs alone. Sessions expire after ``ttl_s``
unused or when their answer ends, and are bounded in number (the least recently used goes first);
/metrics counts them.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from prometheus_client import Counter, Gauge
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from specvideo.serve.jobs import Answered, Failed, Job
from specvideo.serve.protocol import MAX_STOP_SEQUENCES, APIError, Message, new_id
from specvideo.serve.requests import job_events, submit
from specvideo.text.book import RowRequest, cut_at_stop, shown_length
from specvideo.text.sampling import SamplingConfig

MAX_DRAFT = 32  # draft tokens one round may send
SETTINGS = ("temperature", "top_p", "seed", "stop", "max_tokens")


class VerifyRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str
    session: str | None = None  # continue this session (else open one from prompt or messages)
    prompt: str | list[int] | None = None  # text, or token ids
    messages: list[Message] | None = None  # a chat, laid out by the model's template
    draft: list[int] = Field(default_factory=list)  # token ids following the answer so far
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)  # None: 1.0, or the session's
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    seed: int | None = Field(default=None, ge=0)
    stop: str | list[str] | None = None

    @field_validator("draft")
    @classmethod
    def _short(cls, draft: list[int]) -> list[int]:
        if len(draft) > MAX_DRAFT:
            raise ValueError(f"a draft holds at most {MAX_DRAFT} tokens, got {len(draft)}")
        return draft

    @field_validator("stop")
    @classmethod
    def _stops(cls, value):
        stops = [value] if isinstance(value, str) else value
        if stops is not None and (len(stops) > MAX_STOP_SEQUENCES or any(not s for s in stops)):
            raise ValueError(f"stop takes up to {MAX_STOP_SEQUENCES} non-empty strings")
        return stops

    @model_validator(mode="after")
    def _one_start(self):
        given = [name for name in ("session", "prompt", "messages") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of session, prompt or messages (got {', '.join(given) or 'none'})")
        return self


@dataclass
class Session:
    id: str
    row: object  # specvideo.serve.verify_row.VerifyRow
    settings: dict
    prompt_ids: list[int]
    stops: list[str]
    expires: float
    sent: str = ""  # the answer's text the client has been given
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0


@dataclass
class Sessions:
    """Open sessions by id, least recently used first; touched only on the engine's worker thread."""

    max_sessions: int = 64
    ttl_s: float = 300.0
    open: OrderedDict = field(default_factory=OrderedDict)

    def __post_init__(self):
        self.registry = None

    def register(self, registry) -> None:
        """Series in the engine's /metrics registry."""
        Gauge("specvideo_verify_sessions", "open /v1/verify sessions (each holds a row's cache)", registry=registry).set_function(
            lambda: len(self.open)
        )
        self.rounds = Counter("specvideo_verify_rounds", "/v1/verify rounds (one target forward each)", registry=registry)
        self.drafted = Counter("specvideo_verify_drafted_tokens", "client draft tokens checked", registry=registry)
        self.accepted = Counter("specvideo_verify_accepted_tokens", "client draft tokens accepted", registry=registry)
        self.batched = Counter(
            "specvideo_verify_rounds_batched", "/v1/verify rounds run as a row of the running batch", registry=registry
        )
        self.expired = Counter("specvideo_verify_sessions_expired", "sessions dropped unused or past the bound", registry=registry)
        self.registry = registry

    def expire(self, now: float) -> None:
        for sid in [sid for sid, s in self.open.items() if s.expires < now]:
            self._drop(sid)
        while len(self.open) > self.max_sessions:
            self._drop(next(iter(self.open)))

    def _drop(self, sid: str) -> None:
        session = self.open.pop(sid)
        session.row.end()
        if self.registry is not None:
            self.expired.inc()

    def get(self, sid: str) -> Session:
        if sid not in self.open:
            raise APIError(404, f"unknown or expired session {sid!r}: start again with the prompt", param="session", code="session_not_found")
        self.open.move_to_end(sid)
        return self.open[sid]

    def add(self, session: Session) -> None:
        self.open[session.id] = session
        self.expire(time.monotonic())


def add_verify_route(app: FastAPI, engine, ready, check_model, prompt_ids) -> Sessions:
    """``POST /v1/verify`` on ``app``; ``prompt_ids(engine, body)`` tokenizes a prompt or chat."""
    sessions = Sessions()
    sessions.register(engine.metrics.registry)

    @app.post("/v1/verify")
    async def verify(body: VerifyRequest, request: Request):
        ready(engine)
        check_model(engine, body.model)
        ids, budget = None, None
        if body.session is None:
            ids = await asyncio.to_thread(prompt_ids, engine, body)
            room = engine.room(ids, max(body.max_tokens or 0, 1))
            budget = body.max_tokens if body.max_tokens is not None else min(512, room)
            if engine.max_tokens is not None:
                budget = min(budget, engine.max_tokens)
        job = Job(ids or [], budget or 0, 0.0, 1.0)
        job.turn = Turn(sessions, body, ids, budget, job)
        trace = submit(engine, job, request, new_id("verify"))
        async for event in job_events(job, request, trace):
            if isinstance(event, Failed):
                raise event.error
            if isinstance(event, Answered):
                return event.body
        return JSONResponse({}, status_code=499)  # the client left

    return sessions


@dataclass
class Turn:
    """One ``/v1/verify`` round of ``body``'s session (opened from ``ids`` and ``budget`` when it has
    none), on the engine's worker: ``open`` it, then run it ``alone``, or ``join`` the running batch
    and come ``back`` after its round. An ``APIError`` is the answer."""

    sessions: Sessions
    body: VerifyRequest
    ids: list[int] | None
    budget: int | None
    job: Job
    session: Session | None = None
    started: float = 0.0

    def open(self, generator) -> None:
        """Check the draft, find or open the session, check its settings."""
        sessions, body = self.sessions, self.body
        sessions.expire(time.monotonic())
        vocab = generator.models.vocab_size
        if any(not 0 <= t < vocab for t in body.draft):
            raise APIError(400, f"draft token ids must be in [0, {vocab}) (this model's vocabulary)", param="draft")
        self.session = sessions.get(body.session) if body.session else _open(sessions, body, self.ids, self.budget, generator)
        _same_settings(self.session, body)
        self.started = time.perf_counter()

    def joinable(self, run) -> bool:
        """The session's row can join ``run`` (after its first round, on the same target)."""
        row = self.session.row
        return row.joinable and row.run.verifier.state.model is run.verifier.state.model

    def alone(self, generator) -> dict:
        """The round as a run of its own row."""
        return self.answer(self.session.row.check(self.body.draft), generator, rows=1)

    def join(self, run) -> None:
        """The session's row joins ``run`` (between its rounds), the draft its next round's."""
        self.session.row.join(run, self.body.draft, tag=self)

    def here(self, b: int) -> bool:
        """The session's row is row b of the run it joined, not yet back."""
        away = self.session.row.away
        return away is not None and away[0] == b

    def back(self, run, step, generator) -> dict:
        """The session's row leaves ``run`` after its round ``step``; the answer."""
        self.sessions.batched.inc()
        return self.answer(self.session.row.back(run, step), generator, rows=int(step.active.sum()))

    def answer(self, checked, generator, rows: int) -> dict:
        """The answer's body for a round of ``rows`` rows that gave ``checked``."""
        sessions, session = self.sessions, self.session
        round_ms = 1e3 * (time.perf_counter() - self.started)
        session.expires = time.monotonic() + sessions.ttl_s
        session.rounds += 1
        session.drafted += checked.checked
        session.accepted += checked.accepted
        sessions.rounds.inc()
        sessions.drafted.inc(checked.checked)
        sessions.accepted.inc(checked.accepted)
        piece, finished, eos = _text(session, generator.tokenizer, checked)
        if finished:
            sessions.open.pop(session.id, None)
            session.row.end()
        outputs = session.row.outputs
        answer = {
            "session": session.id,
            "accepted": checked.accepted,
            "checked": checked.checked,
            "tokens": checked.tokens,  # the accepted draft tokens, then the target's own
            "text": piece,  # the answer's new text (held back while it may be the start of a stop string)
            "finished": finished,
            "finish_reason": ("stop" if eos else "length") if finished else None,
            "position": len(outputs),
            "seed": session.settings["seed"],
            "usage": {
                "prompt_tokens": len(session.prompt_ids), "completion_tokens": len(outputs),
                "target_calls": session.row.target_calls, "rounds": session.rounds, "round_ms": round_ms,
                "batch_rows": rows,  # the rows the round's target forward checked (this one among them)
            },
        }
        if session.rounds == 1:
            answer["prompt_ids"] = session.prompt_ids  # for a client that drafts from the prompt without a tokenizer
        return answer


def _open(sessions: Sessions, body: VerifyRequest, ids: list[int], budget: int, generator) -> Session:
    from specvideo.serve.verify_row import VerifyRow

    temperature = 1.0 if body.temperature is None else body.temperature
    top_p = 1.0 if body.top_p is None else body.top_p
    seed = body.seed if body.seed is not None else (secrets.randbelow(2**31) if temperature > 0 else 0)
    sampling = SamplingConfig(temperature, None, None if temperature == 0 or top_p >= 1 else top_p)
    try:
        row = VerifyRow(generator, RowRequest(ids, budget, sampling, seed))
    except ValueError as err:
        raise APIError(400, str(err)) from None
    stops = list(body.stop or [])
    settings = {"temperature": temperature, "top_p": top_p, "seed": seed, "stop": stops, "max_tokens": budget}
    session = Session(new_id("vs"), row, settings, list(ids), stops, time.monotonic() + sessions.ttl_s)
    sessions.add(session)
    return session


def _same_settings(session: Session, body: VerifyRequest) -> None:
    """A session's settings are fixed when it opens: a later call may repeat them, not change them."""
    for name in SETTINGS:
        value = getattr(body, name)
        if body.session is not None and value is not None and value != session.settings[name]:
            raise APIError(
                400, f"{name}={value!r} differs from the session's {session.settings[name]!r}: a session keeps its settings",
                param=name,
            )


def _text(session: Session, tokenizer, checked) -> tuple[str, bool, bool]:
    """The new text piece, and whether the answer ended (and by a stop: an end id or string)."""
    final, eos = checked.finished, checked.eos
    text = tokenizer.decode(session.row.outputs, skip_special_tokens=True)
    text, stopped = cut_at_stop(text, session.stops)
    if stopped:
        final, eos = True, True
    if not final:
        text = text.rstrip("\ufffd")  # a multi-byte character still arriving
    visible = text[: max(len(session.sent), shown_length(text, session.stops, final))]
    piece = visible[len(session.sent) :]
    session.sent = visible
    return piece, final, eos
