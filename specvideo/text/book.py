"""The rows of a run and the rules their text ends by.

``RowBook`` owns the per-row state: each row's request (prompt, budget, sampling
settings, seed), what it has emitted, whether it still generates, and its sampling generator. The
verifier appends what each round accepted (``emit``), the run adds and drops rows (``admit``,
``finish``, ``compact``); the drafters and the sampler only read it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specvideo.text.sampling import SamplingConfig

STOP_MARGIN = 16  # characters of a row's text kept before the longest stop string (see ``RowBook._tail``)


@dataclass(frozen=True)
class RowRequest:
    """One row of a run: prompt token ids and its own settings."""

    prompt_ids: list[int]
    max_new_tokens: int
    sampling: SamplingConfig = SamplingConfig()
    seed: int = 0  # the noise a sampled row draws (ignored when greedy)
    cache_prompt: bool = True  # reuse and keep its prefix in the generator's prompt cache

    def __post_init__(self) -> None:  # every caller's budget is checked here: generate, stream, server and batch jobs
        n = self.max_new_tokens
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(f"max_new_tokens must be an integer >= 0, got {n!r}")


@dataclass
class BookRow:
    """One row as it leaves a book (``RowBook.take``) to join another (``RowBook.admit``'s ``resume``)."""

    request: RowRequest
    output: list[int]
    generator: torch.Generator
    tail: list[int]
    active: bool


class RowBook:
    """The rows of one run, numbered 0 .. B - 1 (``compact`` renumbers them).

    A row ends at its budget, at a stop id (kept), or at the token that completes a stop string in
    its decoded text (kept; ``cut_at_stop`` trims the text). The stop-string check decodes only the
    tail of a row's output that can still hold the start of a stop string.
    """

    def __init__(self, requests: list[RowRequest], stop_ids: frozenset[int] = frozenset()):
        self.requests: list[RowRequest] = []
        self.outputs: list[list[int]] = []
        self.generators: list[torch.Generator] = []  # each row's own (the rejection rule draws from it)
        self.active = torch.zeros(0, dtype=torch.bool)  # (B,) rows still generating
        self.stop_ids = stop_ids
        self.stop_strings: tuple[str, ...] = ()
        self._decode = None
        self._tails: list[list[int]] = []  # the output tokens a stop string could still start in
        for request in requests:
            self.admit(request)

    def stop_on_text(self, strings: tuple[str, ...], tokenizer) -> None:
        """Also end a row at the token that completes one of ``strings`` in its decoded text."""
        self.stop_strings = tuple(strings)
        self._decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)

    def __len__(self) -> int:
        return len(self.requests)

    @property
    def prompts(self) -> list[list[int]]:
        return [r.prompt_ids for r in self.requests]

    def history(self, b: int) -> list[int]:
        """Row b's prompt and output: the tokens a drafter's context re-syncs to."""
        return self.requests[b].prompt_ids + self.outputs[b]

    def length(self, b: int) -> int:
        """``len(history(b))``, without building it."""
        return len(self.requests[b].prompt_ids) + len(self.outputs[b])

    def tail(self, b: int, start: int) -> list[int]:
        """``history(b)[start:]`` without building the whole history (a drafter's per-round re-sync)."""
        prompt = self.requests[b].prompt_ids
        return self.outputs[b][start - len(prompt) :] if start >= len(prompt) else prompt[start:] + self.outputs[b]

    @property
    def finished(self) -> bool:
        return not bool(self.active.any())

    @property
    def target_only_calls(self) -> int:
        """Target-only decoding needs one forward per generated token (the first is the prefill)."""
        return max(len(out) for out in self.outputs)

    def max_draft_length(self, context_length: int) -> int:
        """Keep k + 1 tokens within the budget of the row furthest from done and within the context."""
        rows = [b for b, on in enumerate(self.active.tolist()) if on]
        budget = max(self.requests[b].max_new_tokens - len(self.outputs[b]) for b in rows) - 1
        room = min(context_length - self.length(b) for b in rows)
        return max(0, min(budget, room))

    def admit(self, request: RowRequest, resume: BookRow | None = None) -> int:
        """Add a row (numbered after the last), or ``resume`` one another book gave up with its
        output so far; returns its number."""
        if resume is None:
            generator = torch.Generator().manual_seed(int(request.seed) % (1 << 63))
            resume = BookRow(request, [], generator, [], request.max_new_tokens > 0)
        row = resume
        self.requests.append(row.request)
        self.outputs.append(row.output)
        self._tails.append(row.tail)
        self.generators.append(row.generator)
        self.active = torch.cat([self.active, torch.tensor([row.active])])
        return len(self.requests) - 1

    def take(self, b: int) -> BookRow:
        """Row b as it stands, for another book to ``admit``; here it stops generating."""
        row = BookRow(self.requests[b], self.outputs[b], self.generators[b], self._tails[b], bool(self.active[b]))
        self.active[b] = False
        return row

    def finish(self, rows: list[int]) -> None:
        self.active[rows] = False

    def compact(self) -> list[int]:
        """Drop the finished rows from the numbering; returns the kept rows' former numbers."""
        kept = self.active.nonzero()[:, 0].tolist()
        for name in ("requests", "outputs", "generators", "_tails"):
            setattr(self, name, [getattr(self, name)[b] for b in kept])
        self.active = self.active[kept]
        return kept

    def emit(self, b: int, new: list[int]) -> list[int]:
        """Append ``new`` to row b up to its budget and through its first stop; the row stops
        generating when done. Returns what was appended."""
        room = self.requests[b].max_new_tokens - len(self.outputs[b])
        new = new[:room]
        stop_at = next((i for i, t in enumerate(new) if t in self.stop_ids), None)
        if stop_at is not None:
            new = new[: stop_at + 1]
        if self.stop_strings:
            at = self._text_stop(b, new)
            stop_at = at if at is not None else stop_at
            new = new if at is None else new[: at + 1]
        self.outputs[b].extend(new)
        if self.stop_strings:
            self._tails[b] = self._tail(self._tails[b] + new)
        if stop_at is not None or len(self.outputs[b]) >= self.requests[b].max_new_tokens:
            self.active[b] = False
        return new

    def _text_stop(self, b: int, new: list[int]) -> int | None:
        """Index in ``new`` of the token that completes a stop string in row b (None: none does).
        Only text past the row's tail, less a stop string's length, is searched."""
        before, decode = self._tails[b], self._decode
        start = max(0, len(decode(before)) - max(len(s) for s in self.stop_strings))
        if not any(s in decode(before + new)[start:] for s in self.stop_strings):
            return None
        return next(i for i in range(len(new)) if any(s in decode(before + new[: i + 1])[start:] for s in self.stop_strings))

    def _tail(self, tokens: list[int]) -> list[int]:
        """The shortest end of ``tokens`` whose text is ``STOP_MARGIN`` characters longer than the
        longest stop string: a stop string completed later starts inside it, and the text of a
        cut-off start (half a character, a dropped leading space) lies before where it is searched."""
        need = max(len(s) for s in self.stop_strings) + STOP_MARGIN
        while len(tokens) > 1 and len(self._decode(tokens[1:])) >= need:
            tokens = tokens[1:]
        return tokens


def stop_rules(stop, eos_ids: frozenset[int], tokenizer) -> tuple[frozenset[int], tuple[str, ...]]:
    """(stop token ids, stop strings) of a ``stop`` argument.

    "eos": the end-of-sequence ids; None: nothing (exactly max_new_tokens); a token id or a list
    of them: those ids; any other string, or a list of strings: those stop strings (the text ends
    before the first of them), with the end-of-sequence ids too, as OpenAI's ``stop`` does. A list
    may mix token ids, "eos" and strings."""
    if stop is None:
        return frozenset(), ()
    items = [stop] if isinstance(stop, (str, int)) else stop
    if not isinstance(items, (list, tuple, set, frozenset)) or not all(
        isinstance(t, (str, int)) and not isinstance(t, bool) for t in items
    ):
        raise ValueError(f"stop must be 'eos', None, a token id, a string or a list of them, got {stop!r}")
    ids = {t for t in items if isinstance(t, int)}
    strings = tuple(dict.fromkeys(t for t in items if isinstance(t, str) and t != "eos"))
    if any(not s for s in strings):
        raise ValueError("a stop string must not be empty")
    if strings and tokenizer is None:
        raise ValueError("stop strings are matched on decoded text and need a tokenizer")
    if "eos" in items or (strings and not ids):
        ids |= eos_ids
    return frozenset(ids), strings


def first_stop(text: str, stops) -> tuple[int, str] | None:
    """Where the first stop string in ``text`` starts, and which one (None: none occurs)."""
    return min(((text.find(s), s) for s in stops if s in text), default=None)


def cut_at_stop(text: str, stops: tuple[str, ...]) -> tuple[str, bool]:
    """The text before the first stop string, and whether one occurred."""
    found = first_stop(text, stops)
    return (text, False) if found is None else (text[: found[0]], True)


def shown_length(text: str, stops, final: bool) -> int:
    """How much of a row's decoded ``text`` (already cut at a stop string) a stream may show now:
    all of it once the row is final; else all but an incomplete character at its end and the last
    len(longest stop) - 1 characters, which could still become a stop string. The hold-back rule of
    ``SpeculativeGenerator.stream`` and the server."""
    if final:
        return len(text)
    hold = max((len(s) - 1 for s in stops), default=0)
    return max(0, len(text.rstrip("\ufffd")) - hold)
