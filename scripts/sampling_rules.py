"""Sampled drafts under the two sampling rules of the one row path (``TextConfig.sampling_rule``):
rejection sampling on each row's generator (Leviathan et al. 2023) against per-row Gumbel-max noise
with coupled drafting (the default).

For each prompt of the tuning splits (chat and code), each temperature and each seed, one sampled
run of the default pair with the lean model drafter, alone (batch 1), under each rule; prints the
pooled acceptance rate, accepted tokens per round and emitted tokens per target call, with the
spread over seeds, as one JSON line per rule and temperature.

    python scripts/sampling_rules.py --prompts 8 --seeds 3 --max-new-tokens 48
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from benchmarks.text.prompts import chat_prompts, code_prompts
from specvideo.text import SpeculativeGenerator
from specvideo.text.prompts import chat_ids
from specvideo.text.sampling import SamplingConfig


def prompt_ids(g, prompt) -> list[int]:
    if prompt.chat:
        return chat_ids([{"role": "user", "content": prompt.text}], g.tokenizer)
    return g.tokenizer(prompt.text)["input_ids"]


def sampled_run(g, ids, sampling, seed, n):
    run = g.start([ids], max_new_tokens=n, temperature=sampling.temperature, top_p=sampling.top_p, seed=seed)
    for _ in run.steps():
        pass
    return run.stats


RULES = ("rejection", "gumbel")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=8, help="per workload, from the tuning split")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.7, 1.0])
    parser.add_argument("--drafter", default="lean")
    args = parser.parse_args()
    torch.manual_seed(0)
    base = SpeculativeGenerator.from_pretrained(drafter=args.drafter)
    g = base
    prompts = chat_prompts("tuning", args.prompts) + code_prompts("tuning", args.prompts)
    ids = [prompt_ids(g, p) for p in prompts]
    for temperature in args.temperatures:
        sampling = SamplingConfig(temperature, None, 1.0)
        for rule in RULES:
            g = SpeculativeGenerator(base.models, base.config, sampling_rule=rule)
            per_seed = []
            for seed in range(args.seeds):
                stats = [sampled_run(g, x, sampling, seed, args.max_new_tokens) for x in ids]
                drafted, accepted = sum(s.drafted for s in stats), sum(s.accepted for s in stats)
                rounds, calls = sum(s.rounds for s in stats), sum(s.target_calls for s in stats)
                emitted = sum(s.emitted for s in stats)
                per_seed.append((accepted / drafted, accepted / rounds, emitted / calls))
            cols = list(zip(*per_seed))
            print(json.dumps({
                "rule": rule, "temperature": temperature, "drafter": args.drafter, "prompts": len(ids),
                "seeds": args.seeds, "max_new_tokens": args.max_new_tokens,
                **{name: {"median": statistics.median(c), "min": min(c), "max": max(c)}
                   for name, c in zip(("acceptance", "accepted_per_round", "tokens_per_call"), cols)},
            }), flush=True)


if __name__ == "__main__":
    main()
