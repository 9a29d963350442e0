"""TaskLedger pool lifecycle (issue 37): open / paused / finished, and a trainer heartbeat. Claims revert
(`TaskLedgerPoolNotOpen` naming the state) unless the pool is open and its trainer was seen (a checkpoint or a
heartbeat) within a lease duration; a finished pool pays the work submitted before and refunds the rest of its
budget to its owner."""

from __future__ import annotations

from brownie import accounts, chain
from contracts_helpers import T_PAID, TOKEN, WORKER, event, reverts

OPEN, PAUSED, FINISHED, STALLED = range(4)


def test_a_finished_pool_stops_claims_pays_submitted_work_and_refunds_the_rest(net):
    worker = net.register(WORKER)
    net.publish(0)
    pool = net.pool_id
    owner = net.ledger.pool(pool)["owner"]
    assert net.ledger.poolState(pool)[0] == OPEN
    done = net.claim(worker)
    net.submit(worker, done, units=4, step=0)
    open_lease = net.claim(worker)  # claimed before the end, never submitted
    reward = net.ledger.task(done)["reward"]
    budget = net.ledger.pool(pool)["budget"]
    before = net.token.balanceOf(owner)

    with reverts("TaskLedgerNotPoolOwner", pool, worker):  # a worker cannot end a live pool
        net.ledger.setPoolState(pool, FINISHED, {"from": worker})
    tx = net.ledger.setPoolState(pool, FINISHED, {"from": net.trainer()})  # the trainer at its last step
    assert event(tx, "PoolStateChanged")["state"] == FINISHED
    assert event(tx, "PoolDefunded")["amount"] == budget
    assert net.token.balanceOf(owner) - before == budget
    assert net.ledger.pool(pool)["budget"] == 0 and net.ledger.pool(pool)["reserved"] == reward
    assert tuple(net.ledger.poolState(pool)) == (FINISHED, 2)

    with reverts("TaskLedgerPoolNotOpen", pool, FINISHED):
        net.ledger.claimTask(pool, {"from": worker})
    with reverts("TaskLedgerInsufficientBudget"):  # the lease left open at the end is paid nothing
        net.submit(worker, open_lease, units=4, step=0)
    with reverts("TaskLedgerPoolNotOpen", pool, FINISHED):  # for good: no resume, no heartbeat
        net.ledger.setPoolState(pool, OPEN, {"from": net.trainer()})

    chain.sleep(net.ledger.pool(pool)["params"]["windowLength"] + 1)
    paid = net.ledger.claimRewards([done], {"from": worker})
    assert event(paid, "RewardClaimed")["amount"] == reward and net.ledger.task(done)["status"] == T_PAID
    assert net.ledger.pool(pool)["reserved"] == 0


def test_a_stalled_trainer_stops_claims_until_its_heartbeat(net):
    worker = net.register(WORKER)
    pool = net.pool_id
    net.publish(0)
    lease = net.ledger.pool(pool)["params"]["leaseDuration"]
    assert tuple(net.ledger.poolState(pool)) == (OPEN, 0)  # no heartbeat yet: no liveness deadline
    net.ledger.setPoolState(pool, OPEN, {"from": net.trainer()})  # the trainer's first heartbeat
    net.publish(1)  # from now on each checkpoint is a heartbeat too
    state, open_until = net.ledger.poolState(pool)
    assert state == OPEN and open_until >= chain.time() + lease - 5
    first = net.claim(worker)

    chain.sleep(lease + 1)
    chain.mine()
    assert net.ledger.poolState(pool)[0] == STALLED
    with reverts("TaskLedgerPoolNotOpen", pool, STALLED):
        net.ledger.claimTask(pool, {"from": worker})

    # the trainer comes back: an explicit heartbeat (or a checkpoint) reopens claims for a lease duration
    with reverts("TaskLedgerNotTrainer", pool, worker):
        net.ledger.setPoolState(pool, OPEN, {"from": worker})
    net.ledger.setPoolState(pool, OPEN, {"from": net.trainer()})
    assert net.ledger.poolState(pool)[0] == OPEN
    net.ledger.expireLease(first, {"from": worker})  # the stale lease out of the way of maxOpenLeases
    net.claim(worker)

    # stalled again: now anyone may finish the pool, and the budget goes back to its owner
    chain.sleep(lease + 1)
    chain.mine()
    owner = net.ledger.pool(pool)["owner"]
    budget = net.ledger.pool(pool)["budget"]
    before = net.token.balanceOf(owner)
    net.ledger.setPoolState(pool, FINISHED, {"from": accounts[7]})
    assert net.token.balanceOf(owner) - before == budget
    assert net.ledger.poolState(pool)[0] == FINISHED


def _own_pool(net, owner):
    """A funded pool owned by `owner` whose trainer is the default pool's (another account), at step 0."""
    pool = net.ledger.createPool(net.ledger.pool(net.pool_id)["params"], {"from": owner}).return_value
    net.fund(owner, 100 * TOKEN)
    net.token.approve(net.ledger, 100 * TOKEN, {"from": owner})
    net.ledger.fundPool(pool, 100 * TOKEN, {"from": owner})
    net.ledger.publishCheckpoint(pool, 0, "bafkstep0", {"from": net.trainer()})
    return pool


def test_the_owner_pauses_and_resumes(net):
    worker = net.register(WORKER)
    owner = accounts[3]
    pool = _own_pool(net, owner)
    with reverts("TaskLedgerNotPoolOwner", pool, worker):
        net.ledger.setPoolState(pool, PAUSED, {"from": worker})
    tx = net.ledger.setPoolState(pool, PAUSED, {"from": owner})
    assert event(tx, "PoolStateChanged")["state"] == PAUSED
    with reverts("TaskLedgerPoolNotOpen", pool, PAUSED):
        net.ledger.claimTask(pool, {"from": worker})
    net.ledger.publishCheckpoint(pool, 1, "bafkstep1", {"from": net.trainer()})  # a checkpoint does not reopen it
    assert net.ledger.poolState(pool)[0] == PAUSED
    with reverts("TaskLedgerNotPoolOwner", pool, net.trainer()):  # nor can the trainer resume it
        net.ledger.setPoolState(pool, OPEN, {"from": net.trainer()})
    net.ledger.setPoolState(pool, OPEN, {"from": owner})
    assert net.ledger.poolState(pool)[0] == OPEN
    net.claim(worker, pool)


def test_claims_need_a_checkpoint_before_the_pool_opens(net):
    worker = net.register(WORKER)
    pool = net.ledger.createPool(net.ledger.pool(net.pool_id)["params"], {"from": accounts[0]}).return_value
    assert tuple(net.ledger.poolState(pool)) == (OPEN, 0)
    with reverts("TaskLedgerNoCheckpoint", pool):
        net.ledger.claimTask(pool, {"from": worker})
    net.ledger.setPoolState(pool, OPEN, {"from": net.trainer()})  # a heartbeat before any checkpoint
    assert net.ledger.poolState(pool)[0] == OPEN and net.ledger.poolState(pool)[1] > 2
    with reverts("TaskLedgerNoCheckpoint", pool):
        net.ledger.claimTask(pool, {"from": worker})
    net.ledger.publishCheckpoint(pool, 0, "bafkstep0", {"from": net.trainer()})
    net.claim(worker, pool)
