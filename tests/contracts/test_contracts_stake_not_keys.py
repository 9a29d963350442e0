"""Issue 33 on the real contracts: the attacks that were demonstrated on anvil, each replayed here.

- a challenge that misses its quorum punished the correct side (Rejected: the honest uphold voter slashable, the
  reporter paid); now it resolves NoQuorum: no loser, the bond back, challengeable again inside the window;
- the sham-challenge race: a friendly challenge that ends before the honest verdicts clears nothing (the
  submission stays challengeable), and when the honest validators uphold it, the friendly challenger wins no share
  of the slash: the cheater and its friend lose at least the full slash together;
- ten minimum-stake keys locked a pool's whole budget (the reservation cap was per key); now a node's reservations
  are bounded by the reservation leverage times its stake, and an honest worker still submits;
- a pool owner front-running a claimed lease's submission with `defundPool`; now a defund is announced a lease
  duration ahead.

Each test fails on the contracts before issue 33 (checked by running this file against main's contracts); where the
old ABI lacks a new call (the 3-argument setPoolBounds, announceDefund) the test drives the old path, so that it
fails on the attack's outcome, not on the ABI.
"""

from __future__ import annotations

from brownie import accounts, chain
from brownie.exceptions import VirtualMachineError
from contracts_helpers import (
    C_UPHELD,
    MANIFEST_CID,
    MIN_STAKE,
    PROOFS_HASH,
    ROLLOUTS_CID,
    T_SUBMITTED,
    T_UPHELD,
    TOKEN,
    VALIDATOR,
    WORKER,
    event,
    reverts,
)

from scripts import _deployment

C_NO_QUORUM = 4
BOND = 10 * TOKEN
SLASH = 50 * TOKEN
VOTE = 120


def _params(**over):
    p = {
        "trainer": accounts[0].address, "rulesCid": MANIFEST_CID, "rewardPerUnit": TOKEN, "challengeBond": BOND,
        "slashAmount": SLASH, "windowLength": 300, "votePeriod": VOTE, "leaseDuration": 600,
        "maxUnitsPerSubmission": 1024, "asyncLevel": 2, "quorum": 1, "maxOpenLeases": 2, "maxReservationBps": 10_000,
    }
    p.update(over)
    return tuple(p.values())


def _pool(net, budget: int, **over) -> int:
    pid = int(net.ledger.createPool(_params(**over), {"from": accounts[0]}).return_value)
    net.fund(accounts[0], budget)
    net.token.approve(net.ledger, budget, {"from": accounts[0]})
    net.ledger.fundPool(pid, budget, {"from": accounts[0]})
    net.publish(0, pid)
    return pid


def _submit(net, node, pid: int, units: int) -> int:
    tid = net.claim(node, pid)
    net.ledger.submitWork(tid, ROLLOUTS_CID, PROOFS_HASH, units, 0, {"from": node})
    return tid


def _challenge(net, validator, sid: int) -> None:
    net.bond_ready(validator)
    net.ledger.challenge(sid, "evidence", {"from": validator})


def _balance(net, *who) -> int:
    return sum(int(net.token.balanceOf(w)) + int(net.stake.stakeOf(w)["active"]) for w in who)


# ------------------------------------------------------------------ no outcome, no loser


def test_a_quorum_miss_slashes_no_honest_voter_and_the_work_stays_challengeable(net):
    """Quorum 3; honest A challenges junk, honest B votes uphold, honest C is offline. Before issue 33 the round
    resolved Rejected: B's uphold vote lost (slashVoter paid its reporter, here the cheater) and A's bond went to
    the treasury. Now: NoQuorum, A's bond back, B not slashable, and C (back online) opens a round that upholds."""
    pid = _pool(net, 10_000 * TOKEN, quorum=3)
    worker = net.register(WORKER)
    a, b, c = (net.register(VALIDATOR) for _ in range(3))
    sid = _submit(net, worker, pid, 10)
    _challenge(net, a, sid)
    a_before = net.token.balanceOf(a)
    net.ledger.vote(sid, True, {"from": b})
    chain.sleep(VOTE + 1)
    tx = net.ledger.resolve(sid, {"from": accounts[9]})
    assert net.ledger.challengeInfo(sid)["status"] == C_NO_QUORUM
    assert tx.return_value is False and net.ledger.task(sid)["status"] == T_SUBMITTED
    assert event(tx, "ChallengeResolved")["outcome"] == C_NO_QUORUM
    assert net.token.balanceOf(a) == a_before + BOND  # no outcome, no loser: the bond goes back
    book = net.d.attester_book
    with reverts("AttesterBookNotLosingVoter", sid, b):
        book.slashVoter(sid, b, {"from": worker})  # the cheater reporting the honest uphold voter
    assert net.stake.stakeOf(b)["active"] == MIN_STAKE
    # still challengeable inside the window: C opens round 2, A and B uphold, the junk is slashed
    _challenge(net, c, sid)
    net.ledger.vote(sid, True, {"from": a})
    net.ledger.vote(sid, True, {"from": b})
    assert net.ledger.resolve(sid, {"from": accounts[9]}).return_value is True
    assert net.ledger.challengeInfo(sid)["round"] == 2 and net.ledger.task(sid)["status"] == T_UPHELD


def test_nothing_is_decided_early_without_the_quorum(net):
    """A majority of the electorate voting against decides early only once the quorum is met: a 300-INTL voter
    alone cannot reject a quorum-3 round before its end, and at its end the round has no outcome."""
    pid = _pool(net, 10_000 * TOKEN, quorum=3)
    worker = net.register(WORKER)
    a = net.register(VALIDATOR)
    big = net.register(VALIDATOR, stake=3 * MIN_STAKE)
    sid = _submit(net, worker, pid, 10)
    _challenge(net, a, sid)
    net.ledger.vote(sid, False, {"from": big})
    with reverts("TaskLedgerVotePeriodActive"):
        net.ledger.resolve(sid, {"from": accounts[9]})
    chain.sleep(VOTE + 1)
    net.ledger.resolve(sid, {"from": accounts[9]})
    assert net.ledger.challengeInfo(sid)["status"] == C_NO_QUORUM


# ------------------------------------------------------------------ the sham-challenge race


def test_a_friendly_challenge_rejected_before_the_honest_verdicts_clears_nothing(net):
    """The cheater's friend F challenges its junk at once and friend G votes it down (a tie rejects) before any
    honest verdict exists: the round is Rejected, but the submission stays challengeable inside its window; honest
    H opens round 2, H2 and H3 uphold it; the junk is never paid and the cheater and its friends lose at least the
    full slash together."""
    worker = net.register(WORKER)
    f, g = net.register(VALIDATOR), net.register(VALIDATOR)
    h, h2, h3 = (net.register(VALIDATOR) for _ in range(3))
    net.publish(0)
    coalition_before = _balance(net, worker, f, g)
    sid = _submit(net, worker, net.pool_id, 4)
    _challenge(net, f, sid)
    net.ledger.vote(sid, False, {"from": g})
    chain.sleep(VOTE + 1)
    assert net.ledger.resolve(sid, {"from": accounts[9]}).return_value is False
    assert net.ledger.task(sid)["status"] == T_SUBMITTED
    _challenge(net, h, sid)
    net.ledger.vote(sid, True, {"from": h2})
    net.ledger.vote(sid, True, {"from": h3})
    net.ledger.vote(sid, False, {"from": g})
    assert net.ledger.resolve(sid, {"from": accounts[9]}).return_value is True
    chain.sleep(301)
    with reverts("TaskLedgerInvalidStatus", sid, T_UPHELD):
        net.ledger.claimRewards([sid], {"from": worker})
    # the friends' bonds were minted to them for the test: count them as spent coalition money
    assert coalition_before + BOND - _balance(net, worker, f, g) >= SLASH


def test_a_friendly_challenger_wins_no_share_of_the_slash_it_provoked(net):
    """F (the cheater's friend) challenges the junk first; honest validators vote it upheld. Before issue 33 F got
    its bond back and the challenger's half of the slash: the cheater and F lost 25 of the 50 INTL slash together.
    Now the whole slash goes to the treasury: they lose all of it."""
    worker = net.register(WORKER)
    f = net.register(VALIDATOR)
    h, h2 = net.register(VALIDATOR), net.register(VALIDATOR)
    net.publish(0)
    sid = _submit(net, worker, net.pool_id, 4)
    net.bond_ready(f)
    coalition_before = _balance(net, worker, f)
    treasury = net.stake.treasury()
    t_before = net.token.balanceOf(treasury)
    net.ledger.challenge(sid, "evidence", {"from": f})
    net.ledger.vote(sid, True, {"from": h})
    net.ledger.vote(sid, True, {"from": h2})
    tx = net.ledger.resolve(sid, {"from": accounts[9]})
    assert tx.return_value is True and net.ledger.challengeInfo(sid)["status"] == C_UPHELD
    assert coalition_before - _balance(net, worker, f) >= SLASH
    assert net.token.balanceOf(treasury) == t_before + SLASH


# ------------------------------------------------------------------ budgets by stake


def _set_public_leverage(net) -> int:
    """The public networks' reservation leverage (10) on this ledger; 0 on a ledger without the rule."""
    if len(net.ledger.setPoolBounds.abi["inputs"]) < 3:
        return 0
    leverage = _deployment.testnet_params().reservationLeverage
    net.ledger.setPoolBounds(1, 1, leverage, {"from": accounts[0]})
    return leverage


def test_ten_minimum_stake_keys_cannot_lock_a_pool(net):
    """The demonstrated lock-up: a 10,240-INTL pool (10 % per node, 1,024 units of 1 INTL per submission) and ten
    keys of 100 INTL under ten owners, each reserving all it can. Before issue 33 they reserved the whole budget
    and the honest worker's submission reverted. Now ten keys hold at most leverage x their 1,000 INTL of stake,
    the same as one key of 1,000 INTL would, and the honest worker submits."""
    leverage = _set_public_leverage(net)
    pid = _pool(net, 10_240 * TOKEN, maxReservationBps=1_000)
    attackers = [net.register(WORKER) for _ in range(10)]
    honest = net.register(WORKER)
    for node in attackers:
        tid = net.claim(node, pid)
        for units in (1024, 1000, 500):  # the most the ledger lets the key reserve
            try:
                net.ledger.submitWork(tid, ROLLOUTS_CID, PROOFS_HASH, units, 0, {"from": node})
                break
            except VirtualMachineError:
                continue
    locked = sum(int(net.ledger.nodeBook(n, pid)["reserved"]) for n in attackers)
    if leverage:
        assert locked == leverage * 10 * MIN_STAKE  # each key at its stake cap (1,000 of the 1,024 share)
    tid = _submit(net, honest, pid, 200)
    assert net.ledger.task(tid)["status"] == T_SUBMITTED


def test_the_reservation_bound_follows_stake_not_keys(net):
    """One key of 1,000 INTL may reserve what ten keys of 100 INTL may reserve together (leverage x stake), and a
    key's cap grows with its stake."""
    leverage = _set_public_leverage(net)
    assert leverage, "this ledger has no stake-bound reservations"
    pid = _pool(net, 100_000 * TOKEN, maxUnitsPerSubmission=20_000)
    small = net.register(WORKER)
    tid = net.claim(small, pid)
    with reverts("TaskLedgerReservationCap", small, (leverage * 100 + 1) * TOKEN, leverage * MIN_STAKE):
        net.ledger.submitWork(tid, ROLLOUTS_CID, PROOFS_HASH, leverage * 100 + 1, 0, {"from": small})
    net.ledger.submitWork(tid, ROLLOUTS_CID, PROOFS_HASH, leverage * 100, 0, {"from": small})
    big = net.register(WORKER, stake=10 * MIN_STAKE)
    _submit(net, big, pid, leverage * 1_000)
    assert net.ledger.nodeBook(big, pid)["reserved"] == 10 * net.ledger.nodeBook(small, pid)["reserved"]
    assert tuple(int(x) for x in net.ledger.poolBounds()) == (1, 1, leverage)


# ------------------------------------------------------------------ defund front-running


def test_a_pool_owner_cannot_defund_under_an_open_lease(net):
    """A worker claims; the pool owner sees its submitWork coming and takes the whole budget first. Before issue 33
    the defund went through and the submission reverted (the lease then expired on the worker's record). Now a
    defund needs an announcement a lease duration old: every lease open at the announcement has ended by then."""
    worker = net.register(WORKER)
    net.publish(0)
    tid = net.claim(worker)
    budget = net.pool()["budget"]
    try:
        net.ledger.defundPool(net.pool_id, budget, accounts[0], {"from": accounts[0]})
    except VirtualMachineError as exc:
        assert "TaskLedgerDefundNotAnnounced" in str(exc.revert_msg)
    if hasattr(net.ledger, "announceDefund"):
        tx = net.ledger.announceDefund(net.pool_id, budget, {"from": accounts[0]})
        with reverts("TaskLedgerDefundNotAnnounced", net.pool_id, budget, tx.timestamp + 600):
            net.ledger.defundPool(net.pool_id, budget, accounts[0], {"from": accounts[0]})
    net.submit(worker, tid, 4, 0)
    assert net.ledger.task(tid)["status"] == T_SUBMITTED
    # a lease duration later the owner takes what is not reserved; the submission's reward stays
    chain.sleep(601)
    free = net.pool()["budget"]
    net.ledger.defundPool(net.pool_id, free, accounts[0], {"from": accounts[0]})
    assert net.pool()["budget"] == 0 and net.pool()["reserved"] == 4 * TOKEN
    with reverts("TaskLedgerDefundNotAnnounced", net.pool_id, budget - free):
        net.ledger.defundPool(net.pool_id, budget - free + 1, accounts[0], {"from": accounts[0]})
