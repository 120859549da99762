"""Text benchmark: our speculative loop against transformers' own generation, side by side.

Every method runs in one process on the same prompts and the same machine (docs/ARCHITECTURE.md §4):

    hf-target     ``target.generate()`` alone (the reference for speedups and greedy exact match)
    ours-target   our loop with ``drafter="none"`` (plain target-only decoding through the same loop)
    hf-assisted   ``target.generate(assistant_model=draft)`` with the draft's generation config
                  (transformers' defaults unless the draft's generation_config.json sets them)
    hf-lookup     ``target.generate(prompt_lookup_num_tokens=lookup_k)``
    ours-draft    our loop with a draft model, for every schedule and k (one row per
                  drafter name x schedule x k; the drafter name is a parameter, default "model")
    ours-ngram    our loop with prompt lookup (n-gram drafter), constant k = lookup_k

each greedily (temperature 0) and sampled at temperature 0.8 with top-k and top-p disabled on both
sides. End-of-sequence never stops a run (our ``stop=None``; transformers gets ``eos_token_id=[]``
and ``min_new_tokens=max_new_tokens``), so every method generates exactly ``max_new_tokens`` per
prompt and the timings compare equal work. Reported per method: median tokens/s over prompts, the
median over prompts of the per-prompt time ratio to each baseline, acceptance rate, tokens per
target call, target calls, and (greedy) the fraction of prompts whose token ids equal hf-target's.
"""

from __future__ import annotations

import ast
import json
import math
import os
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from specvideo.bench.measure import median_ratio, progress_bar
from specvideo.bench.measure import sync as _sync
from specvideo.bench.report import atomic_write as _atomic_write
from specvideo.bench.report import command_block as _command_block
from specvideo.bench.report import fmt_load as _fmt_load
from specvideo.bench.report import machine_info
from specvideo.bench.report import replace_section as _replace_section
from specvideo.text.state import context_length

FAMILIES = ("hf-target", "ours-target", "hf-assisted", "hf-lookup", "ours-draft", "ours-ngram")
SCHEDULES = ("constant", "heuristic", "confidence")
REPORT_PLOT_NAME = "text_speedup_vs_k.png"

# Targets from the issue: (key, description, threshold).
TARGETS = (
    ("greedy_vs_hf", "greedy speedup over HF target-only generate()", 2.0),
    ("greedy_vs_loop", "greedy speedup over our target-only loop", 1.5),
    ("greedy_vs_assisted", "greedy speedup over HF assisted generation", 1.3),
    ("sampled_vs_hf", "T=0.8 speedup over HF target-only generate()", 1.5),
    ("tokens_per_call", "greedy mean tokens per target call at the best k", 3.0),
)


def _check_positive_int(name: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def parse_drafter(spec: str) -> tuple[str, int | None]:
    """ "model" -> ("model", None); "lean@2048" -> ("lean", 2048): the lean drafter restricted to
    the 2048 most frequent tokens; "hybrid@2048": prompt lookup first, else that lean drafter."""
    name, at, size = spec.partition("@")
    if not at:
        return name, None
    if name not in ("lean", "hybrid") or not size.isdigit() or int(size) < 1:
        raise ValueError(
            f"drafter {spec!r}: a vocabulary size goes with the lean and hybrid drafters, as lean@N or "
            "hybrid@N with N >= 1"
        )
    return name, int(size)


@dataclass(frozen=True)
class BenchTextConfig:
    """Defaults of ``specvideo bench text`` (the CLI reads them from here).

    drafters: names of our model-drafter variants; each adds one row per schedule x k. "lean@N"
    is the lean drafter restricted to the N most frequent tokens (the ranking beside the draft);
    "hybrid" / "hybrid@N" look the context up first and draft with that lean drafter otherwise.
    lookup_k: draft length of both prompt-lookup methods (HF's prompt_lookup_num_tokens and our
    n-gram drafter with a constant schedule).
    """

    target: str = "models/text/target"
    draft: str = "models/text/draft"
    prompts: str | None = None
    num_prompts: int = 24
    max_new_tokens: int = 128
    drafters: tuple[str, ...] = ("model",)
    schedules: tuple[str, ...] = SCHEDULES
    ks: tuple[int, ...] = (2, 4, 6, 8)
    temperatures: tuple[float, ...] = (0.0, 0.8)
    lookup_k: int = 4
    methods: tuple[str, ...] = FAMILIES
    seed: int = 0
    device: str = "cpu"
    report: str = "docs/BENCHMARKS.md"

    def __post_init__(self) -> None:
        for name in ("drafters", "schedules", "ks", "temperatures", "methods"):  # tuples, no repeats
            object.__setattr__(self, name, tuple(dict.fromkeys(getattr(self, name))))
        _check_positive_int("num_prompts", self.num_prompts)
        _check_positive_int("max_new_tokens", self.max_new_tokens)
        _check_positive_int("lookup_k", self.lookup_k)
        if not self.methods:
            raise ValueError(f"no methods to run; choose from {', '.join(FAMILIES)}")
        unknown = [m for m in self.methods if m not in FAMILIES]
        if unknown:
            raise ValueError(f"unknown method {unknown[0]!r}; choose from {', '.join(FAMILIES)}")
        bad = [s for s in self.schedules if s not in SCHEDULES]
        if bad or not self.schedules:
            raise ValueError(
                f"unknown schedule {bad[0] if bad else ''!r}; choose from {', '.join(SCHEDULES)}"
            )
        if not self.ks:
            raise ValueError("give at least one draft length k")
        for k in self.ks:
            _check_positive_int("k", k)
        if not self.drafters or not all(isinstance(d, str) and d for d in self.drafters):
            raise ValueError(f"drafters must be non-empty names, got {self.drafters!r}")
        for spec in self.drafters:
            parse_drafter(spec)
        if not self.temperatures:
            raise ValueError("give at least one temperature")
        for t in self.temperatures:
            if not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
                raise ValueError(f"temperature must be a finite number >= 0, got {t!r}")

    @property
    def needs_draft(self) -> bool:
        return "hf-assisted" in self.methods or "ours-draft" in self.methods


BENCH_TEXT_DEFAULTS = BenchTextConfig()


# ---------------------------------------------------------------------------------------------
# Prompts


@dataclass(frozen=True)
class BenchPrompt:
    """text: what the models continue; source: where it came from (file:line and name)."""

    text: str
    source: str


def heldout_prompts(
    n: int = 24,
    root: Path | None = None,
    body_lines: int = 2,
    min_rest_lines: int = 4,
    max_prompt_lines: int = 24,
    max_prompt_chars: int = 1200,
) -> list[BenchPrompt]:
    """``n`` code-completion prompts from the held-out stdlib modules (never the train split).

    Candidates are the top-level functions and the methods of top-level classes of every held-out
    file, in sorted file order then line order. A prompt is the function's source from its ``def``
    line through its docstring (if any) and the first ``body_lines`` code lines of the body (blank
    and comment lines in between come along), indentation kept, without a trailing newline (the
    model starts by writing the line break). Functions are skipped when fewer than
    ``min_rest_lines`` code lines are left to complete, when the body starts on the ``def`` line,
    or when the prompt is longer than ``max_prompt_lines`` lines / ``max_prompt_chars``
    characters. ``n`` prompts are taken evenly spaced over the candidates (centres of n equal
    slices), so the selection is deterministic and spread over the held-out files.
    """
    from specvideo.training.corpus import corpus_files, stdlib_root

    _check_positive_int("n", n)
    root = root or stdlib_root()
    candidates = []
    for path in corpus_files("heldout", root):
        candidates.extend(
            _function_prompts(path, root, body_lines, min_rest_lines, max_prompt_lines, max_prompt_chars)
        )
    if len(candidates) < n:
        raise ValueError(f"asked for {n} prompts but the held-out modules give only {len(candidates)}")
    return [candidates[(2 * i + 1) * len(candidates) // (2 * n)] for i in range(n)]


def _function_prompts(
    path: Path, root: Path, body_lines: int, min_rest_lines: int, max_lines: int, max_chars: int
) -> list[BenchPrompt]:
    source = path.read_text(encoding="utf-8", errors="replace")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines()
    functions: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append((node.name, node))
        elif isinstance(node, ast.ClassDef):
            for child in node.body:
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    functions.append((f"{node.name}.{child.name}", child))
    rel = path.relative_to(root).as_posix()
    prompts = []
    for name, fn in functions:
        text = _function_prompt(fn, lines, body_lines, min_rest_lines)
        if text is None or text.count("\n") + 1 > max_lines or len(text) > max_chars:
            continue
        prompts.append(BenchPrompt(text=text, source=f"{rel}:{fn.lineno} {name}"))
    return prompts


def _function_prompt(fn, lines: list[str], body_lines: int, min_rest_lines: int) -> str | None:
    body = fn.body
    has_doc = (
        isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    )
    rest = body[1:] if has_doc else body
    if not rest or rest[0].lineno <= fn.lineno or fn.end_lineno is None:
        return None
    start = fn.lineno - 1  # the def line (decorators left out), 0-based
    end = rest[0].lineno - 1  # first line of code after the docstring
    taken = 0
    while end < fn.end_lineno and taken < body_lines:
        taken += _is_code(lines[end])  # blank and comment-only lines come along but do not count
        end += 1
    left = sum(_is_code(line) for line in lines[end : fn.end_lineno])
    if taken < body_lines or left < min_rest_lines:
        return None
    return "\n".join(line.rstrip() for line in lines[start:end])


def _is_code(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def load_prompts_jsonl(path: str | os.PathLike) -> list[BenchPrompt]:
    """Prompts from a JSON Lines file, one ``{"prompt": "..."}`` object per line (blank lines skipped)."""
    prompts = []
    with open(path, encoding="utf-8") as f:  # a missing file raises OSError naming it
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{where}: not valid JSON ({err.msg})") from err
            if not isinstance(record, dict) or "prompt" not in record:
                raise ValueError(f'{where}: expected an object like {{"prompt": "..."}}')
            text = record["prompt"]
            if not isinstance(text, str) or not text:
                raise ValueError(f'{where}: "prompt" must be a non-empty string')
            prompts.append(BenchPrompt(text=text, source=where))
    if not prompts:
        raise ValueError(f'no prompts in {path}: expected one {{"prompt": "..."}} object per line')
    return prompts


# ---------------------------------------------------------------------------------------------
# Results


@dataclass
class MethodResult:
    """One method at one temperature, aggregated over the prompts (per-prompt lists kept)."""

    method: str
    family: str
    temperature: float
    drafter: str | None = None
    schedule: str | None = None
    k: int | None = None
    tokens_per_s: float = 0.0  # median over prompts
    speedup_vs_hf: float | None = None  # median over prompts of time(hf-target) / time(method)
    speedup_vs_loop: float | None = None  # same, against our target-only loop
    acceptance_rate: float | None = None  # accepted / drafted over all prompts (ours)
    tokens_per_target_call: float | None = None  # generated tokens / target forward calls
    target_calls: float | None = None  # mean target forward calls per prompt
    exact_match: float | None = None  # greedy: fraction of prompts token-identical to hf-target
    times_s: list[float] = field(default_factory=list)
    new_tokens: list[int] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class TargetCheck:
    key: str
    description: str
    threshold: float
    value: float | None
    detail: str

    @property
    def reached(self) -> bool | None:
        return None if self.value is None else self.value >= self.threshold

    def line(self) -> str:
        if self.value is None:
            return f"{self.description} >= {self.threshold:g}: not measured ({self.detail})"
        verdict = "reached" if self.reached else "NOT reached"
        return f"{self.description} >= {self.threshold:g}: {verdict} ({self.value:.2f}, {self.detail})"


@dataclass
class BenchResults:
    rows: list[MethodResult]
    prompts: list[BenchPrompt]
    settings: dict[str, Any]
    machine: dict[str, Any]

    def row(self, method: str, temperature: float) -> MethodResult | None:
        return next((r for r in self.rows if r.method == method and r.temperature == temperature), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "machine": self.machine,
            "prompts": [asdict(p) for p in self.prompts],
            "rows": [asdict(r) for r in self.rows],
            "targets": [{**asdict(t), "reached": t.reached} for t in check_targets(self)],
        }


# ---------------------------------------------------------------------------------------------
# Running


@dataclass
class _Method:
    name: str
    family: str
    run: Callable[[torch.Tensor, float, int], tuple[list[int], Any]]
    drafter: str | None = None
    schedule: str | None = None
    k: int | None = None
    reset: Callable[[], None] | None = None  # called before every run, outside the timed region


class _CallCounter:
    """Counts the target's forward calls (a forward hook: the same few microseconds for every method)."""

    def __init__(self, model: torch.nn.Module):
        self.count = 0
        self._handle = model.register_forward_hook(self._hook)

    def _hook(self, module, args, output) -> None:
        self.count += 1

    def close(self) -> None:
        self._handle.remove()


def run_benchmark(
    config: BenchTextConfig = BENCH_TEXT_DEFAULTS,
    *,
    target=None,
    draft=None,
    tokenizer=None,
    prompts: Sequence[BenchPrompt | str] | None = None,
    progress: bool = False,
) -> BenchResults:
    """Run every method of ``config`` on the same prompts and aggregate.

    target / draft / tokenizer: already-loaded models (default: loaded from ``config.target`` and
    ``config.draft``; the tokenizer from the target's directory). prompts: default
    ``config.prompts`` (a JSONL file) or ``heldout_prompts(config.num_prompts)``.
    """
    device = torch.device(config.device)
    if target is None:
        target, tokenizer = _load_target(config.target, tokenizer)
    if draft is None and config.needs_draft:
        draft = _load_model(config.draft, "draft")
    if tokenizer is None:
        raise ValueError("the text benchmark needs a tokenizer (none given, none in the target directory)")
    target = target.to(device).eval()
    draft = draft.to(device).eval() if draft is not None else None
    bench_prompts = _resolve_prompts(config, prompts)
    context = min(context_length(m) for m in (target, draft) if m is not None)
    prompt_ids = [_encode(p, tokenizer, context, config.max_new_tokens, device) for p in bench_prompts]
    vocabs = _draft_vocabularies(config, draft)
    methods = _build_methods(config, target, draft, tokenizer, vocabs)
    counter = _CallCounter(target)
    records: dict[tuple[str, float], dict[str, list]] = {}
    total = len(config.temperatures) * len(methods) * (len(prompt_ids) + 1)
    bar = _progress_bar(total, progress)
    try:
        with torch.inference_mode():
            for temperature in config.temperatures:
                for method in methods:  # one untimed warm-up per method
                    bar.set_postfix_str(f"T={temperature:g} warm-up {method.name}", refresh=False)
                    if method.reset is not None:
                        method.reset()
                    method.run(prompt_ids[0], temperature, config.seed)
                    bar.update()
                # prompts outer, methods inner: a slow spell of the machine hits every method alike
                for index, ids in enumerate(prompt_ids):
                    for method in methods:
                        bar.set_postfix_str(f"T={temperature:g} {method.name}", refresh=False)
                        if method.reset is not None:
                            method.reset()
                        counter.count = 0
                        _sync(device)
                        start = time.perf_counter()
                        tokens, stats = method.run(ids, temperature, config.seed + index)
                        _sync(device)
                        elapsed = time.perf_counter() - start
                        if len(tokens) != config.max_new_tokens:
                            raise RuntimeError(
                                f"{method.name} generated {len(tokens)} tokens instead of "
                                f"{config.max_new_tokens} on prompt {index}"
                            )
                        rec = records.setdefault((method.name, temperature), _new_record())
                        rec["times"].append(elapsed)
                        rec["tokens"].append(tokens)
                        rec["calls"].append(stats.target_calls if stats is not None else counter.count)
                        rec["stats"].append(stats)
                        bar.update()
    finally:
        counter.close()
        bar.close()
    rows = [
        _aggregate(method, temperature, records) for temperature in config.temperatures for method in methods
    ]
    settings = {
        "decode_ms": decode_costs(target, draft, prompt_ids[0], vocabs) if draft is not None else None,
        **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()},
        "num_prompts": len(bench_prompts),
        "prompt_tokens": [int(ids.shape[1]) for ids in prompt_ids],
        "hf_assisted": _assistant_settings(draft) if "hf-assisted" in config.methods else None,
    }
    return BenchResults(rows=rows, prompts=bench_prompts, settings=settings, machine=machine_info(device))


def decode_costs(
    target,
    draft,
    prompt: torch.Tensor,
    vocabs: dict[str, torch.Tensor] | None = None,
    tokens: int = 64,
    repeats: int = 5,
) -> dict[str, float]:
    """Median wall time (ms) of one single-token decode step, after the prompt, for the target and
    for the draft run by transformers and by LeanLlama (Llama drafts only; also "draft_lean@N" for
    each restricted vocabulary in ``vocabs``). The models take turns within each repeat, so a drift
    in the machine's speed reaches all of them alike."""
    from specvideo.text.lean import LeanLlama

    models = {"target": target, "draft": draft}
    if getattr(draft.config, "model_type", None) == "llama":
        models["draft_lean"] = LeanLlama(draft)
        for vocab in (vocabs or {}).values():  # lean@N and hybrid@N run the same restricted draft
            models[f"draft_lean@{len(vocab)}"] = LeanLlama(draft, vocab)
    samples: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(repeats):
        for name, model in models.items():
            samples[name].append(_decode_step_ms(model, prompt, tokens))
    costs = {name: float(np.median(times)) for name, times in samples.items()}
    for name in [n for n in costs if n.startswith("draft")]:
        costs[f"{name}_over_target"] = costs[name] / costs["target"]
    return costs


def _decode_step_ms(model, prompt: torch.Tensor, tokens: int) -> float:
    """Mean time of ``tokens`` single-token steps after a prefill of ``prompt`` (1, T)."""
    from specvideo.text.state import CausalLMState

    state = CausalLMState(model, prompt, torch.ones_like(prompt))
    state.forward()
    token = prompt[:, -1:]
    start = time.perf_counter()
    for _ in range(tokens):
        state.forward(token)
    return (time.perf_counter() - start) / tokens * 1e3


def _draft_vocabularies(config: BenchTextConfig, draft) -> dict[str, torch.Tensor]:
    """The token ids of each "lean@N" drafter, from the ranking saved beside the draft."""
    from specvideo.text.vocab import draft_vocabulary, load_token_ranking

    specs = {spec: parse_drafter(spec)[1] for spec in config.drafters if "ours-draft" in config.methods}
    specs = {spec: size for spec, size in specs.items() if size is not None}
    if not specs:
        return {}
    ranking = load_token_ranking(config.draft) if config.draft and os.path.isdir(config.draft) else None
    if ranking is None:
        raise ValueError(
            f"drafter {next(iter(specs))!r} needs the token ranking beside the draft "
            f"({config.draft}/token_ranking.json; `specvideo train text --stage draft-vocab` writes one)"
        )
    vocab_size = draft.config.vocab_size
    out = {spec: draft_vocabulary(ranking, size, vocab_size) for spec, size in specs.items()}
    return {spec: vocab for spec, vocab in out.items() if vocab is not None}


def _new_record() -> dict[str, list]:
    return {"times": [], "tokens": [], "calls": [], "stats": []}


def _progress_bar(total: int, enabled: bool):
    return progress_bar(total, enabled, "bench text")


def _load_target(path: str, tokenizer):
    from transformers import AutoTokenizer

    model = _load_model(path, "target")
    if tokenizer is None:
        try:
            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except Exception as err:  # transformers raises OSError, ValueError, ... for a missing tokenizer
            raise ValueError(
                f"no tokenizer found in the target directory {path!r}: the benchmark needs one"
            ) from err
    return model, tokenizer


def _load_model(path: str, role: str):
    from specvideo.text.generator import load_causal_lm

    if not os.path.isdir(path):
        raise ValueError(f"{role} model directory {path!r} does not exist (pass --{role} DIR)")
    return load_causal_lm(path)


def _resolve_prompts(config: BenchTextConfig, prompts) -> list[BenchPrompt]:
    if prompts is not None:
        out = [
            p if isinstance(p, BenchPrompt) else BenchPrompt(str(p), f"prompt {i}")
            for i, p in enumerate(prompts)
        ]
        if not out:
            raise ValueError("the list of prompts is empty")
        return out
    if config.prompts is not None:
        return load_prompts_jsonl(config.prompts)[: config.num_prompts]
    return heldout_prompts(config.num_prompts)


def _encode(prompt: BenchPrompt, tokenizer, context: int, max_new_tokens: int, device) -> torch.Tensor:
    """Token ids (1, T) of a prompt; it and max_new_tokens must fit the target's (and draft's) context."""
    ids = list(tokenizer(prompt.text)["input_ids"])
    if not ids:
        raise ValueError(f"prompt {prompt.source} encodes to no tokens")
    if len(ids) + max_new_tokens > context:
        raise ValueError(
            f"prompt {prompt.source} has {len(ids)} tokens; + max_new_tokens={max_new_tokens} exceeds "
            f"the context length of {context} tokens (of the target, and of the draft when one is used)"
        )
    return torch.tensor([ids], dtype=torch.long, device=device)  # (1, T)


def _build_methods(
    config: BenchTextConfig, target, draft, tokenizer, vocabs: dict[str, torch.Tensor] | None = None
) -> list[_Method]:
    from specvideo.text import SpeculativeGenerator

    n = config.max_new_tokens
    pad = _pad_id(target, tokenizer)
    methods: list[_Method] = []

    def hf(**extra) -> Callable:
        def run(ids: torch.Tensor, temperature: float, seed: int):
            kwargs = dict(extra)
            if temperature > 0:
                kwargs.update(do_sample=True, temperature=float(temperature), top_k=0, top_p=1.0)
            else:
                kwargs.update(do_sample=False)
            torch.manual_seed(seed)
            out = target.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=n,
                min_new_tokens=n,
                eos_token_id=[],  # never stop early (None would fall back to the model's eos id)
                pad_token_id=pad,
                **kwargs,
            )
            return out[0, ids.shape[1] :].tolist(), None

        return run

    def ours(gen) -> Callable:
        def run(ids: torch.Tensor, temperature: float, seed: int):
            generator = torch.Generator(device=ids.device).manual_seed(seed)
            out = gen.generate(
                ids[0].tolist(),
                max_new_tokens=n,
                temperature=temperature,
                top_k=None,
                top_p=None,
                generator=generator,
                stop=None,
            )
            return out.token_ids, out.stats

        return run

    for family in FAMILIES:  # a fixed order whatever order the user listed them in
        if family not in config.methods:
            continue
        if family == "hf-target":
            methods.append(_Method("hf-target", family, hf()))
        elif family == "ours-target":
            gen = SpeculativeGenerator(target, tokenizer, drafter="none")
            methods.append(_Method("ours-target", family, ours(gen)))
        elif family == "hf-assisted":
            reset = _generation_config_restorer(draft)
            methods.append(_Method("hf-assisted", family, hf(assistant_model=draft), reset=reset))
        elif family == "hf-lookup":
            methods.append(
                _Method(
                    f"hf-lookup-k{config.lookup_k}",
                    family,
                    hf(prompt_lookup_num_tokens=config.lookup_k),
                    k=config.lookup_k,
                )
            )
        elif family == "ours-draft":
            for name in config.drafters:
                for schedule in config.schedules:
                    for k in config.ks:
                        gen = SpeculativeGenerator(
                            target,
                            tokenizer,
                            draft=draft,
                            drafter=parse_drafter(name)[0],
                            num_draft_tokens=k,
                            schedule=schedule,
                            draft_vocab=(vocabs or {}).get(name),
                        )
                        methods.append(
                            _Method(f"ours-{name}-{schedule}-k{k}", family, ours(gen), name, schedule, k)
                        )
        elif family == "ours-ngram":
            gen = SpeculativeGenerator(
                target, tokenizer, drafter="ngram", num_draft_tokens=config.lookup_k, schedule="constant"
            )
            methods.append(
                _Method(
                    f"ours-ngram-k{config.lookup_k}", family, ours(gen), "ngram", "constant", config.lookup_k
                )
            )
    return methods


def _generation_config_restorer(draft) -> Callable[[], None]:
    """transformers may carry assistant state (k under the "heuristic" schedule) from one call to the
    next in the draft's generation_config; restoring it makes every prompt start alike."""
    import copy

    saved = copy.deepcopy(draft.generation_config)

    def reset() -> None:
        draft.generation_config = copy.deepcopy(saved)

    return reset


def _pad_id(target, tokenizer) -> int:
    for value in (
        getattr(tokenizer, "pad_token_id", None),
        getattr(target.generation_config, "pad_token_id", None),
    ):
        if isinstance(value, int):
            return value
    return 0


def _assistant_settings(draft) -> dict[str, Any] | None:
    if draft is None:
        return None
    config = draft.generation_config
    defaults = (
        config._get_default_generation_params() if hasattr(config, "_get_default_generation_params") else {}
    )
    out = {}
    for name in ("num_assistant_tokens", "num_assistant_tokens_schedule", "assistant_confidence_threshold"):
        value = getattr(config, name, None)
        out[name] = defaults.get(name) if value is None else value
    try:
        import sklearn  # noqa: F401  (transformers adapts the confidence threshold only with scikit-learn)

        out["adaptive_confidence_threshold"] = True
    except ImportError:
        out["adaptive_confidence_threshold"] = False
    return out


def _aggregate(method: _Method, temperature: float, records) -> MethodResult:
    rec = records[(method.name, temperature)]
    times, tokens, calls, stats = rec["times"], rec["tokens"], rec["calls"], rec["stats"]
    row = MethodResult(
        method=method.name,
        family=method.family,
        temperature=temperature,
        drafter=method.drafter,
        schedule=method.schedule,
        k=method.k,
        tokens_per_s=statistics.median(len(t) / s for t, s in zip(tokens, times)),
        times_s=list(times),
        new_tokens=[len(t) for t in tokens],
        calls=list(calls),
    )
    row.speedup_vs_hf = _median_ratio(records.get(("hf-target", temperature)), times)
    row.speedup_vs_loop = _median_ratio(records.get(("ours-target", temperature)), times)
    row.target_calls = statistics.fmean(calls)
    row.tokens_per_target_call = sum(row.new_tokens) / sum(calls) if sum(calls) else None
    if all(s is not None for s in stats):
        drafted = sum(s.drafted for s in stats)
        row.acceptance_rate = sum(s.accepted for s in stats) / drafted if drafted else None
    reference = records.get(("hf-target", temperature))
    if temperature == 0 and reference is not None:
        row.exact_match = statistics.fmean(float(a == b) for a, b in zip(tokens, reference["tokens"]))
    return row


def _median_ratio(baseline: dict[str, list] | None, times: list[float]) -> float | None:
    return None if baseline is None else median_ratio(baseline["times"], times)


# ---------------------------------------------------------------------------------------------
# Targets, table, plot, report


def check_targets(results: BenchResults) -> list[TargetCheck]:
    """The issue's targets, measured on the best of our draft-model configurations per temperature."""
    greedy, greedy_detail = _best_ours(results, 0.0)
    sampled_t = next((t for t in results.settings.get("temperatures", []) if t > 0), 0.8)
    sampled, sampled_detail = _best_ours(results, sampled_t)
    checks = []
    for key, description, threshold in TARGETS:
        value, detail = None, greedy_detail
        if key == "sampled_vs_hf":
            description = f"T={sampled_t:g} speedup over HF target-only generate()"
            value, detail = (sampled.speedup_vs_hf if sampled else None), sampled_detail
        elif greedy is not None:
            if key == "greedy_vs_hf":
                value = greedy.speedup_vs_hf
            elif key == "greedy_vs_loop":
                value = greedy.speedup_vs_loop
            elif key == "tokens_per_call":
                value = greedy.tokens_per_target_call
            elif key == "greedy_vs_assisted":
                assisted = results.row("hf-assisted", 0.0)
                if assisted is not None:
                    value = statistics.median(a / t for a, t in zip(assisted.times_s, greedy.times_s))
            if value is None:
                detail += " (its baseline was not run)"
        checks.append(TargetCheck(key, description, threshold, value, detail))
    return checks


def _best_ours(results: BenchResults, temperature: float) -> tuple[MethodResult | None, str]:
    """Our draft-model row with the highest speedup over HF target-only, or None and why not."""
    rows = [r for r in results.rows if r.family == "ours-draft" and r.temperature == temperature]
    if not rows:
        return None, f"no draft-model rows at T={temperature:g}"
    rows = [r for r in rows if r.speedup_vs_hf is not None]
    if not rows:
        return None, "hf-target not run"
    best = max(rows, key=lambda r: r.speedup_vs_hf)
    return best, f"best: {best.method}"


def _rows(results: BenchResults | Iterable[MethodResult]) -> list[MethodResult]:
    return list(results.rows if isinstance(results, BenchResults) else results)


def to_markdown(results: BenchResults | Iterable[MethodResult]) -> str:
    """One table per temperature; '-' where a number does not apply."""
    rows = _rows(results)
    out = []
    for temperature in dict.fromkeys(r.temperature for r in rows):
        title = (
            "Greedy (temperature 0)"
            if temperature == 0
            else f"Sampled (temperature {temperature:g}, no top-k/top-p)"
        )
        out += [
            f"### {title}",
            "",
            "| method | tokens/s | × HF target-only | × our target-only | acceptance | tokens / target call | target calls | exact match |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            if r.temperature != temperature:
                continue
            cells = [
                r.method,
                f"{r.tokens_per_s:.1f}",
                _fmt(r.speedup_vs_hf, "{:.2f}×"),
                _fmt(r.speedup_vs_loop, "{:.2f}×"),
                _fmt(r.acceptance_rate, "{:.3f}"),
                _fmt(r.tokens_per_target_call, "{:.2f}"),
                _fmt(r.target_calls, "{:.1f}"),
                _fmt(r.exact_match, "{:.2f}"),
            ]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else spec.format(value)


def plot_speedup_vs_k(results: BenchResults | Iterable[MethodResult], path: str | os.PathLike) -> Path:
    """PNG of speedup over HF target-only against k: one line per drafter x schedule, one panel per
    temperature, horizontal lines for the methods without a k sweep."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = _rows(results)
    temperatures = list(dict.fromkeys(r.temperature for r in rows))
    fig = Figure(figsize=(5.5 * max(1, len(temperatures)), 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, max(1, len(temperatures)), squeeze=False)[0]
    references = {  # family -> (line style, colour)
        "hf-assisted": ("--", "black"),
        "hf-lookup": ("-.", "tab:brown"),
        "ours-ngram": (":", "tab:purple"),
        "ours-target": ((0, (5, 2, 1, 2)), "tab:grey"),
    }
    for ax, temperature in zip(axes, temperatures):
        here = [r for r in rows if r.temperature == temperature and r.speedup_vs_hf is not None]
        lines = {}
        for r in here:
            if r.family == "ours-draft":
                lines.setdefault(f"{r.drafter} / {r.schedule}", []).append((r.k, r.speedup_vs_hf))
        for label, points in lines.items():
            points.sort()
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        ax.axhline(1.0, color="lightgrey", linewidth=1.0, label="HF target-only (1×)")
        for r in here:
            if r.family in references:
                style, colour = references[r.family]
                ax.axhline(r.speedup_vs_hf, linestyle=style, color=colour, linewidth=1.2, label=r.method)
        ax.set_title("greedy" if temperature == 0 else f"temperature {temperature:g}")
        ax.set_xlabel("draft length k (heuristic: initial k)")
        ax.set_ylabel("speedup over HF target-only (median)")
        ks = sorted({r.k for r in here if r.family == "ours-draft"})
        if ks:
            ax.set_xticks(ks)
        ax.legend(fontsize=7)
    path = Path(path)
    _atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=110), binary=True)
    return path


def format_targets(results: BenchResults) -> str:
    return "\n".join(f"- {check.line()}" for check in check_targets(results))


def write_report(results: BenchResults, command: str, path: str | os.PathLike = "docs/BENCHMARKS.md") -> Path:
    """Write (or replace) the "## Text" section of the report, and the plot next to it."""
    path = Path(path)
    plot = plot_speedup_vs_k(results, path.parent / REPORT_PLOT_NAME)
    section = _text_section(results, command, os.path.relpath(plot, path.parent))
    old = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    _atomic_write(path, lambda f: f.write(_replace_section(old, "## Text", section)))
    return path


def _text_section(results: BenchResults, command: str, plot_link: str) -> str:
    m, s = results.machine, results.settings
    assisted = s.get("hf_assisted")
    notes = [
        f"- Machine: {m['processor']}, {m['cpu_count']} cores (torch threads: {m['torch_threads']}), "
        f"{m['platform']}, device {m['device']}{', ' + m['gpu'] if 'gpu' in m else ''}; "
        f"Python {m['python']}, torch {m['torch']}, transformers {m['transformers']}; "
        f"load average at start {_fmt_load(m.get('load_average'))}; run {m['date_utc']} UTC.",
        f"- {s['num_prompts']} prompts ({'from ' + s['prompts'] if s.get('prompts') else 'held-out stdlib functions'}, "
        f"{min(s['prompt_tokens'])}-{max(s['prompt_tokens'])} tokens), exactly {s['max_new_tokens']} new tokens "
        "each for every method (end-of-sequence ignored), one untimed warm-up per method.",
        "- tokens/s: median over prompts. Speedups: median over prompts of the per-prompt time ratio. "
        "Acceptance and tokens per target call: totals over prompts. Exact match: fraction of prompts "
        "whose greedy token ids equal HF target-only's.",
        f"- Prompt lookup: k = {s['lookup_k']} for both HF (`prompt_lookup_num_tokens`, its default "
        "`max_matching_ngram_size`) and ours (n-gram drafter, constant schedule).",
    ]
    decode = s.get("decode_ms")
    if decode:
        lean = "".join(
            f", {name[len('draft_') :].replace('_', ' ')} draft {decode[name]:.2f} ms "
            f"({decode[name + '_over_target']:.3f} of the target)"
            for name in decode
            if name.startswith("draft_lean") and not name.endswith("_over_target")
        )
        notes.append(
            f"- Decode cost per token (batch 1, median of 5 x 64 steps, the models taking turns): target {decode['target']:.2f} ms, "
            f"transformers draft {decode['draft']:.2f} ms ({decode['draft_over_target']:.3f} of the target){lean}."
        )
    if assisted:
        notes.append(
            "- HF assisted: the draft's generation config: "
            + ", ".join(f"{k}={v}" for k, v in assisted.items())
            + "."
        )
    notes.append(
        "- Targets are checked on the best of our draft-model rows (by greedy speedup over HF target-only), "
        "picked on these same prompts."
    )
    lines = [
        *_command_block("## Text", command),
        *notes,
        "",
        to_markdown(results).rstrip(),
        "",
        "Targets:",
        "",
        format_targets(results),
        "",
        f"![speedup over HF target-only against k]({Path(plot_link).as_posix()})",
        "",
    ]
    return "\n".join(lines)
