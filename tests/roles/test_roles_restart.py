"""kill -9 the worker, the validator and the trainer at random points, restart them: no claim or
accepted rollout lost, no task submitted twice, the run completes."""

from __future__ import annotations

import random
import time

import pytest

from intellect.sdk import PoolState, TaskStatus


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_agents_survive_kill9_restarts(swarm, devnet):
    rng = random.Random(int(time.time()))
    p = devnet.protocol(0)
    trainer = swarm.add("trainer", "trainer", 0, {"trainer": {"max_steps": 3}}).start()
    validator = swarm.add("validator", "validator", 4).start()
    w1 = swarm.add("w1", "worker", 1, {"worker": {"max_tasks": 6}}).start()
    w2 = swarm.add("w2", "worker", 2, {"worker": {"max_tasks": 4}}).start()
    swarm.wait(lambda: (w1.status() or {}).get("submitted", 0) >= 1, 600, "a first submission")

    busy = {"w1": ("generating", "submitting", "claiming", "loading"), "validator": ("following: backlog",),
            "trainer": ("training", "publishing", "waiting")}
    kills = []
    for victim in rng.sample([w1, validator, trainer], 3):
        deadline = time.monotonic() + rng.uniform(5.0, 60.0)
        while time.monotonic() < deadline:  # aim at a moment when it is in the middle of its work
            doing = (victim.status() or {}).get("doing") or ""
            if doing.startswith(busy[victim.name]) and rng.random() < 0.3:
                break
            time.sleep(rng.uniform(0.05, 0.5))
        kills.append((victim.name, (victim.status() or {}).get("doing")))
        victim.kill9()
        time.sleep(rng.uniform(0.0, 2.0))
        victim.start()
        swarm.wait(lambda v=victim: v.status() is not None and v.status()["doing"] != "starting", 300,
                   f"{victim.name} back up")
    print("killed:", kills)

    swarm.wait(lambda: trainer.status()["policy_step"] >= 3, 900, "the run completes (3 steps)", 2)
    swarm.wait(lambda: w1.status()["done"] and w2.status()["done"], 600, "workers finish their tasks")
    for w in (w1, w2):
        node = w.status()["node"]
        claims = p.get_events(["TaskClaimed"], filters={"node": node})
        subs = p.get_events(["WorkSubmitted"], filters={"node": node})
        sub_ids = [e.args["submissionId"] for e in subs]
        assert len(sub_ids) == len(set(sub_ids)), "a task was submitted twice"
        # every claim was finished (a killed worker resumes its live claims), or ended by the pool's finish at
        # max_steps (issue 37: a finished pool pays no new work; the worker records the claim as pool_finished)
        finished = p.pool_state(p.deployment.default_pool_id).state == PoolState.FINISHED
        ended = {s["task_id"] for s in w.status()["submissions"] if s["status"] == "pool_finished"}
        for e in claims:
            tid = e.args["taskId"]
            if p.task(tid).status < TaskStatus.SUBMITTED:
                assert finished and tid in ended, f"claim {tid} lost"
        sent = {s["task_id"] for s in w.status()["submissions"] if s["status"] == "sent"}
        assert sent == set(sub_ids)

    # every accepted submission reaches the trainer (attestations survive validator and trainer kills)
    def all_attested() -> bool:
        accepted = {v["submission_id"] for v in validator.status()["verdicts"] if v["status"] == "accepted"}
        known = {s["submission_id"] for s in trainer.status()["submissions"] if s["attestations"]}
        return bool(accepted) and accepted <= known

    swarm.wait(all_attested, 300, "the trainer holds every accepted submission's attestation")
    st = trainer.status()
    consumed = st["consumed"]
    published = [s for s in st["steps"] if s["status"] == "published"]
    assert [s["step"] for s in published] == list(range(len(published))) and len(published) >= 4
    used = [sid for s in published for sid in s["submissions"]]
    assert sorted(used) == sorted(consumed) and len(used) == len(set(used)), "a submission trained twice"
    accepted = {v["submission_id"] for v in validator.status()["verdicts"] if v["status"] == "accepted"}
    assert set(consumed) <= accepted
    for s in published:
        assert p.checkpoint(p.deployment.default_pool_id, s["step"]).manifest_cid == s["checkpoint_cid"]
    assert trainer.starts >= 2 and validator.starts >= 2 and w1.starts >= 2
