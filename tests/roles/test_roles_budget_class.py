"""Budget classes on a real chain (issue 21): a node that declares gpu-large with no history is judged with the
cpu budgets by the worker and the validator alike (a file written with the declared class's budgets is rejected
`wrong_problems`); its verified history promotes it, leases it lets expire demote it, and a record rewritten
after a claim changes nothing for that claim. Real anvil; the agents' own BudgetClasses and the claim lookup
both roles use (`claim_lookup.claim_block`, `claim_lookup.claim_class`; no agent process)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from intellect.agents.config import AgentConfig, load_config
from intellect.agents.roles._state import StateStore
from intellect.agents.roles.budget_class import BudgetClasses
from intellect.agents.roles.claim_lookup import claim_block, claim_class
from intellect.sdk import Role
from intellect.verifier.submission import Checkpoint, Claim, RejectReason, SubmissionRules, check_submission
from intellect.verifier.toploc import proofs_hash

TOKEN = 10**18
BUDGETS = {"cpu": [6], "gpu-small": [10], "gpu-large": [12]}
CID = "bafkreibudgetclasscheckpoint"


def _cfg(history: int | None = None) -> AgentConfig:
    """A worker's real configuration in this pool's shape (2 problems x 2 completions, `BUDGETS`)."""
    over = {"role": "worker", "worker.group_size": "2", "worker.problems_per_task": "2",
            "tasks.budgets": json.dumps(BUDGETS)}
    return load_config(None, env={}, overrides=over | ({} if history is None else {"tasks.class_history": str(history)}))


def _gpu_worker(devnet: Any) -> tuple[Any, int]:
    pool_id = devnet.deployment.default_pool_id or 1
    devnet.protocol(0).publish_checkpoint(pool_id, 0, CID)
    w = devnet.protocol(1)
    w.drip()
    w.register_node(Role.WORKER, gpu_model="H100", vram_gib=80, gpu_count=1)  # declares gpu-large
    w.stake(w.address, 100 * TOKEN)
    return w, pool_id


def _views(devnet: Any, w: Any, pool_id: int, history: int | None = None) -> tuple[BudgetClasses, BudgetClasses]:
    """The worker's own and a validator's (another key, another history object)."""
    params = w.pool(pool_id).params
    v = devnet.protocol(2)
    return BudgetClasses(w, pool_id, params, _cfg(history)), BudgetClasses(v, pool_id, params, _cfg(history))


def test_gpu_large_declaration_without_history_is_judged_with_cpu_budgets(devnet, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from intellect.agents.engines import TransformersEngine
    from intellect.agents.generate import generate_for_claim
    from intellect.agents.models import tiny_model_dir
    from intellect.agents.tasks import synthetic_task_set

    w, pool_id = _gpu_worker(devnet)
    claim = w.claim_task(pool_id)
    sid = claim.task_id

    # the worker's budgets for its claim (`Worker.claim_budgets`): the claim's block from its claim record
    worker_state, worker_classes = StateStore(tmp_path / "worker.sqlite"), _views(devnet, w, pool_id)[0]
    worker_state.put("claim", sid, "claimed", {"seed": claim.seed.hex(), "block": claim.block_number})
    claim_budgets = worker_classes.budgets_at(w.address, claim_block(worker_state, worker_classes, sid))
    assert claim_budgets == BUDGETS["cpu"]

    # the class a validator judges the claim by: no claim record, the block from the history's scan
    validator, validator_state = devnet.protocol(2), StateStore(tmp_path / "validator.sqlite")
    validator_classes = _views(devnet, w, pool_id)[1]
    assert claim_class(validator, validator_state, validator_classes, sid, w.address) == "cpu"

    task_set = synthetic_task_set(16, seed=3, max_operand=9, ops=("+",), name="budget-class-test")
    engine = TransformersEngine(tiny_model_dir())
    rules = SubmissionRules(problems_per_task=2, group_size=2, length_alpha=0.0, temperature=1.0, budgets=BUDGETS)

    def written_with(budgets: list[int]) -> Any:
        return generate_for_claim(engine, task_set, claim.seed, task_id=sid, problems=2, budgets=budgets,
                                  group_size=2, temperature=1.0, length_alpha=0.0, policy_step=0, worker=w.address,
                                  model=CID)

    d = tiny_model_dir()
    checkpoint = Checkpoint(AutoModelForCausalLM.from_pretrained(str(d)).eval(), AutoTokenizer.from_pretrained(str(d)),
                            CID)

    def judged(rf: Any) -> Any:
        c = Claim(submission_id=sid, node=w.address, policy_step=0,
                  proofs_hash="0x" + proofs_hash([p for r in rf.rows for p in r.proofs]).hex(),
                  work_units=sum(len(r.completion_ids) for r in rf.rows), rollouts_cid="bafkreirollouts",
                  seed=lambda: claim.seed, budget_class=lambda: claim_class(validator, validator_state, validator_classes, sid,
                                                                       w.address))
        return check_submission(rf.to_bytes(), c, task_set, rules, lambda step: checkpoint)

    declared = judged(written_with(BUDGETS["gpu-large"]))
    assert (declared.accepted, declared.reason) == (False, RejectReason.WRONG_PROBLEMS), declared.detail
    earned = judged(written_with(claim_budgets))
    assert earned.accepted, earned.detail
    worker_state.close()
    validator_state.close()


def test_verified_history_promotes_expired_leases_demote_and_the_class_is_fixed_at_the_claim(devnet):
    w, pool_id = _gpu_worker(devnet)
    params = w.pool(pool_id).params
    mine, theirs = _views(devnet, w, pool_id, history=2)
    # thresholds (tokens per lease-second): a full-length submission of the class in half the 600 s lease
    assert mine.thresholds["gpu-large"] == pytest.approx(12 * 2 * 2 / 300)

    for _ in range(2):  # two full-length submissions a few seconds after their claims, fast for every class
        t = w.claim_task(pool_id)
        assert mine.class_at(w.address, t.block_number) == "cpu"  # fewer than 2 decided leases: cpu
        w.submit_work(t.task_id, "bafkreirollouts", b"\x11" * 32, 48, 0)
    t = w.claim_task(pool_id)
    assert mine.class_at(w.address, t.block_number) == "cpu"  # windows still open: not decided yet
    w.submit_work(t.task_id, "bafkreirollouts", b"\x11" * 32, 48, 0)

    devnet.increase_time(params.window_length + 1)
    t3 = w.claim_task(pool_id)
    assert mine.class_at(w.address, t3.block_number) == theirs.class_at(w.address, t3.block_number) == "gpu-large"

    # the owner rewrites the record after the claim: that claim keeps its class (as of the block before it)
    w.update_node(w.address, gpu_model="RTX 4090", vram_gib=24, gpu_count=1, endpoint="")
    fresh = BudgetClasses(devnet.protocol(3), pool_id, params, _cfg(2))
    assert fresh.class_at(w.address, t3.block_number) == "gpu-large"
    t4 = w.claim_task(pool_id)
    assert fresh.class_at(w.address, t4.block_number) == "gpu-small"  # declared gpu-small now: capped by it

    # the node lets both leases expire: two whole leases at 0 units are its last two decided leases
    devnet.increase_time(params.lease_duration + 1)
    w.expire_lease(t3.task_id)
    w.expire_lease(t4.task_id)
    t5 = w.claim_task(pool_id)
    assert mine.class_at(w.address, t5.block_number) == theirs.class_at(w.address, t5.block_number) == "cpu"
    assert [o.verified for o in mine.history.outcomes(w.address, t5.block_number - 1)] == [True, True, True,
                                                                                            False, False]
