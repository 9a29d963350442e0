"""The GRPO recipe, declared once: `GRPOConfig`, one pydantic model with a doc per field (as TRL's `GRPOConfig`).

`intellect.agents.grpo_trainer.GRPOTrainer` takes it; the trainer agent's settings nest it (`trainer.grpo`, with
the agent's own defaults: `TrainerRecipe`) instead of redeclaring its fields. Light on purpose (pydantic only, no
torch) so that the agents' configuration can import it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MAX_ABS_ADVANTAGE", "GRPOConfig", "TrainerRecipe"]

MAX_ABS_ADVANTAGE = 16.0
"""Largest |advantage| a trainer takes. A normalised group advantage is at most (n − 1)/√n in
absolute value (one outlier among n equal rewards): 7.9 for n = 64, 11.2 for n = 128; anything
larger was not computed by `group_advantages` and is refused, never trained on."""


class GRPOConfig(BaseModel):
    """INTELLECT-2's GRPO hyperparameters (defaults as in the paper where it states them)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    lr: float = Field(3e-7, gt=0)
    """AdamW learning rate after warm-up (INTELLECT-2 used 3e-7 for 32B; small models want far more)"""
    warmup_steps: int = Field(0, ge=0)
    """optimizer updates over which the learning rate rises linearly from lr/warmup_steps to lr
    (INTELLECT-2 warmed up over its first 25 steps); 0: constant lr"""
    weight_decay: float = Field(0.01, ge=0)
    """AdamW weight decay"""
    betas: tuple[float, float] = (0.9, 0.99)
    """AdamW betas"""
    epsilon: float = Field(0.2, gt=0)
    """PPO clip range: the ratio is clipped to [1-ε, 1+ε]"""
    delta: float = Field(4.0, gt=1)
    """two-sided bound: for negative advantages the ratio counts at most δ"""
    max_grad_norm: float = Field(0.1, gt=0)
    """gradient-norm clip (INTELLECT-2: aggressive clipping kept the 32B run stable)"""
    optimizer_steps: int = Field(2, ge=1)
    """optimizer steps (mini-batches) per rollout step; old log-probs are from before the first"""
    max_completion_tokens: int = Field(128, ge=1)
    """the constant of the per-token loss denominator (sequences × this)"""
    kl_coef: float = Field(0.0, ge=0)
    """k3 KL to the initial policy; 0 (off) in INTELLECT-2"""
    async_level: int = Field(2, ge=0)
    """training step t accepts rollouts of policy step s >= t − async_level"""
    filter_zero_advantage: bool = True
    """drop groups whose advantages are all zero (every completion earned the same reward): no signal"""
    max_abs_advantage: float = Field(MAX_ABS_ADVANTAGE, gt=0)
    """samples with |advantage| above this (or not finite) are refused: no real group gives one"""
    seed: int = 0
    """torch and sampling seed of the trainer"""
    dtype: str = "float32"
    """dtype of the weights and the optimizer state (the master copy; checkpoints are written in it)"""
    device: str = "cpu"
    """where the policy trains (`cpu`, `cuda`, `cuda:N`)"""
    autocast: str | None = None
    """compute dtype of the forward and backward passes (`bfloat16` on GPUs): torch.autocast on one process,
    FSDP2's `MixedPrecisionPolicy(param_dtype, reduce_dtype=float32)` when sharded; None: compute in `dtype`"""
    keep_checkpoints: int = Field(0, ge=0)
    """keep only the newest k step dirs (0 keeps all)"""


class TrainerRecipe(GRPOConfig):
    """The trainer agent's recipe (`trainer.grpo`): `GRPOConfig` with the agent's defaults where they differ from
    the paper's (a small model learns at 1e-5, one optimizer step per training step, the newest 4 checkpoints
    kept). The agent sets `device`, `autocast`, `max_completion_tokens` and `async_level` itself (from
    `trainer.device`/`trainer.dtype`, the pool's budgets and its on-chain async level) and keeps at least
    async level + 2 checkpoints."""

    lr: float = Field(1e-5, gt=0)
    """AdamW learning rate after warm-up (INTELLECT-2: 3e-7 for a 32B model; small models want more)"""
    optimizer_steps: int = Field(1, ge=1)
    """optimizer steps (mini-batches) per training step; old log-probs are taken before the first"""
    keep_checkpoints: int = Field(4, ge=1)
    """keep only the newest k step dirs (at least the pool's async level + 2 are kept)"""
