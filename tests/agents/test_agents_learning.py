"""The short learning test: GRPO on a tiny warm-started model must raise the reward."""

from __future__ import annotations

import time
from pathlib import Path

from intellect.agents.demo.learn import evaluate, make_rollouts
from intellect.agents.engines import SamplingParams, TransformersEngine
from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer, Sample


def test_grpo_learning_reward_rises(warm_dir: Path, learn_tasks, tmp_path: Path) -> None:
    t0 = time.perf_counter()
    tasks = list(learn_tasks)
    trainer = GRPOTrainer(warm_dir, tmp_path / "ckpt", GRPOConfig(
        lr=5e-4, optimizer_steps=2, max_completion_tokens=6, async_level=0, seed=0))
    trainer.save_checkpoint()
    engine = TransformersEngine(trainer.checkpoint_path(0))
    eval_params = SamplingParams(max_tokens=6, temperature=1.0, seed=123, capture_proofs=False)
    before = evaluate(engine, tasks, eval_params, samples=8)
    params = SamplingParams(max_tokens=6, temperature=1.0, capture_proofs=False)
    dropped = 0
    for step in range(24):
        engine.load(trainer.checkpoint_path(step))  # hot swap to the trainer's newest checkpoint
        assert engine.policy_step == step
        rf = make_rollouts(engine, tasks[step % 2 :: 2], params, group_size=8, policy_step=step,
                           task_id=f"t{step}", seed=step)
        stats = trainer.train_step([Sample.from_row(r) for r in rf])
        dropped += stats.dropped_groups
    engine.load(trainer.checkpoint_path(24))
    after = evaluate(engine, tasks, eval_params, samples=8)
    print(f"reward {before:.3f} -> {after:.3f} in {time.perf_counter() - t0:.1f}s (dropped {dropped} groups)")
    assert before <= 0.45
    assert after >= before + 0.25
