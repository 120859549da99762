"""Recipe for the shipped code-completion pair under models/text/ (`specvideo train text`).

Stages (each resumable, each logging to <work>/<stage>/log.jsonl):
  tokenizer  byte-level BPE (~8k) on the train split of the stdlib corpus
  sizes      short runs of several target sizes, compared by held-out loss
  target     a Llama-architecture causal LM (context 512) trained on the train split
  draft      a much smaller Llama distilled from the target (KL to the target's logits)
  draft-more further distillation of the saved draft (repeatable: round i logs to draft-more-i)
  draft-vocab  the train split's token ranking beside the draft (the draft stages write it too)
The held-out modules (benchmarks.text.corpus.HELD_OUT_MODULES) are only ever evaluated on.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from benchmarks.text.corpus import corpus_files, read_sources
from specvideo.files import atomic_dir
from specvideo.text.models.vocab import save_token_ranking, token_ranking

EOS = "<|endoftext|>"
PAD = "<pad>"
RANKING_SOURCE = "token counts of the train split (held-out modules excluded)"


@dataclass(frozen=True)
class ModelSize:
    hidden: int
    layers: int
    heads: int
    intermediate: int


TARGET_SIZES = {
    "s": ModelSize(hidden=192, layers=4, heads=6, intermediate=512),
    "m": ModelSize(hidden=256, layers=6, heads=8, intermediate=704),
    "l": ModelSize(hidden=384, layers=6, heads=6, intermediate=1024),
}
DRAFT_SIZE = ModelSize(hidden=128, layers=1, heads=4, intermediate=384)


@dataclass(frozen=True)
class TrainConfig:
    out: str = "models/text"
    work: str = "runs/text"
    vocab_size: int = 8192
    context: int = 512
    seq_len: int = 512
    batch_size: int = 8
    lr: float = 1.5e-3
    min_lr_ratio: float = 0.1
    warmup: int = 100
    weight_decay: float = 0.1
    target_size: str | None = None  # None: the size that won the "sizes" stage
    size_steps: int = 200  # per size in the comparison (equal tokens for every size)
    sizes: tuple[str, ...] = ("s", "m")
    target_minutes: float = 45.0
    draft_minutes: float = 12.0
    draft_lr: float = 3e-3
    draft_more_lr: float = 1e-3  # "draft-more": further distillation of the saved draft
    eval_windows: int = 64
    eval_every: int = 100
    checkpoint_minutes: float = 5.0
    max_minutes: float = 150.0
    seed: int = 0
    device: str = "cpu"


# ---------------------------------------------------------------- tokenizer and data


def train_tokenizer(cfg: TrainConfig) -> PreTrainedTokenizerFast:
    from tokenizers import ByteLevelBPETokenizer

    path = Path(cfg.work) / "tokenizer"
    if (path / "tokenizer.json").exists():
        return PreTrainedTokenizerFast.from_pretrained(path)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        read_sources(corpus_files("train")), vocab_size=cfg.vocab_size, special_tokens=[EOS, PAD]
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token=EOS, eos_token=EOS, pad_token=PAD, unk_token=None
    )
    tok.model_max_length = cfg.context
    tok.save_pretrained(path)
    return tok


def token_array(cfg: TrainConfig, tok: PreTrainedTokenizerFast, split: str) -> np.ndarray:
    """All files of a split, each followed by EOS, as one uint16 array (cached)."""
    cache = Path(cfg.work) / f"{split}.npy"
    if cache.exists():
        return np.load(cache)
    ids: list[int] = []
    for text in read_sources(corpus_files(split)):
        ids.extend(tok(text)["input_ids"])
        ids.append(tok.eos_token_id)
    arr = np.asarray(ids, dtype=np.uint16)
    np.save(cache, arr)
    return arr


def batch_windows(data: np.ndarray, starts: np.ndarray, seq_len: int) -> torch.Tensor:
    return torch.from_numpy(
        np.stack([data[s : s + seq_len + 1] for s in starts]).astype(np.int64)
    )  # (B, T+1)


def eval_starts(data: np.ndarray, cfg: TrainConfig) -> np.ndarray:
    """Evenly spaced, fixed held-out windows."""
    return np.linspace(0, len(data) - cfg.seq_len - 2, cfg.eval_windows).astype(np.int64)


# ---------------------------------------------------------------- models


def make_llama(size: ModelSize, cfg: TrainConfig, tok: PreTrainedTokenizerFast) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=size.hidden,
        intermediate_size=size.intermediate,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=size.heads,
        max_position_embeddings=cfg.context,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
        rope_theta=10000.0,
    )
    return LlamaForCausalLM(config)


def num_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------- training loop


@torch.no_grad()
def heldout_loss(model: LlamaForCausalLM, data: np.ndarray, cfg: TrainConfig) -> float:
    model.eval()
    losses = []
    for chunk in np.array_split(eval_starts(data, cfg), max(1, cfg.eval_windows // cfg.batch_size)):
        batch = batch_windows(data, chunk, cfg.seq_len).to(cfg.device)
        logits = model(input_ids=batch[:, :-1]).logits  # (B, T, V)
        losses.append(F.cross_entropy(logits.flatten(0, 1).float(), batch[:, 1:].flatten()).item())
    model.train()
    return float(np.mean(losses))


def lr_at(step: int, total: int, cfg, peak: float) -> float:
    """Linear warm-up over cfg.warmup steps, then cosine down to cfg.min_lr_ratio * peak."""
    if step < cfg.warmup:
        return peak * (step + 1) / cfg.warmup
    progress = min(1.0, (step - cfg.warmup) / max(1, total - cfg.warmup))
    return peak * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def lr_warm_cosine(step: int, total: int, warmup: int, peak: float) -> float:
    """A cosine over all ``total`` steps down to 0, scaled by a linear warm-up over its first
    ``warmup``: the draft and head recipes' schedule (kept as it made their shipped weights)."""
    return peak * min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * step / total))


def train_loop(
    name: str,
    model: LlamaForCausalLM,
    loss_fn,
    train: np.ndarray,
    heldout: np.ndarray,
    minutes: float | None,
    peak_lr: float,
    cfg: TrainConfig,
    steps: int | None = None,
) -> dict:
    """Generic resumable loop: random windows of the train split, AdamW, cosine LR, checkpoints.

    Either ``steps`` is given, or the number of steps is fixed after 5 timed steps to fill
    ``minutes`` (and saved, so a resumed run keeps the same schedule); the log records it.
    """
    work = Path(cfg.work) / name
    work.mkdir(parents=True, exist_ok=True)
    model.to(cfg.device).train()
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=peak_lr,
        betas=(0.9, 0.95),
    )
    state = {
        "step": 0,
        "elapsed": 0.0,
        "steps": steps,
        "rng": np.random.default_rng(cfg.seed).bit_generator.state,
    }
    ckpt = work / "checkpoint.pt"
    if ckpt.exists():
        saved = torch.load(ckpt, weights_only=False)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        state = saved["state"]
    rng = np.random.default_rng()
    rng.bit_generator.state = state["rng"]
    log = (work / "log.jsonl").open("a")
    last_ckpt, start = time.time(), time.time() - state["elapsed"]
    bar = tqdm(total=state["steps"], initial=state["step"], desc=name, mininterval=10)
    while (state["steps"] is None or state["step"] < state["steps"]) and (
        time.time() - start
    ) / 60 < cfg.max_minutes:
        step = state["step"]
        if state["steps"] is None and step == 5:
            state["steps"] = max(10, int(minutes * 60 / (state["elapsed"] / 5)))
            bar.total = state["steps"]
        steps = state["steps"] or 10**9
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, cfg, peak_lr)
        batch = batch_windows(
            train, rng.integers(0, len(train) - cfg.seq_len - 2, cfg.batch_size), cfg.seq_len
        )
        loss = loss_fn(model, batch.to(cfg.device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        state["step"] = step + 1
        state["elapsed"] = time.time() - start
        bar.update(1)
        record = {
            "step": step + 1,
            "loss": round(loss.item(), 4),
            "lr": group["lr"],
            "minutes": state["elapsed"] / 60,
        }
        if (step + 1) % cfg.eval_every == 0 or step + 1 == steps:
            record["heldout_loss"] = round(heldout_loss(model, heldout, cfg), 4)
            bar.set_postfix(heldout=record["heldout_loss"])
        if (step + 1) % 10 == 0 or "heldout_loss" in record:
            log.write(json.dumps(record) + "\n")
            log.flush()
        if time.time() - last_ckpt > cfg.checkpoint_minutes * 60 or step + 1 == steps:
            state["rng"] = rng.bit_generator.state
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "state": state}, ckpt)
            last_ckpt = time.time()
    bar.close()
    return {
        "steps": state["step"],
        "minutes": state["elapsed"] / 60,
        "heldout_loss": heldout_loss(model, heldout, cfg),
    }


def lm_loss(model: LlamaForCausalLM, batch: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=batch[:, :-1]).logits  # (B, T, V)
    return F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())


def distill_loss(teacher: LlamaForCausalLM):
    """KL(p_target || q_draft) over every position: what maximises the draft's acceptance."""

    def loss(student: LlamaForCausalLM, batch: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            p_log = torch.log_softmax(teacher(input_ids=batch[:, :-1]).logits.float(), dim=-1)  # (B, T, V)
        q_log = torch.log_softmax(student(input_ids=batch[:, :-1]).logits, dim=-1)  # (B, T, V)
        return F.kl_div(q_log.flatten(0, 1), p_log.flatten(0, 1), log_target=True, reduction="batchmean")

    return loss


# ---------------------------------------------------------------- stages


def stage_sizes(cfg: TrainConfig, tok, train, heldout) -> dict:
    """Short equal-token runs of the candidate sizes (constant LR after warm-up); lowest held-out loss wins."""
    results = {}
    for name in cfg.sizes:
        size = TARGET_SIZES[name]
        torch.manual_seed(cfg.seed)
        model = make_llama(size, cfg, tok)
        short = replace(cfg, eval_every=10**9, warmup=20, min_lr_ratio=1.0)
        res = train_loop(
            f"sizes/{name}", model, lm_loss, train, heldout, None, cfg.lr, short, steps=cfg.size_steps
        )
        results[name] = {**res, "params": num_params(model), **asdict(size)}
    (Path(cfg.work) / "sizes.json").write_text(json.dumps(results, indent=2))
    return results


def stage_target(cfg: TrainConfig, tok, train, heldout) -> dict:
    size = cfg.target_size or chosen_size(cfg)
    torch.manual_seed(cfg.seed)
    model = make_llama(TARGET_SIZES[size], cfg, tok)
    res = train_loop("target", model, lm_loss, train, heldout, cfg.target_minutes, cfg.lr, cfg)
    save_model(model, tok, Path(cfg.out) / "target")
    return {**res, "params": num_params(model), "size": size}


def chosen_size(cfg: TrainConfig) -> str:
    sizes = Path(cfg.work) / "sizes.json"
    if not sizes.exists():
        raise ValueError(f"no {sizes}: run the 'sizes' stage first or pass a target size")
    results = json.loads(sizes.read_text())
    return min(results, key=lambda name: results[name]["heldout_loss"])


def stage_draft(cfg: TrainConfig, tok, train, heldout) -> dict:
    teacher = _frozen(Path(cfg.out) / "target", cfg.device)
    torch.manual_seed(cfg.seed + 1)
    student = make_llama(DRAFT_SIZE, cfg, tok)
    with torch.no_grad():  # start from the target's token embeddings, projected to the draft width
        u, s, v = torch.linalg.svd(teacher.model.embed_tokens.weight, full_matrices=False)
        student.model.embed_tokens.weight.copy_(u[:, : DRAFT_SIZE.hidden] * s[: DRAFT_SIZE.hidden].sqrt())
    res = train_loop(
        "draft", student, distill_loss(teacher), train, heldout, cfg.draft_minutes, cfg.draft_lr, cfg
    )
    save_model(student, tok, Path(cfg.out) / "draft", ranking=token_ranking(train, len(tok)))
    return {**res, "params": num_params(student)}


def stage_draft_more(cfg: TrainConfig, tok, train, heldout) -> dict:
    """Continue distilling the saved draft (<out>/draft) for ``draft_minutes`` more, with a fresh
    warm-up + cosine schedule peaking at ``draft_more_lr``; the result replaces <out>/draft.

    Each call is one round: an unfinished round resumes, a finished one is not run again, and the
    next round logs to <work>/draft-more-2, -3, ..."""
    for part in ("target", "draft"):
        if not (Path(cfg.out) / part / "config.json").is_file():
            raise ValueError(
                f"draft-more needs a trained {part} in {Path(cfg.out) / part}: run --stage {part} first"
            )
    teacher = _frozen(Path(cfg.out) / "target", cfg.device)
    student = LlamaForCausalLM.from_pretrained(Path(cfg.out) / "draft", dtype=torch.float32)
    res = train_loop(
        _unfinished_run(Path(cfg.work), "draft-more"),
        student,
        distill_loss(teacher),
        train,
        heldout,
        cfg.draft_minutes,
        cfg.draft_more_lr,
        cfg,
    )
    save_model(student, tok, Path(cfg.out) / "draft", ranking=token_ranking(train, len(tok)))
    return {**res, "params": num_params(student)}


def _unfinished_run(work: Path, name: str) -> str:
    """The first of name, name-2, name-3, ... whose checkpoint is missing or not at its last step."""
    run, i = name, 1
    while _finished(work / run / "checkpoint.pt"):
        i += 1
        run = f"{name}-{i}"
    return run


def _finished(checkpoint: Path) -> bool:
    if not checkpoint.exists():
        return False
    state = torch.load(checkpoint, weights_only=False)["state"]
    return state["steps"] is not None and state["step"] >= state["steps"]


def stage_draft_vocab(cfg: TrainConfig, tok, train, heldout) -> dict:
    """Rank the train split's tokens by frequency and save the ranking beside <out>/draft (the lean
    drafter's FR-Spec vocabulary; the draft stages write it too)."""
    draft = Path(cfg.out) / "draft"
    if not (draft / "config.json").is_file():
        raise ValueError(f"draft-vocab needs a trained draft in {draft}: run --stage draft first")
    ranking = token_ranking(train, len(tok))
    save_token_ranking(draft, ranking, RANKING_SOURCE)
    counts = np.bincount(train, minlength=len(tok))
    sizes = [n for n in VOCAB_SIZES if n < len(tok)] + [len(tok)]
    info = {"train_coverage": {n: float(counts[ranking[:n]].sum() / counts.sum()) for n in sizes}}
    if (Path(cfg.out) / "target" / "config.json").is_file():
        info["train_agreement"] = draft_agreement(cfg, ranking, sizes, train)
    return info


VOCAB_SIZES = (1024, 2048, 4096)


@torch.no_grad()
def draft_agreement(cfg: TrainConfig, ranking: list[int], sizes: list[int], train: np.ndarray) -> dict:
    """How often the draft's greedy token, restricted to the n most frequent tokens, equals the
    target's, over 12 random train windows (the train split: the choice of n never sees held-out data)."""
    target = _frozen(Path(cfg.out) / "target", cfg.device)
    draft = _frozen(Path(cfg.out) / "draft", cfg.device)
    starts = np.random.default_rng(cfg.seed + 2).integers(0, len(train) - cfg.seq_len - 1, 12)
    x = batch_windows(train, starts, cfg.seq_len)[:, :-1].to(cfg.device)  # (12, T)
    target_top = target(x).logits.argmax(-1)  # (12, T)
    draft_logits = draft(x).logits  # (12, T, V)
    out = {}
    for n in sizes:
        vocab = torch.tensor(ranking[:n], device=cfg.device)  # (n,)
        draft_top = vocab[draft_logits[..., vocab].argmax(-1)]  # (12, T)
        out[n] = float((draft_top == target_top).float().mean())
    return out


def _frozen(path: Path, device: str) -> LlamaForCausalLM:
    model = LlamaForCausalLM.from_pretrained(path, dtype=torch.float32).to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def save_model(model: LlamaForCausalLM, tok, path: Path, ranking: list[int] | None = None) -> None:
    """fp16 safetensors + tokenizer (+ the token ranking for a draft), written to a temp dir and
    renamed into place."""
    with atomic_dir(path, keep_others=False) as tmp:
        model.to(torch.float16).save_pretrained(tmp, safe_serialization=True)
        model.to(torch.float32)
        tok.save_pretrained(tmp)
        if ranking is not None:
            save_token_ranking(tmp, ranking, RANKING_SOURCE)


STAGES = ("all", "tokenizer", "sizes", "target", "draft", "draft-more", "draft-vocab")


def run(stage: str, cfg: TrainConfig) -> dict:
    """Run one stage ("tokenizer", "sizes", "target", "draft", "draft-more", "draft-vocab") or "all"
    (sizes, target, draft)."""
    torch.set_num_threads(max(1, torch.get_num_threads()))
    Path(cfg.work).mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(cfg)
    train, heldout = token_array(cfg, tok, "train"), token_array(cfg, tok, "heldout")
    info = {"tokenizer_vocab": len(tok), "train_tokens": len(train), "heldout_tokens": len(heldout)}
    stages = {
        "sizes": stage_sizes,
        "target": stage_target,
        "draft": stage_draft,
        "draft-more": stage_draft_more,
        "draft-vocab": stage_draft_vocab,
    }
    todo = ["sizes", "target", "draft"] if stage == "all" else [] if stage == "tokenizer" else [stage]
    for name in todo:
        if name not in stages:
            raise ValueError(
                f"unknown stage {name!r}; choose tokenizer, sizes, target, draft, draft-more, draft-vocab or all"
            )
        info[name] = stages[name](cfg, tok, train, heldout)
        results = Path(cfg.work) / "results.json"
        previous = json.loads(results.read_text()) if results.exists() else {}
        results.write_text(json.dumps({**previous, **info, "config": asdict(cfg)}, indent=2))
    return info
