"""The trainer's assignment of validators to a submission comes from the TaskClaimed event its follower already
read (the claim's seed, block and node), not from a search of the chain's logs for that claim (`task_claim`:
eth_getLogs from the deployment block, 10,000 blocks a request: a year of Base is ~1,600 requests per
submission). Real anvil, the trainer's own event handler (`submission_log.record_event`) and assignment
(`submission_log.assigned_slots`), no agent process."""

from __future__ import annotations

from intellect.agents.roles._state import StateStore
from intellect.agents.roles.assignment import Assigner
from intellect.agents.roles.submission_log import assigned_slots, record_event
from intellect.sdk import Role

TOKEN = 10**18


def test_trainer_assigns_from_the_claim_it_followed_without_searching_the_logs(devnet, tmp_path):
    for i in (2, 3, 4):
        v = devnet.protocol(i)
        v.drip()
        v.register_node(Role.VALIDATOR, gpu_model="cpu")
        v.stake(v.address, 100 * TOKEN)
    pool_id = devnet.deployment.default_pool_id or 1
    devnet.protocol(0).publish_checkpoint(pool_id, 0, "bafkreimanifestclaims")
    w = devnet.protocol(1)
    w.drip()
    w.register_node(Role.WORKER, gpu_model="cpu")
    w.stake(w.address, 100 * TOKEN)
    sid = w.claim_task(pool_id).task_id
    w.submit_work(sid, "bafkreirolloutsclaims", b"\x12" * 32, 2, 0)

    p = devnet.protocol(0)
    expected = Assigner(p, k=2, quorum=1).for_task(sid)  # from the logs' search
    assert expected is not None and len(expected) == 2

    state = StateStore(tmp_path / "state.sqlite")
    for e in p.get_events(["TaskClaimed", "WorkSubmitted", "ChallengeResolved"]):
        record_event(state, pool_id, e)
    assert state.record("submission", sid)["status"] == "pending"
    assert state.record("claim", sid)["data"]["node"].lower() == w.address.lower()

    def no_search(*a, **k):
        raise AssertionError("task_claim: the trainer searched the chain's logs for a claim it had followed")

    p.task_claim = no_search  # type: ignore[method-assign]
    assert assigned_slots(sid, state=state, assigner=Assigner(p, k=2, quorum=1), cache={}) == tuple(expected)
    state.close()
