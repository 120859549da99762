"""Acceptance rules: pure tensor functions, one per rule.

Notation (Leviathan et al. 2023, Chen et al. 2023): p = target distribution, q = draft
distribution, k = draft length, tau = acceptance threshold. Every rule returns a ``Verdict`` with the
length of the accepted prefix of each row; positions at or beyond ``lengths[b]`` are padding and are
never accepted.
"""

from __future__ import annotations

import torch

from specvideo.core.types import Verdict


def greedy_match(target_tokens: torch.Tensor, draft_tokens: torch.Tensor, lengths: torch.Tensor) -> Verdict:
    """Accept drafted tokens while they equal the target's argmax.

    target_tokens: (B, k+1) argmax of the target at each drafted position plus the bonus position.
    draft_tokens:  (B, k)
    lengths:       (B,) number of real drafted tokens per row.
    The next token is the target's own token at the first mismatch (or the bonus token).
    """
    k = draft_tokens.shape[1]
    match = (target_tokens[:, :k] == draft_tokens) & _valid(lengths, k)  # (B, k)
    num_accepted = _prefix_length(match)  # (B,)
    next_token = target_tokens.gather(1, num_accepted[:, None]).squeeze(1)  # (B,)
    return Verdict(num_accepted=num_accepted, next_item=next_token)


def rejection_sample(
    p: torch.Tensor,
    q: torch.Tensor | None,
    draft_tokens: torch.Tensor,
    lengths: torch.Tensor,
    generator: torch.Generator | None = None,
) -> Verdict:
    """Exact speculative sampling: the output is distributed as p, whatever q is.

    p:            (B, k+1, V) target probabilities at each drafted position and the bonus position.
    q:            (B, k, V) draft probabilities the tokens were sampled from, or None for a
                  deterministic drafter (q is then one-hot at the drafted token, e.g. n-gram lookup).
    draft_tokens: (B, k)
    Token x_i is accepted with probability min(1, p(x_i) / q(x_i)). At the first rejection the next
    token is sampled from normalize(max(0, p - q)); when all pass, the bonus token from p at k+1.
    """
    B, k1, V = p.shape
    k = k1 - 1
    p_x = p[:, :k].gather(2, draft_tokens[:, :, None]).squeeze(2)  # (B, k)
    q_x = torch.ones_like(p_x) if q is None else q.gather(2, draft_tokens[:, :, None]).squeeze(2)  # (B, k)
    u = uniform((B, k), generator, p.device)  # (B, k) in [0, 1)
    accept = (u * q_x < p_x) & _valid(lengths, k)  # (B, k)
    num_accepted = _prefix_length(accept)  # (B,)
    p_next = p.gather(1, num_accepted[:, None, None].expand(B, 1, V)).squeeze(1)  # (B, V)
    residual = torch.clamp(
        p_next - _draft_at(q, draft_tokens, num_accepted, lengths, p_next), min=0
    )  # (B, V)
    # The residual is empty only when p == q there, where rejection has probability 0; guard anyway.
    empty = residual.sum(-1, keepdim=True) <= 0  # (B, 1)
    residual = torch.where(empty, p_next, residual)
    next_token = sample_categorical(residual, generator)  # (B,)
    return Verdict(num_accepted=num_accepted, next_item=next_token)


def threshold_accept(scores: torch.Tensor, tau: float, lengths: torch.Tensor) -> Verdict:
    """Accept the longest prefix whose score is >= tau (video: similarity of draft and refinement).

    scores: (B, k). The correction is produced later by the verifier (``next_item`` is None).
    """
    k = scores.shape[1]
    passed = (scores >= tau) & _valid(lengths, k)  # (B, k)
    return Verdict(num_accepted=_prefix_length(passed), scores=scores)


def sample_categorical(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Inverse-CDF sampling from unnormalised probabilities (N, V) -> (N,).

    Uses one uniform per row from ``generator`` on whatever device it lives; a token with zero
    probability is never returned.
    """
    cdf = probs.cumsum(-1)  # (N, V)
    u = 1.0 - uniform((probs.shape[0], 1), generator, probs.device)  # (N, 1) in (0, 1]
    idx = (cdf < u * cdf[:, -1:]).sum(-1)  # (N,)
    return idx.clamp(max=probs.shape[-1] - 1)


def uniform(shape: tuple[int, ...], generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    """U[0, 1) drawn from ``generator`` (on its own device), returned on ``device``."""
    gen_device = generator.device if generator is not None else torch.device("cpu")
    return torch.rand(shape, generator=generator, device=gen_device).to(device)


def _valid(lengths: torch.Tensor, k: int) -> torch.Tensor:
    return torch.arange(k, device=lengths.device)[None, :] < lengths[:, None]  # (B, k)


def _prefix_length(ok: torch.Tensor) -> torch.Tensor:
    """(B, k) bool -> (B,) length of the all-True prefix."""
    return ok.long().cumprod(dim=1).sum(dim=1)


def _draft_at(
    q: torch.Tensor | None,
    draft_tokens: torch.Tensor,
    index: torch.Tensor,
    lengths: torch.Tensor,
    like: torch.Tensor,
) -> torch.Tensor:
    """q at the rejected position (zeros at the bonus position or past a row's draft) -> (B, V)."""
    B, k = draft_tokens.shape
    V = like.shape[-1]
    inside = index < torch.minimum(lengths, torch.full_like(lengths, k))  # (B,)
    safe = index.clamp(max=max(k - 1, 0))
    if k == 0:
        return torch.zeros_like(like)
    if q is None:
        q_at = torch.zeros_like(like)
        q_at.scatter_(1, draft_tokens.gather(1, safe[:, None]), 1.0)  # one-hot of the drafted token
    else:
        q_at = q.gather(1, safe[:, None, None].expand(B, 1, V)).squeeze(1)  # (B, V)
    return q_at * inside[:, None]
