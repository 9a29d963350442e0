"""The acceptance rule (`intellect.verifier.submission`): prompt, budgets, group scoring, staleness, and
`check_submission` on a real rollout file of the tiny model, one rejection reason at a time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from intellect.verifier.completion import EndError
from intellect.verifier.difficulty import COUNT_UNIT, DifficultyTable
from intellect.verifier.rollouts import RolloutFile
from intellect.verifier.submission import (
    Checkpoint,
    Claim,
    Rejection,
    RejectReason,
    SubmissionRules,
    check_submission,
    group_advantages,
    hardware_class,
    is_fresh,
    prompt_text,
    score_group,
    thinking_budgets,
    too_stale,
)
from intellect.verifier.toploc import ReasonCode, proofs_hash

WORKER = "0x" + "11" * 20
OTHER = "0x" + "22" * 20
SEED = bytes(range(32))
SID = 7


# -- the pieces ---------------------------------------------------------------------------------


def test_reject_reasons_cover_every_completion_and_toploc_code() -> None:
    assert {RejectReason.of_end(e) for e in EndError} <= set(RejectReason)
    assert {RejectReason.of_toploc(c) for c in ReasonCode} <= set(RejectReason)
    assert RejectReason.of_toploc(ReasonCode.REPLAY_MISMATCH) == "toploc_replay_mismatch"


@pytest.mark.parametrize(("gpu", "vram", "count", "cls"), [
    ("cpu", 0, 0, "cpu"), ("RTX 4090", 24, 1, "gpu-small"), ("H100", 80, 8, "gpu-large"), ("A100", 40, 1, "gpu-large"),
    ("H100", 80, 0, "cpu"), ("none", 0, 2, "cpu"),
])
def test_hardware_class_by_declared_gpu(gpu: str, vram: int, count: int, cls: str) -> None:
    assert hardware_class(gpu, vram, count) == cls


def test_thinking_budgets_slow_nodes_get_short_tasks() -> None:
    from intellect.agents.config import TaskSettings

    s = TaskSettings().budgets  # the agents' default budgets
    cpu = thinking_budgets(s, "cpu", 0, 0)
    small = thinking_budgets(s, "RTX 4090", 24, 1)
    large = thinking_budgets(s, "H100", 80, 8)
    assert max(cpu) < min(small) and max(small) < min(large)


def test_thinking_budgets_falls_back_to_cpu_entry() -> None:
    assert thinking_budgets({"cpu": [4]}, "H100", 80, 1) == [4]
    with pytest.raises(ValueError, match="gpu-large"):
        thinking_budgets({}, "H100", 80, 1)


def test_prompt_text_appends_the_thinking_budget(learn_task: Any) -> None:
    assert prompt_text(learn_task) == learn_task.prompt
    assert prompt_text(learn_task, 6).startswith(learn_task.prompt) and "6 tokens" in prompt_text(learn_task, 6)


def test_group_advantages_normalise_each_group() -> None:
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.5, 0.5]]))
    assert torch.allclose(adv[0], torch.tensor([0.866, -0.866, -0.866, 0.866]), atol=1e-3)
    assert torch.equal(adv[1], torch.zeros(4))
    with pytest.raises(ValueError, match="at least 2"):
        group_advantages(torch.zeros(1, 1))


def test_score_group_rewards_right_answers_and_penalises_length_of_solved_ones(learn_task: Any) -> None:
    right = f" {learn_task.answer}"
    scored = score_group(learn_task, [right, " 999"], [3, 3], 6, 0.1)
    (tr0, lp0, tot0, a0), (tr1, lp1, tot1, a1) = scored
    assert (tr0, tr1) == (1.0, 0.0) and lp0 == pytest.approx(0.3) and lp1 == 0.0  # unsolved: no length term
    assert tot0 == pytest.approx(0.7) and tot1 == 0.0 and a0 > 0 > a1
    # among solved answers the one nearer its target scores higher
    (_, _, near, a_near), (_, _, far, a_far) = score_group(learn_task, [right, right], [5, 2], 6, 0.1)
    assert near == pytest.approx(0.9) and far == pytest.approx(0.6) and a_near > 0 > a_far


def test_score_group_all_wrong_answers_of_different_lengths_have_zero_advantage(learn_task: Any) -> None:
    """Issue 17: with the penalty on every answer, four wrong answers of 62/63/63/64 tokens (target 64)
    got advantages −1.22, 0, 0, +1.22 (group std normalisation makes any α full-size), so GRPO learnt
    "longer" until every answer hit the cap. Unsolved answers carry no length term: the group is flat."""
    wrong = [" 999", " 998", " 997", " 996"]
    for alpha in (0.0003, 0.005):
        scored = score_group(learn_task, wrong, [62, 63, 63, 64], 64, alpha)
        assert [tr for tr, *_ in scored] == [0.0] * 4
        assert [lp for _, lp, _, _ in scored] == [0.0] * 4
        assert [adv for *_, adv in scored] == [0.0] * 4
    # the old rule (`length_scope="all"`, pools whose rules predate the field) is kept for them, as it was
    old = score_group(learn_task, wrong, [62, 63, 63, 64], 64, 0.005, length_scope="all")
    assert [adv for *_, adv in old] == pytest.approx([-1.2247, 0.0, 0.0, 1.2247], abs=1e-3)
    # a mixed group: the right answer's advantage does not depend on the wrong ones' lengths
    right = f" {learn_task.answer}"
    a = score_group(learn_task, [right, *wrong[:3]], [10, 20, 40, 64], 64, 0.005)
    b = score_group(learn_task, [right, *wrong[:3]], [10, 5, 50, 63], 64, 0.005)
    assert [x[3] for x in a] == pytest.approx([x[3] for x in b]) and a[0][3] > 0


def test_staleness_rule_boundaries() -> None:
    assert is_fresh(5, 3, 2) and is_fresh(5, 5, 0)  # t - s == async_level: ok
    assert not is_fresh(5, 2, 2) and too_stale(5, 2, 2)
    assert not is_fresh(1, 2, 2) and not too_stale(1, 2, 2)  # from the future: never fresh, not stale
    with pytest.raises(ValueError, match="async_level"):
        is_fresh(1, 1, -1)


# -- check_submission on a real file ------------------------------------------------------------


RULES = SubmissionRules(problems_per_task=2, group_size=2, length_alpha=0.0003, temperature=1.0,
                        budgets={"cpu": [6]}, toploc_profile="fp32")
CID = "bafy-checkpoint-step-3"


@pytest.fixture(scope="module")
def learn_task(task_set: Any) -> Any:
    return next(iter(task_set))


@pytest.fixture(scope="module")
def task_set() -> Any:
    from intellect.agents.tasks import synthetic_task_set

    return synthetic_task_set(16, seed=3, max_operand=9, ops=("+",), name="submission-test")


@pytest.fixture(scope="module")
def checkpoint() -> Checkpoint:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from intellect.agents.models import tiny_model_dir

    d: Path = tiny_model_dir()
    return Checkpoint(AutoModelForCausalLM.from_pretrained(str(d)).eval(), AutoTokenizer.from_pretrained(str(d)), CID)


def _generate(task_set: Any, rules: SubmissionRules, **extra: Any) -> RolloutFile:
    """The honest worker's file for claim SID under `rules` (the tiny model, policy step 3)."""
    from intellect.agents.engines import TransformersEngine
    from intellect.agents.generate import generate_for_claim
    from intellect.agents.models import tiny_model_dir

    return generate_for_claim(TransformersEngine(tiny_model_dir()), task_set, SEED, task_id=SID,
                              problems=rules.problems_per_task, budgets=rules.budgets["cpu"],
                              group_size=rules.group_size, temperature=rules.temperature,
                              length_alpha=rules.length_alpha, policy_step=3, worker=WORKER, model=CID, **extra)


@pytest.fixture(scope="module")
def honest(task_set: Any, checkpoint: Checkpoint) -> RolloutFile:
    return _generate(task_set, RULES)


def _claim(rf: RolloutFile, **over: Any) -> Claim:
    fields: dict[str, Any] = {
        "submission_id": SID, "node": WORKER, "policy_step": rf.meta.policy_step,
        "proofs_hash": "0x" + proofs_hash([p for r in rf.rows for p in r.proofs]).hex(),
        "work_units": sum(len(r.completion_ids) for r in rf.rows), "rollouts_cid": "bafk-rollouts",
        "seed": lambda: SEED, "budget_class": lambda: "cpu",
    }
    fields.update(over)
    return Claim(**fields)


def _check(rf: RolloutFile | bytes, task_set: Any, checkpoint: Checkpoint, *, rules: SubmissionRules = RULES,
           load: Callable[[int], Checkpoint] | None = None, claim_of: RolloutFile | None = None, **over: Any) -> Any:
    data = rf if isinstance(rf, bytes) else rf.to_bytes()
    claim = _claim(claim_of if claim_of is not None else rf, **over)  # type: ignore[arg-type]
    return check_submission(data, claim, task_set, rules, load or (lambda step: checkpoint))


def _edit(rf: RolloutFile, row: int, **changes: Any) -> RolloutFile:
    rows = list(rf.rows)
    rows[row] = rows[row].model_copy(update=changes)
    return RolloutFile(rf.meta, rows)


def test_honest_submission_accepted(honest: RolloutFile, task_set: Any, checkpoint: Checkpoint) -> None:
    verdict = _check(honest, task_set, checkpoint)
    assert verdict.accepted, verdict.detail
    assert verdict.stats["rows"] == RULES.problems_per_task * RULES.group_size


def _unknown_task() -> bytes:
    raise Rejection(RejectReason.UNKNOWN_TASK, "no TaskClaimed event for task 7")


@pytest.mark.parametrize(("over", "reason"), [
    ({"node": OTHER}, RejectReason.WRONG_WORKER),
    ({"submission_id": 8}, RejectReason.WRONG_TASK),
    ({"policy_step": 4}, RejectReason.WRONG_POLICY_STEP),
    ({"proofs_hash": "0x" + "00" * 32}, RejectReason.PROOFS_HASH_MISMATCH),
    ({"work_units": 1}, RejectReason.WORK_UNITS_MISMATCH),
    ({"seed": _unknown_task}, RejectReason.UNKNOWN_TASK),
    ({"seed": lambda: bytes(32)}, RejectReason.WRONG_SEED),
])
def test_claim_mismatch_rejected(honest: RolloutFile, task_set: Any, checkpoint: Checkpoint, over: dict[str, Any],
                                 reason: RejectReason) -> None:
    verdict = _check(honest, task_set, checkpoint, **over)
    assert (verdict.accepted, verdict.reason) == (False, reason), verdict.detail


@pytest.mark.parametrize(("rules", "reason"), [
    ({"group_size": 3}, RejectReason.WRONG_GROUP_SIZE),
    ({"length_alpha": 0.001}, RejectReason.WRONG_LENGTH_ALPHA),
    ({"problems_per_task": 3}, RejectReason.WRONG_PROBLEMS),
    ({"budgets": {"cpu": [5]}}, RejectReason.WRONG_PROBLEMS),
    ({"problem_order": "random"}, RejectReason.WRONG_PROBLEMS),  # the file walked the pool's passes; this pool draws
])
def test_pool_rule_mismatch_rejected(honest: RolloutFile, task_set: Any, checkpoint: Checkpoint,
                                     rules: dict[str, Any], reason: RejectReason) -> None:
    verdict = _check(honest, task_set, checkpoint, rules=RULES.model_copy(update=rules))
    assert (verdict.accepted, verdict.reason) == (False, reason), verdict.detail


def test_file_is_judged_by_the_claims_budget_class(honest: RolloutFile, task_set: Any,
                                                   checkpoint: Checkpoint) -> None:
    # issue 21: the budgets are the claim's class's (cpu here), whatever the node declared; the same file judged
    # as a gpu-large claim is not the claim's assignment
    rules = RULES.model_copy(update={"budgets": {"cpu": [6], "gpu-large": [9]}})
    assert _check(honest, task_set, checkpoint, rules=rules).accepted
    verdict = _check(honest, task_set, checkpoint, rules=rules, budget_class=lambda: "gpu-large")
    assert (verdict.accepted, verdict.reason) == (False, RejectReason.WRONG_PROBLEMS), verdict.detail


def test_bad_file_and_wrong_checkpoint_rejected(honest: RolloutFile, task_set: Any, checkpoint: Checkpoint) -> None:
    assert _check(b"not parquet", task_set, checkpoint, claim_of=honest).reason == RejectReason.BAD_FILE
    other = Checkpoint(checkpoint.model, checkpoint.tokenizer, "bafy-another-checkpoint")
    assert _check(honest, task_set, checkpoint, load=lambda step: other).reason == RejectReason.WRONG_CHECKPOINT


def test_row_tampering_rejected(honest: RolloutFile, task_set: Any, checkpoint: Checkpoint) -> None:
    r0 = honest.rows[0]
    cases = [
        (_edit(honest, 0, prompt_ids=[*r0.prompt_ids, 5]), RejectReason.WRONG_PROMPT),
        (_edit(honest, 0, task_reward=1.0 - r0.task_reward, reward=1.0 - r0.task_reward - r0.length_penalty),
         RejectReason.REWARD_MISMATCH),
        (_edit(honest, 0, advantage=r0.advantage + 0.5), RejectReason.REWARD_MISMATCH),
        (_edit(honest, 0, completion_ids=[*r0.completion_ids, *r0.completion_ids][:7]), RejectReason.OVER_BUDGET),
    ]
    k, rk = next((k, r) for k, r in enumerate(honest.rows) if len(r.completion_ids) >= 2)
    eos = {checkpoint.tokenizer.eos_token_id}
    cut = [t for t in rk.completion_ids[:-1] if t not in eos] or [rk.completion_ids[0] + 1]
    cases.append((_edit(honest, k, completion_ids=cut), RejectReason.CUT_SHORT))
    for rf, reason in cases:
        verdict = _check(rf, task_set, checkpoint)
        assert (verdict.accepted, verdict.reason) == (False, reason), (reason, verdict.detail)


def test_altered_token_fails_toploc_or_replay(honest: RolloutFile, task_set: Any, checkpoint: Checkpoint) -> None:
    r0 = honest.rows[0]
    ids = list(r0.completion_ids)
    ids[0] = (ids[0] + 1) % checkpoint.tokenizer.vocab_size  # same length: the same units and budget
    verdict = _check(_edit(honest, 0, completion_ids=ids), task_set, checkpoint)
    assert not verdict.accepted
    # the replay runs before the rewards (issue 32): a token the model did not sample is caught there, never
    # as a reward mismatch, whatever its reward
    assert verdict.reason in {RejectReason.TOKENS_AFTER_EOS, RejectReason.CUT_SHORT,
                              *(r for r in RejectReason if r.startswith("toploc_"))}, verdict.detail


def test_wrong_rewards_and_wrong_proofs_get_the_toploc_reason(honest: RolloutFile, task_set: Any,
                                                               checkpoint: Checkpoint) -> None:
    """A file wrong in both its proofs and its rewards: the replay's reason (it runs first)."""
    r0, r2 = honest.rows[0], honest.rows[2]  # rows of two different problems
    both = _edit(honest, 0, proofs=list(r2.proofs), task_reward=1.0 - r0.task_reward,
                 reward=1.0 - r0.task_reward - r0.length_penalty)
    verdict = _check(both, task_set, checkpoint)
    assert not verdict.accepted and verdict.reason.startswith("toploc_"), (verdict.reason, verdict.detail)
    rewards_only = _edit(honest, 0, task_reward=1.0 - r0.task_reward, reward=1.0 - r0.task_reward - r0.length_penalty)
    assert _check(rewards_only, task_set, checkpoint).reason == RejectReason.REWARD_MISMATCH


# -- code runs only for completions proven the model's (issue 32) ----------------------------------


@pytest.fixture(scope="module")
def code_task_set() -> Any:
    from intellect.verifier.tasks import Task, TaskSet, VerifierKind

    return TaskSet([Task(id=f"code-{i}", prompt=f"def add{i}(x):\n    return x + {i}\n# again:\n",
                         verifier=VerifierKind.CODE, tests=[f"assert add{i}(1) == {i + 1}"], entry_point=f"add{i}")
                    for i in range(4)], name="submission-code-test")


@pytest.fixture(scope="module")
def code_honest(code_task_set: Any, checkpoint: Checkpoint) -> RolloutFile:
    from intellect.agents.engines import TransformersEngine
    from intellect.agents.generate import generate_for_claim
    from intellect.agents.models import tiny_model_dir

    return generate_for_claim(TransformersEngine(tiny_model_dir()), code_task_set, SEED, task_id=SID,
                              problems=RULES.problems_per_task, budgets=RULES.budgets["cpu"],
                              group_size=RULES.group_size, temperature=RULES.temperature,
                              length_alpha=RULES.length_alpha, policy_step=3, worker=WORKER, model=CID)


def test_code_runs_only_after_toploc(code_task_set: Any, code_honest: RolloutFile, checkpoint: Checkpoint,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Every validator checks every staked worker's file: a code completion whose proofs are wrong is
    rejected by the replay before its code reaches the sandbox (sandbox runs counted through the real
    `run_python`)."""
    from intellect.verifier import rewards
    from intellect.verifier.sandbox import sandbox_available

    if not sandbox_available()[0]:
        pytest.skip(f"no sandbox here: {sandbox_available()[1]}")
    runs: list[str] = []
    real = rewards.run_python

    def counted(code: str, *args: Any, **kwargs: Any) -> Any:
        runs.append(code)
        return real(code, *args, **kwargs)

    monkeypatch.setattr(rewards, "run_python", counted)
    verdict = _check(code_honest, code_task_set, checkpoint)
    assert verdict.accepted, verdict.detail
    assert runs, "the honest file's completions ran in the sandbox"  # the same file does reach the sandbox
    runs.clear()
    k = next(k for k, r in enumerate(code_honest.rows) if r.proofs != code_honest.rows[0].proofs)
    forged = _edit(code_honest, 0, proofs=list(code_honest.rows[k].proofs))
    verdict = _check(forged, code_task_set, checkpoint)
    assert not verdict.accepted and verdict.reason.startswith("toploc_"), (verdict.reason, verdict.detail)
    assert runs == [], "no code ran for a file the replay rejected"


TOL = 1e-4
"""The documented reward tolerance (docs/security.md, "Rules at their limits"), pinned here by value."""


@pytest.mark.parametrize(("tamper", "refused"), [
    ({"task_reward": 1.0, "length_penalty": 0.5, "reward": 0.5}, ["task_reward"]),
    ({"length_penalty": 1.0, "task_reward": 0.5, "reward": -0.5}, ["length_penalty"]),
    ({"advantage": 1.0}, ["advantage"]),
    ({"reward": 1.0, "task_reward": 1.0}, ["reward", "task_reward"]),
], ids=["task_reward", "length_penalty", "advantage", "reward"])
def test_reward_tolerance_just_under_accepted_just_over_refused(honest: RolloutFile, task_set: Any,
                                                                checkpoint: Checkpoint, tamper: dict[str, float],
                                                                refused: list[str]) -> None:
    """A worker's rewards may differ from the recomputed ones by float noise, not by a chosen amount. The file
    itself pins reward = task_reward - length_penalty (to 1e-6), so a tampered field moves the others with it:
    each case moves one field by x·TOL and the others by at most x/2·TOL, so that field alone crosses the
    tolerance (the reward together with the task reward: the honest rows' length penalty is 0 and cannot go
    lower). x = 0.5 passes, x = 1.5 is refused naming exactly the fields past the tolerance."""
    from intellect.verifier.submission import REWARD_TOL

    assert REWARD_TOL == TOL
    r0 = honest.rows[0]

    def moved(x: float) -> RolloutFile:
        return _edit(honest, 0, **{f: getattr(r0, f) + k * x * TOL for f, k in tamper.items()})

    under = _check(moved(0.5), task_set, checkpoint)
    assert under.accepted, under.detail
    over = _check(moved(1.5), task_set, checkpoint)
    assert (over.accepted, over.reason) == (False, RejectReason.REWARD_MISMATCH), over.detail
    assert f"{refused} differ from recomputed" in over.detail


def test_target_length_of_a_later_row_must_be_the_assignment(honest: RolloutFile, task_set: Any,
                                                              checkpoint: Checkpoint) -> None:
    """Row 0 of a group is checked with the problem list; every later row of the group is checked on its own."""
    r0, r1 = honest.rows[0], honest.rows[1]
    assert r1.problem_id == r0.problem_id and r1.target_length == r0.target_length  # one group, one assignment
    verdict = _check(_edit(honest, 1, target_length=r1.target_length + 1), task_set, checkpoint)
    assert (verdict.accepted, verdict.reason) == (False, RejectReason.WRONG_PROBLEMS), verdict.detail
    assert "row 1 of" in verdict.detail


def test_verdict_carries_evidence_and_high_evidence_is_ambiguous(honest: RolloutFile, task_set: Any,
                                                                checkpoint: Checkpoint) -> None:
    """Issue 35: the honest submission's verdict carries its LLR (negative: every exact token is evidence of
    honesty) and binned observations; under rules whose cheat shape sits on the exact bin (made up for the test:
    every honest token is then evidence against the worker) the same submission passes every bound and is
    `ambiguous`: not accepted, not slashable."""
    from intellect.verifier.evidence import EXP_EDGES, MARGIN_EDGES, Component, EvidenceRules
    from intellect.verifier.submission import EVIDENCE_HIGH

    verdict = _check(honest, task_set, checkpoint)
    assert verdict.outcome == "accept" and verdict.llr is not None and verdict.llr < 0
    assert verdict.observations is not None
    assert sum(verdict.observations["replay_margin"]) == verdict.stats["tokens"]
    n = len(MARGIN_EDGES)
    upside_down = EvidenceRules(components=(
        Component(name="replay_margin", edges=MARGIN_EDGES, weight=0.5, alternative=(1.0,) + (0.0,) * (n - 1),
                  honest={"cpu-fp32": (0.01,) + (0.99 / (n - 1),) * (n - 1)}),
        Component(name="toploc_exp_mismatches", edges=EXP_EDGES, weight=0.05,
                  alternative=(0.0,) + (1.0 / (n - 1),) * (n - 1), honest={"cpu-fp32": (1.0 / n,) * n}),
    ), default_class="cpu-fp32")
    data = honest.to_bytes()
    amb = check_submission(data, _claim(honest), task_set, RULES, lambda step: checkpoint, evidence=upside_down)
    assert amb.outcome == "ambiguous" and amb.reason == EVIDENCE_HIGH, amb
    assert not amb.accepted and not amb.slashable and amb.llr is not None and amb.llr >= upside_down.ambiguous_llr


def test_a_file_bad_in_one_row_is_rejected_and_only_that_row_differs(honest: RolloutFile, task_set: Any,
                                                                     checkpoint: Checkpoint) -> None:
    """The trainer's canaries since issue 33: one row, at random, from a perturbed copy of the checkpoint (as real
    cheats alter a few rows), the rest the checkpoint's own. A validator that checks every row rejects it; one
    that checks a single row of N would miss it N - 1 times in N."""
    from intellect.agents.engines import TransformersEngine
    from intellect.agents.generate import generate_for_claim
    from intellect.agents.models import tiny_model_dir
    from intellect.agents.roles.canary import perturb, splice_rows

    bad = TransformersEngine(tiny_model_dir())
    perturb(bad.model, 0.5, seed=11)
    row = RULES.group_size + 1  # the second problem's second completion: the hook maps file rows to groups
    canary = generate_for_claim(TransformersEngine(tiny_model_dir()), task_set, SEED, task_id=SID,
                                problems=RULES.problems_per_task, budgets=RULES.budgets["cpu"],
                                group_size=RULES.group_size, temperature=RULES.temperature,
                                length_alpha=RULES.length_alpha, policy_step=3, worker=WORKER, model=CID,
                                replace=splice_rows(bad, {row}, RULES.group_size))
    differs = [i for i, (a, b) in enumerate(zip(honest.rows, canary.rows, strict=True))
               if (a.completion_ids, a.proofs) != (b.completion_ids, b.proofs)]
    assert differs == [row]
    verdict = _check(canary, task_set, checkpoint)
    assert not verdict.accepted and verdict.outcome == "reject", verdict.detail


# -- online difficulty filtering (issue 37): the `adaptive` order judged with the checkpoint's table ---------------

ADAPTIVE = RULES.model_copy(update={"problem_order": "adaptive"})


def _learnt(task_set: Any) -> DifficultyTable:
    """A table that makes the adaptive draw differ from a uniform one: half the problems never solved."""
    u = COUNT_UNIT
    return DifficultyTable(group_size=RULES.group_size,
                           counts={t.id: (64 * u, 0) if k % 2 else (8 * u, 4 * u) for k, t in enumerate(task_set)})


@pytest.fixture(scope="module")
def adaptive(task_set: Any, checkpoint: Checkpoint) -> RolloutFile:
    return _generate(task_set, ADAPTIVE, problem_order="adaptive", difficulty=_learnt(task_set))


def test_adaptive_submission_judged_with_the_table_of_its_checkpoint(adaptive: RolloutFile, task_set: Any,
                                                                     checkpoint: Checkpoint) -> None:
    asked: list[int] = []

    def table(step: int) -> DifficultyTable:
        asked.append(step)
        return _learnt(task_set)

    claim = _claim(adaptive)
    data = adaptive.to_bytes()
    verdict = check_submission(data, claim, task_set, ADAPTIVE, lambda step: checkpoint, difficulty=table)
    assert verdict.accepted, verdict.detail
    assert asked == [3]  # the table of the file's (on-chain) policy step
    # the same file judged with another table (a validator that ignored the checkpoint's) is not the assignment
    verdict = check_submission(data, claim, task_set, ADAPTIVE, lambda step: checkpoint,
                               difficulty=lambda step: DifficultyTable.empty(RULES.group_size))
    assert (verdict.accepted, verdict.reason) == (False, RejectReason.WRONG_PROBLEMS), verdict.detail
    # and a pool with another order does not accept it either
    assert _check(adaptive, task_set, checkpoint).reason == RejectReason.WRONG_PROBLEMS
    # by default the table is the loaded checkpoint's (what a validator's `load_checkpoint` reads from its files);
    # a checkpoint without one is judged with the empty table
    with_table = checkpoint._replace(difficulty=_learnt(task_set))
    assert check_submission(data, claim, task_set, ADAPTIVE, lambda step: with_table).accepted
    verdict = check_submission(data, claim, task_set, ADAPTIVE, lambda step: checkpoint)
    assert (verdict.accepted, verdict.reason) == (False, RejectReason.WRONG_PROBLEMS), verdict.detail
