"""Issue 37 at the agents' level, on a real devnet (anvil + the deployed contracts): a pool the trainer finishes
stops claims and pays only the work submitted before, the rest of its budget back to its owner; a worker says
why it does not claim; a lease the end left open is not held against the worker's budget class; a stalled
trainer stops claims until its heartbeat (`pool_lifecycle.Heartbeat`) reopens the pool. The worker is a real
`Worker` agent of dev account 3, connected to the chain (not started: no threads)."""

from __future__ import annotations

import pytest
from role_config import role_config  # type: ignore[import-not-found]

from intellect.agents.roles._state import StateStore
from intellect.agents.roles.pool_lifecycle import Heartbeat, finish_pool
from intellect.agents.roles.worker import Worker
from intellect.sdk import ContractRevert, PoolState, WorkHistory

POOL = 1  # the devnet's default pool: trainer and owner dev account 0, lease 600 s, window 300 s


def _worker(devnet, tmp_path) -> Worker:
    """A real worker agent of dev account 3 on the devnet's default pool, connected, registered and staked."""
    agent = Worker(role_config(devnet, "worker", tmp_path / "w", 3))
    agent.connect()
    assert agent.pool_id == POOL
    w = agent.protocol
    w.drip()
    w.register_node("worker")
    w.stake(w.address, w.min_stake("worker"))
    return agent


def test_a_finished_pool_stops_claims_and_paying(devnet, tmp_path) -> None:
    trainer, me = devnet.protocol(0), _worker(devnet, tmp_path)
    w = me.protocol
    trainer.publish_checkpoint(POOL, 0, "bafkreistep0")
    assert me.pool_closed() is None and not me.done()
    done = w.claim_task(POOL)
    w.submit_work(done.task_id, "bafkreirollouts", b"\x11" * 32, 10, 0)
    left_open = w.claim_task(POOL)
    pool = trainer.pool(POOL)
    owner_before = trainer.balance_of(pool.owner)

    # the trainer at its last step (`pool_lifecycle.finish_pool`)
    state = StateStore(tmp_path / "state.sqlite")
    finish_pool(trainer, state, POOL, 3)
    assert state.get("pool_finished") is True
    assert trainer.pool_state(POOL).state == PoolState.FINISHED
    after = trainer.pool(POOL)
    assert after.budget == 0 and after.reserved == pool.reserved
    assert trainer.balance_of(pool.owner) - owner_before == pool.budget

    why = me.pool_closed()
    assert why is not None and f"pool {POOL} is finished" in why and "not claiming" in why
    assert me.done()  # the worker is done for good: it only claims rewards now
    with pytest.raises(ContractRevert) as err:
        w.claim_task(POOL)
    assert err.value.name == "TaskLedgerPoolNotOpen"
    with pytest.raises(ContractRevert) as err:  # the lease open at the end is paid nothing
        w.submit_work(left_open.task_id, "bafkreilate", b"\x22" * 32, 10, 0)
    assert err.value.name == "TaskLedgerInsufficientBudget"

    devnet.increase_time(pool.params.lease_duration + pool.params.window_length + 1)
    paid = w.claim_rewards([done.task_id])
    assert paid > 0
    # the lease the pool's end left unfinished is not a failure in the worker's record; the submitted one counts
    history = WorkHistory(w, POOL, lease_duration=pool.params.lease_duration,
                          window_length=pool.params.window_length)
    outcomes = history.outcomes(w.address, w.block_number())
    assert [o.task_id for o in outcomes] == [done.task_id] and outcomes[0].verified
    me.state.close()


def test_a_stalled_trainer_stops_claims_until_its_heartbeat(devnet, tmp_path) -> None:
    trainer, me = devnet.protocol(0), _worker(devnet, tmp_path)
    w = me.protocol
    trainer.publish_checkpoint(POOL, 0, "bafkreistep0")
    lease = trainer.pool(POOL).params.lease_duration
    beat = Heartbeat(trainer, POOL, lease)
    assert beat.beat() is True  # the trainer agent's first heartbeat
    w.claim_task(POOL)
    devnet.increase_time(lease + 1)
    devnet.anvil.mine()  # a block at the new time
    assert trainer.pool_state(POOL).state == PoolState.STALLED
    why = me.pool_closed()
    assert why is not None and "stalled" in why and "heartbeat" in why and not me.done()  # stalled is not the end
    with pytest.raises(ContractRevert) as err:
        w.claim_task(POOL)
    assert err.value.name == "TaskLedgerPoolNotOpen"

    beat.last = 0.0  # a quarter lease later (the agent's monotonic clock), it beats again
    assert beat.beat() is True
    assert beat.beat() is False  # not again within a quarter lease
    assert trainer.pool_state(POOL).state == PoolState.OPEN and me.pool_closed() is None
    w.claim_task(POOL)
    me.state.close()
