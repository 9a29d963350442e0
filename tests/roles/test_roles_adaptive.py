"""Issue 37, online difficulty filtering end to end: in a pool whose problem order is `adaptive` the trainer writes
the difficulty table of what it trained into every checkpoint it publishes, the worker draws its claims' problems
with that table's weights, and the validator, reading the same table from the checkpoint it fetched, recomputes the
same problems and accepts the work."""

from __future__ import annotations

import pytest

from intellect.verifier.difficulty import COUNT_UNIT, DIFFICULTY_FILE, DifficultyTable

ADAPTIVE = {"tasks": {"problem_order": "adaptive"}}


@pytest.mark.timeout(600)
def test_adaptive_pool_trains_publishes_its_table_and_its_work_is_accepted(swarm, devnet):
    trainer = swarm.add("trainer", "trainer", 0, ADAPTIVE | {"trainer": {"max_steps": 3}}).start()
    validator = swarm.add("validator", "validator", 4, ADAPTIVE).start()
    # one claim per policy step (a submission is a step's batch): every step after the first trains on work
    # generated on a checkpoint that carries a table
    swarm.add("w1", "worker", 1, ADAPTIVE | {"worker": {"tasks_per_step": 1, "max_tasks": 12}}).start()

    swarm.wait(lambda: trainer.status()["policy_step"] >= 3, 420, "3 policy steps", 2)
    ckpts = swarm.root / "trainer" / "checkpoints"
    assert not (ckpts / "step-0" / DIFFICULTY_FILE).exists()  # nothing trained yet: every problem weighs the same
    trained = {s["step"]: s["rollouts"] for s in trainer.status()["steps"]}
    before = 0
    for step in (1, 2, 3):
        table = DifficultyTable.from_bytes((ckpts / f"step-{step}" / DIFFICULTY_FILE).read_bytes())
        assert table.group_size == 4
        # every completion the trainer took at this step, flat groups included, on the earlier steps' faded by 7/8
        new = COUNT_UNIT * trained[step]
        assert new + before * 7 // 8 - len(table.counts) <= table.totals()[0] <= new + before * 7 // 8 + 8, step
        before = table.totals()[0]
    # work generated on the steps that carry a table is judged against the same table by the validator
    p = devnet.protocol(0)
    assert {s.policy_step for s in p.submissions()} >= {1, 2}
    n = len(p.submissions())
    swarm.wait(lambda: validator.status()["counters"]["verified"] >= n, 180,
               f"the validator's verdicts on {n} submissions", 2)
    c = validator.status()["counters"]
    assert c["accepted"] == c["verified"] >= n and not c.get("rejected") and not c.get("challenged"), c
