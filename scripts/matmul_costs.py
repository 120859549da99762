"""Time one matrix product at M = 1..32 tokens per dtype on this CPU (the curve behind
``specvideo.text.models.precision``'s dtype rule), and per weight-only format (int8, int4 over bf16
activations, ``specvideo.text.runtime.quant``): median of 20 calls after 3 warm-ups, 2 threads.

    python scripts/matmul_costs.py            # a markdown table (docs/history/benchmarks.md "Text: decode cost per dtype")
"""

import time

import torch

from specvideo.text.runtime.quant import quantize

SHAPES = ((49152, 576), (1536, 576), (576, 1536), (8960, 1536), (151936, 1536))  # SmolLM2 head, its MLP; Qwen-1.5B MLP, head
ROWS = (1, 2, 4, 8, 16, 32)


def median_ms(fn, calls: int = 20) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e3


def main() -> None:
    torch.set_num_threads(2)
    print("| matrix (out × in) | dtype | " + " | ".join(f"M = {m}" for m in ROWS) + " |")
    print("|---|---|" + "---:|" * len(ROWS))
    for out_features, in_features in SHAPES:
        for dtype in (torch.float32, torch.bfloat16):
            weight = torch.randn(out_features, in_features).to(dtype)
            cells = []
            for rows in ROWS:
                x = torch.randn(rows, in_features).to(dtype)
                cells.append(f"{median_ms(lambda: torch.nn.functional.linear(x, weight)):.3f}")  # noqa: B023
            name = str(dtype).removeprefix("torch.")
            print(f"| {out_features:,} × {in_features:,} | {name} | " + " | ".join(cells) + " |")
        for fmt in ("int8", "int4"):
            weight = quantize(torch.randn(out_features, in_features).to(torch.bfloat16), fmt)
            cells = []
            for rows in ROWS:
                x = torch.randn(rows, in_features).to(torch.bfloat16)
                cells.append(f"{median_ms(lambda: weight.linear(x)):.3f}")  # noqa: B023
            print(f"| {out_features:,} × {in_features:,} | {fmt} (bf16 activations) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
