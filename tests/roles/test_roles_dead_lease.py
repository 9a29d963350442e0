"""A dead worker's leases never stall the pool (issue 21), against a real anvil with the deployed ledger.

The ledger has no fixed set of tasks to re-issue: `claimTask` mints a new task (fresh id, fresh chain-drawn seed)
for whichever staked worker asks, so the leases a dead node holds block no other node, and the trainer's batch
(attested submissions, whoever made them) fills from the live workers. What a dead lease holds is only its own
node's slot (the pool's cap on open leases per node); after the expiry nobody can submit it, anyone may free the
slot (`expireLease`, counted against the node), and the restarted worker frees what is left itself."""

from __future__ import annotations

import pytest
from nodes import staked_node  # type: ignore[import-not-found]
from role_config import role_config  # type: ignore[import-not-found]

from intellect.agents.roles.leases import free_expired_leases, unfinished_claims
from intellect.sdk import ContractRevert, TaskStatus

TOKEN = 10**18


def _worker(devnet, account: int):
    return staked_node(devnet, account, "worker")


def test_dead_workers_leases_block_no_one_and_are_freed_after_expiry(devnet, tmp_path):
    from intellect.agents.roles.worker import Worker

    trainer = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    pool = trainer.pool(pool_id)
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestdeadlease")
    dead, live = _worker(devnet, 1), _worker(devnet, 3)

    cap = pool.params.max_open_leases
    held = [dead.claim_task(pool_id) for _ in range(cap)]  # every lease the dead node may hold; then it dies
    with pytest.raises(ContractRevert) as err:
        dead.claim_task(pool_id)
    assert err.value.name == "TaskLedgerTooManyLeases"

    # the live worker makes more than the dead one held (a step's whole batch), each claim a new task and seed
    made = []
    for i in range(2 * cap + 1):
        c = live.claim_task(pool_id)
        sub = live.submit_work(c.task_id, f"bafkreilive{i}", bytes([i + 1]) * 32, 2, 1)
        made.append((c.task_id, c.seed, sub.submission_id))
    ids = [t for t, _, _ in made]
    assert len(set(ids)) == len(ids) and not set(ids) & {h.task_id for h in held}
    assert len({s for _, s, _ in made} | {h.seed for h in held}) == len(made) + cap
    assert all(trainer.task(t).status == TaskStatus.SUBMITTED for t in ids)

    # inside the lease the slot cannot be taken back; after it nobody can submit the dead node's task
    with pytest.raises(ContractRevert) as err:
        trainer.expire_lease(held[0].task_id)
    assert err.value.name == "TaskLedgerLeaseNotExpired"
    devnet.increase_time(pool.params.lease_duration + 1)
    with pytest.raises(ContractRevert) as err:
        dead.submit_work(held[0].task_id, "bafkreilate", b"\x09" * 32, 2, 1)
    assert err.value.name == "TaskLedgerLeaseExpired"

    # anyone frees a dead node's expired slot (here the trainer); it counts against that node
    trainer.expire_lease(held[0].task_id)
    assert trainer.task(held[0].task_id).status == TaskStatus.EXPIRED
    book = trainer.node_book(dead.address, pool_id)
    assert (book.open_leases, book.expired_leases) == (cap - 1, 1)

    # the dead worker restarts: it resumes no expired claim, frees the slots still held, and claims again
    cfg = role_config(devnet, "worker", tmp_path / "w", 1)
    w = Worker(cfg)
    w.connect()
    assert unfinished_claims(w.protocol, w.state, w.pool_id) == []
    assert free_expired_leases(w.protocol, w.state, w.pool_id) == cap - 1
    assert all(trainer.task(h.task_id).status == TaskStatus.EXPIRED for h in held)
    book = trainer.node_book(dead.address, pool_id)
    assert (book.open_leases, book.expired_leases) == (0, cap)
    again = w.protocol.claim_task(pool_id)
    assert again.task_id > max(ids)
    w.state.close()
