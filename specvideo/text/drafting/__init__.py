"""The drafters: the chains (``drafters``), the draft head's (``head_drafters``), the table of
what each is by name and how a run builds it (``catalog``), the builders of the chains
(``registry``). ``DrafterSpec`` is here, plain data, so an extension's table (token trees,
``specvideo.text.trees``) and the settings read it without importing torch."""

from __future__ import annotations

from dataclasses import dataclass

VERIFIER = "specvideo.text.verifier:TargetVerifier"


@dataclass(frozen=True)
class DrafterSpec:
    """One drafter by name: how a run builds it and what it needs. ``build``, ``verifier`` and
    ``check`` are "module:attribute" references, imported when a run needs them."""

    build: str  # (DraftParts) -> the drafter
    needs: str = ""  # the model it runs: "" none, "draft" a causal LM, "head" a DraftHead
    lean: bool = False  # runs that model with LeanLlama (and FR-Spec's draft_vocab)
    one_row: bool = False  # verifies one prompt at a time: a batch is refused
    chain: str | None = None  # what a continuous batch drafts with in its place
    copy: str | None = None  # drafts with a copy of the target in this weight format (self-speculation)
    verifier: str = VERIFIER  # the class that checks its drafts: (model, sampler, rows)
    float32: bool = False  # its check is exact only in float32: dtype "auto" loads float32
    check: str | None = None  # (models, config) -> None: raises for models or settings it cannot run with
