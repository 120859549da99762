"""The cost of one forward of a model on LeanLlama(invariant=True) at 1, 2, 4, 8 and 16 tokens over a
cache of ``--context`` tokens, per number format (bf16 dense, int8 and int4 weight-only): the curve
behind the verify width of each format (docs/history/benchmarks.md "Text: weight formats"). Median of
``--repeats`` calls after two warm-ups, 2 threads, with the weights' bytes and the process's
resident memory after each format is built (the previous one freed).

    python scripts/format_costs.py ~/.cache/specvideo/converted/qwen2.5-coder-1.5b-instruct-q4_k_m-bfloat16
"""

import argparse
import gc
import resource
import time

import torch

from specvideo.text.models.loading import load_causal_lm
from specvideo.text.runtime.lean import LeanLlama
from specvideo.text.runtime.state import CausalLMState

ROWS = (1, 2, 4, 8, 16)


def forward_ms(lean: LeanLlama, context: int, rows: int, repeats: int) -> float:
    ids = torch.randint(100, 20000, (1, context), generator=torch.Generator().manual_seed(0))
    state = CausalLMState(lean, ids, torch.ones_like(ids))
    state.forward()  # the prompt's last token
    block = torch.randint(100, 20000, (1, rows), generator=torch.Generator().manual_seed(1))
    times = []
    for _ in range(repeats + 2):
        mark = state.num_tokens.clone()
        start = time.perf_counter()
        state.forward(block, num_logits=rows)
        times.append(time.perf_counter() - start)
        state.truncate(mark)  # back to the context
    return sorted(times[2:])[repeats // 2] * 1e3


def rss_mb() -> float:
    """The process's resident memory (MB), the file pages it maps included."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a bf16 model directory (a converted GGUF)")
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--formats", default="bfloat16,int8,int4")
    args = parser.parse_args()
    torch.set_num_threads(2)
    print("| format | weights (MB) | resident (MB) | " + " | ".join(f"{m} tok" for m in ROWS) + " |")
    print("|---|---:|---:|" + "---:|" * len(ROWS))
    for fmt in args.formats.split(","):
        model = load_causal_lm(args.model, torch.bfloat16)
        lean = LeanLlama(model, invariant=True, weights=None if fmt == "bfloat16" else fmt)
        if fmt != "bfloat16":
            from specvideo.text.runtime.quant import release_layers

            release_layers(model, lean.embed)
        gc.collect()
        cells = [f"{forward_ms(lean, args.context, rows, args.repeats):.1f}" for rows in ROWS]
        print(f"| {fmt} | {lean.weight_bytes() / 2**20:.0f} | {rss_mb():.0f} | " + " | ".join(cells) + " |", flush=True)
        del model, lean
        gc.collect()


if __name__ == "__main__":
    main()
