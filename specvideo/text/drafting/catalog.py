"""The table of drafters: what each is by name (a ``DrafterSpec``) and how a run builds it.
The settings (``specvideo.text.config``), the CLI's choices and the loaders read it without
importing torch; an extension adds its rows (token trees: ``specvideo.text.trees``)."""

from __future__ import annotations

from importlib import import_module

from specvideo.text.drafting import DrafterSpec

__all__ = ["DRAFTER_SPECS", "build_drafter", "build_verifier", "check_drafter", "spec_of"]

_CHAINS = "specvideo.text.drafting.registry"

DRAFTER_SPECS: dict[str, DrafterSpec] = {
    # a small causal LM through transformers
    "model": DrafterSpec(f"{_CHAINS}:dense_model", needs="draft"),
    # the same Llama draft run by LeanLlama: much less per-call overhead on CPU
    "lean": DrafterSpec(f"{_CHAINS}:lean_model", needs="draft", lean=True),
    # prompt lookup when the context's last tokens occurred before, else the lean draft
    "hybrid": DrafterSpec(f"{_CHAINS}:hybrid", needs="draft", lean=True),
    # a draft head on the target's features (EAGLE): its chain, behind prompt lookup for the hybrid
    "head": DrafterSpec(f"{_CHAINS}:head", needs="head", lean=True),
    "head-hybrid": DrafterSpec(f"{_CHAINS}:head_hybrid", needs="head", lean=True),
    # self-speculation (ML-SpecQD): an int4 copy of the target drafts, no second model to load;
    # behind prompt lookup for its hybrid
    "self": DrafterSpec(f"{_CHAINS}:lean_model", lean=True, copy="int4"),
    "self-hybrid": DrafterSpec(f"{_CHAINS}:hybrid", lean=True, copy="int4"),
    # prompt lookup, no model
    "ngram": DrafterSpec(f"{_CHAINS}:lookup"),
    # plain target-only decoding through the same loop: the baseline
    "none": DrafterSpec(f"{_CHAINS}:null"),
}

EXTENSIONS = ("specvideo.text.trees",)  # packages whose DRAFTERS join the table
for _extension in EXTENSIONS:
    DRAFTER_SPECS.update(import_module(_extension).DRAFTERS)


def spec_of(name: str) -> DrafterSpec:
    """The spec of drafter ``name``; a clear error for an unknown name."""
    try:
        return DRAFTER_SPECS[name]
    except KeyError:
        raise ValueError(f"unknown drafter {name!r}; choose one of {', '.join(DRAFTER_SPECS)}") from None


def _resolve(reference: str):
    module, attribute = reference.split(":")
    return getattr(import_module(module), attribute)


def build_drafter(name: str, parts):
    """Drafter ``name`` for one run, from its ``DraftParts`` (``registry``)."""
    return _resolve(spec_of(name).build)(parts)


def build_verifier(spec: DrafterSpec, model, sampler, rows):
    """The target's verifier for a drafter of ``spec``."""
    return _resolve(spec.verifier)(model, sampler, rows)


def check_drafter(spec: DrafterSpec, models, config) -> None:
    """Raise where drafter ``spec`` cannot run on ``models`` with ``config``'s settings."""
    if spec.check is not None:
        _resolve(spec.check)(models, config)
