"""TextModels: the loaded models of text generation and what runs them, built once and shared.

A target causal LM with its tokenizer, an optional draft causal LM and an optional draft head (on
the target's features), and their runners: the target's (transformers, or ``LeanLlama``: lean,
invariant, weight-only quantised), the drafts' ``LeanLlama`` runners and the target's quantised
copies the self drafters draft with (built on first use, then kept), oneDNN pre-packed linears for
the models transformers runs, and the prompt cache. Every per-call setting lives elsewhere (a
``TextConfig`` in a ``SpeculativeGenerator``), so one TextModels serves any number of cheap
generators: the app builds one per request, the server one for its life, a benchmark one per
method.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from specvideo.device import packs_float32
from specvideo.paths import shipped
from specvideo.text.drafting.catalog import DrafterSpec, spec_of
from specvideo.text.models.head import DraftHead
from specvideo.text.models.loading import (
    check_context,
    check_vocab,
    load_causal_lm,
    load_draft,
    load_tokenizer,
)
from specvideo.text.models.precision import dtype_name, model_type, resolve_dtype, weight_format
from specvideo.text.models.smollm import smollm2_dir
from specvideo.text.models.vocab import load_token_ranking
from specvideo.text.runtime.contract import LEAN_MODEL_TYPES, context_length
from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.packing import packed_linears
from specvideo.text.runtime.quant import release_layers

DEFAULT_DRAFT = ("smollm2-draft",)  # under models/: the draft trained for SmolLM2-135M-Instruct
DEFAULT_HEAD = ("smollm2-head",)  # under models/: the draft head on its features (the head drafters)


class TextModels:
    """target, tokenizer, draft (a causal LM), head (a ``DraftHead``) and their runners.

    draft: a draft causal LM, or a DraftHead (then it is the ``head``). draft_ranking / head_ranking:
    their token rankings by frequency (FR-Spec, ``specvideo.text.models.vocab``), from which a
    generator takes its ``draft_vocab_size`` most frequent tokens. drafter: the drafter these models
    were loaded for (a named pair's default), None for ``default_drafter``.

    lean_target: run the target's forwards with ``LeanLlama`` (Llama architectures), or a LeanLlama
    already built over ``target``. invariant: its k-token checks computed exactly as 1-token steps
    (``specvideo.text.models.precision``); None: wherever the target is not float32 and LeanLlama
    runs it. weights: "int8" / "int4" runs the target's projections weight-only quantised on an
    invariant LeanLlama (one built here frees the dense weights). packed: the models transformers
    runs on oneDNN pre-packed weights; "auto": wherever that applies (float32 on a CPU).
    """

    def __init__(
        self,
        target: PreTrainedModel,
        tokenizer=None,
        draft: torch.nn.Module | None = None,
        *,
        head: DraftHead | None = None,
        device: str | torch.device | None = None,
        draft_tokenizer=None,
        draft_ranking: list[int] | None = None,
        head_ranking: list[int] | None = None,
        drafter: str | None = None,
        lean_target: bool | LeanLlama = False,
        packed: bool | str = False,
        invariant: bool | None = None,
        weights: str | None = None,
        copies: tuple[str, ...] = (),
    ):
        """copies: the weight formats of the target's copies to build now (the self drafters'),
        before a quantised target runner frees the dense weights they are made from."""
        if isinstance(draft, DraftHead):
            draft, head, head_ranking = None, draft, head_ranking or draft_ranking
        self.device = torch.device(device) if device is not None else _device_of(target)
        released = getattr(target, "specvideo_released", False)  # quantised copies run it (quant.release_layers)
        self.target = (target if released else target.to(self.device)).eval()
        self.tokenizer = tokenizer
        self.draft = place(draft, self.device).eval() if draft is not None else None
        self.head = place(head, self.device).eval() if head is not None else None
        if self.draft is not None:
            check_vocab(self.target, self.draft, tokenizer, draft_tokenizer)
        self.draft_ranking, self.head_ranking, self.drafter = draft_ranking, head_ranking, drafter
        self.lean_ok = getattr(self.target.config, "model_type", None) in LEAN_MODEL_TYPES
        if invariant is None:  # bf16 / fp16 / quantised weights round a k-token check apart from a 1-token step
            invariant = (self.target.dtype != torch.float32 or weights is not None) and self.lean_ok
        if (lean_target or invariant or weights) and not self.lean_ok:
            raise ValueError(
                f"lean_target and invariant run {' and '.join(LEAN_MODEL_TYPES)} targets only, "
                f"got model_type={self.target.config.model_type!r}"
            )
        self.invariant, self.weights = bool(invariant), weights
        self._runners: dict[tuple, LeanLlama] = {}
        for fmt in copies:
            if fmt != weights and weights != "gguf" and self.lean_ok:  # (an impossible copy is the generator's error to give)
                self._runners[(fmt, None)] = LeanLlama(self.target, None, weights=fmt)
        self.target_runner = self._target_runner(lean_target)
        if packed == "auto":
            packed = packs_float32(self.device, target.dtype)
        self.packed = bool(packed)
        self.prompt_cache = None  # a specvideo.text.runtime.prompt_cache.PromptCache: reuse recent prompts' prefixes
        self._packings: dict[int, object] = {}

    def add_head(self, head: DraftHead, ranking: list[int] | None = None) -> None:
        """Add a draft head on this target's features (and its token ranking) to what is loaded."""
        self.head, self.head_ranking = place(head, self.device).eval(), ranking

    def _target_runner(self, lean_target) -> PreTrainedModel | LeanLlama:
        """What runs the target's forwards: ``lean_target`` itself when it is a LeanLlama of the
        same kind, a LeanLlama built here, or the transformers model."""
        if isinstance(lean_target, LeanLlama) and (lean_target.invariant, lean_target.weights) == (self.invariant, self.weights):
            return lean_target  # a LeanLlama already built over this target
        if lean_target or self.invariant or self.weights:
            runner = LeanLlama(self.target, invariant=self.invariant, weights=self.weights, gguf=self._gguf_blocks())
            if self.weights:  # its quantised copies run the target: the dense weights go
                release_layers(self.target, runner.embed)
            return runner
        return self.target

    def _gguf_blocks(self, model: PreTrainedModel | None = None):
        """The blocks of the GGUF file the target's runner reads (None: it reads none), or those of
        ``model`` (a draft read as it is)."""
        from specvideo.text.models.gguf import gguf_blocks

        return gguf_blocks(self.target, self.weights) if model is None else gguf_blocks(model, "gguf")

    @property
    def lean_target(self) -> bool:
        return self.target_runner is not self.target

    @property
    def vocab_size(self) -> int:
        return self.target.config.vocab_size

    def draft_for(self, spec: DrafterSpec) -> torch.nn.Module | None:
        """The model drafter ``spec`` runs as given: the head, the draft causal LM, or None."""
        return self.head if spec.needs == "head" else self.draft if spec.needs else None

    def lean_draft(self, spec: DrafterSpec) -> bool:
        """Whether drafter ``spec``'s model runs on LeanLlama here (a Llama draft, the head, a copy)."""
        if spec.copy:
            return True
        model = self.draft_for(spec)
        if not spec.lean or model is None:
            return False
        return isinstance(model, DraftHead) or getattr(model.config, "model_type", None) in LEAN_MODEL_TYPES

    def draft_runner(self, spec: DrafterSpec, vocab: torch.Tensor | None = None):
        """What runs drafter ``spec``'s model: its LeanLlama (over the draft, the head or a
        quantised copy of the target, proposing only ``vocab``), built once per kind and vocabulary,
        or the transformers draft (a draft LeanLlama does not run: the same tokens, slower)."""
        model = self.draft_for(spec)
        if not self.lean_draft(spec):
            return model
        key = (spec.copy or spec.needs, None if vocab is None else tuple(torch.as_tensor(vocab).tolist()))
        if key not in self._runners:
            if spec.copy and getattr(self.target, "specvideo_released", False):
                raise ValueError(
                    f"the target's dense weights were freed for its {self.weights} runner: a {spec.copy} copy "
                    f"to draft with is built before that (TextModels(copies=({spec.copy!r},)), or load with that drafter)"
                )
            if spec.copy:
                self._runners[key] = LeanLlama(self.target, vocab, weights=spec.copy)
            elif isinstance(model, DraftHead):  # one layer over [embedding, feature]
                # a target read from its GGUF file as it is has no dense tables: the head reads its runner's
                tables = self.target_runner if model.llama.get_input_embeddings().weight.is_meta else None
                self._runners[key] = LeanLlama(model.llama, vocab, fc=model.fc, tables=tables, fuse=model.fuse)
            elif getattr(model, "specvideo_released", False):  # a draft read from its GGUF file as it is
                if vocab is not None:
                    raise ValueError("a draft run in its GGUF file's blocks proposes from its whole vocabulary (draft_vocab_size=0)")
                self._runners[key] = LeanLlama(model, weights="gguf", gguf=self._gguf_blocks(model))
            else:
                self._runners[key] = LeanLlama(model, vocab)
        return self._runners[key]

    def packing(self, spec: DrafterSpec) -> contextlib.ExitStack:
        """The context the forwards of a run with drafter ``spec`` run in: the pre-packed weights
        of the models transformers runs (LeanLlama runners pack their own), when ``packed``."""
        stack = contextlib.ExitStack()
        for model in self.packed_models(spec):
            if id(model) not in self._packings:
                self._packings[id(model)] = packed_linears(model)
            stack.enter_context(self._packings[id(model)])
        return stack

    def packed_models(self, spec: DrafterSpec) -> list[PreTrainedModel]:
        """The models a run with drafter ``spec`` runs on pre-packed weights: those transformers
        runs (none unless ``packed``)."""
        if not self.packed:
            return []
        run_by_hf = [self.target] if not self.lean_target else []
        return run_by_hf + ([self.draft] if spec.needs == "draft" and not self.lean_draft(spec) else [])

    def eos_ids(self) -> frozenset[int]:
        """The model's end-of-sequence ids and the tokenizer's (a chat template's end of turn)."""
        ids = set()
        for eos in (
            getattr(self.target.generation_config, "eos_token_id", None),
            getattr(self.tokenizer, "eos_token_id", None),
        ):
            ids |= set() if eos is None else {eos} if isinstance(eos, int) else set(eos)
        return frozenset(ids)

    def check_room(self, prompt_length: int, max_new_tokens: int, spec: DrafterSpec) -> None:
        """Refuse a run past the target's positions, or past those of the model ``spec`` drafts with."""
        check_context(prompt_length, max_new_tokens, context_length(self.target))
        model = self.draft_for(spec)
        if model is not None:  # drafts never run past the target's room
            check_context(prompt_length, max_new_tokens, context_length(model), "draft")

    def cache_prompt(self, ids: list[int], state) -> int:
        """With ``prompt_cache`` set, a batch-1 run's ``state`` reuses the longest cached prefix of
        ``ids`` and stores its own after the prefill; returns the tokens reused."""
        if self.prompt_cache is None:
            return 0
        cache = self.prompt_cache
        reused = cache.restore(ids, state)
        state.on_prefill = lambda filled: cache.store(ids, filled)
        return reused

    @classmethod
    def from_pretrained(
        cls,
        target: str | None = None,
        draft: str | None = None,
        dtype: str | torch.dtype = "auto",
        exact: bool = False,
        drafter: str | None = None,
        device: str | None = None,
        tokenizer=None,
        **kwargs,
    ) -> TextModels:
        """Load a target (and a draft for ``drafter``) by name, from a GGUF file, a local model
        directory or a cached Hub id (``SpeculativeGenerator.from_pretrained`` says what each name
        loads). drafter: the drafter the models are for (it picks the default pair's draft model
        or head); kwargs: the constructor's (lean_target, packed, invariant)."""
        from specvideo.text.models.gguf import is_metadata_dir, load_gguf_target
        from specvideo.text.models.names import default_format, is_named, pair_draft, resolve_model

        device = device or "cpu"
        # a drafter whose check is exact in float32 only (token trees): auto picks it
        exact = exact or (dtype == "auto" and drafter is not None and spec_of(drafter).float32)
        if device == "cpu":  # a GGUF-sourced target runs its file's own blocks
            dtype = default_format(target, dtype, exact)
        choice = None
        if target is None or is_named(target):
            choice = resolve_model(target or "smollm2", "float32" if exact else dtype, device)
            target = choice.target
        default = target is None
        torch_dtype = resolve_dtype(dtype, device, exact, architecture="llama" if default else model_type(target))
        if default:
            target = str(smollm2_dir(dtype_name(torch_dtype), gguf_blocks=dtype == "gguf"))
            drafter = drafter or ("ngram" if draft is None else None)
            kwargs.setdefault("lean_target", True)
            needs = spec_of(drafter).needs if drafter else "draft"
            if draft is None and needs:  # the model that drafter runs
                draft = str(shipped(*(DEFAULT_HEAD if needs == "head" else DEFAULT_DRAFT)))
        elif choice is not None and choice.draft_file and draft is None:
            asked = {"drafter": drafter} if drafter else {}
            draft = pair_draft(choice, asked)
            drafter = asked.get("drafter")
        with tqdm(total=3, desc=f"loading {Path(target).name}", unit="part", disable=not default, leave=False) as bar:
            target_model = load_gguf_target(target) if is_metadata_dir(target) else load_causal_lm(target, torch_dtype)
            bar.update()
            tokenizer = tokenizer or load_tokenizer(target)
            bar.update()
            # a draft beside GGUF blocks runs in the dtype auto picks (its own, smaller, forwards)
            draft_dtype = resolve_dtype("auto", device, architecture=model_type(draft)) if dtype == "gguf" and draft else torch_dtype
            draft_model = load_draft(draft, target_model, draft_dtype) if draft else None
            bar.update()
        if draft_model is not None and draft_model.config.vocab_size != target_model.config.vocab_size:
            kwargs.setdefault("draft_tokenizer", load_tokenizer(draft))
        ranking = load_token_ranking(draft) if draft and Path(draft).is_dir() else None
        return cls(
            target_model, tokenizer, draft_model, device=device, draft_ranking=ranking, drafter=drafter,
            **{"weights": weight_format(dtype), "copies": copies_for(drafter), **kwargs},
        )


def _device_of(model: torch.nn.Module) -> torch.device:
    """Where a model's tensors are, ignoring those on the meta device (a GGUF target read as it is
    holds only its rotary tables, and its token tables where they fit: ``gguf.load_gguf_target``)."""
    tensors = (*model.parameters(), *model.buffers())
    return next((t.device for t in tensors if not t.is_meta), torch.device("cpu"))


def place(module: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """``module.to(device)``, leaving tensors on the meta device where they are (the token tables of a
    target read from its GGUF file as it is, which a head shares but never reads through them)."""
    return module._apply(lambda t: t if t.is_meta or t.device == device else t.to(device))


def copies_for(drafter: str | None) -> tuple[str, ...]:
    """The target copies drafter ``drafter`` drafts with (a self drafter's weight format)."""
    copy = spec_of(drafter).copy if drafter else None
    return (copy,) if copy else ()
