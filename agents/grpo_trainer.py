"""The GRPO trainer: HF causal LM in, rollouts in, safetensors checkpoints out.

    trainer = GRPOTrainer(model_dir, out_dir, GRPOConfig())
    trainer.save_checkpoint()                    # <out>/step-0: what inference starts from
    stats = trainer.train_step(samples)          # one rollout step → step-1, step-2, ...

One `train_step`:
1. refuses samples staler than `async_level` (t − s > async_level) and drops groups whose
   advantages are all zero (no signal);
2. recomputes the old log-probs with the current weights (no grad) — the trainer, not the
   worker, is the reference for π_old, so inference numerics never enter the ratio;
3. splits the samples into `optimizer_steps` shuffled mini-batches; for each: token log-probs,
   `grpo_loss` (constant denominator = mini-batch size × max completion tokens), backward,
   grad-norm clip (0.1), AdamW step;
4. saves `<out>/step-<t+1>/` atomically (temp dir + rename): model.safetensors, config.json,
   tokenizer files and `intellect_checkpoint.json` (schema, step, parent).

With more than one process in a torch.distributed group the model is sharded with FSDP2
(`fully_shard`), each rank trains its slice of the samples and rank 0 writes the full state
dict. That path is guarded and untested here (one CPU, no second device); on one process the
trainer is a plain module.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from intellect.agents.engines import CHECKPOINT_META
from intellect.agents.grpo import (
    check_staleness,
    constant_denominator,
    grpo_loss,
    token_logprobs,
)

log = logging.getLogger(__name__)

__all__ = ["CHECKPOINT_SCHEMA", "GRPOConfig", "GRPOTrainer", "Sample", "StepStats"]

CHECKPOINT_SCHEMA = "intellect.checkpoint/v1"


@dataclass
class GRPOConfig:
    """INTELLECT-2's GRPO hyperparameters (defaults as in the paper where it states them)."""

    lr: float = 3e-7
    """AdamW learning rate (INTELLECT-2 used 3e-7 for 32B; small models want far more)"""
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.99)
    epsilon: float = 0.2
    """PPO clip range: the ratio is clipped to [1-ε, 1+ε]"""
    delta: float = 4.0
    """two-sided bound: for negative advantages the ratio counts at most δ"""
    max_grad_norm: float = 0.1
    """gradient-norm clip (INTELLECT-2: aggressive clipping kept the 32B run stable)"""
    optimizer_steps: int = 2
    """optimizer steps (mini-batches) per rollout step; old log-probs are from before the first"""
    max_completion_tokens: int = 128
    """the constant of the per-token loss denominator (sequences × this)"""
    kl_coef: float = 0.0
    """k3 KL to the initial policy; 0 (off) in INTELLECT-2"""
    async_level: int = 2
    """training step t accepts rollouts of policy step s >= t − async_level"""
    filter_zero_advantage: bool = True
    seed: int = 0
    dtype: str = "float32"
    device: str = "cpu"
    keep_checkpoints: int = 0
    """keep only the newest k step dirs (0 keeps all)"""


@dataclass(frozen=True)
class Sample:
    """One completion as the trainer sees it (built from a `RolloutRow`)."""

    problem_id: str
    prompt_ids: Sequence[int]
    completion_ids: Sequence[int]
    advantage: float
    policy_step: int
    reward: float = 0.0

    @classmethod
    def from_row(cls, row: Any) -> Sample:
        return cls(row.problem_id, row.prompt_ids, row.completion_ids, row.advantage, row.policy_step, row.reward)


@dataclass
class StepStats:
    """What one rollout step did (logged cleanrl-style)."""

    step: int
    samples: int
    dropped_groups: int
    loss: float
    clip_fraction: float
    approx_kl: float
    grad_norm: float
    lr: float
    reward_mean: float
    tokens: int
    tokens_per_s: float
    """completion tokens trained per second of this step (old log-probs + updates + save)"""
    seconds: float
    checkpoint: str | None = None
    extra: dict[str, float] = field(default_factory=dict)


class GRPOTrainer:
    """Trains an HF causal LM with GRPO and writes a checkpoint after every step."""

    def __init__(self, model_dir: str | Path, out_dir: str | Path, config: GRPOConfig | None = None) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.config = config or GRPOConfig()
        self.model_dir = Path(model_dir)
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(self.config.seed)
        self._rng = random.Random(self.config.seed)
        self.device = torch.device(self.config.device)
        self.model = AutoModelForCausalLM.from_pretrained(
            str(self.model_dir), dtype=getattr(torch, self.config.dtype)
        ).to(self.device)
        self.model.config.use_cache = False
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.model_dir))
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.world_size = 1
        self.rank = 0
        self._maybe_shard()
        self.ref_model = None
        if self.config.kl_coef > 0:
            self.ref_model = AutoModelForCausalLM.from_pretrained(str(self.model_dir)).to(self.device).eval()
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=self.config.lr, betas=self.config.betas,
            weight_decay=self.config.weight_decay,
        )
        self.step = self._resume_step()

    # -- distributed (guarded) -------------------------------------------------------------

    def _maybe_shard(self) -> None:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
            return
        from torch.distributed.fsdp import fully_shard

        self.world_size, self.rank = dist.get_world_size(), dist.get_rank()
        for layer in self.model.model.layers:
            fully_shard(layer)
        fully_shard(self.model)
        log.info("FSDP: rank %d of %d", self.rank, self.world_size)

    def _resume_step(self) -> int:
        meta = self.model_dir / CHECKPOINT_META
        if meta.is_file():
            return int(json.loads(meta.read_text())["step"])
        return 0

    # -- log-probs --------------------------------------------------------------------------

    def _batch(self, samples: Sequence[Sample]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Right-padded (B, L) input ids, attention mask, targets (B, L-1), completion mask (B, L-1)."""
        lengths = [len(s.prompt_ids) + len(s.completion_ids) for s in samples]
        width = max(lengths)
        ids = torch.full((len(samples), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((len(samples), width), dtype=torch.long)
        comp = torch.zeros((len(samples), width), dtype=torch.float32)
        for i, s in enumerate(samples):
            seq = list(s.prompt_ids) + list(s.completion_ids)
            ids[i, : len(seq)] = torch.tensor(seq)
            attn[i, : len(seq)] = 1
            comp[i, len(s.prompt_ids) : len(seq)] = 1.0
        # position t predicts token t+1: targets and mask shift left by one
        return ids.to(self.device), attn.to(self.device), ids[:, 1:].to(self.device), comp[:, 1:].to(self.device)

    def _logprobs(self, model: Any, ids: torch.Tensor, attn: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = model(input_ids=ids, attention_mask=attn, use_cache=False).logits[:, :-1, :]  # (B, L-1, V)
        return token_logprobs(logits, targets)  # (B, L-1)

    @torch.no_grad()
    def logprobs(self, samples: Sequence[Sample]) -> list[list[float]]:
        """Completion-token log-probs under the current weights (for tests and validators)."""
        ids, attn, targets, mask = self._batch(samples)
        lp = self._logprobs(self.model, ids, attn, targets)
        return [lp[i][mask[i] > 0].tolist() for i in range(len(samples))]

    # -- one rollout step -------------------------------------------------------------------

    def _filter(self, samples: Sequence[Sample]) -> tuple[list[Sample], int]:
        groups: dict[tuple[str, int], list[Sample]] = defaultdict(list)
        for s in samples:
            groups[(s.problem_id, s.policy_step)].append(s)
        kept, dropped = [], 0
        for group in groups.values():
            if self.config.filter_zero_advantage and all(s.advantage == 0.0 for s in group):
                dropped += 1
                continue
            kept += group
        return kept, dropped

    def train_step(self, samples: Sequence[Sample]) -> StepStats:
        """One rollout step: filter, recompute old log-probs, several optimizer steps, save."""
        cfg = self.config
        t0 = time.perf_counter()
        for s in samples:
            check_staleness(self.step, s.policy_step, cfg.async_level)
            if len(s.completion_ids) > cfg.max_completion_tokens:
                raise ValueError(
                    f"sample of problem {s.problem_id!r} has {len(s.completion_ids)} completion tokens, "
                    f"more than max_completion_tokens={cfg.max_completion_tokens}"
                )
        kept, dropped = self._filter(samples)
        if self.world_size > 1:
            kept = kept[self.rank :: self.world_size]
        reward_mean = sum(s.reward for s in samples) / max(len(samples), 1)
        totals = {"loss": 0.0, "clip_fraction": 0.0, "approx_kl": 0.0, "grad_norm": 0.0}
        n_updates = 0
        tokens = sum(len(s.completion_ids) for s in kept)
        if kept:
            order = list(range(len(kept)))
            self._rng.shuffle(order)
            n_mb = min(cfg.optimizer_steps, len(kept))
            minibatches = [[kept[j] for j in order[k::n_mb]] for k in range(n_mb)]
            prepared = []
            self.model.eval()  # no dropout in the reference pass
            with torch.no_grad():
                for mb in minibatches:
                    ids, attn, targets, mask = self._batch(mb)
                    old = self._logprobs(self.model, ids, attn, targets)
                    ref = self._logprobs(self.ref_model, ids, attn, targets) if self.ref_model is not None else None
                    adv = torch.tensor([s.advantage for s in mb], dtype=torch.float32, device=self.device)
                    prepared.append((ids, attn, targets, mask, old, ref, adv))
            self.model.train()
            for ids, attn, targets, mask, old, ref, adv in prepared:
                new = self._logprobs(self.model, ids, attn, targets)
                loss, st = grpo_loss(
                    new, old, adv, mask,
                    loss_denominator=constant_denominator(ids.shape[0], cfg.max_completion_tokens),
                    epsilon=cfg.epsilon, delta=cfg.delta, ref_logprobs=ref, kl_coef=cfg.kl_coef,
                )
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                totals["loss"] += st.loss
                totals["clip_fraction"] += st.clip_fraction
                totals["approx_kl"] += st.approx_kl
                totals["grad_norm"] += float(grad_norm)
                n_updates += 1
            self.model.eval()
        self.step += 1
        ckpt = self.save_checkpoint()
        seconds = time.perf_counter() - t0
        n = max(n_updates, 1)
        stats = StepStats(
            step=self.step, samples=len(kept), dropped_groups=dropped,
            loss=totals["loss"] / n, clip_fraction=totals["clip_fraction"] / n,
            approx_kl=totals["approx_kl"] / n, grad_norm=totals["grad_norm"] / n,
            lr=self.optimizer.param_groups[0]["lr"], reward_mean=reward_mean, tokens=tokens,
            tokens_per_s=tokens / max(seconds, 1e-9),
            seconds=seconds, checkpoint=str(ckpt) if ckpt else None,
        )
        log.info(
            "step %d: loss %.4f reward %.3f kl %.5f clipfrac %.3f gnorm %.3f lr %.2e samples %d (dropped %d groups) %.0f tok/s",
            stats.step, stats.loss, stats.reward_mean, stats.approx_kl, stats.clip_fraction,
            stats.grad_norm, stats.lr, stats.samples, dropped, stats.tokens_per_s,
        )
        return stats

    # -- checkpoints ------------------------------------------------------------------------

    def checkpoint_path(self, step: int | None = None) -> Path:
        return self.out_dir / f"step-{self.step if step is None else step}"

    def save_checkpoint(self) -> Path | None:
        """Write `<out>/step-<step>/` atomically; returns it (None on ranks other than 0)."""
        state = self._full_state_dict()
        if self.rank != 0:
            return None
        final = self.checkpoint_path()
        tmp = Path(tempfile.mkdtemp(prefix=f".step-{self.step}-", dir=self.out_dir))
        try:
            self.model.save_pretrained(tmp, state_dict=state, safe_serialization=True)
            self.tokenizer.save_pretrained(tmp)
            meta = {"schema": CHECKPOINT_SCHEMA, "step": self.step, "parent": str(self.model_dir),
                    "config": {k: v for k, v in asdict(self.config).items() if k != "betas"}}
            (tmp / CHECKPOINT_META).write_text(json.dumps(meta, sort_keys=True, default=str))
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._write_latest()
        self._prune()
        return final

    def _full_state_dict(self) -> dict[str, torch.Tensor] | None:
        if self.world_size == 1:
            return None  # save_pretrained reads the module itself
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def _write_latest(self) -> None:
        tmp = self.out_dir / ".latest.tmp"
        tmp.write_text(str(self.step))
        os.replace(tmp, self.out_dir / "latest")

    def _prune(self) -> None:
        keep = self.config.keep_checkpoints
        if keep <= 0:
            return
        steps = sorted(int(p.name.split("-")[1]) for p in self.out_dir.glob("step-*") if p.name.split("-")[1].isdigit())
        for s in steps[:-keep]:
            shutil.rmtree(self.out_dir / f"step-{s}", ignore_errors=True)


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The newest complete `step-<n>` dir under a trainer's output dir, or None."""
    out_dir = Path(out_dir)
    marker = out_dir / "latest"
    if not marker.is_file():
        return None
    path = out_dir / f"step-{int(marker.read_text())}"
    return path if (path / CHECKPOINT_META).is_file() else None


__all__ += ["latest_checkpoint"]
