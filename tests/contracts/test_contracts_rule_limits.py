"""The contracts' money rules at their exact limits (issue 39): each rule accepts at its bound and refuses one
step past it. Time bounds land on the exact second with anvil's `evm_setNextBlockTimestamp` (the next block's
timestamp, whatever the wall clock did), as the challenge-window tests in tests/security do; amount bounds
land on the exact unit. Rules whose limits other modules already test at both sides are listed in
docs/security.md ("Rules at their limits") with those tests, not repeated here."""

from __future__ import annotations

from brownie import accounts, web3
from contracts_helpers import (
    C_OPEN,
    T_CHALLENGED,
    T_CLAIMED,
    T_SUBMITTED,
    TOKEN,
    VALIDATOR,
    WORKER,
    reverts,
)
from test_contracts_ledger import pool_params


def at(timestamp: int) -> None:
    """The next block (the next transaction's) is mined at exactly `timestamp`."""
    web3.provider.make_request("evm_setNextBlockTimestamp", [int(timestamp)])


# ------------------------------------------------------------------------------------------ unbonding


def test_withdraw_refused_one_second_before_releaseAt_allowed_at_it(net):
    node = net.register(WORKER, owner=accounts[3])
    net.stake.requestUnstake(node, 40 * TOKEN, {"from": accounts[3]})
    release = net.stake.stakeOf(node)["releaseAt"]
    at(release - 1)
    with reverts("StakeManagerStillUnbonding", node, release):
        net.stake.withdraw(node, {"from": accounts[3]})
    at(release)
    before = net.token.balanceOf(accounts[3])
    net.stake.withdraw(node, {"from": accounts[3]})
    assert net.token.balanceOf(accounts[3]) == before + 40 * TOKEN


# ------------------------------------------------------------------------------------------ leases


def test_submitWork_at_leaseExpiry_accepted_one_second_later_refused(net):
    worker = net.register(WORKER)
    net.publish(0)
    a, b = net.claim(worker), net.claim(worker)
    expiry_a, expiry_b = net.ledger.task(a)["leaseExpiry"], net.ledger.task(b)["leaseExpiry"]
    at(expiry_a)
    net.submit(worker, a)  # the lease's last second
    assert net.ledger.task(a)["status"] == T_SUBMITTED
    at(expiry_b + 1)
    with reverts("TaskLedgerLeaseExpired", b, expiry_b):
        net.submit(worker, b)


def test_expireLease_refused_at_leaseExpiry_allowed_one_second_later(net):
    worker = net.register(WORKER)
    net.publish(0)
    tid = net.claim(worker)
    expiry = net.ledger.task(tid)["leaseExpiry"]
    at(expiry)
    with reverts("TaskLedgerLeaseNotExpired", tid, expiry):
        net.ledger.expireLease(tid, {"from": accounts[9]})
    assert net.ledger.task(tid)["status"] == T_CLAIMED
    at(expiry + 1)
    net.ledger.expireLease(tid, {"from": accounts[9]})
    assert net.ledger.nodeBook(worker, net.pool_id)["expiredLeases"] == 1


# ------------------------------------------------------------------------------------------ votes


def _challenged(worked):
    """The `worked` submission challenged, with two more validators that have not voted."""
    net, _worker, validator, tid = worked
    v2, v3 = net.register(VALIDATOR), net.register(VALIDATOR)
    net.bond_ready(validator)
    net.ledger.challenge(tid, "e", {"from": validator})
    return net, tid, v2, v3, net.ledger.challengeInfo(tid)["voteEnd"]


def test_vote_at_the_last_second_of_the_vote_period_counted_at_voteEnd_refused(worked):
    net, tid, v2, v3, vote_end = _challenged(worked)
    before = net.ledger.challengeInfo(tid)["votesFor"]  # the challenger's own
    at(vote_end - 1)
    net.ledger.vote(tid, True, {"from": v2})
    assert net.ledger.challengeInfo(tid)["votesFor"] == before + 1
    at(vote_end)
    with reverts("TaskLedgerVotePeriodOver", tid, vote_end):
        net.ledger.vote(tid, False, {"from": v3})


def test_resolve_undecided_refused_one_second_before_voteEnd_allowed_at_it(worked):
    net, tid, _v2, _v3, vote_end = _challenged(worked)
    at(vote_end - 1)
    with reverts("TaskLedgerVotePeriodActive", tid, vote_end):
        net.ledger.resolve(tid, {"from": accounts[9]})
    assert net.ledger.challengeInfo(tid)["status"] == C_OPEN
    assert net.ledger.task(tid)["status"] == T_CHALLENGED
    at(vote_end)
    net.ledger.resolve(tid, {"from": accounts[9]})
    assert net.ledger.challengeInfo(tid)["status"] != C_OPEN


# ------------------------------------------------------------------------------------------ amounts


def test_submitWork_at_maxUnits_accepted(net):
    """One unit past it is refused in test_contracts_ledger.py::test_submitWork_work_units_bounds."""
    worker = net.register(WORKER)
    net.publish(0)
    top = net.pool()["params"]["maxUnitsPerSubmission"]
    tid = net.claim(worker)
    net.submit(worker, tid, top, 0)
    assert net.ledger.task(tid)["reward"] == top * net.pool()["params"]["rewardPerUnit"]


def test_submitWork_reward_equal_to_the_budget_accepted_one_unit_more_refused(net):
    """On a pool without a reservation cap (maxReservationBps 100 %), a reward may take the whole budget."""
    pid = net.ledger.createPool(pool_params(net, maxReservationBps=10_000), {"from": accounts[0]}).return_value
    net.fund(accounts[0], 4 * TOKEN)
    net.token.approve(net.ledger, 4 * TOKEN, {"from": accounts[0]})
    net.ledger.fundPool(pid, 4 * TOKEN, {"from": accounts[0]})
    worker = net.register(WORKER)
    net.publish(0, pool=pid)
    tid = net.claim(worker, pool=pid)
    with reverts("TaskLedgerInsufficientBudget", pid, 4 * TOKEN, 5 * TOKEN):
        net.submit(worker, tid, 5, 0)
    net.submit(worker, tid, 4, 0)  # the whole budget
    assert net.ledger.pool(pid)["budget"] == 0


def test_reservation_cap_reached_exactly_accepted_one_unit_more_refused(net):
    """A node's reservations may reach exactly maxReservationBps of the escrow (25 % on the dev pool)."""
    pool = net.pool()
    cap = (pool["budget"] + pool["reserved"]) * pool["params"]["maxReservationBps"] // 10_000
    top = pool["params"]["maxUnitsPerSubmission"]
    unit = pool["params"]["rewardPerUnit"]
    worker = net.register(WORKER)
    net.publish(0)
    left = cap // unit
    while left:
        units = min(top, left)
        net.submit(worker, net.claim(worker), units, 0)
        left -= units
    assert net.ledger.nodeBook(worker, net.pool_id)["reserved"] == cap  # exactly at the cap
    tid = net.claim(worker)
    with reverts("TaskLedgerReservationCap", worker, cap + unit, cap):
        net.submit(worker, tid, 1, 0)


def test_createPool_window_at_minWindowLength_accepted(net):
    """One second shorter is refused in test_contracts_ledger.py::test_createPool_window_too_short."""
    floor = net.ledger.minWindowLength()
    tx = net.ledger.createPool(pool_params(net, windowLength=floor), {"from": accounts[3]})
    assert net.ledger.pool(tx.return_value)["params"]["windowLength"] == floor



def test_pool_floors_bond_and_quorum_at_the_floor_accepted_one_below_refused(net):
    """The admin's floors (10 INTL and quorum 3 on public networks): exactly the floor passes, one wei or one
    voter less is refused (tests/security::test_pool_bond_and_quorum_floors refuses 1 wei and quorum 1)."""
    net.ledger.setPoolBounds(10 * TOKEN, 3, 0, {"from": accounts[0]})
    with reverts("TaskLedgerBondTooLow", 10 * TOKEN - 1, 10 * TOKEN):
        net.ledger.createPool(pool_params(net, challengeBond=10 * TOKEN - 1, quorum=3), {"from": accounts[3]})
    with reverts("TaskLedgerQuorumTooLow", 2, 3):
        net.ledger.createPool(pool_params(net, challengeBond=10 * TOKEN, quorum=2), {"from": accounts[3]})
    tx = net.ledger.createPool(pool_params(net, challengeBond=10 * TOKEN, quorum=3), {"from": accounts[3]})
    params = net.ledger.pool(tx.return_value)["params"]
    assert (params["challengeBond"], params["quorum"]) == (10 * TOKEN, 3)


def test_challenger_share_at_100_percent_accepted_one_bps_more_refused(net):
    with reverts("StakeManagerInvalidShare", 10_001):
        net.stake.setChallengerShareBps(10_001, {"from": accounts[0]})
    net.stake.setChallengerShareBps(10_000, {"from": accounts[0]})
    assert net.stake.challengerShareBps() == 10_000
