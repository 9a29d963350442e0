"""A canary's trace in the trainer's public /status (issue 21): its `submission` record moves like an ordinary
submission the trainer did not train on: `pending` while unchallenged, `excluded` once found challenged when it
would be picked, `rejected` once its challenge is upheld (as any upheld work is, attested or not); never
`consumed`. Against a real anvil, with the trainer's own event handler (`submission_log.record_event`) and batch
selection (`trainer_batch.next_ready`), no agent process."""

from __future__ import annotations

from nodes import staked_node  # type: ignore[import-not-found]

from intellect.agents.roles._state import StateStore
from intellect.agents.roles.canary import KIND as CANARY
from intellect.agents.roles.submission_log import record_event
from intellect.agents.roles.trainer_batch import next_ready
from intellect.sdk import Role, TaskStatus

TOKEN = 10**18


def _worker(devnet, account: int):
    return staked_node(devnet, account, Role.WORKER)


def _submit(w, pool_id: int, cid: str) -> int:
    claim = w.claim_task(pool_id)
    w.submit_work(claim.task_id, cid, b"\x55" * 32, 2, 1)
    return claim.task_id


def test_canary_record_moves_like_ordinary_bad_work(devnet, tmp_path):
    p = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    pool = p.pool(pool_id)
    p.publish_checkpoint(pool_id, 1, "bafkreimanifestcanarystatus")
    bad, canary_worker, unattested_worker = _worker(devnet, 1), _worker(devnet, 7), _worker(devnet, 5)
    ordinary = _submit(bad, pool_id, "bafkreiordinarybad")
    canary = _submit(canary_worker, pool_id, "bafkreicanarybad")
    unattested = _submit(unattested_worker, pool_id, "bafkreiunattestedbad")
    honest = devnet.protocol(2)
    honest.drip()
    honest.register_node(Role.VALIDATOR, gpu_model="cpu")
    honest.stake(honest.address, 100 * TOKEN)

    state = StateStore(tmp_path / "state.sqlite")
    state.put(CANARY, canary, "submitted", {"node": canary_worker.address})  # as the injector records it

    def pick(exclude: set[int]) -> tuple[int | None, int]:
        # the ordinary and the canary work are attested by a quorum (lazy validators), the third not
        return next_ready(p, state, lambda subs: {ordinary, canary}, train_step=1,
                          async_level=pool.params.async_level, exclude=exclude)

    def feed() -> None:
        for e in p.get_events(["WorkSubmitted", "ChallengeResolved"]):
            record_event(state, pool_id, e)

    def statuses() -> dict[int, str]:
        return {sid: state.record("submission", sid)["status"] for sid in (ordinary, canary, unattested)}

    feed()
    assert statuses() == {ordinary: "pending", canary: "pending", unattested: "pending"}
    assert pick(exclude=set()) == (ordinary, 1)  # one ready submission that is not a canary
    assert pick(exclude={ordinary}) == (None, 0)  # never the canary, nor counted as waiting

    for sid in (ordinary, canary, unattested):
        honest.challenge(sid, f"bafkreievidence{sid}")
    assert pick(exclude=set()) == (None, 1)
    st = statuses()
    assert st[canary] == st[ordinary] == "excluded"  # found challenged when it would be picked, like any other
    assert state.record("submission", canary)["data"]["chain_status"] == "challenged"

    devnet.increase_time(pool.params.vote_period + 1)
    for sid in (ordinary, canary, unattested):
        assert honest.resolve(sid) is True
        assert p.task(sid).status == TaskStatus.UPHELD
    feed()
    assert statuses() == {ordinary: "rejected", canary: "rejected", unattested: "rejected"}
    assert {state.record("submission", sid)["data"]["chain_status"] for sid in statuses()} == {"upheld"}
    state.close()
