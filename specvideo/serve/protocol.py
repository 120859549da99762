"""The OpenAI HTTP API's request bodies, response chunks and errors, as specvideo serves them.

Requests are validated with pydantic before anything is queued: a field out of range or of the
wrong type is a 400 in OpenAI's error JSON ({"error": {"message", "type", "param", "code"}}), which
the official ``openai`` client raises as ``BadRequestError``. OpenAI parameters this server does not
implement (``UNSUPPORTED``: log-probabilities, echo, best_of, penalties, logit_bias, response
formats, tools) are refused with a 400 naming them when set to anything but their neutral value;
fields OpenAI does not define (``user``, a client's own extras) are ignored.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_STOP_SEQUENCES = 4
# OpenAI parameters not implemented here, with the values that ask for nothing (accepted)
UNSUPPORTED = {
    "logprobs": (None, False, 0),
    "top_logprobs": (None, 0),
    "echo": (None, False),
    "best_of": (None, 1),
    "frequency_penalty": (None, 0, 0.0),
    "presence_penalty": (None, 0, 0.0),
    "logit_bias": (None, {}),
    "response_format": (None, {"type": "text"}),
    "tools": (None, []),
    "tool_choice": (None, "none"),
    "functions": (None, []),
    "function_call": (None, "none"),
}


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")  # clients send fields this server does not use (user, ...)

    model: str
    max_tokens: int | None = Field(default=None, ge=0)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    stop: str | list[str] | None = None
    seed: int | None = None
    stream: bool = False
    n: int = Field(default=1, ge=1, le=1)  # one choice per request
    # {"include_usage": true}: usage always comes in the last chunk, so that is the only option
    stream_options: dict[Literal["include_usage"], bool] | None = None

    @model_validator(mode="before")
    @classmethod
    def _refuse_unsupported(cls, data):
        if isinstance(data, dict):
            asked = [k for k, neutral in UNSUPPORTED.items() if k in data and data[k] not in neutral]
            if asked:
                raise ValueError(f"this server does not support {', '.join(asked)}: drop {'it' if len(asked) == 1 else 'them'}")
        return data

    @field_validator("stop")
    @classmethod
    def _stops(cls, value):
        stops = [value] if isinstance(value, str) else list(value or [])
        if len(stops) > MAX_STOP_SEQUENCES or any(not s for s in stops):
            raise ValueError(f"stop takes up to {MAX_STOP_SEQUENCES} non-empty strings")
        return stops

    @property
    def stops(self) -> list[str]:
        return list(self.stop or [])


class CompletionRequest(_Request):
    prompt: str
    suffix: str | None = None  # fill-in-the-middle: the text after the gap
    max_tokens: int | None = Field(default=16, ge=0)  # OpenAI's default for completions


class Message(BaseModel):
    role: Literal["system", "user", "assistant"]
    content: str


class ChatRequest(_Request):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=0)

    @property
    def limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


class APIError(Exception):
    """An error the server answers in OpenAI's JSON, with its HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        type_: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code
        self.headers = headers  # e.g. Retry-After on a 429 or a 503

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


@dataclass
class Usage:
    prompt_tokens: int
    completion_tokens: int

    def to_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


def new_id(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:24]}"


def completion_body(
    rid: str, model: str, text: str, finish: str | None, usage: Usage | None, extra: dict | None, chunk: bool
) -> dict:
    """A text completion, or one streamed chunk of it (the same object, ``text`` being the piece)."""
    body = {
        "id": rid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": None}],
    }
    return _finish(body, usage, extra)


def chat_body(
    rid: str,
    model: str,
    text: str,
    finish: str | None,
    usage: Usage | None,
    extra: dict | None,
    chunk: bool,
    first: bool = False,
) -> dict:
    """A chat completion, or one ``chat.completion.chunk`` (delta: the role in the first, then text)."""
    if chunk:
        delta = {"role": "assistant", "content": text} if first else ({"content": text} if text else {})
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        body = {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
        }
    else:
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
        body = {
            "id": rid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
        }
    return _finish(body, usage, extra)


def _finish(body: dict, usage: Usage | None, extra: dict | None) -> dict:
    if usage is not None:
        body["usage"] = usage.to_dict()
    if extra is not None:
        body["speculative"] = extra  # acceptance and tokens per target call, beside OpenAI's fields
    return body
