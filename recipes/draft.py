"""Recipe for the SmolLM2 draft under models/smollm2-draft/ (`specvideo train smollm2-draft`).

The draft is a short Llama with the target's width, its layers initialised from chosen target
layers, sharing the target's (frozen) token embeddings and tied output projection: only its layers
and final norm are trained and shipped (``specvideo.text.models.shared_draft`` puts the target's
embeddings back at load time). It is distilled on the target's own greedy replies
(``recipes.draft_data``): cross-entropy against the target's top-K distribution at every
reply position, over the FR-Spec vocabulary (the ``vocab_size`` most frequent tokens of the data),
which is also the vocabulary it drafts from at run time.

Checkpoints (``<work>/train/ckpt.pt``) are written every ``eval_every`` steps by temp file and
rename; a rerun resumes from the last one. Validation uses the ``valid-*`` shards (prompts from
another seed); the benchmark's prompts are never trained on.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import LlamaForCausalLM

from recipes.text import lr_warm_cosine
from specvideo.files import atomic_path
from specvideo.text.models.shared_draft import save_shared_draft, shared_draft_from_target
from specvideo.text.models.vocab import save_token_ranking, token_ranking


@dataclass(frozen=True)
class DraftConfig:
    work: str = "runs/smollm2-draft"
    out: str = "models/smollm2-draft"
    # first, middle and last target layer: after 15 probe steps from each start, (0, 15, 29) had the
    # lowest validation loss and highest top-1 of (0, 1, 2), (0, 15, 29), (0, 1, 29) (models/smollm2-draft/README.md)
    init_layers: tuple[int, ...] = (0, 15, 29)
    vocab_size: int = 16384  # FR-Spec rows trained (and the largest draft_vocab_size that makes sense)
    batch_size: int = 16  # sequences per step
    lr: float = 6e-4
    warmup: int = 20
    steps: int = 340  # the cosine schedule's length: about 45 minutes on one thread
    max_minutes: float = 45.0
    eval_every: int = 40
    valid_rows: int = 96  # validation replies scored at every eval (a fixed subset of the valid shards)
    seed: int = 0
    threads: int = 1


def load_shards(work: str, split: str) -> list[dict]:
    rows = []
    for path in sorted((Path(work) / "data").glob(f"{split}-*.pt")):
        rows += torch.load(path)["rows"]
    if not rows:
        raise ValueError(
            f"no {split} shards under {work}/data: run `specvideo train smollm2-draft-data` first"
        )
    return rows


def data_ranking(rows: list[dict], vocab_size: int) -> list[int]:
    import numpy as np

    ids = np.concatenate([r["ids"].numpy() for r in rows])
    return token_ranking(ids, vocab_size)


def collate(rows: list[dict], full_to_sub: torch.Tensor):
    """Right-padded batch: input_ids (B, T), attention_mask (B, T), and for the reply positions the
    flat indices into (B*T) of the positions that predict them, the sub-vocabulary target ids (N, K)
    (-1 outside it) and their probabilities (N, K)."""
    T = max(len(r["ids"]) for r in rows)
    input_ids = torch.zeros(len(rows), T, dtype=torch.long)
    mask = torch.zeros(len(rows), T, dtype=torch.long)
    where, ids, probs = [], [], []
    for b, r in enumerate(rows):
        n = len(r["ids"])
        input_ids[b, :n] = r["ids"].long()
        mask[b, :n] = 1
        reply = n - r["start"]
        where.append(b * T + torch.arange(r["start"] - 1, n - 1))  # position j predicts token j + 1
        ids.append(full_to_sub[r["top_ids"][:reply].long()])
        probs.append(r["top_logp"][:reply].float().exp())
    return input_ids, mask, torch.cat(where), torch.cat(ids), torch.cat(probs)


def distill_loss(draft: LlamaForCausalLM, head: torch.Tensor, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Soft cross-entropy to the target's top-K (renormalised inside the sub-vocabulary) and the
    top-1 agreement with the target's greedy token, over the reply positions."""
    input_ids, mask, where, ids, probs = batch
    hidden = draft.model(input_ids=input_ids, attention_mask=mask).last_hidden_state  # (B, T, d), normed
    h = hidden.flatten(0, 1)[where]  # (N, d)
    logq = torch.log_softmax(h @ head.T, dim=-1)  # (N, V')
    inside = ids >= 0
    p = probs * inside
    p = p / p.sum(-1, keepdim=True).clamp_min(1e-8)
    loss = -(p * logq.gather(1, ids.clamp_min(0))).sum(-1)  # (N,)
    keep = inside[:, 0]  # the greedy token is in the sub-vocabulary
    agree = (logq.argmax(-1) == ids[:, 0]) & keep
    return loss[keep].mean(), agree.float().sum() / max(1, int(keep.numel()))


def train(config: DraftConfig, target_dir: str) -> Path:
    torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    work = Path(config.work) / "train"
    work.mkdir(parents=True, exist_ok=True)
    from transformers import AutoModelForCausalLM

    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32)
    train_rows = load_shards(config.work, "train")
    valid_rows = load_shards(config.work, "valid")[: config.valid_rows]
    V = target.config.vocab_size
    ranking = data_ranking(train_rows, V)
    vocab = torch.tensor(sorted(ranking[: config.vocab_size]))
    full_to_sub = torch.full((V,), -1, dtype=torch.long)
    full_to_sub[vocab] = torch.arange(len(vocab))
    draft = shared_draft_from_target(target, config.init_layers)
    del target
    head = draft.lm_head.weight[vocab].detach()  # (V', d) the target's output rows, frozen
    params = [p for n, p in draft.named_parameters() if "embed_tokens" not in n and "lm_head" not in n]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0, betas=(0.9, 0.98))

    def make_step(step: int):
        rng = random.Random(config.seed + step)

        def train_step():
            loss, agree = distill_loss(draft, head, collate(rng.sample(train_rows, config.batch_size), full_to_sub))
            return loss, {"loss": loss, "top1": agree}

        return train_step

    return train_loop(
        work, config, draft, params, opt, "draft", lambda: _trained_state(draft), make_step,
        lambda: _evaluate(draft, head, valid_rows, full_to_sub),
    )


def train_loop(work: Path, config, model, params, opt, key: str, trained_state, make_step, evaluate) -> Path:
    """The draft and head recipes' loop: resume from ``work/ckpt.pt`` (``key``: the model's entry),
    the warm-up + cosine LR (``lr_warm_cosine``), AdamW steps with the gradient clipped to 1, an
    evaluation, a JSONL log record and a checkpoint every ``config.eval_every`` steps.
    make_step(step): the step function for a run resumed at ``step`` (its data RNGs seeded by it),
    returning (loss, {name: value shown as train_name}); evaluate(): {name: value}."""
    step, ckpt = 0, work / "ckpt.pt"
    if ckpt.exists():
        state = torch.load(ckpt)
        model.load_state_dict(state[key], strict=False)
        opt.load_state_dict(state["opt"])
        step = state["step"]
    train_step = make_step(step)
    start, log = time.time(), (work / "log.jsonl").open("a")
    if step == 0:
        log.write(json.dumps({"step": 0, **evaluate(), "config": asdict(config)}) + "\n")
    model.train()
    while step < config.steps and (time.time() - start) / 60 < config.max_minutes:
        lr = lr_warm_cosine(step, config.steps, config.warmup, config.lr)
        for group in opt.param_groups:
            group["lr"] = lr
        loss, shown = train_step()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        if step % config.eval_every == 0 or step == config.steps:
            record = {
                "step": step,
                **{f"train_{k}": round(v.item(), 4) for k, v in shown.items()},
                "lr": lr,
                "minutes": round((time.time() - start) / 60, 2),
                **evaluate(),
            }
            log.write(json.dumps(record) + "\n")
            log.flush()
            print(record, flush=True)
            _save(ckpt, {key: trained_state(), "opt": opt.state_dict(), "step": step})
    _save(ckpt, {key: trained_state(), "opt": opt.state_dict(), "step": step})
    return ckpt


@torch.no_grad()
def _evaluate(draft, head, rows, full_to_sub, batch_size: int = 16) -> dict:
    draft.eval()
    losses, agrees, n = 0.0, 0.0, 0
    for i in range(0, len(rows), batch_size):
        chunk = rows[i : i + batch_size]
        loss, agree = distill_loss(draft, head, collate(chunk, full_to_sub))
        losses += loss.item() * len(chunk)
        agrees += agree.item() * len(chunk)
        n += len(chunk)
    draft.train()
    return {"valid_loss": round(losses / n, 4), "valid_top1": round(agrees / n, 4)}


def _trained_state(draft) -> dict:
    return {k: v for k, v in draft.state_dict().items() if "embed_tokens" not in k and "lm_head" not in k}


def _save(path: Path, obj) -> None:
    with atomic_path(path) as tmp:
        torch.save(obj, tmp)


def export(config: DraftConfig, target_dir: str) -> Path:
    """models/smollm2-draft: the trained layers and norm in fp16, config, token ranking, README
    figures are written by hand from the logs."""
    from transformers import AutoModelForCausalLM

    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32)
    draft = shared_draft_from_target(target, config.init_layers)
    state = torch.load(Path(config.work) / "train" / "ckpt.pt")
    draft.load_state_dict(state["draft"], strict=False)
    out = Path(config.out)
    save_shared_draft(draft, out)
    ranking = data_ranking(load_shards(config.work, "train"), target.config.vocab_size)
    save_token_ranking(out, ranking, "token counts of the self-distillation training shards")
    return out
