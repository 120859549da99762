"""What the replicas' HTTP entry needs without Ray: the routing key of a request (the text that
leads its prompt) and an in-process ASGI call that streams a response back as it is written.

The key is the first ``PREFIX_CHARS`` characters of the text the prompt starts with: the files and
prefix an editor sends, the prompt of a completion, a chat's messages through its first user
message (so every later turn of the conversation has the same key). About 256 tokens of code; characters rather than tokens so the entry needs neither the tokenizer nor the model
files, and two prompts that share those characters share their first tokens too (but for the one
token at the cut), which is all routing needs. A prompt shorter than that is keyed whole, so a short file being
typed into moves between replicas (its prefill is short too). Requests without a prompt have no
key.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator

PREFIX_CHARS = 1024


def prefix_key(path: str, body: bytes, chars: int = PREFIX_CHARS) -> str | None:
    """A short hash of the text leading the prompt of a POST body on ``path``; None when it has none
    (or the body is not JSON: the replica answers that)."""
    try:
        data = json.loads(body) if body else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    text = _leading_text(path, data)
    if not text:
        return None
    return hashlib.blake2b(text[:chars].encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def _leading_text(path: str, data: dict) -> str:
    if path == "/infill":  # the other files' chunks come first, then the text before the cursor
        extra = data.get("input_extra") or []
        chunks = [f"{c.get('filename', '')}\n{c.get('text', '')}" for c in extra if isinstance(c, dict)]
        return "".join(chunks) + str(data.get("input_prefix", ""))
    if path == "/v1/chat/completions":  # up to the first user message: every later turn starts so
        messages = [m for m in data.get("messages") or [] if isinstance(m, dict)]
        first = next((i for i, m in enumerate(messages) if m.get("role") == "user"), len(messages) - 1)
        return "".join(f"{m.get('role')}\n{m.get('content')}\n" for m in messages[: first + 1])
    prompt = data.get("prompt")
    if isinstance(prompt, list):  # token ids (or a batch's first prompt)
        first = prompt[0] if prompt else ""
        return first if isinstance(first, str) else " ".join(map(str, prompt[: PREFIX_CHARS // 4]))
    return prompt if isinstance(prompt, str) else ""


async def asgi_stream(
    app, method: str, path: str, query: str, headers: list[tuple[str, str]], body: bytes, extensions: dict | None = None
) -> AsyncIterator[dict | bytes]:
    """Call an ASGI ``app`` in this process with one buffered request; yield the response's start
    ({"status", "headers"}) and then its body chunks as the app sends them. Closing the generator
    (the caller went away) tells the app the client disconnected and waits for it to finish.
    ``extensions``: the scope's, for what the caller says beyond HTTP (a replay)."""
    messages: asyncio.Queue = asyncio.Queue()
    gone = asyncio.Event()
    received = False

    async def receive() -> dict:
        nonlocal received
        if not received:
            received = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": query.encode(), "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
        "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 0), "extensions": dict(extensions or {}),
    }
    task = asyncio.create_task(app(scope, receive, messages.put))
    try:
        while True:
            getter = asyncio.ensure_future(messages.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():  # the app returned (or raised) with nothing more to send
                getter.cancel()
                task.result()
                return
            message = getter.result()
            if message["type"] == "http.response.start":
                yield {"status": message["status"], "headers": [(k.decode(), v.decode()) for k, v in message.get("headers", [])]}
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    yield bytes(message["body"])
                if not message.get("more_body", False):
                    return
    finally:
        gone.set()
        if not task.done():
            try:
                await asyncio.wait_for(task, timeout=5)
            except Exception:  # noqa: BLE001 - a timeout, or the app's own error (already answered)
                task.cancel()
