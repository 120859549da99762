"""One generation: the Run that steps its rows (together from the start, or joining between
rounds) through the loop, and what its callers read of each row."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from specvideo.core.loop import speculate
from specvideo.core.types import Draft, SpecStats, Step
from specvideo.text.book import BookRow, RowBook, RowRequest
from specvideo.text.drafting.catalog import spec_of
from specvideo.text.drafting.drafters import NGramDrafter
from specvideo.text.prompts import EncodedPrompt
from specvideo.text.runtime.state import CausalLMState


@dataclass
class TextOutput:
    """text: decoded new text (None without a tokenizer); token_ids: the new token ids.

    Both are lists with one entry per prompt when the input was a batch.
    """

    text: str | list[str] | None
    token_ids: list[int] | list[list[int]]
    stats: SpecStats


@dataclass(frozen=True)
class RowOutput:
    """One row of a run so far: what its callers read between rounds."""

    token_ids: list[int]  # the tokens emitted so far
    eos: bool  # the last one is a stop id
    finished: bool  # the row generates no more


@dataclass
class Parked:
    """A row taken out of a run between rounds (``Run.take``), to ``put`` into another run of the
    same target: its book entry, its target state (batch 1; None once it finished) and its tag."""

    book: BookRow
    state: CausalLMState | None
    tag: Any = None


class Run:
    """One generation in progress, opened by ``SpeculativeGenerator.open``: rows that start together
    (a batch of prompts) and rows that join between rounds (``admit``, the server's continuous
    batch) run the same rounds; iterate ``steps()`` to run it; ``stats`` fills up.

    Each row is decoded by the run's ``RowSampler`` with its own settings and seed, so its tokens
    never depend on its neighbours, greedy or sampled (under the default Gumbel rule; the rejection
    rule ties a sampled row to its drafts). The loop asks this run for drafts: when a
    second row joins a run whose drafter reads one row (the head's features), the batch drafts by
    prompt lookup from then on. ``tags`` keeps each row's caller object."""

    def __init__(self, generator, drafter, verifier, rows: RowBook, prompt: EncodedPrompt, packing, cached_tokens: int, name: str, tags):
        self.g, self.drafter, self.verifier, self.rows, self.prompt = generator, drafter, verifier, rows, prompt
        self.schedule, self.stats = generator.schedule(), SpecStats()
        self.packing = packing  # () -> the context the models' forwards run in
        self.cached_tokens = self.last_cached = cached_tokens  # prompt tokens reused from the prompt cache
        self.name, self.tags = name, list(tags)
        self.given: dict[int, list[int]] = {}  # row -> the draft its next round checks instead of the drafter's

    @property
    def calls(self) -> int:
        return self.drafter.calls

    def propose(self, k: int, keep_drafting):
        draft = self.drafter.propose(k, keep_drafting)
        return self._give(draft) if self.given else draft

    def _give(self, draft):
        """The drafter's draft (B, k) with the rows of ``given`` replaced by their own tokens (cut to
        what every row's budget and context allow), used once."""
        given, self.given = self.given, {}
        room = self.verifier.max_draft_length()
        given = {b: tokens[:room] for b, tokens in given.items()}
        width = max(draft.k, *(len(t) for t in given.values()))
        items = torch.nn.functional.pad(draft.items, (0, width - draft.k))  # (B, width)
        lengths = draft.lengths.clone()
        for b, tokens in given.items():
            items[b] = 0
            items[b, : len(tokens)] = torch.tensor(tokens, dtype=items.dtype)
            lengths[b] = len(tokens)
        return Draft(items=items, lengths=lengths)

    def steps(self) -> Iterator[Step]:
        """Rounds until every row has finished (rows admitted meanwhile included)."""
        with self.packing():
            for step in speculate(self, self.verifier, self.verifier.accept, self.schedule, self.stats):
                self.stats.time_forward = self.verifier.forward_seconds  # the check's model part
                yield step

    def round(self) -> Step:
        """One round of the rows generating now (``steps`` runs them all to the end)."""
        with self.packing():
            return next(speculate(self, self.verifier, self.verifier.accept, self.schedule, self.stats))

    def prefill(self) -> None:
        """Run the prompt's prefill now (a warm-up that generates nothing fills the prompt cache)."""
        self.verifier.state.forward()

    @property
    def size(self) -> int:
        """Rows still generating."""
        return int(self.rows.active.sum())

    def row_output(self, b: int) -> RowOutput:
        tokens = self.rows.outputs[b]
        return RowOutput(tokens, bool(tokens) and tokens[-1] in self.rows.stop_ids, not bool(self.rows.active[b]))

    def generating(self) -> list[tuple[int, Any]]:
        """(row, tag) of every row still generating."""
        return [(b, self.tags[b]) for b, on in enumerate(self.rows.active.tolist()) if on]

    def finish(self, rows: list[int]) -> None:
        if rows:
            self.verifier.finish(rows)

    def admit(self, request: RowRequest, tag: Any = None) -> int:
        """Join ``request`` to the run before the next round; returns its row. Prefills it now (the
        batch waits that long) and picks its first token from the prefill, so its text starts
        before the next round; the prompt-cache tokens it reused are in ``last_cached``."""
        g, verifier, rows = self.g, self.verifier, self.rows
        encoded = g.encode_row(request, spec_of(self.name))
        if not self.drafter.batched:  # prompt lookup over every row's prompt and output
            self._swap_to_lookup()
        self._renumber()
        row = CausalLMState(verifier.model, encoded.input_ids, encoded.attention_mask)
        with self.packing():
            self.last_cached = g.models.cache_prompt(request.prompt_ids, row) if request.cache_prompt else 0
            row.prefill()
            b = rows.admit(request)
            first = verifier.first_token(row, b)  # its first token comes with its prefill
            row.push(torch.tensor([[first]], device=row.device))
            rows.emit(b, [first])
            seen = torch.tensor([request.prompt_ids + [first]], device=row.device)
            self.drafter.admit(seen, torch.ones_like(seen))
            verifier.admit(row)
        self.tags.append(tag)
        return b

    def take(self, b: int) -> Parked:
        """Row b leaves the run between rounds with its cache (``Parked``), to be ``put`` back here
        or into another run of the same target."""
        state = self.verifier.state.split(b) if bool(self.rows.active[b]) else None
        parked = Parked(self.rows.take(b), state, self.tags[b])
        self.verifier.finish([])  # it leaves the target's cache and the drafter's
        return parked

    def put(self, parked: Parked, draft: list[int] | None = None) -> int:
        """A ``take``n row joins before the next round, which checks ``draft`` for it instead of
        the drafter's tokens; returns its row. A drafter keeping a model's state per row gives way
        to prompt lookup (the row's history would be prefilled into it at every put)."""
        if parked.state is None or parked.state.model is not self.verifier.state.model:
            raise ValueError("only a generating row of this run's target joins it")
        if not self.verifier.calls:
            raise ValueError("a row is put into a run after its first round (its prompt's prefill)")
        rows = self.rows
        if not self.drafter.reads_book:
            self._swap_to_lookup()
        self._renumber()
        b = rows.admit(parked.book.request, resume=parked.book)
        seen = torch.tensor([rows.history(b)], device=self.verifier.state.device)
        self.drafter.admit(seen, torch.ones_like(seen))
        self.verifier.state.admit(parked.state)
        self.tags.append(parked.tag)
        if draft is not None:
            self.given[b] = list(draft)
        return b

    def _renumber(self) -> None:
        """Drop the finished rows from the numbering (before a row joins)."""
        kept = self.rows.compact()
        self.verifier.compact(kept)
        self.tags = [self.tags[b] for b in kept]
        self.given = {kept.index(b): tokens for b, tokens in self.given.items() if b in kept}

    def _swap_to_lookup(self) -> None:
        """Draft by prompt lookup over every row's prompt and output from now on."""
        drafter = NGramDrafter(self.g.config.max_ngram, rows=self.rows, device=self.verifier.state.device)
        self.verifier.followers = [drafter]
        self.verifier.drop_features()
        self.drafter, self.name = drafter, "ngram"
