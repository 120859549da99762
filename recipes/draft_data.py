"""Self-distillation data for the SmolLM2 draft: the target's own greedy replies, with its top-K
log-probabilities at every reply position (`specvideo train smollm2-draft-data`).

Greedy replies are exactly the token paths a greedy verifier accepts along, and the stored top-K
log-probabilities let the draft learn the target's distribution for sampled decoding too. Each
shard is one batch of prompts (chat instructions through the chat template, or raw code prefixes),
saved as ``<work>/data/<split>-NNNN.pt`` by temp file and rename, so an interrupted run resumes at
the next shard.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from recipes.draft_prompts import chat_prompts, code_prefixes
from specvideo.files import atomic_path
from specvideo.text.prompts import chat_ids


@dataclass(frozen=True)
class DataConfig:
    work: str = "runs/smollm2-draft"
    num_chat: int = 1280
    num_code: int = 768
    batch_size: int = 16
    max_new_tokens: int = 128
    top_k: int = 20
    seed: int = 0
    valid_prompts: int = 64  # per kind, from another seed: the training run's validation shards
    max_minutes: float = 60.0
    threads: int = 0  # 0 = torch's default


def prompt_batches(tokenizer, config: DataConfig) -> list[tuple[str, list[list[int]]]]:
    """(shard name, token-id prompts) for every shard, training shards first, then validation ones."""

    def encode(texts):
        return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]

    kinds = []
    for split, seed, n_chat, n_code in (
        ("train", config.seed, config.num_chat, config.num_code),
        ("valid", config.seed + 1000, config.valid_prompts, config.valid_prompts),
    ):
        chat = [chat_ids([{"role": "user", "content": p}], tokenizer) for p in chat_prompts(n_chat, seed)]
        code = encode(code_prefixes(n_code, seed))
        rows = sorted(chat + code, key=len)  # similar lengths per batch: little padding
        batches = [rows[i : i + config.batch_size] for i in range(0, len(rows), config.batch_size)]
        order = torch.randperm(len(batches), generator=torch.Generator().manual_seed(seed)).tolist()
        kinds += [(f"{split}-{j:04d}", batches[i]) for j, i in enumerate(order)]
    return kinds


@torch.inference_mode()
def generate_shard(model, prompts: list[list[int]], config: DataConfig, pad_id: int, stop_ids) -> dict:
    """Greedy replies for one batch: per row the full token ids, where the reply starts, and the
    target's top-K token ids and log-probabilities (fp16) at each reply position."""
    width = max(len(p) for p in prompts)
    input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(input_ids)
    for b, p in enumerate(prompts):
        input_ids[b, width - len(p) :] = torch.tensor(p)
        mask[b, width - len(p) :] = 1
    out = model.generate(
        input_ids=input_ids,
        attention_mask=mask,
        max_new_tokens=config.max_new_tokens,
        do_sample=False,
        output_logits=True,
        return_dict_in_generate=True,
        pad_token_id=pad_id,
    )
    logits = torch.stack(out.logits, dim=1).float()  # (B, n, V)
    logp = torch.log_softmax(logits, dim=-1)
    top_logp, top_ids = logp.topk(config.top_k, dim=-1)  # (B, n, K)
    rows = []
    for b, p in enumerate(prompts):
        reply = out.sequences[b, width:].tolist()
        end = next((i + 1 for i, t in enumerate(reply) if t in stop_ids), len(reply))
        rows.append(
            {
                "ids": torch.tensor(p + reply[:end], dtype=torch.int32),
                "start": len(p),
                "top_ids": top_ids[b, :end].to(torch.int32),
                "top_logp": top_logp[b, :end].to(torch.float16),
            }
        )
    return {"rows": rows}


def run_data(config: DataConfig, target_dir: str) -> Path:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if config.threads:
        torch.set_num_threads(config.threads)
    out = Path(config.work) / "data"
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(target_dir)
    model = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).eval()
    eos = model.generation_config.eos_token_id
    stop_ids = {eos} if isinstance(eos, int) else set(eos)
    pad_id = model.generation_config.pad_token_id or next(iter(stop_ids))
    start = time.time()
    log = (out / "log.jsonl").open("a")
    for name, prompts in prompt_batches(tokenizer, config):
        path = out / f"{name}.pt"
        if path.exists():
            continue
        if (time.time() - start) / 60 > config.max_minutes:
            print(f"stopping after {config.max_minutes} minutes (resumable)")
            break
        t = time.time()
        shard = generate_shard(model, prompts, config, pad_id, stop_ids)
        with atomic_path(path) as tmp:
            torch.save(shard, tmp)
        tokens = sum(len(r["ids"]) - r["start"] for r in shard["rows"])
        record = {
            "shard": name,
            "reply_tokens": tokens,
            "seconds": round(time.time() - t, 1),
            "minutes_total": round((time.time() - start) / 60, 2),
        }
        log.write(json.dumps(record) + "\n")
        log.flush()
        print(record, flush=True)
    return out
