"""A stream continued on another replica after its own died (the replicas' entry).

Every answer here is a function of the request alone: greedy decoding, or sampling whose rule draws
each token from the row's seed, its position and the target's logits, in a batch or alone. So the
same request replayed on another replica writes the same text, and a stream cut mid-way can go on:

- ``StreamLedger`` frames what a replica streams into whole server-sent events and keeps what went
  out: the answer's text so far and its id;
- ``Resumer`` reads the replay's events, checks their text against what was sent and drops it,
  cuts the event that straddles the cut to its new part, and forwards the rest with the answer's
  own id; replayed text that differs from what was sent (a replica on another kind of CPU, another
  dtype, other weights) raises ``ReplayMismatch``, and the stream ends with the error event it
  ended with before replay existed;
- ``pin_seed`` gives a sampled request that names no seed one at the entry, so it replays too; the
  answer says which (header ``x-specvideo-seed``).

Formats: OpenAI's completion chunks (``choices[0].text``), chat chunks (``choices[0].delta.content``,
also the FIM route's) and llama.cpp's stream objects (``content``, ``stop``).
"""

from __future__ import annotations

import copy
import json
import secrets

# the streaming routes and the format of their events
STREAM_FORMATS = {
    "/v1/completions": "completion",
    "/v1/chat/completions": "chat",
    "/v1/fim/completions": "chat",
    "/completion": "llama",
    "/infill": "llama",
}
DEFAULT_TEMPERATURE = {"completion": 1.0, "chat": 1.0, "llama": 0.8}  # each route's own default
SEED_HEADER = "x-specvideo-seed"


class ReplayMismatch(Exception):
    """The replayed answer is not the one the client was sent."""


def _json_body(body: bytes) -> dict | None:
    try:
        data = json.loads(body) if body else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _has_seed(data: dict, fmt: str) -> bool:
    seed = data.get("seed")
    return isinstance(seed, int) and not isinstance(seed, bool) and (seed >= 0 or fmt != "llama")


def pin_seed(route: str, body: bytes) -> tuple[bytes, int | None]:
    """The body with a fresh seed when it asks to sample on a generation route and names none (the
    seed, else None). Bodies that are not JSON objects pass unchanged: the replica answers them."""
    fmt = STREAM_FORMATS.get(route)
    data = _json_body(body) if fmt else None
    if data is None or _has_seed(data, fmt):
        return body, None
    temperature = data.get("temperature", DEFAULT_TEMPERATURE[fmt])
    if not isinstance(temperature, (int, float)) or temperature <= 0:
        return body, None
    data["seed"] = seed = secrets.randbelow(2**31)
    return json.dumps(data).encode(), seed


def not_reproducible(route: str, body: bytes) -> str | None:
    """Why replaying this request would not give the same answer, or None when it would."""
    fmt = STREAM_FORMATS.get(route)
    data = _json_body(body)
    if fmt is None or data is None:
        return f"{route} is not a generation route"
    if data.get("t_max_predict_ms") is not None:
        return "t_max_predict_ms ends the answer by the clock"
    if data.get("temperature", DEFAULT_TEMPERATURE[fmt]) != 0 and not _has_seed(data, fmt):
        return "a sampled request without a seed"
    return None


def piece(fmt: str, event: dict) -> str | None:
    """The text an event adds to the answer ("" for none); None for an error event."""
    if "error" in event:
        return None
    if fmt == "llama":
        return str(event.get("content") or "")
    choice = (event.get("choices") or [{}])[0]
    text = (choice.get("delta") or {}).get("content") if fmt == "chat" else choice.get("text")
    return str(text or "")


def is_final(fmt: str, event: dict) -> bool:
    if fmt == "llama":
        return bool(event.get("stop"))
    return (event.get("choices") or [{}])[0].get("finish_reason") is not None


def with_piece(fmt: str, event: dict, text: str) -> dict:
    """A copy of ``event`` adding ``text`` instead (a chat delta loses its role: it went out first)."""
    event = copy.deepcopy(event)
    if fmt == "llama":
        event["content"] = text
    elif fmt == "chat":
        event["choices"][0]["delta"] = {"content": text} if text else {}
    else:
        event["choices"][0]["text"] = text
    return event


def sse(data: dict) -> bytes:
    return f"data: {json.dumps(data)}\n\n".encode()


class SSEFrames:
    """Whole events out of a byte stream: each ends with a blank line."""

    def __init__(self):
        self.buffer = b""

    def feed(self, chunk: bytes) -> list[bytes]:
        self.buffer += chunk.replace(b"\r\n", b"\n")
        *frames, self.buffer = self.buffer.split(b"\n\n")
        return [frame + b"\n\n" for frame in frames if frame.strip()]


def payload(frame: bytes) -> dict | str | None:
    """An event's data: a JSON object, the "[DONE]" marker, or None (a comment, anything else)."""
    data = b"\n".join(line[5:].lstrip() for line in frame.splitlines() if line.startswith(b"data:"))
    if data == b"[DONE]":
        return "[DONE]"
    try:
        value = json.loads(data) if data else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class StreamLedger:
    """What a streaming answer has sent: its whole events' text and the answer's id and time."""

    def __init__(self, route: str):
        self.fmt = STREAM_FORMATS[route]
        self.frames = SSEFrames()
        self.text = ""
        self.identity: dict = {}  # OpenAI's "id" and "created" of the answer's first chunk

    def feed(self, chunk: bytes) -> list[bytes]:
        """The whole events in ``chunk`` (and what came before it), recorded as sent."""
        frames = self.frames.feed(chunk)
        for frame in frames:
            self.record(payload(frame))
        return frames

    def record(self, event) -> None:
        if isinstance(event, dict):
            self.text += piece(self.fmt, event) or ""
            if not self.identity and self.fmt != "llama" and "id" in event:
                self.identity = {k: event[k] for k in ("id", "created") if k in event}


class Resumer:
    """Reads a replayed stream, drops what the ledger says was sent (checking it is the same text),
    and returns the rest as events to send, recording them in the ledger."""

    def __init__(self, ledger: StreamLedger):
        self.ledger = ledger
        self.frames = SSEFrames()
        self.cut = len(ledger.text)  # where the client's text ends
        self.position = 0  # how much of the replay's text was read

    @property
    def caught_up(self) -> bool:
        return self.position >= self.cut

    def feed(self, chunk: bytes) -> list[bytes]:
        out = []
        for frame in self.frames.feed(chunk):
            event = payload(frame)
            if not isinstance(event, dict):  # [DONE] or a comment
                if event == "[DONE]" and not self.caught_up:
                    raise ReplayMismatch(f"the replay ended after {self.position} of the {self.cut} characters sent")
                out.append(frame)
                continue
            sent = self._resume(event)
            if sent is not None:
                self.ledger.record(sent)
                out.append(sse(sent))
        return out

    def _resume(self, event: dict) -> dict | None:
        """The event to send for a replayed one (None: wholly sent before)."""
        fmt, sent = self.ledger.fmt, self.ledger.text
        text = piece(fmt, event)
        if text is None:  # the replay's own error: it goes out as it is
            return event
        start, remaining = self.position, self.cut - self.position
        self.position += len(text)
        if remaining > 0:
            seen = sent[start : start + min(len(text), remaining)]
            if text[: len(seen)] != seen:
                raise ReplayMismatch(f"the replay differs from the text sent at character {start}")
            if len(text) < remaining and is_final(fmt, event):
                raise ReplayMismatch(f"the replay ended after {self.position} of the {self.cut} characters sent")
            if len(text) < remaining or (len(text) == remaining and not is_final(fmt, event)):
                return None
            event = with_piece(fmt, event, text[remaining:])
        return {**event, **self.ledger.identity}
