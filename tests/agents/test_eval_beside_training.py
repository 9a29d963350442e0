"""Issue 37: held-out evaluation runs beside training, on its own thread and engine, and never pauses a training
step. The evaluation is held on an event while a real training step (tiny model) runs and its checkpoint is
written: the step completes while the evaluation is still running (no timing asserts)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
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


def test_trainer_queues_evaluation_and_returns_at_once() -> None:
    """`Trainer.maybe_evaluate` hands the step to the evaluation thread: it returns while the evaluation is held."""
    from intellect.agents.roles.trainer import Trainer

    held, release = threading.Event(), threading.Event()

    def evaluate_step(step: int) -> None:
        held.set()
        release.wait(60)

    me = SimpleNamespace(cfg=SimpleNamespace(trainer=SimpleNamespace(eval_every=2)), eval_tasks=[object()],
                         evaluator=None, _closers=[], evaluate_step=evaluate_step)
    try:
        assert Trainer.maybe_evaluate(me, 3) is False  # type: ignore[arg-type]  # not a multiple of eval_every
        assert Trainer.maybe_evaluate(me, 4) is True  # type: ignore[arg-type]
        assert held.wait(60) and me.evaluator.running == 4
    finally:
        release.set()
        if me.evaluator is not None:
            me.evaluator.stop()
