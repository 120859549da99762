"""Running the text benchmark: load, encode each workload's prompts, run every method on every
prompt ``repeats`` times (prompts outer, methods inner, so a slow spell hits all alike), and
measure the decode costs."""

from __future__ import annotations

import copy
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict

import numpy as np
import torch

from benchmarks.measure import progress_bar
from benchmarks.measure import sync as _sync
from benchmarks.report import machine_info
from benchmarks.text.config import BENCH_TEXT_DEFAULTS, BenchTextConfig, parse_drafter
from benchmarks.text.methods import CallCounter, build_methods, weight_formats
from benchmarks.text.prompts import BenchPrompt, load_prompts_jsonl
from benchmarks.text.results import BenchResults, aggregate, assistant_settings, tie_margins
from benchmarks.text.workloads import workload_prompts
from specvideo.text.runtime.contract import context_length
from specvideo.text.runtime.packing import packed_linears
from specvideo.text.text_models import place


def run_benchmark(
    config: BenchTextConfig = BENCH_TEXT_DEFAULTS,
    *,
    target=None,
    draft=None,
    tokenizer=None,
    prompts: Sequence[BenchPrompt | str] | None = None,
    progress: bool = False,
) -> BenchResults:
    """Run every method of ``config`` on the same prompts and aggregate per workload.

    target / draft / tokenizer: already-loaded models (default: loaded from ``config.target`` and
    ``config.draft``, or the library's default pair). prompts: default ``config.prompts`` (a JSONL
    file) or each workload's prompts of ``config.split``.
    """
    device = torch.device(config.device)
    if target is None:
        target, draft, tokenizer = load_models(config)
    if tokenizer is None:
        raise ValueError("the text benchmark needs a tokenizer (none given, none in the target directory)")
    target = place(target, device).eval()  # a model read from its GGUF file as it is keeps its meta tensors
    draft = place(draft, device).eval() if draft is not None else None
    bench_prompts = resolve_prompts(config, prompts)
    context = min(context_length(m) for m in (target, draft) if m is not None)
    prompt_ids = [encode(p, tokenizer, context, config.max_new_tokens, device) for p in bench_prompts]
    head = load_bench_head(config, target)
    vocabs = draft_vocabularies(config, target.config.vocab_size)
    methods = build_methods(config, target, draft, tokenizer, vocabs, head)
    counter = CallCounter(target)
    records: dict[tuple[str, str, float], dict[str, list]] = {}
    runs = sum(len(_at(methods, config, t)) for t in config.temperatures)
    bar = progress_bar(runs * (len(prompt_ids) * config.repeats + 1), progress, "bench text")
    try:
        with torch.inference_mode():
            for temperature in config.temperatures:
                here = _at(methods, config, temperature)
                for method in here:  # one untimed warm-up per method
                    _run_once(method, prompt_ids[0], temperature, config.seed, device, counter)
                    bar.update()
                for repeat in range(config.repeats):
                    for index, (prompt, ids) in enumerate(zip(bench_prompts, prompt_ids)):
                        for method in here:
                            bar.set_postfix_str(f"T={temperature:g} r{repeat} {method.name}", refresh=False)
                            tokens, calls, stats, elapsed = _run_once(
                                method, ids, temperature, config.seed + index, device, counter
                            )
                            if len(tokens) != config.max_new_tokens:
                                raise RuntimeError(
                                    f"{method.name} generated {len(tokens)} tokens instead of "
                                    f"{config.max_new_tokens} on prompt {prompt.source}"
                                )
                            rec = records.setdefault((prompt.workload, method.name, temperature), new_record())
                            for key, value in (("times", elapsed), ("tokens", tokens), ("calls", calls),
                                               ("stats", stats), ("repeat", repeat), ("prompt", index)):
                                rec[key].append(value)
                            bar.update()
    finally:
        counter.close()
        bar.close()
        for method in methods:
            if method.close is not None:
                method.close()
    workloads = list(dict.fromkeys(p.workload for p in bench_prompts))
    rows = [
        aggregate(method, workload, temperature, records)
        for workload in workloads
        for temperature in config.temperatures
        for method in _at(methods, config, temperature)
    ]
    add_tie_margins(rows, records, prompt_ids, target)
    settings = {
        "decode_ms": decode_costs(
            target, draft, prompt_ids[0], vocabs, config.decode_forwards, config.decode_repeats, head,
            weight_formats(config.verifiers, target),
        ) if draft is not None else None,
        **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()},
        "workloads_run": workloads,
        "torch_dtype": str(target.dtype).removeprefix("torch."),  # what --dtype resolved to
        "num_prompts_run": {w: sum(p.workload == w for p in bench_prompts) for w in workloads},
        "prompt_tokens": {w: [int(ids.shape[1]) for p, ids in zip(bench_prompts, prompt_ids) if p.workload == w]
                          for w in workloads},
        "hf_assisted": assistant_settings(draft) if "hf-assisted" in config.methods else None,
    }
    return BenchResults(rows=rows, prompts=bench_prompts, settings=settings, machine=machine_info(device))


def add_tie_margins(rows, records, prompt_ids, target) -> None:
    """Each greedy row that differs from hf-target somewhere gets the float32 target's logit gaps
    at the first differing tokens (a near tie when within ``benchmarks.text.divergence.NEAR_TIE``)."""
    differing = [r for r in rows if r.exact_match is not None and r.exact_match < 1]
    if not differing:
        return
    fp32 = copy.deepcopy(target).float()  # the model the dtypes round: its own gap decides
    for row in differing:
        rec = records[(row.workload, row.method, row.temperature)]
        hf = records[(row.workload, "hf-target", row.temperature)]
        row.tie_margins = tie_margins(rec, hf, prompt_ids, fp32)
    del fp32


def _at(methods, config: BenchTextConfig, temperature: float):
    families = config.families_at(temperature)
    return [m for m in methods if m.family in families]


def _run_once(method, ids, temperature, seed, device, counter):
    if method.reset is not None:
        method.reset()
    counter.count = 0
    _sync(device)
    start = time.perf_counter()
    tokens, stats = method.run(ids, temperature, seed)
    _sync(device)
    elapsed = time.perf_counter() - start
    return tokens, (stats.target_calls if stats is not None else counter.count), stats, elapsed


def new_record() -> dict[str, list]:
    return {"times": [], "tokens": [], "calls": [], "stats": [], "repeat": [], "prompt": []}


def load_models(config: BenchTextConfig):
    """(target, draft or None, tokenizer): from the config's directories, or the default pair."""
    from specvideo.text import SpeculativeGenerator

    if config.pair is not None:  # a named pair: its converted directories (``specvideo.text.models.names``)
        from dataclasses import replace

        from specvideo.text.models.names import resolve_model

        choice = resolve_model(config.pair, config.dtype, config.device)
        config = replace(config, target=choice.target, draft=config.draft or choice.draft, pair=None)
    if config.target is not None and not os.path.isdir(config.target):
        raise ValueError(f"target model directory {config.target!r} does not exist (pass --target DIR)")
    if config.draft is not None and config.needs_draft and not os.path.isdir(config.draft):
        raise ValueError(f"draft model directory {config.draft!r} does not exist (pass --draft DIR)")
    draft_path = config.draft if config.needs_draft else None
    drafter = "model" if draft_path or config.target is None else "ngram"
    gen = SpeculativeGenerator.from_pretrained(config.target, draft_path, drafter=drafter, dtype=config.dtype)
    if config.needs_draft and gen.draft is None:
        raise ValueError("the methods hf-assisted and ours-draft need a draft model (pass --draft DIR)")
    if gen.tokenizer is None:
        raise ValueError(f"no tokenizer found in the target directory {config.target!r}: the benchmark needs one")
    return gen.target, gen.draft if config.needs_draft else None, gen.tokenizer


def resolve_prompts(config: BenchTextConfig, prompts) -> list[BenchPrompt]:
    if prompts is not None:
        out = [p if isinstance(p, BenchPrompt) else BenchPrompt(str(p), f"prompt {i}") for i, p in enumerate(prompts)]
        if not out:
            raise ValueError("the list of prompts is empty")
        return out
    if config.prompts is not None:
        loaded = load_prompts_jsonl(config.prompts)
        return loaded[: config.num_prompts] if config.num_prompts else loaded
    return [p for w in config.workloads for p in workload_prompts(w, config.split, config.num_prompts)]


def encode(prompt: BenchPrompt, tokenizer, context: int, max_new_tokens: int, device) -> torch.Tensor:
    """Token ids (1, T) of a prompt (chat: through the chat template); it and max_new_tokens must
    fit the target's (and draft's) context."""
    from specvideo.text.prompts import chat_ids

    if prompt.chat:
        ids = chat_ids([{"role": "user", "content": prompt.text}], tokenizer)
    elif prompt.suffix is not None:
        from specvideo.text.prompts import FIM_TOKENS, fim_ids

        ids = fim_ids(tokenizer, prompt.text, prompt.suffix)
        if ids is None:
            raise ValueError(f"prompt {prompt.source} fills in the middle; the target has no FIM tokens {list(FIM_TOKENS)}")
    else:
        ids = list(tokenizer(prompt.text)["input_ids"])
    if not ids:
        raise ValueError(f"prompt {prompt.source} encodes to no tokens")
    if len(ids) + max_new_tokens > context:
        raise ValueError(
            f"prompt {prompt.source} has {len(ids)} tokens; + max_new_tokens={max_new_tokens} exceeds "
            f"the context length of {context} tokens (of the target, and of the draft when one is used)"
        )
    return torch.tensor([ids], dtype=torch.long, device=device)  # (1, T)


def load_bench_head(config: BenchTextConfig, target):
    """The draft head of the head drafters, on the target's embeddings (None when none runs)."""
    if not config.needs_head:
        return None
    from specvideo.text.models.head import is_draft_head, load_head

    if not is_draft_head(config.head_dir):
        raise ValueError(f"the head drafters need a draft head: {config.head_dir!r} is none (pass --head DIR)")
    return load_head(config.head_dir, target).to(target.device)


def draft_vocabularies(config: BenchTextConfig, vocab_size: int) -> dict[str, torch.Tensor]:
    """The token ids of each "lean@N" / "hybrid@N" / "head@N" drafter, from the ranking saved
    beside the draft (the head's, for the head drafters)."""
    from specvideo.text.config import HEAD_DRAFTERS
    from specvideo.text.models.vocab import draft_vocabulary, load_token_ranking

    specs = {spec: parse_drafter(spec) for spec in config.drafters if "ours-draft" in config.methods}
    out = {}
    for spec, (name, size) in specs.items():
        if size is None:
            continue
        source = config.head_dir if name in HEAD_DRAFTERS else config.draft or _default_draft_dir()
        ranking = load_token_ranking(source) if os.path.isdir(source) else None
        if ranking is None:
            raise ValueError(f"drafter {spec!r} needs the token ranking beside its model ({source}/token_ranking.json)")
        vocab = draft_vocabulary(ranking, size, vocab_size)
        if vocab is not None:
            out[spec] = vocab
    return out


def _default_draft_dir() -> str:
    from specvideo.paths import shipped
    from specvideo.text.text_models import DEFAULT_DRAFT

    return str(shipped(*DEFAULT_DRAFT))


TARGET_WIDTHS = (1, 2, 4, 8)
TREE_WIDTHS = (6, 12, 16)  # LeanLlama only: the cost of verifying a token tree of n - 1 nodes


def decode_costs(
    target, draft, prompt: torch.Tensor, vocabs: dict[str, torch.Tensor] | None = None,
    tokens: int = 32, repeats: int = 5, head=None, weight_formats: tuple[str, ...] = (),
) -> dict[str, float]:
    """Median wall time (ms) of one decode forward after the prompt: the target fed 1, 2, 4 and 8
    tokens at once, by transformers ("target@n"; float32 CPU targets also "target_packed@n", its
    forward on oneDNN pre-packed ``PackedLinears``) and by LeanLlama ("target_lean@n", Llama targets), and the draft per token run by transformers and by LeanLlama
    (Llama drafts; also "draft_lean@N" per restricted vocabulary); "target_int4@n" and so on per
    weight-only format in ``weight_formats`` (invariant LeanLlama). LeanLlama targets also at
    ``TREE_WIDTHS`` tokens (a tree of n - 1 nodes below its root costs an n-token forward); a draft
    ``head``: "head_lean@N" per token, fed its own features. The models take turns within each
    repeat, so a drift in the machine's speed reaches all of them alike."""
    from specvideo.text.models.gguf import gguf_blocks
    from specvideo.text.runtime.contract import LEAN_MODEL_TYPES
    from specvideo.text.runtime.lean import LeanLlama

    shell = getattr(target, "specvideo_released", False)  # read from its GGUF file as it is: its blocks only
    models = {} if shell else {f"target@{n}": (target, n) for n in TARGET_WIDTHS}
    packing = None
    float32_cpu = target.device.type == "cpu" and target.dtype == torch.float32 and not shell
    if shell:
        for fmt in weight_formats:
            runner = LeanLlama(target, invariant=True, weights=fmt, gguf=gguf_blocks(target, fmt))
            models.update({f"target_{fmt}@{n}": (runner, n) for n in TARGET_WIDTHS + TREE_WIDTHS})
    elif getattr(target.config, "model_type", None) in LEAN_MODEL_TYPES:
        widths = TARGET_WIDTHS + TREE_WIDTHS
        lean = LeanLlama(target)  # one runner per kind, shared by its widths (a 1.5B copy is gigabytes)
        models.update({f"target_lean@{n}": (lean, n) for n in widths})
        if not float32_cpu:  # the bf16 precision policy's runner
            invariant = LeanLlama(target, invariant=True)
            models.update({f"target_invariant@{n}": (invariant, n) for n in widths})
        for fmt in weight_formats:  # weight-only projections, invariant
            quantised = LeanLlama(target, invariant=True, weights=fmt, gguf=gguf_blocks(target, fmt))
            models.update({f"target_{fmt}@{n}": (quantised, n) for n in widths})
    if float32_cpu:  # transformers on packed linears
        packing = packed_linears(target)
    if getattr(draft, "specvideo_released", False):  # the draft's own blocks
        models["draft_gguf"] = (LeanLlama(draft, weights="gguf", gguf=gguf_blocks(draft, "gguf")), 1)
    else:
        models["draft"] = (draft, 1)
    if getattr(draft.config, "model_type", None) in LEAN_MODEL_TYPES and "draft" in models:
        models["draft_lean"] = (LeanLlama(draft), 1)
        for vocab in (vocabs or {}).values():
            models[f"draft_lean@{len(vocab)}"] = (LeanLlama(draft, vocab), 1)
    if head is not None:  # its cost depends on the vocabulary's size only, not on which tokens
        sizes = {len(v): v for v in (vocabs or {}).values()} or {"all": None}
        for size, ids in sizes.items():
            models[f"head_lean@{size}"] = (LeanLlama(head.llama, ids, fc=head.fc), 1)
    samples: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(repeats):
        for name, (model, width) in models.items():
            samples[name].append(_forward_ms(model, prompt, width, tokens))
        if packing is not None:
            with packing:
                for n in TARGET_WIDTHS:
                    samples.setdefault(f"target_packed@{n}", []).append(_forward_ms(target, prompt, n, tokens))
    costs = {name: float(np.median(times)) for name, times in samples.items()}
    costs["target"] = costs["target@1"] if "target@1" in costs else costs[f"target_{weight_formats[0]}@1"]
    for name in [n for n in costs if n.startswith(("draft", "head"))]:
        costs[f"{name}_over_target"] = costs[name] / costs["target"]
    return costs


def _forward_ms(model, prompt: torch.Tensor, width: int, steps: int) -> float:
    """Mean time of ``steps`` forwards of ``width`` tokens over the cache after a prefill of
    ``prompt`` (1, T), each rolled back (as a rejected draft is)."""
    from specvideo.text.runtime.state import CausalLMState

    head = getattr(model, "fc", None) is not None  # a draft head reads a feature beside each token
    d = model.config.hidden_size
    features = lambda n: torch.zeros(1, n, d, dtype=model.dtype, device=prompt.device) if head else None  # noqa: E731
    state = CausalLMState(model, prompt, torch.ones_like(prompt), features=features(prompt.shape[1]))
    state.forward()
    block = prompt[:, -1:].repeat(1, width)  # (1, width)
    times = []
    for _ in range(steps):
        mark = state.num_tokens.clone()
        start = time.perf_counter()
        state.forward(block, num_logits=width, features=features(width))
        times.append(time.perf_counter() - start)
        state.truncate(mark)
    return statistics.fmean(times) * 1e3
