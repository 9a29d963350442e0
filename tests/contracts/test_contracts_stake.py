"""StakeManager: stake, unbond, withdraw, slash, challenge locks, admin params; every error and event."""

from __future__ import annotations

from brownie import ZERO_ADDRESS as ZERO
from brownie import accounts, chain
from contracts_helpers import (
    MIN_STAKE,
    TOKEN,
    VALIDATOR,
    WORKER,
    event,
    new_key_account,
    registration_signature,
    reverts,
)

from scripts._eip712 import permit_signature


def test_stake_by_anyone_for_active_node(net):
    node = net.register(WORKER, owner=accounts[3], stake=0)
    net.fund(accounts[4], 50 * TOKEN)
    net.token.approve(net.stake, 50 * TOKEN, {"from": accounts[4]})
    tx = net.stake.stake(node, 50 * TOKEN, {"from": accounts[4]})
    assert event(tx, "Staked") == {"node": node, "from": accounts[4], "amount": 50 * TOKEN}
    assert event(tx, "StakeUpdated") == {"node": node, "active": 50 * TOKEN, "unbonding": 0, "releaseAt": 0}
    assert net.stake.activeStake(node) == 50 * TOKEN == net.stake.totalStaked()
    assert not net.stake.hasMinStake(node, WORKER)
    with reverts("StakeManagerZeroAmount"):
        net.stake.stake(node, 0, {"from": accounts[4]})
    with reverts("StakeManagerNodeNotActive", accounts[8]):
        net.stake.stake(accounts[8], 1, {"from": accounts[4]})
    with reverts("ERC20InsufficientAllowance"):
        net.stake.stake(node, 1, {"from": accounts[4]})


def test_stakeWithPermit(net):
    node = new_key_account("permit-stake")
    net.register(WORKER, stake=0)  # keep the registry busy; node below registers itself
    deadline = chain.time() + 600
    sig = registration_signature(net.registry, node, node.address, WORKER, deadline)
    net.registry.register(node, WORKER, "cpu", 0, 0, "", deadline, sig, {"from": node})
    net.fund(node, MIN_STAKE)
    s = permit_signature(net.token, node, net.stake, MIN_STAKE, deadline, nonce=0)
    net.stake.stakeWithPermit(node, MIN_STAKE, deadline, s.v, f"0x{s.r:064x}", f"0x{s.s:064x}", {"from": node})
    assert net.stake.hasMinStake(node, WORKER)


def test_requestUnstake_aggregates_one_entry(net):
    node = net.register(WORKER)
    with reverts("StakeManagerNotOwner", node, accounts[4]):
        net.stake.requestUnstake(node, TOKEN, {"from": accounts[4]})
    with reverts("StakeManagerZeroAmount"):
        net.stake.requestUnstake(node, 0, {"from": node})
    with reverts("StakeManagerInsufficientStake", node, MIN_STAKE, MIN_STAKE + 1):
        net.stake.requestUnstake(node, MIN_STAKE + 1, {"from": node})
    tx = net.stake.requestUnstake(node, 10 * TOKEN, {"from": node})
    first_release = chain[tx.block_number].timestamp + 3600
    assert event(tx, "UnstakeRequested") == {
        "node": node, "amount": 10 * TOKEN, "totalUnbonding": 10 * TOKEN, "releaseAt": first_release,
    }
    chain.sleep(100)
    tx = net.stake.requestUnstake(node, 5 * TOKEN, {"from": node})
    s = net.stake.stakeOf(node)
    assert s["unbonding"] == 15 * TOKEN and s["active"] == MIN_STAKE - 15 * TOKEN
    assert s["releaseAt"] == chain[tx.block_number].timestamp + 3600 > first_release


def test_withdraw_after_release_pays_owner(net):
    node = net.register(WORKER, owner=accounts[3])
    with reverts("StakeManagerNothingToWithdraw", node):
        net.stake.withdraw(node, {"from": accounts[3]})
    net.stake.requestUnstake(node, 40 * TOKEN, {"from": accounts[3]})
    release = net.stake.stakeOf(node)["releaseAt"]
    with reverts("StakeManagerStillUnbonding", node, release):
        net.stake.withdraw(node, {"from": accounts[3]})
    chain.sleep(3601)
    with reverts("StakeManagerNotOwner", node, node):
        net.stake.withdraw(node, {"from": node})
    before = net.token.balanceOf(accounts[3])
    tx = net.stake.withdraw(node, {"from": accounts[3]})
    assert event(tx, "Withdrawn") == {"node": node, "to": accounts[3], "amount": 40 * TOKEN}
    assert net.token.balanceOf(accounts[3]) == before + 40 * TOKEN
    assert net.stake.stakeOf(node)["unbonding"] == 0
    assert net.stake.totalStaked() == MIN_STAKE - 40 * TOKEN


def test_withdraw_gas_constant_after_many_unbonds(net):
    node = net.register(WORKER, stake=MIN_STAKE)
    net.fund(node, 1)  # the owner's balance is non-zero in both measurements (same storage transitions)
    net.stake.requestUnstake(node, TOKEN, {"from": node})
    chain.sleep(3601)
    first = net.stake.withdraw(node, {"from": node}).gas_used
    for _ in range(15):
        net.stake.requestUnstake(node, TOKEN, {"from": node})
    chain.sleep(3601)
    assert net.stake.withdraw(node, {"from": node}).gas_used == first


def test_withdraw_refused_with_open_challenge(worked):
    net, worker, validator, tid = worked
    net.register(VALIDATOR)
    net.stake.requestUnstake(worker, 10 * TOKEN, {"from": worker})
    net.bond_ready(validator)
    net.ledger.challenge(tid, "e", {"from": validator})
    chain.sleep(3601)
    with reverts("StakeManagerOpenChallenges", worker, 1):
        net.stake.withdraw(worker, {"from": worker})
    net.ledger.resolve(tid, {"from": accounts[9]})  # upheld after the vote period: slashed from active first
    s = net.stake.stakeOf(worker)
    assert s["active"] == MIN_STAKE - 10 * TOKEN - 50 * TOKEN and s["unbonding"] == 10 * TOKEN
    net.stake.withdraw(worker, {"from": worker})


def test_slash_only_by_ledger_and_capped(net):
    node = net.register(WORKER)
    with reverts("AccessControlUnauthorizedAccount"):
        net.stake.slash(node, TOKEN, accounts[2], {"from": accounts[0]})
    with reverts("AccessControlUnauthorizedAccount"):
        net.stake.challengeOpened(node, {"from": accounts[0]})
    # give a test account the slasher role to drive slash directly
    net.stake.grantRole(net.stake.SLASHER_ROLE(), accounts[1], {"from": accounts[0]})
    net.stake.requestUnstake(node, 30 * TOKEN, {"from": node})
    tx = net.stake.slash(node, 10**30, accounts[2], {"from": accounts[1]})
    assert tx.return_value == MIN_STAKE
    assert event(tx, "Slashed") == {
        "node": node, "challenger": accounts[2], "amount": MIN_STAKE, "challengerReward": MIN_STAKE // 2,
        "treasuryAmount": MIN_STAKE // 2,
    }
    s = net.stake.stakeOf(node)
    assert s["active"] == s["unbonding"] == s["releaseAt"] == 0
    assert net.stake.slash(node, TOKEN, accounts[2], {"from": accounts[1]}).return_value == 0
    with reverts("StakeManagerNoOpenChallenge", node):
        net.stake.challengeClosed(node, {"from": accounts[1]})
    tx = net.stake.challengeOpened(node, {"from": accounts[1]})
    assert event(tx, "ChallengeLockUpdated") == {"node": node, "openChallenges": 1}
    net.stake.challengeClosed(node, {"from": accounts[1]})


def test_admin_parameters(net):
    tx = net.stake.setMinStake(VALIDATOR, 7, {"from": accounts[0]})
    assert event(tx, "MinStakeSet") == {"role": VALIDATOR, "amount": 7}
    assert net.stake.minStake(VALIDATOR) == 7
    tx = net.stake.setUnbondingPeriod(7200, {"from": accounts[0]})
    assert event(tx, "UnbondingPeriodSet")["period"] == 7200 == net.stake.unbondingPeriod()
    floor = net.stake.unbondingFloor()
    with reverts("StakeManagerUnbondingTooShort", floor, floor):
        net.stake.setUnbondingPeriod(floor, {"from": accounts[0]})
    tx = net.stake.setChallengerShareBps(2500, {"from": accounts[0]})
    assert event(tx, "ChallengerShareSet")["bps"] == 2500 == net.stake.challengerShareBps()
    with reverts("StakeManagerInvalidShare", 10_001):
        net.stake.setChallengerShareBps(10_001, {"from": accounts[0]})
    tx = net.stake.setTreasury(accounts[8], {"from": accounts[0]})
    assert event(tx, "TreasurySet")["treasury"] == accounts[8] == net.stake.treasury()
    with reverts("StakeManagerZeroAddress"):
        net.stake.setTreasury(ZERO, {"from": accounts[0]})
    for fn, args in [
        (net.stake.setMinStake, (WORKER, 1)),
        (net.stake.setUnbondingPeriod, (99999,)),
        (net.stake.setChallengerShareBps, (1,)),
        (net.stake.setTreasury, (accounts[1],)),
        (net.stake.raiseUnbondingFloor, (1,)),
    ]:
        with reverts("AccessControlUnauthorizedAccount"):
            fn(*args, {"from": accounts[1]})


def test_raiseUnbondingFloor(net):
    net.stake.grantRole(net.stake.SLASHER_ROLE(), accounts[1], {"from": accounts[0]})
    tx = net.stake.raiseUnbondingFloor(3000, {"from": accounts[1]})
    assert event(tx, "UnbondingFloorRaised")["floor"] == 3000
    net.stake.raiseUnbondingFloor(10, {"from": accounts[1]})  # lower: no change
    assert net.stake.unbondingFloor() == 3000
    with reverts("StakeManagerUnbondingTooShort", 3600, 3600):
        net.stake.raiseUnbondingFloor(3600, {"from": accounts[1]})
