"""The trainer's policy and its checkpoints on-chain (issue 34: moved out of `Trainer`).

    gt = open_policy(cfg, data_dir, async_level)        # resume the newest local checkpoint, or write step 0
    cid = publish_step(origin, gt, protocol, state, pool_id, step, model_name)   # Shardcast + publishCheckpoint
    finish_plan(state, step, cid, count)                # the step's submissions consumed, the step published

Crash safety: a step is recorded `publishing` before `publishCheckpoint` and `published` after; the plan's
submissions are marked consumed only once its checkpoint is on-chain, in one transaction with the step's record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from intellect.agents.grpo_trainer import GRPOTrainer, latest_checkpoint
from intellect.agents.hardware import resolve
from intellect.agents.models import smollm2_dir, tiny_model_dir
from intellect.agents.roles import trainer_ranks
from intellect.agents.roles._runtime import AgentError
from intellect.agents.roles._state import StateStore
from intellect.agents.warmstart import WarmStartRecipe, warm_start_cached

__all__ = ["base_model", "finish_plan", "open_policy", "publish_step", "warm_start_recipe"]

log = logging.getLogger(__name__)


def warm_start_recipe(tasks: Any) -> Any:
    """The `WarmStartRecipe` for a pool's `TaskSettings`: its synthetic task set (`synthetic:N:SEED`,
    the only source the warm start knows) and every thinking budget a worker may be given, so the
    warm-started policy has seen the exact prompts the pool's workers send."""
    parts = str(tasks.source).split(":")
    if len(parts) != 3 or parts[0] != "synthetic" or not parts[1].isdigit() or not parts[2].isdigit():
        raise AgentError(f"trainer.model tiny-warm needs tasks.source synthetic:N:SEED, got {tasks.source!r}")
    budgets = tuple(sorted({int(b) for v in tasks.budgets.values() for b in v}))
    return WarmStartRecipe(tasks=int(parts[1]), task_seed=int(parts[2]), target_lengths=budgets)


def base_model(cfg: Any) -> Path:
    """The model directory `trainer.model` names: 'tiny', 'tiny-warm', 'smollm2' or an HF model directory."""
    m = cfg.trainer.model
    if m == "tiny":
        return tiny_model_dir()
    if m == "tiny-warm":
        return warm_start_cached(warm_start_recipe(cfg.tasks))
    if m == "smollm2":
        return smollm2_dir()
    p = Path(m)
    if not (p / "config.json").is_file():
        raise AgentError(f"trainer.model {m!r}: not 'tiny', 'tiny-warm', 'smollm2' or an HF model directory")
    return p


def open_policy(cfg: Any, data_dir: Path, async_level: int) -> Any:
    """The trainer's `GRPOTrainer`: the recipe `trainer.grpo` with what the agent decides (device, compute dtype,
    the pool's largest thinking budget and `async_level`), resumed from the newest checkpoint under
    `data_dir/checkpoints`, else from the base model with its step 0 checkpoint written. Under torchrun (several
    ranks, joined by `trainer.trainer_agent`) rank 0's policy is a `trainer_ranks.LeaderPolicy`: every rank opens its shard."""
    t = cfg.trainer
    ckpt_dir = data_dir / "checkpoints"
    max_tokens = max(max(v) for v in cfg.tasks.budgets.values())
    device, dtype = resolve(t.device, t.dtype, "trainer")
    if trainer_ranks.group_size() > 1:
        if not trainer_ranks.joined():
            raise AgentError("the trainer runs under torchrun through `intellect-agent --role trainer`, which joins "
                             "the ranks' process group (docs/agents.md)")
        device = trainer_ranks.join(device)[2]
    log.info("training on %s (%s compute, fp32 master weights)", device, dtype)
    config = t.grpo.model_copy(update={
        "device": device, "autocast": None if dtype == "float32" else dtype, "max_completion_tokens": max_tokens,
        "async_level": async_level, "keep_checkpoints": max(t.grpo.keep_checkpoints, async_level + 2)})
    local = latest_checkpoint(ckpt_dir)
    if trainer_ranks.joined():  # every rank opens its shard of the same policy (issue 38)
        gt: Any = trainer_ranks.lead_open(local or base_model(cfg), ckpt_dir, config, fresh=local is None)
    else:
        gt = GRPOTrainer(local or base_model(cfg), ckpt_dir, config)
        if local is None:
            gt.save_checkpoint()
    if local is None:
        log.info("step 0 checkpoint written from %s", gt.model_dir)
    else:
        log.info("resuming from local checkpoint %s (step %d)", local, gt.step)
    return gt


def publish_step(origin: Any, gt: Any, protocol: Any, state: StateStore, pool_id: int, step: int,
                 model_name: str) -> str:
    """Shard checkpoint `step` through the Shardcast `origin` (manifest on IPFS) and publish its CID on-chain
    (`publishCheckpoint`), the step recorded `publishing` in between. Returns the manifest's CID."""
    manifest, cid = origin.publish(gt.checkpoint_path(step), step, model_name)
    assert cid is not None
    state.put("step", step, "publishing", {"checkpoint_cid": cid, "manifest_id": manifest.id})
    protocol.publish_checkpoint(pool_id, step, cid)
    log.info("published step %d: %s", step, cid)
    return cid


def finish_plan(state: StateStore, step: int, cid: str, count: Callable[[str, int], None]) -> None:
    """Record step `step` published (checkpoint `cid`) and, if the state's `plan` is that step's, its
    submissions consumed (`count("submissions_consumed", n)`) and the plan done, in one transaction."""
    plan = state.get("plan")
    with state.transaction():
        rec = state.record("step", step)
        data = {"checkpoint_cid": cid, "published_at": time.time()}
        if plan is not None and plan["step"] == step:
            for sid in plan["submissions"]:
                state.put("submission", sid, "consumed", {"step": step})
            data.update({k: plan[k] for k in ("submissions", "rollouts", "stats") if k in plan})
            state.set("plan", None)
            count("submissions_consumed", len(plan["submissions"]))
        if rec is None or rec["status"] != "published":
            state.put("step", step, "published", data)
