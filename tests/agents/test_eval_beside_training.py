"""Issue 37: held-out evaluation runs beside training, on its own thread and engine, and never pauses a training
step. The evaluation is held on an event while a real training step (tiny model) runs and its checkpoint is
written: the step completes while the evaluation is still running (no timing asserts)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from intellect.agents.engines import TransformersEngine
from intellect.agents.evaluation import evaluate_checkpoint
from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer, Sample
from intellect.agents.roles.eval_thread import BackgroundEvaluator
from intellect.agents.tasks import synthetic_task_set


def _group(trainer: GRPOTrainer) -> list[Sample]:
    tok = trainer.tokenizer
    prompt = tok("What is 2 + 3?", add_special_tokens=False)["input_ids"]
    return [Sample("p1", prompt, tok(o, add_special_tokens=False)["input_ids"] + [tok.eos_token_id], a, 0)
            for o, a in zip([" 5", " 6", " 4"], [1.1547, -0.5774, -0.5774], strict=True)]


def test_a_training_step_completes_while_evaluation_runs(tiny_dir: Path, tmp_path: Path) -> None:
    gt = GRPOTrainer(tiny_dir, tmp_path / "ckpt", GRPOConfig(lr=1e-2, optimizer_steps=1, max_completion_tokens=8))
    gt.save_checkpoint()
    tasks = list(synthetic_task_set(3, seed=1, max_operand=9, ops=("+",)))
    engine = TransformersEngine(device="cpu")  # the evaluation's own engine, not the trainer's model
    started, release = threading.Event(), threading.Event()
    results: dict[int, Any] = {}

    def evaluate(step: int) -> Any:
        engine.load(gt.checkpoint_path(step))
        started.set()
        assert release.wait(300), "the test never released the evaluation"
        return evaluate_checkpoint(gt.checkpoint_path(step), tasks, max_tokens=4, engine=engine, chat_template=False)

    ev = BackgroundEvaluator(evaluate, on_result=lambda step, r: results.__setitem__(step, r))
    try:
        ev.submit(0)
        assert started.wait(300), "the evaluation did not start"
        stats = gt.train_step(_group(gt))  # a whole step, checkpoint written, while step 0 is being evaluated
        assert gt.step == 1 and stats.samples == 3 and gt.checkpoint_path(1).is_dir()
        assert ev.running == 0 and 0 not in results  # the evaluation was still running all along
        ev.submit(1)
        release.set()
        assert ev.wait_idle(600)
        assert sorted(results) == [0, 1] and ev.failures == 0
        assert all(0.0 <= r.pass_at_1 <= 1.0 and r.tasks == 3 for r in results.values())
    finally:
        release.set()
        ev.stop()


def test_trainer_queues_evaluation_when_due(tmp_path) -> None:
    """`Trainer.maybe_evaluate` decides with `held_out.eval_due` and hands a due step to its evaluation thread
    (`BackgroundEvaluator`, made on the first one; its non-blocking `submit` is tested above): a real trainer,
    not started (its evaluation of a step it has no checkpoint for fails on that thread, counted, never raised)."""
    from intellect.agents.config import load_config
    from intellect.agents.roles.held_out import eval_due
    from intellect.agents.roles.trainer import Trainer

    task = object()
    assert eval_due(4, 2, [task]) and eval_due(3, 2, [task], force=True)
    assert not eval_due(3, 2, [task]) and not eval_due(4, 0, [task]) and not eval_due(4, 2, [])
    t = Trainer(load_config(None, env={}, overrides={"role": "trainer", "data_dir": str(tmp_path / "t"),
                                                     "trainer.eval_every": "2"}))
    t.eval_tasks = [task]
    try:
        assert t.maybe_evaluate(3) is False and t.evaluator is None  # not a multiple of eval_every
        assert t.maybe_evaluate(4) is True and t.evaluator is not None
    finally:
        if t.evaluator is not None:
            t.evaluator.stop()
        t.state.close()
