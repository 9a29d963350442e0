"""The real SmolLM2-135M-Instruct through the engine and the trainer (slow: `pytest -m slow`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow


def test_smollm2_generate_prove_train_step(tmp_path: Path) -> None:
    from intellect.agents.demo.learn import make_rollouts
    from intellect.agents.engines import SamplingParams, TransformersEngine
    from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer
    from intellect.agents.models import smollm2_dir
    from intellect.agents.tasks import synthetic_task_set
    from intellect.verifier.toploc import verify_proofs

    base = smollm2_dir()
    trainer = GRPOTrainer(base, tmp_path / "ckpt", GRPOConfig(lr=1e-6, max_completion_tokens=48, optimizer_steps=1))
    engine = TransformersEngine(trainer.save_checkpoint())
    tasks = list(synthetic_task_set(2, seed=0, max_operand=9, ops=("+",)))
    rf = make_rollouts(engine, tasks, SamplingParams(max_tokens=48, temperature=1.0), group_size=4,
                       policy_step=0, task_id="slow", seed=1)
    row = rf.rows[0]
    ids = torch.tensor([row.prompt_ids + row.completion_ids])
    with torch.no_grad():
        hidden = engine.model.model(input_ids=ids).last_hidden_state[0]
    p = len(row.prompt_ids)
    assert verify_proofs(hidden[p - 1 : p - 1 + len(row.completion_ids)], row.proofs).ok
    from intellect.agents.grpo_trainer import Sample

    stats = trainer.train_step([Sample.from_row(r) for r in rf])
    engine.load(Path(stats.checkpoint))  # type: ignore[arg-type]
    assert engine.policy_step == 1
