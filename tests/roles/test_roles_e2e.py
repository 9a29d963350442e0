"""End to end on one machine: anvil + deployment + trainer + relay + 2 honest workers + 1 cheating
worker + 1 validator, each a separate `intellect-agent` process, with the tiny model."""

from __future__ import annotations

import json
import urllib.request

import pytest

from intellect.sdk import ChallengeStatus, TaskStatus


def _metrics(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
        return resp.read().decode()


@pytest.mark.timeout(900)
def test_swarm_trains_on_attested_rollouts_and_slashes_cheater(swarm, devnet):
    p = devnet.protocol(0)
    pool_id = p.deployment.default_pool_id
    params = p.pool(pool_id).params
    p.set_attester_reward(pool_id, 10**18)  # issue 21: validators paid per attestation the trainer used
    p.fund_attester_rewards(pool_id, 100 * 10**18)
    trainer = swarm.add("trainer", "trainer", 0, {"log_json": True}).start()
    swarm.add("relay", "relay", 5).start()
    validator = swarm.add("validator", "validator", 4).start()
    w1 = swarm.add("w1", "worker", 1, {"worker": {"max_tasks": 3}}).start()
    w2 = swarm.add("w2", "worker", 2, {"worker": {"max_tasks": 3, "gpu_model": "RTX 4090", "vram_gib": 24,
                                                  "gpu_count": 1}}).start()
    cheat = swarm.add("cheat", "worker", 3, {"worker": {"max_tasks": 2, "adversary": "wrong_model"}}).start()

    # 1. three policy steps, every cheater submission challenged
    swarm.wait(lambda: trainer.status()["policy_step"] >= 3, 480, "3 policy steps", 2)
    swarm.wait(lambda: cheat.status()["submitted"] >= 2, 120, "the cheater's submissions")
    cheater = cheat.status()["node"]
    cheat_ids = {s["task_id"] for s in cheat.status()["submissions"] if s["status"] == "sent"}
    # each cheater submission is challenged, or voided because an upheld challenge of another one slashed
    # the cheater first (an upheld challenge wipes the node's submissions still in their windows: with one
    # validator, quorum 1, the first challenge can resolve before the second bad file is even verified)
    def handled() -> set[int]:
        mine = {c["challenge_id"] for c in validator.status()["challenges"]
                if c["status"] in ("open", "upheld") and c["mine"]}
        return mine | {i for i in cheat_ids if p.task(i).status == TaskStatus.VOIDED}

    swarm.wait(lambda: handled() >= cheat_ids, 120, "challenges of every cheater submission (or its void)")
    challenged = {c["challenge_id"] for c in validator.status()["challenges"] if c["mine"]} & cheat_ids
    assert challenged, "no cheater submission was challenged"
    stake_before = sum(e.args["amount"] for e in p.get_events(["Staked"], filters={"node": cheater}))

    # 2. vote period over (a lone validator's uphold vote is already a majority: it may resolve early)
    devnet.increase_time(params.vote_period + 5)
    swarm.wait(lambda: all(p.challenge_info(i).status == ChallengeStatus.UPHELD for i in challenged), 120,
               "challenges upheld")
    assert p.active_stake(cheater) < stake_before
    slashed = p.get_events(["Slashed"], filters={"node": cheater})
    assert slashed, "no Slashed event for the cheater"

    # 3. windows over: honest workers claim their rewards
    swarm.wait(lambda: w1.status()["submitted"] >= 3 and w2.status()["submitted"] >= 3, 120, "honest submissions")
    # the trainer records the attestations it used while their windows are open (every ~5 s): wait for it
    # before moving time past the windows, or the recording is refused as too late
    vnode = validator.status()["node"]
    # (issue 38: one Merkle root a trained step, its leaves on IPFS, instead of a transaction per submission)
    swarm.wait(lambda: p.get_events(["AttestationRootRecorded"]), 120, "the trainer records the attestations it used")
    roots = p.get_events(["AttestationRootRecorded"])
    assert not p.get_events(["AttestationRecorded"])
    devnet.increase_time(params.window_length + 5)
    honest = {w1.status()["node"], w2.status()["node"]}
    swarm.wait(lambda: all(p.rewards(n).paid > 0 and not p.rewards(n).claimable_ids for n in honest), 120,
               "honest workers claim rewards")
    for n in honest:
        assert all(s.status == TaskStatus.PAID for s in p.submissions(node=n))
    assert all(s.status in (TaskStatus.UPHELD, TaskStatus.VOIDED) for s in p.submissions(node=cheater))
    assert w1.status()["rewards_claimed"] > 0
    # the trainer recorded the attestations it used; the validator claims their rewards once the windows close
    swarm.wait(lambda: p.get_events(["AttesterRewardPaid"], filters={"validator": vnode}), 120,
               "the validator claims its attester rewards")
    paid = p.get_events(["AttesterRewardPaid"], filters={"validator": vnode})
    # the one validator holds both slots of every submission (quorum 1: 2 slots): paid per slot, never per key
    # (issue 33: one key paid once for two slots would make splitting a stake over two keys pay)
    assert {e.args["amount"] for e in paid} == {2 * 10**18}
    # all windows closed at once (the clock moved past them): one claim transaction per root pays its leaves
    assert len({e.tx_hash for e in paid}) <= len(roots)
    assert sum(e.args["amount"] for e in paid) <= sum(e.args["total"] for e in roots)

    # 4. the trainer trained only on attested, unchallenged work (from its own state)
    st = trainer.status()
    vst = validator.status()
    accepted = {v["submission_id"] for v in vst["verdicts"] if v["status"] == "accepted"}
    consumed = set(st["consumed"])
    assert consumed, "the trainer consumed nothing"
    assert consumed <= accepted
    assert not consumed & cheat_ids
    subs = {s["submission_id"]: s for s in st["submissions"]}
    for sid in consumed:
        assert subs[sid]["attestations"] == [vst["node"].lower()]
        assert subs[sid]["node"].lower() != cheater.lower()
    published = [s for s in st["steps"] if s["status"] == "published"]
    assert [s["step"] for s in published][:4] == [0, 1, 2, 3]
    for s in published:
        assert p.checkpoint(pool_id, s["step"]).manifest_cid == s["checkpoint_cid"]
    assert sum(len(s["submissions"]) for s in published) == len(consumed)  # each consumed once

    # 5. every agent: /status schema, /metrics in Prometheus text, JSON logs, clean SIGTERM stop
    for agent in swarm.agents.values():
        doc = agent.status()
        assert doc["schema"] == "intellect.agent.status/v1"
        assert "# TYPE intellect_up gauge" in _metrics(agent.url())
    assert "intellect_backlog" in _metrics(validator.url())
    lines = [ln for ln in trainer.log_text().splitlines() if ln.startswith("{")]
    assert lines and all(json.loads(ln)["role"] == "trainer" for ln in lines[:20])
    codes = {name: a.stop() for name, a in swarm.agents.items()}
    assert codes == dict.fromkeys(swarm.agents, 0), codes
