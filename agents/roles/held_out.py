"""The trainer's held-out evaluation (issue 37's evaluation beside training; moved out of `Trainer` by issue 34):
which tasks, when, and one checkpoint's evaluation recorded. The thread it runs on is `eval_thread.BackgroundEvaluator`.

    tasks = load_eval_tasks(cfg.trainer, held_out_source)    # `trainer.eval_tasks`, else the rules' held-out split
    if eval_due(step, cfg.trainer.eval_every, tasks): evaluator.submit(step)
    evaluate_and_record(step, checkpoint, tasks, cfg.tasks, engine=..., state=..., metrics=...)
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from intellect.agents.evaluation import evaluate_checkpoint, held_out_max_tokens
from intellect.agents.roles._state import StateStore
from intellect.verifier.tasks import TaskSet

__all__ = ["eval_due", "evaluate_and_record", "load_eval_tasks"]

log = logging.getLogger(__name__)


def load_eval_tasks(trainer_cfg: Any, held_out_source: Any) -> list[Any]:
    """The held-out tasks (`trainer.eval_tasks`, else `held_out_source`: the pool rules' held-out `TaskSet`), at
    most `trainer.eval_max_tasks` of them; empty when evaluation is off or there is no held-out set."""
    t = trainer_cfg
    if not t.eval_every:
        return []
    source = t.eval_tasks or held_out_source
    if not source:
        log.warning("trainer.eval_every is %d but no held-out set: set trainer.eval_tasks or name one in "
                    "the pool rules (heldout_cid)", t.eval_every)
        return []
    ts = source if isinstance(source, TaskSet) else TaskSet.load(Path(source))
    return list(ts)[: t.eval_max_tasks]


def eval_due(step: int, every: int, tasks: list[Any], force: bool = False) -> bool:
    """Whether checkpoint `step` is evaluated: there are held-out `tasks`, evaluation is on (`trainer.eval_every`)
    and `every` divides `step` (or `force`: the baseline at start)."""
    return bool(tasks) and bool(every) and (force or step % every == 0)


def evaluate_and_record(step: int, checkpoint: Path, tasks: list[Any], tasks_cfg: Any, *, engine: Any,
                        chat_template: bool, rules_cid: str | None, state: StateStore, metrics: Any) -> Any:
    """Evaluate checkpoint `step` (its directory `checkpoint`) on the held-out `tasks` now, on `engine`, under the
    pool's length rule (`tasks_cfg`: `length_alpha`, `length_scope`; the completion budget is the largest CPU
    thinking budget, `held_out_max_tokens`), and record the result (state `eval`, with `rules_cid` when the pool
    has rules; `metrics`). An evaluation never stops training: a failure is logged and counted; None then."""
    try:
        result = evaluate_checkpoint(checkpoint, tasks, max_tokens=held_out_max_tokens(tasks_cfg.budgets),
                                     length_alpha=tasks_cfg.length_alpha, length_scope=tasks_cfg.length_scope,
                                     task_set="held-out", engine=engine, chat_template=chat_template)
    except Exception as exc:
        metrics.inc("errors_total", kind="eval")
        log.exception("evaluation of step %d failed: %s", step, exc)
        return None
    if rules_cid is not None:
        result = result.model_copy(update={"rules_cid": rules_cid})
    state.put("eval", step, "done", result.model_dump())
    metrics.set("eval_pass_at_1", result.pass_at_1)
    metrics.set("eval_mean_reward", result.mean_reward)
    metrics.set("eval_step", step)
    return result
