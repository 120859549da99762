"""Settings of ``specvideo bench text``: workloads, split, methods, sweeps, repeats."""

from __future__ import annotations

import math
from dataclasses import dataclass

from benchmarks.text.llama_cpp import LLAMA_MODES
from benchmarks.text.openvino_peer import OPENVINO_MODES
from specvideo.core.schedule import SCHEDULES
from specvideo.text.config import HEAD_DRAFTERS, LEAN_DRAFTERS
from specvideo.text.models.precision import DTYPES

FAMILIES = ("hf-target", "ours-target", "hf-assisted", "hf-lookup", "ours-draft", "ours-ngram")
# llama.cpp's server on the same GGUF files (scripts/build_llama_cpp.sh builds it; asked for by name)
PEER_FAMILIES = ("llama-cpp", "openvino")  # openvino: OpenVINO GenAI on int4 exports (scripts/build_openvino_peer.sh)
HF_SCHEDULES = ("constant", "heuristic")  # num_assistant_tokens_schedule values that match ours
WORKLOADS = ("code", "chat", "fim")  # fim: fill-in-the-middle, for a model with FIM tokens (the code pair)
SPLITS = ("tuning", "heldout", "test")  # test: third-party sources no choice has read (fim, chat)
# how our loop runs the target's forwards: LeanLlama ("lean": invariant in bf16, specvideo.text.runtime.invariant)
# or on oneDNN pre-packed weights ("packed", float32 only)
# or on LeanLlama with weight-only int8 / int4 projections ("int8", "int4": invariant, specvideo.text.runtime.quant),
# beside a dense target for transformers' rows; or "gguf": the GGUF file's own blocks on specvideo's kernel
VERIFIERS = ("transformers", "lean", "packed", "int8", "int4", "gguf")

# Targets from the issue: (key, description, threshold per workload; fim as code), checked per workload.
TARGETS = (
    ("greedy_vs_hf", "greedy speedup over HF target-only generate()", {"code": 2.5, "chat": 2.0}),
    ("greedy_vs_hf_speculative", "greedy speedup over the best HF speculative method", {"code": 1.5}),
    ("sampled_vs_hf", "sampled speedup over HF target-only generate()", {"code": 1.8, "chat": 1.6}),
)


def check_positive_int(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def parse_drafter(spec: str) -> tuple[str, int | None]:
    """ "model" -> ("model", None); "lean@2048" -> ("lean", 2048): the lean drafter restricted to
    the 2048 most frequent tokens; "hybrid@2048": prompt lookup first, else that lean drafter."""
    name, at, size = spec.partition("@")
    if not at:
        return name, None
    if name not in LEAN_DRAFTERS or not size.isdigit() or int(size) < 1:
        raise ValueError(
            f"drafter {spec!r}: a vocabulary size goes with the lean, hybrid, tree and head drafters, as "
            "lean@N, hybrid@N, tree@N or head@N (head-tree@N, ...) with N >= 1"
        )
    return name, int(size)


def parse_tree_shape(shape: str) -> tuple[int, int]:
    """ "2x8" -> (2, 8): nodes expanded per depth (and children each), nodes kept."""
    width, x, nodes = shape.partition("x")
    if not x or not width.isdigit() or not nodes.isdigit() or int(width) < 1 or int(nodes) < 1:
        raise ValueError(f"tree shape {shape!r}: write WxN with W >= 1 nodes expanded per depth and N >= 1 nodes kept")
    return int(width), int(nodes)


@dataclass(frozen=True)
class BenchTextConfig:
    """Defaults of ``specvideo bench text`` (the CLI reads them from here).

    target / draft: model directories; None = the library's default pair (SmolLM2-135M-Instruct
    and its trained draft). workloads: "code" (held-out stdlib functions to complete) and "chat"
    (hand-written instructions through the chat template); ``split`` picks the tuning or the
    held-out prompts of each, ``num_prompts`` per workload (0 = all of the split). prompts: a JSONL
    file instead (one workload, "custom").
    drafters: our model-drafter variants; each adds one row per schedule x k. "lean@N" is the lean
    drafter restricted to the N most frequent tokens; "hybrid" / "hybrid@N" look the context up
    first and draft with that lean drafter otherwise. hf-assisted sweeps ``num_assistant_tokens``
    over ``assistant_ks`` for each of ``assistant_schedules``; hf-lookup sweeps ``lookup_ks`` and
    ours-ngram ``ngram_ks`` (empty = the same values, so both lookups are tuned alike).
    verifiers: our methods run the target through transformers and/or LeanLlama
    ("lean": ``TextModels(lean_target=True)``, rows suffixed "+lean"). repeats: every prompt runs this many times per method (methods interleaved);
    speedups are medians over prompts per repeat, reported as the median over repeats and its
    spread.
    """

    target: str | None = None
    draft: str | None = None
    head: str | None = None  # the draft head of the head drafters (default: the pair's, models/smollm2-head)
    pair: str | None = None  # "qwen-coder": the fetched code pair instead of target / draft
    workloads: tuple[str, ...] = ("code", "chat")
    split: str = "heldout"
    prompts: str | None = None
    num_prompts: int = 16  # per workload: the held-out size (the code split holds more)
    max_new_tokens: int = 96
    # the sweeps default to the picks of the tuning split (docs/history/benchmarks.md "Text: tuning split"),
    # so a plain held-out run measures the chosen setting of each family
    drafters: tuple[str, ...] = ("hybrid@2048",)
    schedules: tuple[str, ...] = ("heuristic",)
    ks: tuple[int, ...] = (5,)
    assistant_ks: tuple[int, ...] = (3,)
    assistant_schedules: tuple[str, ...] = ("constant",)
    lookup_ks: tuple[int, ...] = (5,)
    ngram_ks: tuple[int, ...] = (3,)  # ours-ngram's k; () = lookup_ks
    # ours: the target run by transformers and/or "lean", and in the GGUF file's own blocks ("gguf",
    # what dtype auto runs for a GGUF-sourced target; skipped for a target from no GGUF file)
    verifiers: tuple[str, ...] = ("lean", "gguf")
    # head-tree drafters: one row per shape "WxN" (W nodes expanded per depth with W children
    # each, N nodes kept); the tree depth is the row's k
    tree_shapes: tuple[str, ...] = ("2x8",)
    temperatures: tuple[float, ...] = (0.0, 0.7)
    top_p: float = 0.9
    methods: tuple[str, ...] = FAMILIES
    sampled_methods: tuple[str, ...] = ("hf-target", "ours-draft", "ours-ngram")  # the families also run at T > 0
    # llama-cpp (in methods): its plain generation and speculative modes, each speculative one at
    # every k of llama_cpp_ks (benchmarks.text.llama_cpp)
    llama_cpp_modes: tuple[str, ...] = ("plain", "ngram")
    llama_cpp_ks: tuple[int, ...] = (3,)
    # openvino (in methods, the code pair only): its plain generation, prompt lookup and 0.5B draft,
    # each speculative mode at every k of llama_cpp_ks (benchmarks.text.openvino_peer)
    openvino_modes: tuple[str, ...] = ("plain", "lookup")
    repeats: int = 3  # medians over repeats with their spread
    # the decode-cost table: forwards timed per entry and repeats (a 1.5B target: fewer, ~1 s each)
    decode_forwards: int = 32
    decode_repeats: int = 5
    seed: int = 0
    device: str = "cpu"
    # the models' number format (specvideo.text.models.precision): auto = bfloat16 where the CPU has bf16
    # units; every method (transformers' and ours) runs the same weights in it
    dtype: str = "auto"
    report: str = "docs/history/benchmarks.md"

    def __post_init__(self) -> None:
        for name in (
            "workloads", "drafters", "schedules", "ks", "assistant_ks", "assistant_schedules",
            "lookup_ks", "ngram_ks", "verifiers", "temperatures", "methods", "sampled_methods", "tree_shapes",
            "llama_cpp_modes", "llama_cpp_ks", "openvino_modes",
        ):  # tuples, no repeats
            object.__setattr__(self, name, tuple(dict.fromkeys(getattr(self, name))))
        if not isinstance(self.num_prompts, int) or isinstance(self.num_prompts, bool) or self.num_prompts < 0:
            raise ValueError(f"num_prompts must be an integer >= 0 (0 = the whole split), got {self.num_prompts!r}")
        check_positive_int("max_new_tokens", self.max_new_tokens)
        if self.pair is not None and (self.pair != "qwen-coder" or self.target is not None):
            raise ValueError(f"pair must be 'qwen-coder' and excludes a target directory, got pair={self.pair!r}")
        check_positive_int("repeats", self.repeats)
        check_positive_int("decode_forwards", self.decode_forwards)
        check_positive_int("decode_repeats", self.decode_repeats)
        _choose("split", (self.split,), SPLITS, allow_empty=False)
        _choose("workload", self.workloads, WORKLOADS, allow_empty=False)
        _choose("method", self.methods, FAMILIES + PEER_FAMILIES, allow_empty=False)
        _choose("method", self.sampled_methods, FAMILIES + PEER_FAMILIES, allow_empty=True)
        _choose("llama.cpp mode", self.llama_cpp_modes, LLAMA_MODES, allow_empty=False)
        _choose("OpenVINO mode", self.openvino_modes, OPENVINO_MODES, allow_empty=False)
        for k in self.llama_cpp_ks:
            check_positive_int("k", k)
        _choose("schedule", self.schedules, SCHEDULES, allow_empty=False)
        _choose("verifier", self.verifiers, VERIFIERS, allow_empty=False)
        _choose("dtype", (self.dtype,), DTYPES, allow_empty=False)
        _choose("assistant schedule", self.assistant_schedules, HF_SCHEDULES, allow_empty=False)
        for name in ("ks", "assistant_ks", "lookup_ks"):
            if not getattr(self, name):
                raise ValueError(f"give at least one value for {name}")
            for k in getattr(self, name):
                check_positive_int("k", k)
        for k in self.ngram_ks:
            check_positive_int("k", k)
        if not self.drafters or not all(isinstance(d, str) and d for d in self.drafters):
            raise ValueError(f"drafters must be non-empty names, got {self.drafters!r}")
        for spec in self.drafters:
            parse_drafter(spec)
        if not self.tree_shapes:
            raise ValueError("give at least one tree shape WxN")
        for shape in self.tree_shapes:
            parse_tree_shape(shape)
        if not self.temperatures:
            raise ValueError("give at least one temperature")
        for t in self.temperatures:
            if not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
                raise ValueError(f"temperature must be a finite number >= 0, got {t!r}")
        if not (isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")

    @property
    def ngram_k_values(self) -> tuple[int, ...]:
        return self.ngram_ks or self.lookup_ks

    @property
    def needs_head(self) -> bool:
        return "ours-draft" in self.methods and any(parse_drafter(d)[0] in HEAD_DRAFTERS for d in self.drafters)

    @property
    def head_dir(self) -> str:
        from specvideo.paths import shipped
        from specvideo.text.models.names import QWEN_CODER_HEAD

        return self.head or str(shipped(QWEN_CODER_HEAD if self.pair == "qwen-coder" else "smollm2-head"))

    @property
    def needs_draft(self) -> bool:
        return "hf-assisted" in self.methods or "ours-draft" in self.methods

    def families_at(self, temperature: float) -> tuple[str, ...]:
        return self.methods if temperature == 0 else tuple(m for m in self.methods if m in self.sampled_methods)


def _choose(what: str, values, allowed, allow_empty: bool) -> None:
    if not values and not allow_empty:
        raise ValueError(f"give at least one {what}; choose from {', '.join(allowed)}")
    bad = [v for v in values if v not in allowed]
    if bad:
        raise ValueError(f"unknown {what} {bad[0]!r}; choose from {', '.join(allowed)}")


BENCH_TEXT_DEFAULTS = BenchTextConfig()
