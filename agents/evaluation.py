"""Held-out evaluation of a checkpoint: pass@1 at temperature 0 and mean reward.

    result = evaluate_checkpoint(Path("data/trainer/checkpoints/step-12"), held_out, max_tokens=128)
    result.pass_at_1, result.mean_reward

One greedy completion per task (temperature 0: pass@1 is then a property of the checkpoint, not of a
draw), prompted as the pool's workers prompt (`prompt_text`: the task, the thinking-budget suffix for
`max_tokens`, the model's chat template when it has one). `pass_at_1` is the mean task reward (1 if
the verifier accepts the completion); `mean_reward` the mean pool reward, i.e. task reward minus the
length penalty α·|max_tokens − length| on the completions the pool rules' `length_scope` names (`solved`:
solved ones only; `all`: every one). The trainer runs it every `trainer.eval_every` steps;
`intellect-agent eval --model DIR --taskset CID|FILE` runs it on any checkpoint.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from intellect.verifier.prompts import prompt_text
from intellect.verifier.rewards import reward
from intellect.verifier.tasks import Task

if TYPE_CHECKING:
    from intellect.verifier.rewards import LengthScope

__all__ = ["EvalResult", "evaluate_checkpoint", "evaluate_engine", "held_out_max_tokens"]

log = logging.getLogger(__name__)


def held_out_max_tokens(budgets: Mapping[str, Sequence[int]]) -> int:
    """Completion budget of a held-out evaluation under a pool's `budgets`: the largest CPU thinking budget
    (the class whose largest budget is smallest when there is no `cpu` entry). The trainer's evaluation and
    `intellect-agent eval --rules/--pool` both use it, so their numbers are comparable."""
    lengths = budgets.get("cpu") or min(budgets.values(), key=max)
    return int(max(lengths))


class EvalResult(BaseModel):
    """What one evaluation measured (crosses processes: /status, the run report, the CLI's JSON)."""

    model_config = ConfigDict(frozen=True)

    step: int | None
    """policy step of the checkpoint (None for a model that is not a trainer checkpoint)"""
    task_set: str
    tasks: int
    pass_at_1: float
    """fraction of tasks solved by the greedy completion"""
    mean_reward: float
    """mean pool reward of the greedy completions (task reward − length penalty)"""
    max_tokens: int
    length_alpha: float
    length_scope: Literal["solved", "all"] = "solved"
    """which completions carried the length penalty (the pool rules' `length_scope`)"""
    mean_completion_tokens: float
    seconds: float
    chat_template: bool | None = None
    """whether prompts were asked for in the model's chat template (used when its tokenizer has one); None: not
    recorded (results made before the field)"""
    rules_cid: str | None = None
    """the pool rules the settings came from (`intellect-agent eval --rules/--pool`, a trainer whose pool has
    rules); None: the evaluator's own settings"""


def evaluate_engine(engine: Any, tasks: Sequence[Task], *, max_tokens: int, length_alpha: float = 0.0,
                    length_scope: LengthScope = "solved", task_set: str = "held-out", batch_size: int = 16,
                    chat_template: bool = True) -> EvalResult:
    """Evaluate the checkpoint `engine` (an `InferenceEngine`) has loaded on `tasks` (prompts in its chat
    template when `chat_template` and it has one, as a pool whose rules say `chat_template: model`; the
    length penalty on the completions `length_scope` names, as the pool's rules say)."""
    from intellect.agents.engines import SamplingParams  # deferred: torch (this module is read by the CLI)

    if not tasks:
        raise ValueError("evaluation needs at least one task")
    t0 = time.perf_counter()
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, seed=0, capture_proofs=False)
    solved = total = 0.0
    lengths = 0
    for start in range(0, len(tasks), batch_size):
        chunk = list(tasks[start : start + batch_size])
        tok = engine.tokenizer if chat_template else None
        prompts = [prompt_text(t, max_tokens, tokenizer=tok) for t in chunk]
        for task, gen in zip(chunk, engine.generate(prompts, params), strict=True):
            r = reward(task, gen.text, max_tokens, len(gen.completion_ids), length_alpha,
                       length_scope=length_scope)
            solved += r.task_reward
            total += r.total
            lengths += len(gen.completion_ids)
    n = len(tasks)
    result = EvalResult(step=engine.policy_step, task_set=task_set, tasks=n, pass_at_1=solved / n,
                        mean_reward=total / n, max_tokens=max_tokens, length_alpha=length_alpha,
                        length_scope=length_scope, mean_completion_tokens=lengths / n,
                        seconds=time.perf_counter() - t0, chat_template=chat_template)
    log.info("eval step %s on %s: pass@1 %.3f mean reward %.3f (%d tasks, %.1fs)", result.step, task_set,
             result.pass_at_1, result.mean_reward, n, result.seconds)
    return result


def evaluate_checkpoint(model_dir: str | Path, tasks: Sequence[Task], *, max_tokens: int,
                        length_alpha: float = 0.0, length_scope: LengthScope = "solved",
                        task_set: str = "held-out", device: str = "cpu", engine: Any = None,
                        chat_template: bool = True) -> EvalResult:
    """Load `model_dir` (any HF causal-LM dir; `engine` reused if given) and evaluate it on `tasks`."""
    from intellect.agents.engines import TransformersEngine  # deferred: torch

    engine = engine or TransformersEngine(device=device)
    engine.load(Path(model_dir))
    return evaluate_engine(engine, tasks, max_tokens=max_tokens, length_alpha=length_alpha,
                           length_scope=length_scope, task_set=task_set, chat_template=chat_template)
