"""The methods the text benchmark runs side by side, each a ``run(ids, temperature, seed)``.

    hf-target     ``target.generate()`` alone (the reference for speedups and greedy exact match)
    ours-target   our loop with ``drafter="none"`` (plain target-only decoding through the same loop)
    hf-assisted   ``target.generate(assistant_model=draft)``, ``num_assistant_tokens`` swept over
                  ``assistant_ks`` for each ``num_assistant_tokens_schedule`` (as ours sweeps k)
    hf-lookup     ``target.generate(prompt_lookup_num_tokens=k)`` for k in ``lookup_ks``
    ours-draft    our loop with a draft model: one row per drafter x schedule x k
    ours-ngram    our loop with prompt lookup (n-gram drafter), constant k in ``ngram_ks`` (else ``lookup_ks``)
    llama-cpp     llama.cpp's server on the same GGUF files: plain, n-gram and draft speculation
                  (``benchmarks.text.llama_cpp``; only when asked for in ``methods``)

End-of-sequence never stops a run (our ``stop=None``; transformers gets ``eos_token_id=[]`` and
``min_new_tokens=max_new_tokens``), so every method generates exactly ``max_new_tokens`` and the
timings compare equal work. Sampling is temperature T with top-p on both sides (top-k off).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from benchmarks.text.config import (
    FAMILIES,
    PEER_FAMILIES,
    BenchTextConfig,
    parse_drafter,
    parse_tree_shape,
)


@dataclass
class Method:
    name: str
    family: str
    run: Callable[[torch.Tensor, float, int], tuple[list[int], Any]]
    drafter: str | None = None
    schedule: str | None = None
    k: int | None = None
    reset: Callable[[], None] | None = None  # called before every run, outside the timed region
    close: Callable[[], None] | None = None  # called once after the last run (a peer's server)


class CallCounter:
    """Counts the target's forward calls (a forward hook: the same few microseconds for every method)."""

    def __init__(self, model: torch.nn.Module):
        self.count = 0
        self._handle = model.register_forward_hook(self._hook)

    def _hook(self, module, args, output) -> None:
        self.count += 1

    def close(self) -> None:
        self._handle.remove()


def weight_formats(verifiers: tuple[str, ...], target) -> tuple[str, ...]:
    """The weight-only formats among ``verifiers`` that run ``target`` here ("gguf" only for a
    target converted from a GGUF file, where specvideo's kernel runs)."""
    from specvideo.text.models.gguf import has_gguf_source
    from specvideo.text.models.precision import WEIGHT_ONLY

    return tuple(v for v in verifiers if v in WEIGHT_ONLY and (v != "gguf" or has_gguf_source(target)))


def build_methods(
    config: BenchTextConfig, target, draft, tokenizer, vocabs: dict[str, torch.Tensor] | None = None, head=None
) -> list[Method]:
    """Every method of ``config``, in the fixed family order whatever order they were listed in
    (``head``: the draft head the head drafters run)."""
    from specvideo.text import SpeculativeGenerator
    from specvideo.text.config import HEAD_DRAFTERS, SELF_DRAFTERS
    from specvideo.text.drafting.catalog import spec_of

    n, top_p = config.max_new_tokens, config.top_p
    hf = _hf_runner(target, n, top_p, pad_id(target, tokenizer))
    methods: list[Method] = []
    from specvideo.text.models.gguf import gguf_blocks
    from specvideo.text.models.precision import WEIGHT_ONLY
    from specvideo.text.runtime.contract import LEAN_MODEL_TYPES
    from specvideo.text.runtime.lean import LeanLlama

    llama = target.config.model_type in LEAN_MODEL_TYPES  # LeanLlama runs it
    float32 = target.dtype == torch.float32
    runners = {"lean": LeanLlama(target, invariant=not float32)} if "lean" in config.verifiers and llama else {}
    # "lean": invariant in bf16 (the precision policy)
    # weight-only int8 / int4 copies of the target's projections (always invariant); the dense
    # target stays for transformers' rows
    runners.update({
        v: LeanLlama(target, invariant=True, weights=v, gguf=gguf_blocks(target, v))
        for v in weight_formats(config.verifiers, target) if llama
    })
    # "packed": transformers' own forwards of the target and the draft on pre-packed linear
    # weights (TextModels(packed=True)), float32 only
    verifiers = [
        (v, runners.get(v, False))
        for v in config.verifiers
        if v == "transformers" or v in runners or (v == "packed" and float32)
    ]
    verifiers = verifiers or [("transformers", False)]  # lean verifiers alone on a non-Llama target

    def ours(name: str, family: str, row: tuple, **kwargs) -> list[Method]:
        """One Method per verifier; row = (drafter label, schedule, k) for the table."""
        out = []
        copy = spec_of(kwargs.get("drafter", "none")).copy
        for verifier, lean_target in verifiers:
            packed = verifier == "packed"
            weights = verifier if verifier in WEIGHT_ONLY else None
            if copy and (weights == copy or not llama):  # a self drafter's copy would be the target itself
                continue
            gen = SpeculativeGenerator.from_models(
                target, tokenizer, lean_target=lean_target, packed=packed,
                invariant=bool(lean_target) and (not float32 or weights is not None), weights=weights, **kwargs
            )
            suffix = "" if verifier == "transformers" else f"+{verifier}"
            out.append(Method(name + suffix, family, _ours_runner(gen, n, top_p), *row))
        return out

    for family in FAMILIES + PEER_FAMILIES:
        if family not in config.methods:
            continue
        if family == "llama-cpp":
            methods += llama_cpp_methods(config)
        if family == "openvino":
            methods += openvino_methods(config)
        if family == "hf-target":
            methods.append(Method("hf-target", family, hf()))
        elif family == "ours-target":
            methods += ours("ours-target", family, (None, None, None), drafter="none")
        elif family == "hf-assisted":
            for schedule in config.assistant_schedules:
                for k in config.assistant_ks:
                    reset = _assistant_setter(draft, k, schedule)
                    methods.append(
                        Method(
                            f"hf-assisted-{schedule}-k{k}",
                            family,
                            hf(assistant_model=draft),
                            "draft",
                            schedule,
                            k,
                            reset=reset,
                        )
                    )
        elif family == "hf-lookup":
            for k in config.lookup_ks:
                methods.append(Method(f"hf-lookup-k{k}", family, hf(prompt_lookup_num_tokens=k), k=k))
        elif family == "ours-draft":
            for name in config.drafters:
                drafter = parse_drafter(name)[0]
                head_tree = drafter in HEAD_DRAFTERS and drafter.endswith("tree")
                for label, shape in _shapes(name, config.tree_shapes if head_tree else (None,)):
                    for schedule in config.schedules:
                        for k in config.ks:
                            methods += ours(
                                f"ours-{label}-{schedule}-k{k}",
                                family,
                                (label, schedule, k),
                                draft=head if drafter in HEAD_DRAFTERS else None if drafter in SELF_DRAFTERS else draft,
                                drafter=drafter,
                                num_draft_tokens=k,
                                schedule=schedule,
                                draft_vocab=(vocabs or {}).get(name),
                                **shape,
                            )
        elif family == "ours-ngram":
            for k in config.ngram_k_values:
                methods += ours(
                    f"ours-ngram-k{k}",
                    family,
                    ("ngram", "constant", k),
                    drafter="ngram",
                    num_draft_tokens=k,
                    schedule="constant",
                )
    return methods


def llama_cpp_methods(config: BenchTextConfig) -> list[Method]:
    """One llama-server per mode (and k) on the target's GGUF file; closed by the bench at the end."""
    from benchmarks.text.llama_cpp import LlamaServer, llama_runner, mode_args

    target_gguf, draft_gguf = gguf_files(config)
    threads = torch.get_num_threads()
    methods = []
    for mode in config.llama_cpp_modes:
        for k in (None,) if mode == "plain" else config.llama_cpp_ks:
            name = "llama.cpp" if k is None else f"llama.cpp-{mode}-k{k}"
            server = LlamaServer(target_gguf, mode_args(mode, draft_gguf, k or 1), threads, context=4096)
            run = llama_runner(server, config.max_new_tokens, config.top_p)
            methods.append(Method(name, "llama-cpp", run, None if k is None else mode, None, k, close=server.close))
    return methods


def openvino_methods(config: BenchTextConfig) -> list[Method]:
    """One OpenVINO GenAI worker per mode (and k) on the code pair's int4 exports."""
    from benchmarks.text.openvino_peer import OpenVINOWorker, openvino_runner

    if config.pair != "qwen-coder":
        raise ValueError("OpenVINO rows run the code pair's int4 exports: pass --pair qwen-coder")
    methods = []
    for mode in config.openvino_modes:
        for k in (None,) if mode == "plain" else config.llama_cpp_ks:
            worker = OpenVINOWorker(mode, k or 1, torch.get_num_threads())
            name = "openvino" if k is None else f"openvino-{mode}-k{k}"
            run = openvino_runner(worker, config.max_new_tokens, config.top_p)
            methods.append(Method(name, "openvino", run, None if k is None else mode, None, k, close=worker.close))
    return methods


def gguf_files(config: BenchTextConfig):
    """(target GGUF, draft GGUF or None) of the benchmarked model: the default SmolLM2's file, or
    the code pair's two files."""
    if config.pair == "qwen-coder":
        from specvideo.text.models.names import QWEN_CODER_FILES, qwen_coder_dir

        return tuple(qwen_coder_dir() / name for name in QWEN_CODER_FILES)
    if config.target is None:
        from specvideo.text.models.smollm import gguf_path

        return gguf_path(), None
    raise ValueError("llama.cpp rows run the default target's or the code pair's GGUF files (no --target DIR)")


def _shapes(name: str, shapes) -> list[tuple[str, dict]]:
    """(row label, generator settings) per tree shape of a head-tree drafter ("name/WxN")."""
    if shapes == (None,):
        return [(name, {})]
    out = []
    for shape in shapes:
        width, nodes = parse_tree_shape(shape)
        out.append((f"{name}/{shape}", {"head_tree_width": width, "tree_nodes": nodes}))
    return out


def _hf_runner(target, n: int, top_p: float, pad: int) -> Callable:
    def hf(**extra) -> Callable:
        def run(ids: torch.Tensor, temperature: float, seed: int):
            kwargs = dict(extra)
            if temperature > 0:
                kwargs.update(do_sample=True, temperature=float(temperature), top_k=0, top_p=float(top_p))
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

    return hf


def _ours_runner(gen, n: int, top_p: float) -> Callable:
    def run(ids: torch.Tensor, temperature: float, seed: int):
        return _generate(gen, ids, n, top_p, temperature, seed)

    return run


def _generate(gen, ids, n, top_p, temperature, seed: int):
    out = gen.generate(
            ids[0].tolist(),
            max_new_tokens=n,
            temperature=temperature,
            top_k=None,
            top_p=top_p if temperature > 0 else None,
            seed=seed,  # the row's own (RowSampler)
        stop=None,
    )
    return out.token_ids, out.stats


def _assistant_setter(draft, k: int, schedule: str) -> Callable[[], None]:
    """Before every run: the draft's generation config as saved, with this k and schedule
    (transformers carries the heuristic's k from one call to the next in that config)."""
    saved = copy.deepcopy(draft.generation_config)

    def reset() -> None:
        config = copy.deepcopy(saved)
        config.num_assistant_tokens = k
        config.num_assistant_tokens_schedule = schedule
        draft.generation_config = config

    return reset


def pad_id(target, tokenizer) -> int:
    for value in (
        getattr(tokenizer, "pad_token_id", None),
        getattr(target.generation_config, "pad_token_id", None),
    ):
        if isinstance(value, int):
            return value
    return 0
