"""The dispute game (issue 21): stake snapshots, stake-weighted votes, re-challenges after a rejection,
early resolution only once the outcome is fixed, and a property test over random orders of votes, exits,
registrations, unstakes and time moves (an honest majority of stake decides)."""

from __future__ import annotations

import os

import pytest
from brownie import ZERO_ADDRESS as ZERO
from brownie import accounts, chain
from brownie.exceptions import VirtualMachineError
from contracts_helpers import (
    C_OPEN,
    C_REJECTED,
    C_UPHELD,
    MIN_STAKE,
    T_SUBMITTED,
    T_UPHELD,
    TOKEN,
    VALIDATOR,
    WORKER,
    event,
    has_voted,
    reverts,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

VOTE = 120  # the dev pool's vote period
SLASH = 50 * TOKEN


# ------------------------------------------------------------------ validator weights (StakeManager)


def test_validator_weight_follows_stake_role_and_status(net):
    v = net.register(VALIDATOR)
    w = net.register(WORKER)
    assert net.stake.validatorWeight(v) == MIN_STAKE
    assert net.stake.validatorWeight(w) == 0  # workers weigh nothing
    assert net.stake.totalValidatorWeight() == MIN_STAKE
    before = chain.height
    net.stake.requestUnstake(v, 30 * TOKEN, {"from": v})
    assert net.stake.validatorWeight(v) == 70 * TOKEN
    tx = net.registry.exit(v, {"from": v})
    assert event(tx, "ValidatorWeightUpdated") == {"node": v, "weight": 0, "totalWeight": 0}
    assert net.stake.totalValidatorWeight() == 0
    chain.mine()
    # the past stays readable: the weight at the block before the unstake
    assert net.stake.validatorWeightAt(v, before) == MIN_STAKE
    assert net.stake.totalValidatorWeightAt(before) == MIN_STAKE
    with reverts("StakeManagerFutureLookup", chain.height + 1):
        net.stake.totalValidatorWeightAt(chain.height + 1)


def test_validator_weights_of_one_block(net):
    """Several validators staking in one block (as on a busy chain): the later pushes update the block's
    checkpoint in place (keys are equal, never out of order), and the block's final totals are read back."""
    from brownie import web3

    vs = [net.register(VALIDATOR, stake=0) for _ in range(3)]
    for v in vs:
        net.fund(v, MIN_STAKE)
        net.token.approve(net.stake, MIN_STAKE, {"from": v})
    # raw transactions signed with the validators' own keys and one evm_mine: brownie's sender waits for each
    # transaction's confirmation in a thread, which never comes while automine is off (it hung the test), and
    # impersonating the keys in anvil would add them to brownie's `accounts` (later tests then sign with them)
    raws = [v._acct.sign_transaction({
        "to": net.stake.address, "data": net.stake.stake.encode_input(v, MIN_STAKE), "gas": 400_000,
        "gasPrice": web3.eth.gas_price + 10**9, "nonce": web3.eth.get_transaction_count(v.address),
        "chainId": web3.eth.chain_id, "value": 0}).raw_transaction for v in vs]
    web3.provider.make_request("evm_setAutomine", [False])
    try:
        hashes = [web3.eth.send_raw_transaction(raw) for raw in raws]
        web3.provider.make_request("evm_mine", [])
    finally:
        web3.provider.make_request("evm_setAutomine", [True])
    receipts = [web3.eth.get_transaction_receipt(h) for h in hashes]
    block = receipts[0]["blockNumber"]
    assert [r["blockNumber"] for r in receipts] == [block] * 3 and [r["status"] for r in receipts] == [1] * 3
    assert receipts[1]["gasUsed"] < receipts[0]["gasUsed"]  # the total's checkpoint of this block, updated in place
    chain.mine()
    assert net.stake.totalValidatorWeightAt(block - 1) == 0
    assert net.stake.totalValidatorWeightAt(block) == 3 * MIN_STAKE == net.stake.totalValidatorWeight()
    assert [net.stake.validatorWeightAt(v, block) for v in vs] == [MIN_STAKE] * 3


def test_validator_weight_returns_on_re_registration(net):
    from contracts_helpers import registration_signature  # type: ignore[attr-defined]

    v = net.register(VALIDATOR)
    net.registry.exit(v, {"from": v})
    assert net.stake.validatorWeight(v) == 0
    deadline = chain.time() + 3600
    sig = registration_signature(net.registry, v, v.address, VALIDATOR, deadline)
    net.registry.register(v, VALIDATOR, "H100", 80, 8, "http://x", deadline, sig, {"from": v})
    assert net.stake.validatorWeight(v) == MIN_STAKE  # its stake never left
    net.registry.exit(v, {"from": v})
    sig = registration_signature(net.registry, v, v.address, WORKER, deadline)
    net.registry.register(v, WORKER, "H100", 80, 8, "http://x", deadline, sig, {"from": v})
    assert net.stake.validatorWeight(v) == 0  # as a worker it weighs nothing


def test_stake_hook_set_once_by_deployer_and_only_registry_notifies(net):
    assert net.registry.stakeHook() == net.stake.address
    with reverts("NodeRegistryHookNotSettable", accounts[0], net.stake.address):
        net.registry.setStakeHook(accounts[3], {"from": accounts[0]})
    with reverts("NodeRegistryHookNotSettable", accounts[3], net.stake.address):
        net.registry.setStakeHook(accounts[3], {"from": accounts[3]})
    with reverts("StakeManagerNotRegistry", accounts[3]):
        net.stake.nodeChanged(accounts[3], {"from": accounts[3]})
    assert net.registry.stakeHook() != ZERO


# ------------------------------------------------------------------ challenges weigh stake at the snapshot


def _resolvable(net, cid) -> bool:
    """Whether resolve would succeed now (what the SDK's Challenge.resolvable asks the ledger)."""
    try:
        net.ledger.resolve.call(cid, {"from": accounts[9]})
        return True
    except VirtualMachineError:
        return False


def _challenge(net, validator, sid, evidence="e"):
    net.bond_ready(validator)
    return net.ledger.challenge(sid, evidence, {"from": validator})


def test_challenge_records_snapshot_round_and_weight(worked):
    net, _worker, validator, tid = worked
    tx = _challenge(net, validator, tid)
    ev = event(tx, "ChallengeOpened")
    assert ev["round"] == 1 and ev["snapshotBlock"] == tx.block_number - 1 and ev["weight"] == MIN_STAKE
    c = net.ledger.challengeInfo(tid)
    assert (c["weightFor"], c["round"], c["snapshotBlock"]) == (MIN_STAKE, 1, tx.block_number - 1)
    assert net.stake.totalValidatorWeightAt(c["snapshotBlock"]) == MIN_STAKE  # the electorate
    assert _resolvable(net, tid)  # the only validator's stake is a majority of the electorate


def test_votes_weigh_stake_not_keys(worked):
    """Three cartel keys (300 staked) vote against one honest validator holding 400: upheld."""
    net, worker, _validator, tid = worked
    cartel_owner = accounts[7]
    honest = net.register(VALIDATOR, stake=400 * TOKEN)
    cartel = [net.register(VALIDATOR, owner=cartel_owner) for _ in range(3)]
    _challenge(net, honest, tid)
    for v in cartel:
        net.ledger.vote(tid, False, {"from": v})
    c = net.ledger.challengeInfo(tid)
    assert (c["votesFor"], c["votesAgainst"]) == (1, 3)
    assert (c["weightFor"], c["weightAgainst"]) == (400 * TOKEN, 300 * TOKEN)
    chain.sleep(VOTE + 1)
    assert net.ledger.resolve(tid, {"from": accounts[9]}).return_value is True
    assert net.stake.activeStake(worker) == MIN_STAKE - SLASH


def test_registration_after_snapshot_cannot_vote(worked):
    net, _worker, validator, tid = worked
    _challenge(net, validator, tid)
    late = net.register(VALIDATOR, stake=1000 * TOKEN)
    with reverts("TaskLedgerNoVotingWeight", tid, late):
        net.ledger.vote(tid, False, {"from": late})
    # and its stake does not enter the electorate either
    assert net.stake.totalValidatorWeightAt(net.ledger.challengeInfo(tid)["snapshotBlock"]) == MIN_STAKE


def test_vote_weight_is_the_snapshot_stake(worked):
    net, _worker, validator, tid = worked
    v2 = net.register(VALIDATOR, stake=300 * TOKEN)
    _challenge(net, validator, tid)
    net.fund(v2, 500 * TOKEN)
    net.token.approve(net.stake, 500 * TOKEN, {"from": v2})
    net.stake.stake(v2, 500 * TOKEN, {"from": v2})  # stake added after the snapshot weighs nothing
    tx = net.ledger.vote(tid, False, {"from": v2})
    assert event(tx, "VoteCast")["weight"] == 300 * TOKEN


def test_rejected_challenge_can_be_reopened_inside_the_window(worked):
    net, worker, validator, tid = worked
    v2 = net.register(VALIDATOR)
    v3 = net.register(VALIDATOR)
    _challenge(net, validator, tid)
    net.ledger.vote(tid, False, {"from": v2})
    net.ledger.vote(tid, False, {"from": v3})
    assert net.ledger.resolve(tid, {"from": accounts[9]}).return_value is False  # 2 of 3 against: early
    assert net.ledger.task(tid)["status"] == T_SUBMITTED
    # round 2, by a validator that voted against in round 1
    tx = _challenge(net, v2, tid, "second look")
    assert event(tx, "ChallengeOpened")["round"] == 2
    c = net.ledger.challengeInfo(tid)
    assert (c["status"], c["round"], c["votesFor"], c["votesAgainst"], c["challenger"]) == (C_OPEN, 2, 1, 0, v2)
    assert has_voted(net, tid, v2) and not has_voted(net, tid, v3) and not has_voted(net, tid, validator)
    net.ledger.vote(tid, True, {"from": v3})  # round-1 votes do not count as round-2 votes
    with reverts("TaskLedgerAlreadyVoted", tid, v3):
        net.ledger.vote(tid, True, {"from": v3})
    assert net.ledger.resolve(tid, {"from": accounts[9]}).return_value is True
    assert net.ledger.task(tid)["status"] == T_UPHELD
    assert net.stake.activeStake(worker) == MIN_STAKE - SLASH


def test_early_resolution_only_when_the_outcome_is_fixed(worked):
    net, _worker, validator, tid = worked
    v2, v3, v4 = (net.register(VALIDATOR) for _ in range(3))
    _challenge(net, validator, tid)  # electorate: 4 x 100
    net.ledger.vote(tid, False, {"from": v2})
    assert not _resolvable(net, tid)
    with reverts("TaskLedgerVotePeriodActive"):
        net.ledger.resolve(tid, {"from": accounts[9]})
    net.ledger.vote(tid, True, {"from": v3})  # 200 for of 400: not more than half
    with reverts("TaskLedgerVotePeriodActive"):
        net.ledger.resolve(tid, {"from": accounts[9]})
    net.ledger.vote(tid, False, {"from": v4})  # 200 against of 400: for can at best tie -> rejected
    assert _resolvable(net, tid)
    assert net.ledger.resolve(tid, {"from": accounts[9]}).return_value is False
    assert net.ledger.challengeInfo(tid)["status"] == C_REJECTED


# ------------------------------------------------------------------ property: honest majority of stake decides


def _play(net, honest_stakes, cartel_stakes, bad_work, cartel_opens, ops):
    """One game: a worker's submission (bad or good), honest validators (self-owned, majority of stake) who
    vote the truth before the vote period ends, a cartel (one owner) that wants the opposite and votes,
    exits, unstakes, registers new validators and resolves in the order `ops` says. Returns the outcome."""
    cartel_owner = accounts[7]
    worker = net.register(WORKER, owner=accounts[6])
    honest = [net.register(VALIDATOR, stake=s * TOKEN) for s in honest_stakes]
    cartel = [net.register(VALIDATOR, owner=cartel_owner, stake=s * TOKEN) for s in cartel_stakes]
    net.publish(0)
    sid = net.claim(worker)
    net.submit(worker, sid, units=4, step=0)
    # honest validators challenge only bad work; the cartel challenges good work (or bad work, as a sham)
    opener = cartel[0] if cartel_opens or not bad_work else honest[0]
    _challenge(net, opener, sid)
    pending_honest = [v for v in honest if v != opener]
    for kind, i in ops:
        try:
            if kind == "cartel_vote":
                # the cartel votes against the truth (its opener's uphold vote already counts)
                net.ledger.vote(sid, not bad_work, {"from": cartel[i % len(cartel)]})
            elif kind == "cartel_exit":
                net.registry.exit(cartel[i % len(cartel)], {"from": cartel_owner})
            elif kind == "cartel_unstake":
                net.stake.requestUnstake(cartel[i % len(cartel)], 60 * TOKEN, {"from": cartel_owner})
            elif kind == "cartel_register":
                cartel.append(net.register(VALIDATOR, owner=cartel_owner, stake=500 * TOKEN))
            elif kind == "resolve":
                net.ledger.resolve(sid, {"from": cartel_owner})
            elif kind == "honest_vote" and pending_honest:
                net.ledger.vote(sid, bad_work, {"from": pending_honest.pop(i % len(pending_honest))})
            elif kind == "sleep":
                chain.sleep(1 + i % 10)
        except VirtualMachineError:
            pass  # refused moves (vote after an early resolution, a vote without weight, ...) change nothing
    for v in pending_honest:  # the rest of the honest validators vote before the period ends
        try:
            net.ledger.vote(sid, bad_work, {"from": v})
        except VirtualMachineError as exc:
            assert (exc.revert_msg or "").startswith("TaskLedgerChallengeNotOpen"), exc.revert_msg
    chain.sleep(VOTE + 1)
    try:
        net.ledger.resolve(sid, {"from": accounts[9]})
    except VirtualMachineError as exc:
        assert (exc.revert_msg or "").startswith("TaskLedgerChallengeNotOpen"), exc.revert_msg
    return net.ledger.challengeInfo(sid)["status"], net.stake.activeStake(worker)


st_ops = st.lists(
    st.tuples(
        st.sampled_from(["cartel_vote", "cartel_exit", "cartel_unstake", "cartel_register", "resolve",
                         "honest_vote", "sleep"]),
        st.integers(min_value=0, max_value=7),
    ),
    max_size=14,
)
st_game = st.tuples(
    st.lists(st.sampled_from([100, 150, 300]), min_size=1, max_size=3),  # honest stakes (tokens)
    st.lists(st.sampled_from([100, 120, 200]), min_size=1, max_size=4),  # cartel stakes
    st.booleans(),  # the work is bad
    st.booleans(),  # the cartel opens the challenge (a sham one when the work is bad)
    st_ops,
).filter(lambda g: sum(g[0]) > sum(g[1]))


def _honest_majority_decides(net, game):
    honest_stakes, cartel_stakes, bad_work, cartel_opens, ops = game
    snap = chain.snapshot()
    try:
        status, worker_stake = _play(net, honest_stakes, cartel_stakes, bad_work, cartel_opens, ops)
    finally:
        chain.revert()
    assert status == (C_UPHELD if bad_work else C_REJECTED), game
    assert worker_stake == (MIN_STAKE - SLASH if bad_work else MIN_STAKE), game
    del snap


def test_property_honest_majority_of_stake_decides(net):
    @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
    @given(game=st_game)
    def run(game):
        _honest_majority_decides(net, game)

    run()


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_property_honest_majority_of_stake_decides_long(net):
    @settings(max_examples=int(os.environ.get("INTELLECT_DISPUTE_EXAMPLES", "150")), deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(game=st_game)
    def run(game):
        _honest_majority_decides(net, game)

    run()
