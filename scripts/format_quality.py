"""What a weight-only format costs in quality, against the same model in bf16 (docs/history/benchmarks.md
"Text: weight formats"): per format (bf16 dense, int8, int4, all on LeanLlama(invariant=True)) and
for llama.cpp on the GGUF file the bf16 directory was converted from,

- greedy agreement with bf16: ``--new-tokens`` greedy tokens after each prompt of the benchmark's
  validation split (fill in the middle and chat); the share of prompts whose whole continuation is
  the bf16 one, the mean length of the common prefix, and the share of equal tokens by position;
- perplexity on llama-perplexity's own chunks of the held-out code (``--chunks`` consecutive windows of
  ``--window`` tokens, each scored on its second half), ours and llama.cpp's tool on the same text;
- perplexity (our formats only) on ``--chunks`` windows of ``--window`` tokens of the held-out
  standard-library modules (``benchmarks.text.corpus``: code no model here was trained on), and on the bf16
  model's own greedy chat replies (how far each format moves from bf16's behaviour; llama.cpp's
  server returns no prompt log-probabilities, and its Q4_K_M weights are what the bf16 directory
  holds, up to bf16 rounding).

    PYTHONPATH=. python scripts/format_quality.py   # the code pair (scripts/fetch_qwen_coder.sh first)
    PYTHONPATH=. python scripts/format_quality.py --model smollm2   # the default SmolLM2-135M: code, not fim
"""

import argparse
import math
import statistics

import torch

from benchmarks.text.corpus import corpus_files, read_sources
from benchmarks.text.fim import fim_prompts
from benchmarks.text.prompts import chat_prompts, code_prompts
from benchmarks.text.run import encode
from specvideo.text import SpeculativeGenerator
from specvideo.text.models.gguf import weights_source
from specvideo.text.models.names import QWEN_CODER_FILES, qwen_coder_dir, resolve_model
from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.state import CausalLMState

FORMATS = ("bfloat16", "int8", "int4", "gguf")  # gguf: the file's own blocks on specvideo's kernel


def greedy(gen, ids: list[int], n: int) -> list[int]:
    return gen.generate([ids], max_new_tokens=n, stop=None).token_ids[0]


def agreement(runs: list[list[int]], reference: list[list[int]]) -> dict:
    prefixes = [next((i for i, (a, b) in enumerate(zip(r, ref)) if a != b), len(r)) for r, ref in zip(runs, reference)]
    n = len(reference[0])
    by_position = [statistics.fmean(r[i] == ref[i] for r, ref in zip(runs, reference)) for i in range(n)]
    return {"identical": statistics.fmean(p == n for p in prefixes), "prefix": statistics.fmean(prefixes),
            "tokens": statistics.fmean(by_position)}


@torch.inference_mode()
def perplexity(runner, windows: list[list[int]], starts: list[int] | None = None) -> float:
    """exp(mean negative log-likelihood of every token of each window from ``starts[i]`` on (default:
    after the first))."""
    nll, count = 0.0, 0
    for ids, start in zip(windows, starts or [1] * len(windows)):
        x = torch.tensor([ids])
        logits = CausalLMState(runner, x, torch.ones_like(x)).forward(num_logits=len(ids))[0, start - 1 : -1].float()
        nll += float(torch.nn.functional.cross_entropy(logits, x[0, start:], reduction="sum"))  # (T - start, V) logits
        count += len(ids) - start
    return math.exp(nll / count)


def code_windows(tokenizer, chunks: int, window: int) -> list[list[int]]:
    ids = tokenizer("\n".join(read_sources(corpus_files("heldout"))))["input_ids"]
    step = (len(ids) - window) // chunks
    return [ids[i * step : i * step + window] for i in range(chunks)]


def gguf_file(model: str):
    from specvideo.text.models.smollm import gguf_path

    return gguf_path() if model == "smollm2" else qwen_coder_dir() / QWEN_CODER_FILES[0]


def llama_cpp_greedy(prompts: list[list[int]], n: int, model: str) -> list[list[int]]:
    from benchmarks.text.llama_cpp import LlamaServer, mode_args

    server = LlamaServer(gguf_file(model), mode_args("plain", None, 1), torch.get_num_threads(), 4096)
    try:
        return [list(server.complete(ids, n, 0.0, 1.0, 0)["tokens"]) for ids in prompts]
    finally:
        server.close()


def chunked_windows(tokenizer, n_ctx: int, chunks: int) -> list[list[int]]:
    """llama-perplexity's chunks of the held-out code: consecutive n_ctx-token windows from the
    text's first token, each scored on its second half (``perplexity(..., starts=[n_ctx // 2] * n)``)."""
    ids = tokenizer(held_out_text())["input_ids"]
    return [ids[i * n_ctx : (i + 1) * n_ctx] for i in range(chunks)]


def held_out_text() -> str:
    return "\n".join(read_sources(corpus_files("heldout")))


def llama_cpp_perplexity(model: str, n_ctx: int, chunks: int) -> float:
    """llama.cpp's own perplexity tool on the same text, chunks and context (its final estimate)."""
    import re
    import subprocess
    import tempfile

    from benchmarks.text.llama_cpp import binary

    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(held_out_text())
        f.flush()
        out = subprocess.run(
            [str(binary("llama-perplexity")), "-m", str(gguf_file(model)), "-f", f.name, "-c", str(n_ctx),
             "--chunks", str(chunks), "-t", str(torch.get_num_threads()), "-b", str(n_ctx)],
            capture_output=True, text=True, check=True,
        )
    match = re.search(r"Final estimate: PPL = ([0-9.]+)", out.stdout + out.stderr)
    if match is None:
        raise RuntimeError("llama-perplexity printed no final estimate:\n" + (out.stderr or out.stdout)[-2000:])
    return float(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=6, help="prompts per workload (validation split)")
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--no-llama-cpp", action="store_true")
    parser.add_argument("--formats", default=",".join(FORMATS[1:]), help="besides bfloat16 (the reference)")
    parser.add_argument("--model", choices=("qwen-coder", "smollm2"), default="qwen-coder")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (1 beside another heavy process)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    path = resolve_model("qwen-coder", "bfloat16").target if args.model == "qwen-coder" else None
    base = SpeculativeGenerator.from_pretrained(path, dtype="bfloat16", drafter="none")
    tok, target = base.tokenizer, base.target
    code = ("fim", fim_prompts) if args.model == "qwen-coder" else ("code", code_prompts)
    prompts = {w: [encode(p, tok, 32768, args.new_tokens, "cpu")[0].tolist() for p in ps] for w, ps in
               ((code[0], code[1]("heldout", args.prompts)), ("chat", chat_prompts("heldout", args.prompts)))}
    runners = {"bfloat16": base.models.target_runner, **{
        f: LeanLlama(target, invariant=True, weights=f, gguf=weights_source(target, f)) for f in args.formats.split(",")}}
    gens = {f: SpeculativeGenerator.from_models(target, tok, drafter="none", lean_target=r, invariant=True,
                                    weights=None if f == "bfloat16" else f) for f, r in runners.items()}
    runs = {(f, w): [greedy(g, ids, args.new_tokens) for ids in ps] for f, g in gens.items() for w, ps in prompts.items()}
    if not args.no_llama_cpp:
        for w, ps in prompts.items():
            runs[("llama.cpp", w)] = llama_cpp_greedy(ps, args.new_tokens, args.model)
    windows = code_windows(tok, args.chunks, args.window)
    halves = chunked_windows(tok, args.window, args.chunks)  # llama-perplexity's chunks and scoring
    replies = [ids + out for ids, out in zip(prompts["chat"], runs[("bfloat16", "chat")])]
    print(f"| format | weights (MB) | {code[0]}: identical / common prefix / equal tokens | chat: identical / common prefix / "
          "equal tokens | perplexity, held-out code | perplexity, bf16's chat replies | perplexity, llama-perplexity's chunks |")
    print("|---|---:|---|---|---:|---:|---:|")
    for name in [*runners, *(() if args.no_llama_cpp else ("llama.cpp",))]:
        cells = []
        for w in (code[0], "chat"):
            a = agreement(runs[(name, w)], runs[("bfloat16", w)])
            cells.append(f"{a['identical']:.2f} / {a['prefix']:.1f} / {a['tokens']:.2f}")
        if name in runners:
            mb = f"{runners[name].weight_bytes() / 2**20:,.0f}"
            starts = [len(ids) for ids in prompts["chat"]]  # the replies' tokens only
            ppl = [f"{perplexity(runners[name], windows):.3f}", f"{perplexity(runners[name], replies, starts):.3f}",
                   f"{perplexity(runners[name], halves, [args.window // 2] * len(halves)):.3f}"]
        else:
            ppl = ["-", "-", f"{llama_cpp_perplexity(args.model, args.window, args.chunks):.3f}"]
            mb = f"{gguf_file(args.model).stat().st_size / 2**20:,.0f}"
        print(f"| {name} | {mb} | {cells[0]} | {cells[1]} | {ppl[0]} | {ppl[1]} | {ppl[2]} |", flush=True)


if __name__ == "__main__":
    main()
