"""Recipe for the draft head under models/smollm2-head/ (`specvideo train smollm2-head`).

Data: the self-distillation shards of ``specvideo train smollm2-draft-data`` (the target's own
greedy replies to training prompts). ``features`` runs the target once over every row and caches
its final-normed hidden states (fp16) and its top-K log-probabilities at every position, prompt
included. ``train`` fits the head (``specvideo.text.models.head``): at slot j it reads x_j and f_{j-1}
(zeros at j = 0; noise on the features, as EAGLE does, for drafting on its own predictions) and is
trained on

    loss = CE(softmax(h_j W_vocab^T), target top-K at j)  +  reg_weight * SmoothL1(h_j, f_j)

over the FR-Spec vocabulary (the ``vocab_size`` most frequent tokens of the data; the target's
top-K renormalised inside it). With ``ttt_steps`` S > 1 the head is also trained on its own
predicted features, EAGLE-3's training-time test (``unroll``): step s feeds it h^{s-1}_{j-1} in
place of f_{j-1} and lets position j attend to the true-feature keys up to j - s and to one key of
each earlier step on its diagonal, exactly the context a depth-(s+1) draft has at decode time; the
loss is averaged over the steps. With ``feature_layers`` (EAGLE-3) the cached features are those
layers' ``layer_features`` (T, n d) and the head reads them through its ``fuse``; the regression
target stays the final state (EAGLE-3 drops that term: ``reg_weight`` 0). ``init_head`` starts from
an exported head (a head without ``fuse`` gets one that passes the final state through). Checkpoints by temp
file and rename every ``eval_every`` steps; a rerun resumes. Validation rows come from the
``valid`` shards (prompts from another seed).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from recipes.draft import _save, data_ranking, load_shards, train_loop
from specvideo.text.models.head import DraftHead, load_head, save_head
from specvideo.text.models.vocab import save_token_ranking
from specvideo.text.runtime.contract import layer_features


@dataclass(frozen=True)
class HeadConfig:
    target: str = "smollm2"  # or qwen-coder (its bf16 conversion: the features it verifies with)
    data: str = "runs/smollm2-draft"  # the smollm2-draft-data work directory (its data/ shards)
    work: str = "runs/smollm2-head"  # features/ and train/ go here
    out: str = "models/smollm2-head"
    init_layer: int | None = -1  # the target's last layer (its features' own producer)
    intermediate_size: int | None = None  # narrow the MLP (the head's size budget); None: the target's
    vocab_size: int = 4096  # FR-Spec rows trained (the head drafts from the 2048 most frequent)
    top_k: int = 20
    batch_size: int = 16
    lr: float = 5e-4
    warmup: int = 20
    steps: int = 800
    max_minutes: float = 60.0
    reg_weight: float = 1.0
    feature_noise: float = 0.2  # uniform noise on the input features, in units of their RMS
    eval_every: int = 50
    valid_rows: int = 96
    ttt_steps: int = 1  # S: steps unrolled on the head's own features (1 = teacher forcing only)
    init_head: str | None = None  # an exported head to start from (None: from the target's layer)
    feature_layers: tuple[int, ...] | None = None  # EAGLE-3: the target's states the head fuses (the last the final)
    seed: int = 0
    threads: int = 2


HEAD_DEFAULTS = {
    "smollm2": {},
    "qwen-coder": {
        "data": "runs/qwen-coder-head",
        "work": "runs/qwen-coder-head",
        "out": "models/qwen-coder-head",
        "intermediate_size": 896,  # 14.4M parameters, 28.7 MB in fp16 (the budget is 30 MB)
        "vocab_size": 8192,
        "batch_size": 8,
    },
}


def head_config(target: str = "smollm2", **overrides) -> HeadConfig:
    """The recipe's settings for a target, with ``overrides`` (None values ignored)."""
    if target not in HEAD_DEFAULTS:
        raise ValueError(f"a draft head is trained for {', '.join(HEAD_DEFAULTS)}, got {target!r}")
    given = {k: v for k, v in overrides.items() if v is not None}
    return HeadConfig(target=target, **{**HEAD_DEFAULTS[target], **given})


def layer_index(target, init_layer: int | None) -> int | None:
    return None if init_layer is None else init_layer % target.config.num_hidden_layers


@torch.inference_mode()
def compute_features(config: HeadConfig, target) -> Path:
    """``<work>/features/<split>.pt``: per row the token ids, the target's features (T, d) fp16 (with
    ``feature_layers``: (T, n d)) and its top-K ids / log-probabilities at every position (T, K)."""
    torch.set_num_threads(config.threads)
    out = Path(config.work) / "features"
    out.mkdir(parents=True, exist_ok=True)
    for split in ("valid", "train"):
        path = out / f"{split}.pt"
        if path.exists():
            continue
        rows, start = [], time.time()
        for row in load_shards(config.data, split):
            ids = row["ids"].long()[None]  # (1, T)
            result = target(ids, output_hidden_states=True)
            logp = torch.log_softmax(result.logits[0].float(), dim=-1)  # (T, V)
            top_logp, top_ids = logp.topk(config.top_k, dim=-1)
            rows.append(
                {
                    "ids": row["ids"],
                    "start": row["start"],
                    "source": row.get("source", ""),
                    "features": _features(result.hidden_states, config.feature_layers)[0].to(torch.float16),
                    "top_ids": top_ids.to(torch.int32),
                    "top_logp": top_logp.to(torch.float16),
                }
            )
        _save(path, {"rows": rows})
        print(f"{split}: {len(rows)} rows in {time.time() - start:.0f} s", flush=True)
    return out


def _features(hidden_states, layers: tuple[int, ...] | None) -> torch.Tensor:
    return layer_features(hidden_states, layers) if layers else hidden_states[-1]  # (B, T, n d)


def collate(rows: list[dict], full_to_sub: torch.Tensor, noise: float, g: torch.Generator | None, width: int = 0):
    """Right-padded batch: ids (B, T), mask (B, T), input features f_{j-1} (B, T, n d) (zeros at
    j = 0, noised; fused by the head), target features f_j (B, T, d) (the final state), sub-vocabulary
    top-K ids (B, T, K) (-1 outside) and probabilities (B, T, K). ``width``: d (0: all of a row's
    features are the final state)."""
    T = max(len(r["ids"]) for r in rows)
    B, d, K = len(rows), rows[0]["features"].shape[1], rows[0]["top_ids"].shape[1]
    ids = torch.zeros(B, T, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.long)
    f = torch.zeros(B, T, d)
    top_ids = torch.full((B, T, K), -1, dtype=torch.long)
    probs = torch.zeros(B, T, K)
    for b, r in enumerate(rows):
        n = len(r["ids"])
        ids[b, :n], mask[b, :n] = r["ids"].long(), 1
        f[b, :n] = r["features"].float()
        top_ids[b, :n] = full_to_sub[r["top_ids"].long()]
        probs[b, :n] = r["top_logp"].float().exp()
    inputs = torch.cat([torch.zeros(B, 1, d), f[:, :-1]], dim=1)  # (B, T, n d) f_{j-1}
    if noise:
        rms = inputs.pow(2).mean().sqrt()
        inputs = inputs + noise * rms * (2 * torch.rand(inputs.shape, generator=g) - 1)
    return ids, mask, inputs, f[..., -width:] if width else f, top_ids, probs


def unroll_mask(mask: torch.Tensor, s: int) -> torch.Tensor:
    """(B, T) padding mask -> (B, 1, T, (s + 1) T) bool: at step s, query j sees the step-0 keys
    i <= j - s and, of each step r = 1..s, the key at j - s + r (the drafted chain it extends)."""
    T = mask.shape[1]
    j, i = torch.arange(T)[:, None], torch.arange(T)[None, :]
    blocks = [i <= j - s] + [i == j - s + r for r in range(1, s + 1)]  # (T, T) each
    keys = mask.bool().repeat(1, s + 1)  # (B, (s + 1) T)
    return (torch.cat(blocks, dim=1)[None] & keys[:, None])[:, None]


def unroll(
    head: DraftHead, ids: torch.Tensor, inputs: torch.Tensor, mask: torch.Tensor, steps: int
) -> list[torch.Tensor]:
    """EAGLE-3's training-time test: h^0 from the true features f_{j-1} (B, T, n d, fused), then each step s
    from the previous step's own predictions h^{s-1}_{j-1}, over a cache holding every earlier step's
    keys (``unroll_mask``). Returns [h^0 .. h^{S-1}], each (B, T, d)."""
    from transformers import DynamicCache

    from specvideo.text.runtime.state import forward_kwargs

    model = head.llama.model
    cache_name = forward_kwargs(model).cache  # transformers 5: "cache"; 4.x: "past_key_values"
    embeds = model.embed_tokens(ids)  # (B, T, d)
    positions = torch.arange(ids.shape[1])[None].expand_as(ids)
    cache, features, out = DynamicCache(config=head.config), head.fused(inputs), []
    for s in range(steps):
        u = head.fc(torch.cat([embeds, features.to(embeds.dtype)], dim=-1))  # (B, T, d)
        h = model(
            inputs_embeds=u,
            attention_mask=unroll_mask(mask, s),
            position_ids=positions,
            use_cache=True,
            **{cache_name: cache},
        ).last_hidden_state
        out.append(h)
        features = torch.cat([torch.zeros_like(h[:, :1]), h[:, :-1]], dim=1)  # h^s_{j-1}
    return out


def head_loss(
    head: DraftHead, rows_w: torch.Tensor, batch, reg_weight: float, steps: int = 1
) -> dict[str, torch.Tensor]:
    """Soft cross-entropy to the target's top-K inside the sub-vocabulary, feature regression, and
    top-1 agreement with the target's argmax, over the real positions, averaged over ``steps``
    unrolled steps (``unroll``; position j of step s counts from j = s on); ``top1_s<s>`` per step."""
    ids, mask, inputs, f, top_ids, probs = batch
    hs = unroll(head, ids, inputs, mask, steps) if steps > 1 else [head(ids, head.fused(inputs), mask)]
    total, record = 0.0, {}
    for s, h in enumerate(hs):
        real = mask.bool() & (torch.arange(mask.shape[1]) >= s)[None]
        logq = torch.log_softmax(h[real] @ rows_w.T, dim=-1)  # (N, V')
        tid, p = top_ids[real], probs[real]  # (N, K)
        inside = tid >= 0
        p = p * inside
        p = p / p.sum(-1, keepdim=True).clamp_min(1e-8)
        ce = -(p * logq.gather(1, tid.clamp_min(0))).sum(-1)  # (N,)
        keep = inside[:, 0]  # the target's argmax is in the sub-vocabulary
        reg = F.smooth_l1_loss(h[real], f[real])
        total = total + ce[keep].mean() + reg_weight * reg
        top1 = ((logq.argmax(-1) == tid[:, 0]) & keep).float().mean()
        record.update({"ce": ce[keep].mean(), "reg": reg, "top1": top1} if s == 0 else {f"top1_s{s}": top1})
    return {"loss": total / len(hs), **record}


def train(config: HeadConfig, target) -> Path:
    torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    work = Path(config.work) / "train"
    work.mkdir(parents=True, exist_ok=True)
    train_rows = torch.load(Path(config.work) / "features" / "train.pt")["rows"]
    valid_rows = torch.load(Path(config.work) / "features" / "valid.pt")["rows"][: config.valid_rows]
    V = target.config.vocab_size
    vocab = torch.tensor(sorted(data_ranking(train_rows, V)[: config.vocab_size]))
    full_to_sub = torch.full((V,), -1, dtype=torch.long)
    full_to_sub[vocab] = torch.arange(len(vocab))
    head = DraftHead.from_target(
        target, layer_index(target, config.init_layer), config.intermediate_size, config.feature_layers
    )
    if config.init_head:  # its fc, layer and norm; a fuse it lacks stays the pass-through
        head.load_state_dict(load_head(config.init_head, target).trained_state(), strict=False)
    head = head.float().train()
    rows_w = target.lm_head.weight[vocab].detach().float()  # (V', d) frozen
    params = [p for n, p in head.named_parameters() if "embed_tokens" not in n and "lm_head" not in n]
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0, betas=(0.9, 0.95))
    d = head.config.hidden_size

    def make_step(step: int):
        rng, g = random.Random(config.seed + step), torch.Generator().manual_seed(config.seed + step)

        def train_step():
            batch = collate(rng.sample(train_rows, config.batch_size), full_to_sub, config.feature_noise, g, d)
            out = head_loss(head, rows_w, batch, config.reg_weight, config.ttt_steps)
            return out["loss"], out

        return train_step

    return train_loop(
        work, config, head, params, opt, "head", head.trained_state, make_step,
        lambda: _evaluate(head, rows_w, valid_rows, full_to_sub, config),
    )


@torch.no_grad()
def _evaluate(head, rows_w, rows, full_to_sub, config: HeadConfig, batch_size: int = 16) -> dict:
    head.eval()
    sums, n = {}, 0
    for i in range(0, len(rows), batch_size):
        chunk = rows[i : i + batch_size]
        out = head_loss(
            head, rows_w, collate(chunk, full_to_sub, 0.0, None, head.config.hidden_size), config.reg_weight, config.ttt_steps
        )
        for k, v in out.items():
            sums[k] = sums.get(k, 0.0) + v.item() * len(chunk)
        n += len(chunk)
    head.train()
    return {f"valid_{k}": round(v / n, 4) for k, v in sums.items()}


@torch.inference_mode()
def chain_acceptance(
    head: DraftHead, rows: list[dict], vocab: torch.Tensor | None, k: int = 5, stride: int = 4
) -> list[float]:
    """Greedy acceptance per draft position on stored replies (they are the target's greedy
    continuations): from every ``stride``-th reply position t, the head (run as at decode time, by
    LeanLlama, FR-Spec ``vocab``) drafts k tokens feeding its own features after the first; position
    i counts as accepted when the first i drafted tokens all equal the reply's. Returns, per
    position, accepted / drafted."""
    from specvideo.text.runtime.lean import LeanLlama
    from specvideo.text.runtime.state import CausalLMState

    lean = LeanLlama(head.llama, vocab, fc=head.fc)
    hits, tries = [0] * k, [0] * k
    for row in rows:
        ids, f = row["ids"].long(), row["features"].float()
        inputs = head.fused(torch.cat([torch.zeros(1, f.shape[1]), f[:-1]]))  # (T, d) f_{j-1}
        start = row["start"]
        state = CausalLMState(
            lean, ids[None, :start], torch.ones(1, start, dtype=torch.long), features=inputs[None, :start]
        )
        state.keep_hidden = True
        state.forward()
        for t in range(start, len(ids) - 1):  # the head has seen x_0 .. x_t-1 with true features
            state.push(ids[None, t : t + 1], features=inputs[None, t : t + 1])
            if (t - start) % stride or t + k >= len(ids):
                state.forward()
                continue
            mark = state.num_tokens + 1  # x_t's slot stays, the drafted ones go
            logits, ok = state.forward()[0, -1], True
            for i in range(k):
                token = int(logits.argmax())
                ok = ok and token == int(ids[t + 1 + i])
                tries[i] += 1
                hits[i] += int(ok)
                if i < k - 1:
                    logits = state.forward(torch.tensor([[token]]), features=state.hidden[:, -1:])[0, -1]
            state.truncate(mark)
    return [h / n if n else 0.0 for h, n in zip(hits, tries)]


def export(config: HeadConfig, target) -> Path:
    """``config.out`` (models/smollm2-head, models/qwen-coder-head): fc, the layer and the norm in
    fp16, its config and the token ranking (README figures are written by hand from the logs)."""
    head = DraftHead.from_target(
        target, layer_index(target, config.init_layer), config.intermediate_size, config.feature_layers
    )
    head.load_state_dict(torch.load(Path(config.work) / "train" / "ckpt.pt")["head"], strict=False)
    out = save_head(head, config.out)
    rows = torch.load(Path(config.work) / "features" / "train.pt")["rows"]
    save_token_ranking(
        out,
        data_ranking(rows, target.config.vocab_size),
        "token counts of the self-distillation training shards"
        if config.target == "smollm2"
        else "token counts of the training rows (recipes.code_data: real Python source, and the target's own chat replies when the data has them)",
    )
    return out
