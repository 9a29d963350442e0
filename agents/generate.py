"""The one rollout builder: a policy's completions → scored rows → a rollout file.

    rollout_rows(task, target_len, generations, ...)   one problem's group, scored by the verifier's
                                                       `score_group` (rewards, group advantages)
    generate_for_claim(engine, task_set, seed, ...)    what a worker submits for a task claim: the
                                                       problems the pool's order assigns, `group_size` seeded
                                                       completions each with TOPLOC proofs, the file

The worker, the learning experiment (`intellect.agents.demo.learn`) and the verify-vs-generate bench
build their files here, so a file is scored the way `intellect.verifier.submission.check_submission`
rescores it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from intellect.agents.engines import SamplingParams
from intellect.verifier.difficulty import DifficultyTable
from intellect.verifier.replay import problem_seed
from intellect.verifier.rewards import JudgeBudget, LengthScope
from intellect.verifier.rollouts import RolloutFile, RolloutMeta, RolloutRow
from intellect.verifier.submission import prompt_text, score_group
from intellect.verifier.tasks import ProblemOrder, Task, TaskSet, assign_problems

__all__ = ["generate_for_claim", "rollout_rows"]


def rollout_rows(task: Task, target_len: int | None, generations: Sequence[Any], *, length_alpha: float,
                 policy_step: int, worker: str, judge: JudgeBudget | None = None,
                 length_scope: LengthScope = "solved") -> list[RolloutRow]:
    """The rows of one problem's group: each completion (an engine `Generation`) with its task reward,
    length penalty, total reward and group advantage. `judge`: the math judge's budget of the whole file
    (one per submission, groups in file order, as the validator spends it)."""
    scored = score_group(task, [g.text for g in generations], [len(g.completion_ids) for g in generations],
                         target_len, length_alpha, judge=judge, length_scope=length_scope)
    return [RolloutRow(problem_id=task.id, prompt_ids=g.prompt_ids, completion_ids=g.completion_ids, reward=total,
                       task_reward=tr, length_penalty=lp, target_length=target_len, advantage=adv,
                       policy_step=policy_step, proofs=g.proofs, worker=worker)
            for g, (tr, lp, total, adv) in zip(generations, scored, strict=True)]


def generate_for_claim(engine: Any, task_set: TaskSet, seed: bytes, *, task_id: int, problems: int,
                       budgets: Sequence[int], group_size: int, temperature: float, length_alpha: float,
                       policy_step: int, worker: str, model: str, tokenizer: Any = None,
                       length_scope: LengthScope = "solved", problem_order: ProblemOrder = "epochs",
                       difficulty: DifficultyTable | None = None,
                       replace: Callable[[int, list[str], SamplingParams, list[Any]], list[Any]] | None = None,
                       ) -> RolloutFile:
    """The rollout file for ledger task claim `task_id` with chain-drawn `seed`: `problems` problems and target
    lengths from `assign_problems` under the pool's `problem_order` (`difficulty`: the checkpoint's table, for
    `adaptive`), `group_size` completions of each
    sampled with the replayable seed `problem_seed(seed, k)` and TOPLOC proofs. `model` is the
    checkpoint's manifest CID; `tokenizer`: whose chat template the prompts use (None: the bare text, see
    `prompt_text`); `length_scope`: the pool rules' (which rows carry the length penalty). `replace(k, prompts,
    params, generations)`, when given, may swap completions of problem k's group before the group is scored
    (the trainer's canaries: a few rows from another model, `intellect.agents.roles.canary.splice_rows`)."""
    rows: list[RolloutRow] = []
    judge = JudgeBudget()
    assigned = assign_problems(task_set, problem_order, seed=seed, task_id=task_id, n=problems,
                               target_lengths=budgets, difficulty=difficulty)
    for k, a in enumerate(assigned):
        task = task_set[a.task_id]
        params = SamplingParams(max_tokens=a.target_len, temperature=temperature, seed=problem_seed(seed, k),
                                capture_proofs=True)
        prompts = [prompt_text(task, a.target_len, tokenizer)] * group_size
        gens = engine.generate(prompts, params)
        if replace is not None:
            gens = replace(k, prompts, params, gens)
        rows += rollout_rows(task, a.target_len, gens, length_alpha=length_alpha, policy_step=policy_step,
                             worker=worker, judge=judge, length_scope=length_scope)
    meta = RolloutMeta(task_id=str(task_id), seed=seed.hex(), model=model, worker=worker, policy_step=policy_step,
                       group_size=group_size, length_alpha=length_alpha)
    return RolloutFile(meta, rows, name=f"task-{task_id}")
