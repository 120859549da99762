"""Continuing a cut stream from a replay (specvideo.serve.replay), on hand-written event streams in
each route's format: what was sent is dropped, the straddling event cut, the answer's id kept; a
replay that differs or ends early is refused; seeds are pinned where a request samples."""

from __future__ import annotations

import json

import pytest

from specvideo.serve.replay import (
    ReplayMismatch,
    Resumer,
    SSEFrames,
    StreamLedger,
    not_reproducible,
    pin_seed,
)


def chat_events(rid: str, pieces: list[str], finish: str = "stop") -> bytes:
    chunks = []
    for i, text in enumerate(pieces):
        delta = {"role": "assistant", "content": text} if i == 0 else {"content": text}
        chunks.append({"id": rid, "created": 100 + i, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    chunks.append({"id": rid, "created": 200, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": {"completion_tokens": 9}})
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def llama_events(pieces: list[str]) -> bytes:
    events = [{"content": p, "stop": False} for p in pieces] + [{"content": "", "stop": True, "tokens_predicted": 9}]
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)


def before_final(raw: bytes) -> bytes:
    """The stream cut just before its final event (the replica died there)."""
    final = max(raw.rfind(b'data: {"id"'), raw.rfind(b'data: {"content": "", "stop": true'))
    return raw[:final]


def datas(frames: list[bytes]) -> list:
    out = []
    for frame in frames:
        data = frame.decode().removeprefix("data: ").strip()
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def chat_text(events: list) -> str:
    return "".join(e["choices"][0]["delta"].get("content", "") for e in events if isinstance(e, dict))


def test_frames_are_whole_events_whatever_the_chunking():
    raw = chat_events("a", ["Hel", "lo"])
    frames = SSEFrames()
    split = [frames.feed(raw[i : i + 7]) for i in range(0, len(raw), 7)]
    assert b"".join(f for chunk in split for f in chunk) == raw
    assert frames.buffer == b""


def test_a_chat_replay_drops_what_was_sent_and_continues_with_the_answers_id():
    ledger = StreamLedger("/v1/chat/completions")
    sent = ledger.feed(before_final(chat_events("chatcmpl-original", ["Hel", "lo w"]))[:-3])  # and mid-event
    assert ledger.text == "Hel" and chat_text(datas(sent)) == "Hel"  # whole events only
    resumer = Resumer(ledger)
    replay = chat_events("chatcmpl-replay", ["Hello", " world", "!"])  # the same text, chunked otherwise
    out = datas(resumer.feed(replay))
    assert chat_text(out) == "lo world!" and out[-1] == "[DONE]"
    assert {e["id"] for e in out[:-1]} == {"chatcmpl-original"}
    assert all("role" not in e["choices"][0]["delta"] for e in out[:-1])  # the role went out first
    assert out[-2]["choices"][0]["finish_reason"] == "stop" and out[-2]["usage"] == {"completion_tokens": 9}
    assert ledger.text == "Hello world!"


def test_a_cut_exactly_between_events_forwards_the_next_event_whole():
    ledger = StreamLedger("/completion")
    ledger.feed(before_final(llama_events(["def", " f("])))
    out = datas(Resumer(ledger).feed(llama_events(["def", " f(", "x)"])))
    assert [e["content"] for e in out] == ["x)", ""] and out[-1]["stop"] is True


@pytest.mark.parametrize(
    "replayed, match",
    [(["Help", " me"], "differs from the text sent at character 0"), (["Hel"], "ended after 3 of the 7")],
)
def test_a_replay_that_differs_or_ends_early_is_refused(replayed, match):
    ledger = StreamLedger("/v1/chat/completions")
    ledger.feed(before_final(chat_events("x", ["Hel", "lo w"])))
    with pytest.raises(ReplayMismatch, match=match):
        Resumer(ledger).feed(chat_events("y", replayed))


def test_completion_pieces_and_a_replayed_error_event_go_out():
    ledger = StreamLedger("/v1/completions")
    ledger.feed(b'data: {"id": "cmpl-1", "created": 5, "choices": [{"index": 0, "text": "ab", "finish_reason": null}]}\n\n')
    replay = (
        b'data: {"id": "cmpl-2", "created": 6, "choices": [{"index": 0, "text": "abc", "finish_reason": null}]}\n\n'
        b'data: {"error": {"message": "boom", "type": "server_error"}}\n\n'
    )
    out = datas(Resumer(ledger).feed(replay))
    assert out[0]["choices"][0]["text"] == "c" and out[0]["id"] == "cmpl-1" and out[0]["created"] == 5
    assert out[1] == {"error": {"message": "boom", "type": "server_error"}}


def test_seeds_are_pinned_only_where_a_request_samples_without_one():
    body, seed = pin_seed("/v1/chat/completions", b'{"model": "m", "messages": []}')  # temperature 1 by default
    assert seed is not None and json.loads(body)["seed"] == seed
    assert not_reproducible("/v1/chat/completions", body) is None
    for route, raw in [
        ("/v1/completions", b'{"prompt": "x", "temperature": 0}'),
        ("/v1/completions", b'{"prompt": "x", "seed": 3}'),
        ("/v1/models", b"{}"),
        ("/completion", b"not json"),
    ]:
        assert pin_seed(route, raw) == (raw, None)
    body, seed = pin_seed("/completion", b'{"prompt": "x", "seed": -1}')  # llama.cpp's "no seed"; 0.8 by default
    assert json.loads(body)["seed"] == seed >= 0


def test_what_cannot_be_replayed_says_why():
    assert "without a seed" in not_reproducible("/v1/completions", b'{"prompt": "x"}')
    assert "clock" in not_reproducible("/infill", b'{"temperature": 0, "t_max_predict_ms": 50}')
    assert not_reproducible("/infill", b'{"temperature": 0}') is None
    assert "not a generation route" in not_reproducible("/health", b"")
