"""GRPO as pure functions: group advantages, the clipped token-level loss, filtering, staleness.

The recipe is INTELLECT-2's (Prime Intellect, 2025, §3.3-3.4), itself DeepSeek's GRPO with the
fixes that kept a 32B run stable:

- n completions per prompt form a group; advantage = (r - mean_group) / (std_group + 1e-6),
  one scalar per completion, broadcast to its tokens.
- token-level PPO clipping with ε = 0.2; for negative advantages the ratio is also bounded from
  above by δ = 4 ("two-sided clipping"), so one token whose probability exploded cannot give an
  unbounded gradient.
- the loss is a *sum* over tokens divided by a constant (max tokens per batch), not a per-sample
  mean: long and short completions weigh the same per token (no length bias).
- no KL term by default; groups where every completion got the same reward carry no signal and
  are dropped before training (online filtering).

Everything here is a function of tensors/floats, so the unit tests can check each term by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from intellect.agents.recipe import MAX_ABS_ADVANTAGE
from intellect.sdk import IntellectError
from intellect.verifier.submission import group_advantages, is_fresh  # the protocol's rules, re-exported

__all__ = [
    "MAX_ABS_ADVANTAGE",
    "GRPOLossStats",
    "StaleRolloutError",
    "UntrustedValueError",
    "check_reward",
    "check_staleness",
    "filter_zero_advantage_groups",
    "group_advantages",
    "grpo_loss",
    "is_fresh",
    "recompute_advantages",
]

REWARD_RANGE = (-2.0, 1.0)
"""Bounds of a verified total reward: task reward in [0, 1] minus a length penalty that stays under
1 for every budget the pools use (α = 3e-4 × a difference of < 3,300 tokens)."""


class UntrustedValueError(IntellectError, ValueError):
    """A number that came from another machine (reward, advantage) is not finite or out of range."""


class StaleRolloutError(IntellectError, ValueError):
    """A rollout was made with a policy older than the async level allows for this step."""

    def __init__(self, train_step: int, policy_step: int, async_level: int) -> None:
        self.train_step = train_step
        self.policy_step = policy_step
        self.async_level = async_level
        super().__init__(
            f"rollout of policy step {policy_step} is too stale for training step {train_step}: "
            f"{train_step} - {policy_step} > async_level {async_level}"
        )


def check_staleness(train_step: int, policy_step: int, async_level: int) -> None:
    """Raise `StaleRolloutError` unless `is_fresh(train_step, policy_step, async_level)`."""
    if not is_fresh(train_step, policy_step, async_level):
        if policy_step > train_step:
            raise ValueError(
                f"rollout claims policy step {policy_step}, newer than training step {train_step}"
            )
        raise StaleRolloutError(train_step, policy_step, async_level)


def check_reward(value: float, what: str = "reward") -> float:
    """`value` as a float if it is finite and inside `REWARD_RANGE`; `UntrustedValueError` otherwise."""
    v = float(value)
    lo, hi = REWARD_RANGE
    if not math.isfinite(v) or not lo <= v <= hi:
        raise UntrustedValueError(f"{what} {value!r} is not a finite number in [{lo}, {hi}]")
    return v


def recompute_advantages(rewards: Sequence[float], max_abs: float = MAX_ABS_ADVANTAGE) -> list[float]:
    """GRPO advantages of one group, from its (verified) rewards alone.

    The trainer never takes an advantage written by a worker: it recomputes them from the rewards
    with `group_advantages` and clamps them to ±`max_abs` (a no-op for a real group of ≤ 256).
    Raises `UntrustedValueError` on a non-finite or out-of-range reward.
    """
    checked = [check_reward(r, f"reward {i} of the group") for i, r in enumerate(rewards)]
    adv = group_advantages(torch.tensor([checked], dtype=torch.float64))[0]  # (n,)
    return adv.clamp(-max_abs, max_abs).tolist()


def filter_zero_advantage_groups(
    advantages: torch.Tensor, atol: float = 0.0
) -> torch.Tensor:
    """Boolean mask (G,) of the groups to keep: those with some non-zero advantage.

    advantages: (G, n). A group whose completions all earned the same reward has all-zero
    advantages, contributes zero gradient and would only dilute the constant-denominator loss.
    """
    return advantages.abs().amax(dim=1) > atol


@dataclass(frozen=True)
class GRPOLossStats:
    """Numbers worth logging for every optimizer step (cleanrl-style)."""

    loss: float
    clip_fraction: float
    """share of completion tokens whose ratio left [1-ε, 1+ε] (or hit δ) and so got no gradient"""
    approx_kl: float
    """k3 estimator of KL(old || new) over completion tokens: mean((r - 1) - log r)"""
    ratio_mean: float
    tokens: int


def grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    loss_denominator: float,
    epsilon: float = 0.2,
    delta: float = 4.0,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
) -> tuple[torch.Tensor, GRPOLossStats]:
    """Token-level clipped GRPO loss with INTELLECT-2's two-sided bound.

    logprobs:      (B, T) log π_θ(token) under the policy being optimised (requires grad)
    old_logprobs:  (B, T) log π_old(token), recomputed by the trainer before its first update
    advantages:    (B,) one advantage per completion, or (B, T) per token
    mask:          (B, T) 1 on completion tokens, 0 on prompt/padding
    loss_denominator: the constant C of the per-token normalisation (e.g. the number of
                   sequences × max completion tokens of the rollout step); the loss is
                   Σ_tokens ℓ / C, so every token has the same weight however long its sequence.

    Per token, with r = exp(logprobs - old_logprobs) and A the advantage:
        pg1 = -A · r
        pg2 = -A · clip(r, 1-ε, 1+ε)
        ℓ   = max(pg1, pg2)                      (PPO's pessimistic bound)
        ℓ   = min(ℓ, -A · δ)      if A < 0       (two-sided: r is capped at δ for A < 0)
    An optional k3 KL to a reference policy is added with `kl_coef` (off by default).
    """
    if loss_denominator <= 0:
        raise ValueError(f"loss_denominator must be > 0, got {loss_denominator}")
    if logprobs.shape != old_logprobs.shape or logprobs.shape != mask.shape:
        raise ValueError(
            f"shape mismatch: logprobs {tuple(logprobs.shape)}, old_logprobs "
            f"{tuple(old_logprobs.shape)}, mask {tuple(mask.shape)}"
        )
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(logprobs)  # (B,) -> (B, T)
    mask = mask.to(logprobs.dtype)
    advantages = advantages.to(logprobs.dtype)

    log_ratio = logprobs - old_logprobs.detach()
    ratio = torch.exp(log_ratio)  # (B, T)
    pg1 = -advantages * ratio
    pg2 = -advantages * torch.clamp(ratio, 1.0 - epsilon, 1.0 + epsilon)
    pg_max = torch.maximum(pg1, pg2)
    pg3 = -advantages * delta
    token_loss = torch.where(advantages < 0, torch.minimum(pg_max, pg3), pg_max)  # (B, T)

    if ref_logprobs is not None and kl_coef > 0:
        ref_log_ratio = ref_logprobs.detach() - logprobs
        token_loss = token_loss + kl_coef * (torch.exp(ref_log_ratio) - ref_log_ratio - 1.0)

    loss = (token_loss * mask).sum() / loss_denominator

    with torch.no_grad():
        n_tokens = int(mask.sum().item())
        denom = max(n_tokens, 1)
        clipped_low = (ratio < 1.0 - epsilon) & (advantages < 0)
        clipped_high = (ratio > 1.0 + epsilon) & (advantages > 0)
        clipped = (clipped_low | clipped_high | ((ratio > delta) & (advantages < 0))).to(mask.dtype)
        clip_fraction = float((clipped * mask).sum().item() / denom)
        approx_kl = float((((ratio - 1.0) - log_ratio) * mask).sum().item() / denom)
        ratio_mean = float((ratio * mask).sum().item() / denom)
    stats = GRPOLossStats(
        loss=float(loss.detach().item()),
        clip_fraction=clip_fraction,
        approx_kl=approx_kl,
        ratio_mean=ratio_mean,
        tokens=n_tokens,
    )
    return loss, stats


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log softmax(logits)[target] per position.

    logits: (B, T, V) already aligned so that logits[:, t] predicts targets[:, t]; targets (B, T).
    Returns (B, T) in float32 (logits are upcast: bf16 log-softmax is too coarse for ratios).
    """
    logits = logits.float()
    return torch.gather(torch.log_softmax(logits, dim=-1), -1, targets.unsqueeze(-1)).squeeze(-1)


def constant_denominator(n_sequences: int, max_completion_tokens: int) -> float:
    """The per-token normaliser: sequences × max completion tokens (a constant per run)."""
    if n_sequences <= 0 or max_completion_tokens <= 0:
        raise ValueError("n_sequences and max_completion_tokens must be positive")
    return float(n_sequences * max_completion_tokens)


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population std of a list (for logs); (nan, nan) for an empty one."""
    if not values:
        return math.nan, math.nan
    m = sum(values) / len(values)
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


__all__ += ["constant_denominator", "mean_std", "token_logprobs"]
