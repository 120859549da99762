"""Where a text target's time goes, per number format: a decode step (1 token), a 4-token check and a
prompt chunk, each timed (median of ``--repeats`` after two warm-ups) and profiled per op with
torch.profiler (the top ops by self CPU time). The evidence behind docs/history/benchmarks.md "Text: the
k-quant kernel" (#54): run it before and after a change to a kernel or a format.

Formats: ``gguf`` (the GGUF file's own blocks on specvideo's kernel, each layer of a decode block in
one C++ call), ``gguf-ops`` (the same blocks, each layer as PyTorch ops around the kernel), ``int4`` (rounded to the k-quant
layout, specvideo's kernel), ``int4-torch`` (PyTorch's ``_weight_int4pack_mm_for_cpu``), ``bfloat16``.

    python scripts/profile_text.py ~/.cache/specvideo/qwen-coder/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    python scripts/profile_text.py FILE.gguf --formats gguf --prompts 128,512,2048 --profile
"""

import argparse
import gc
import os
import time

import torch

from specvideo.paths import add_checkout_to_path
from specvideo.text.models.gguf import converted_dir, load_gguf_target, metadata_dir
from specvideo.text.models.loading import load_causal_lm
from specvideo.text.runtime import kernels
from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.quant import release_layers
from specvideo.text.runtime.state import CausalLMState


def build(source: str, fmt: str) -> LeanLlama:
    """The target's invariant LeanLlama in ``fmt``, its dense weights freed where it holds its own."""
    if fmt == "int4-torch":
        os.environ[kernels.ENV_OFF] = "1"
    else:
        os.environ.pop(kernels.ENV_OFF, None)
    dtype = torch.bfloat16
    if fmt in ("gguf", "gguf-ops"):  # read as it is: no converted copy
        lean = LeanLlama(load_gguf_target(metadata_dir(source)), invariant=True, weights="gguf", gguf=source)
        if fmt == "gguf-ops":
            lean._fused = None
        return lean
    model = load_causal_lm(str(converted_dir(source, dtype="bfloat16")), dtype)
    weights = {"bfloat16": None, "int4-torch": "int4"}.get(fmt, fmt)
    lean = LeanLlama(model, invariant=True, weights=weights)
    if weights:
        release_layers(model, lean.embed)
    return lean


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats + 2):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times[2:])[repeats // 2] * 1e3


def measured(once, repeats: int, profile: bool) -> tuple[float, str]:
    """``once``'s median ms and, with ``profile``, torch.profiler's top ops of one more call."""
    ms, table = timed(once, repeats), ""
    if profile:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            once()
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=8)
    return ms, table


def block_ms(lean: LeanLlama, context: int, rows: int, repeats: int, profile: bool) -> tuple[float, str]:
    """One forward of ``rows`` tokens over ``context`` cached ones: ms, and the profiler's table."""
    ids = torch.randint(100, 20000, (1, context), generator=torch.Generator().manual_seed(0))
    state = CausalLMState(lean, ids, torch.ones_like(ids))
    state.forward()  # the prompt, then its last token
    block = torch.randint(100, 20000, (1, rows), generator=torch.Generator().manual_seed(1))

    def once():
        mark = state.num_tokens.clone()
        state.forward(block, num_logits=rows)
        state.truncate(mark)

    return measured(once, repeats, profile)


def prefill_ms(lean: LeanLlama, tokens: int, repeats: int, profile: bool) -> tuple[float, str]:
    """ms per token of a whole prompt's prefill (the state's chunks)."""
    ids = torch.randint(100, 20000, (1, tokens + 1), generator=torch.Generator().manual_seed(2))

    def once():
        CausalLMState(lean, ids, torch.ones_like(ids)).forward()

    ms, table = measured(once, repeats, profile)
    return ms / tokens, table


def llama_bench(gguf: str, rows: list[int], prompts: list[int], repeats: int, context: int) -> dict[str, float]:
    """llama.cpp's own llama-bench on the same file, 2 threads: ms of a forward of n tokens (pp n:
    a step at 1, a check at 2-8 tokens) and ms/token of its prompt processing (pp 128 ...), and of
    its generation (tg); the step and checks over ``context`` cached tokens as ours (-d), prompts from empty."""
    import json
    import subprocess

    add_checkout_to_path()  # benchmarks/ beside the package
    from benchmarks.text.llama_cpp import binary

    def run(sizes: list[int], depth: int, gen: int) -> list[dict]:
        command = [str(binary("llama-bench")), "-m", gguf, "-t", str(torch.get_num_threads()), "-p",
                   ",".join(map(str, sizes)), "-n", str(gen), "-r", str(repeats), "-d", str(depth), "-o", "json"]
        return json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)

    result = {}
    for test in run(rows, context, 32) + (run(prompts, 0, 0) if prompts else []):
        n_prompt, n_gen = test["n_prompt"], test["n_gen"]
        ms_per_token = 1e3 / test["avg_ts"]
        if n_gen:
            result["tg"] = ms_per_token
        else:
            result[f"pp{n_prompt}"] = ms_per_token * (n_prompt if n_prompt in rows else 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("gguf", help="a GGUF file (the bf16 and int4 rows read its converted copy)")
    parser.add_argument("--formats", default="gguf,int4,int4-torch,bfloat16")
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--rows", default="1,2,4,8")
    parser.add_argument("--prompts", default="512", help="prompt lengths whose prefill is timed (ms/token)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="print torch.profiler's top ops per measurement")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (and llama-bench's)")
    parser.add_argument("--llama-bench", action="store_true", help="llama.cpp's llama-bench on the same file after each format")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = [int(r) for r in args.rows.split(",")]
    prompts = [int(p) for p in args.prompts.split(",") if p]
    head = [f"{r} tok (ms)" for r in rows] + [f"{r}-tok / step" for r in rows[1:]] + [f"prefill {p} (ms/tok)" for p in prompts]
    print(f"| format | weights (MB) | {' | '.join(head)} |")
    print("|---|---:|" + "---:|" * len(head))
    tables = []
    for fmt in args.formats.split(","):
        lean = build(args.gguf, fmt)
        costs, cells = {}, []
        for r in rows:
            costs[r], table = block_ms(lean, args.context, r, args.repeats, args.profile)
            tables.append((fmt, f"{r}-token block", table))
        cells += [f"{costs[r]:.1f}" for r in rows] + [f"{costs[r] / costs[rows[0]]:.2f}" for r in rows[1:]]
        for p in prompts:
            ms, table = prefill_ms(lean, p, max(1, args.repeats // 2), args.profile)
            cells.append(f"{ms:.2f}")
            tables.append((fmt, f"prefill {p}", table))
        print(f"| {fmt} | {lean.weight_bytes() / 2**20:,.0f} | {' | '.join(cells)} |", flush=True)
        del lean
        gc.collect()
        if args.llama_bench:  # in turn with ours, so a drift of the machine reaches both
            peer = llama_bench(args.gguf, rows, prompts, args.repeats, args.context)
            cells = [f"{peer[f'pp{r}']:.1f}" for r in rows] + [f"{peer[f'pp{r}'] / peer['pp1']:.2f}" for r in rows[1:]]
            cells += [f"{peer[f'pp{p}']:.2f}" for p in prompts]
            size = os.path.getsize(args.gguf) / 2**20
            print(f"| llama.cpp (llama-bench; generation {peer['tg']:.1f} ms/token) | {size:,.0f} | {' | '.join(cells)} |", flush=True)
    for fmt, what, table in tables:
        if table:
            print(f"\n### {fmt}: {what}\n\n```\n{table}\n```")


if __name__ == "__main__":
    main()
