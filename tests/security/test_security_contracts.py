"""Contract attacks (issue 5): reentrancy through a token hook, front-running a challenge, withdrawing stake
ahead of a slash, claiming rewards twice or early, dust-submission griefing, arithmetic boundaries, and
access control on every privileged function. Real contracts (deploy_all) on anvil; attackers are real
contracts (contracts/test/) or real keys."""

from __future__ import annotations

import brownie
import pytest
from brownie import ReentrantOwner, accounts, chain, web3
from eth_utils import keccak
from security_helpers import (  # type: ignore[import-not-found]
    C_REJECTED,
    C_UPHELD,
    MIN_STAKE,
    PROOFS_HASH,
    ROLLOUTS_CID,
    T_CHALLENGED,
    T_PAID,
    T_SUBMITTED,
    T_UPHELD,
    T_VOIDED,
    TOKEN,
    VALIDATOR,
    WORKER,
    new_key_account,
    registration_signature,
    reverts,
    selector,
)

REENTRANT = selector("ReentrancyGuardReentrantCall()")


def _call(contract, fn: str, *args) -> str:
    """ABI-encoded calldata for contract.fn(*args) (brownie's encode_input)."""
    return getattr(contract, fn).encode_input(*args)


def _owned_by_contract(net, role: int, stake: int = MIN_STAKE):
    """A node whose owner is a ReentrantOwner contract (it registers, approves and stakes through execute)."""
    owner = ReentrantOwner.deploy({"from": accounts[0]})
    node = new_key_account(f"contract-owned-{owner.address}-{role}")
    deadline = chain.time() + 3600
    sig = registration_signature(net.registry, node, owner.address, role, deadline)
    owner.execute(net.registry, _call(net.registry, "register", node, role, "H100", 80, 8, "http://x", deadline, sig),
                  {"from": accounts[0]})
    net.fund(owner, stake)
    owner.execute(net.token, _call(net.token, "approve", net.stake, stake), {"from": accounts[0]})
    owner.execute(net.stake, _call(net.stake, "stake", node, stake), {"from": accounts[0]})
    return owner, node


# ---------------------------------------------------------------------------------------------- reentrancy


def test_withdraw_reentry_through_token_hook_refused(hooked):
    net = hooked
    owner, node = _owned_by_contract(net, WORKER)
    owner.listen(net.token, {"from": accounts[0]})
    owner.execute(net.stake, _call(net.stake, "requestUnstake", node, MIN_STAKE), {"from": accounts[0]})
    chain.sleep(net.stake.unbondingPeriod() + 1)
    owner.arm(net.stake, _call(net.stake, "withdraw", node), {"from": accounts[0]})
    held = net.token.balanceOf(net.stake)

    owner.execute(net.stake, _call(net.stake, "withdraw", node), {"from": accounts[0]})

    assert owner.reentryAttempts() == 1
    assert owner.lastReentryOk() is False
    assert bytes(owner.lastReentryResult())[:4] == REENTRANT
    assert net.token.balanceOf(owner) == MIN_STAKE  # paid once
    assert net.token.balanceOf(net.stake) == held - MIN_STAKE
    assert net.stake.stakeOf(node)["unbonding"] == 0


@pytest.mark.parametrize("reenter,refusal", [
    ("claimRewards", REENTRANT),
    ("fundPool", REENTRANT),
    ("resolve", REENTRANT),
    # not guarded (moves no tokens): checks-effects-interactions already marked the submission Paid
    ("voidSubmissions", selector("TaskLedgerInvalidStatus(uint256,uint8)")),
])
def test_claim_rewards_reentry_through_token_hook_refused(hooked, reenter, refusal):
    net = hooked
    owner, node = _owned_by_contract(net, WORKER)
    net.publish(0)
    task_id = net.claim(node)
    net.submit(node, task_id, units=4)
    chain.sleep(net.params()["windowLength"] + 1)
    owner.listen(net.token, {"from": accounts[0]})
    data = {
        "claimRewards": lambda: _call(net.ledger, "claimRewards", [task_id]),
        "fundPool": lambda: _call(net.ledger, "fundPool", net.pool_id, 1),
        "resolve": lambda: _call(net.ledger, "resolve", task_id),
        "voidSubmissions": lambda: _call(net.ledger, "voidSubmissions", [task_id]),
    }[reenter]()
    owner.arm(net.ledger, data, {"from": accounts[0]})
    reward = net.ledger.claimable(task_id)
    assert reward == 4 * net.params()["rewardPerUnit"]

    owner.execute(net.ledger, _call(net.ledger, "claimRewards", [task_id]), {"from": accounts[0]})

    assert owner.lastReentryOk() is False
    assert bytes(owner.lastReentryResult())[:4] == refusal
    assert net.token.balanceOf(owner) == reward
    assert net.ledger.task(task_id)["status"] == T_PAID
    assert net.ledger.pool(net.pool_id)["reserved"] == 0


def test_intellect_token_transfer_calls_no_receiver_hook(net):
    """The deployed token is plain OpenZeppelin ERC-20 (+permit): a receiving contract is never called back,
    so no reentrancy path through the token exists; the guards above hold even if one did."""
    owner, node = _owned_by_contract(net, WORKER)
    owner.execute(net.stake, _call(net.stake, "requestUnstake", node, MIN_STAKE), {"from": accounts[0]})
    chain.sleep(net.stake.unbondingPeriod() + 1)
    owner.arm(net.stake, _call(net.stake, "withdraw", node), {"from": accounts[0]})
    owner.execute(net.stake, _call(net.stake, "withdraw", node), {"from": accounts[0]})
    assert owner.hookCalls() == 0
    assert net.token.balanceOf(owner) == MIN_STAKE


# --------------------------------------------------------------------------------- front-running a challenge


@pytest.fixture
def worked(net):
    worker = net.register(WORKER)
    v1 = net.register(VALIDATOR)
    v2 = net.register(VALIDATOR)
    net.publish(0)
    task_id = net.claim(worker)
    net.submit(worker, task_id, units=4)
    return net, worker, v1, v2, task_id


def test_challenge_frontrun_second_challenge_refused_and_vote_counts(worked):
    net, worker, v1, v2, sid = worked
    net.bond_ready(v1)
    net.bond_ready(v2)
    net.ledger.challenge(sid, "evidence-1", {"from": v1})
    with reverts("TaskLedgerAlreadyChallenged", sid):
        net.ledger.challenge(sid, "evidence-2", {"from": v2})
    net.ledger.vote(sid, True, {"from": v2})
    chain.sleep(net.params()["votePeriod"] + 1)
    before = net.stake.activeStake(worker)
    net.ledger.resolve(sid, {"from": accounts[9]})  # anyone may resolve
    c = net.ledger.challengeInfo(sid)
    assert (c["status"], c["votesFor"], c["votesAgainst"]) == (C_UPHELD, 2, 0)
    assert net.stake.activeStake(worker) == before - net.params()["slashAmount"]


def test_challenge_last_second_of_window_beats_claim(worked):
    """challenge needs now < windowEnd, claimRewards needs now >= windowEnd: no block admits both, so a worker
    cannot front-run a challenge by claiming first (this test: the last second; the next: the first after)."""
    net, worker, v1, _, sid = worked
    net.bond_ready(v1)
    window_end = net.ledger.task(sid)["windowEnd"]
    web3.provider.make_request("evm_setNextBlockTimestamp", [window_end - 1])
    with reverts("TaskLedgerWindowOpen", sid, window_end):
        net.ledger.claimRewards([sid], {"from": worker})
    web3.provider.make_request("evm_setNextBlockTimestamp", [window_end - 1])
    net.ledger.challenge(sid, "e", {"from": v1})
    assert net.ledger.task(sid)["status"] == T_CHALLENGED
    with reverts("TaskLedgerInvalidStatus", sid, T_CHALLENGED):
        net.ledger.claimRewards([sid], {"from": worker})


def test_claim_first_second_after_window_ends_challenges(worked):
    net, worker, v1, _, sid = worked
    net.bond_ready(v1)
    window_end = net.ledger.task(sid)["windowEnd"]
    web3.provider.make_request("evm_setNextBlockTimestamp", [window_end])
    with reverts("TaskLedgerWindowClosed", sid, window_end):
        net.ledger.challenge(sid, "e", {"from": v1})
    net.ledger.claimRewards([sid], {"from": worker})
    with reverts("TaskLedgerInvalidStatus", sid, T_PAID):
        net.ledger.challenge(sid, "e", {"from": v1})


def test_challenge_by_sybil_of_worker_refused(net):
    """The worker's own owner cannot pre-empt the challenge with a friendly one (conflict of interest)."""
    owner = accounts[5]
    worker = net.register(WORKER, owner=owner)
    sybil = net.register(VALIDATOR, owner=owner)
    net.publish(0)
    sid = net.claim(worker)
    net.submit(worker, sid)
    net.bond_ready(sybil)
    with reverts("TaskLedgerConflictOfInterest", sid, sybil):
        net.ledger.challenge(sid, "friendly", {"from": sybil})


# ------------------------------------------------------------------------------ withdrawing ahead of a slash


def test_withdraw_ahead_of_slash_blocked_by_unbonding_and_challenge_lock(worked):
    net, worker, v1, _, sid = worked
    # the worker sees the challenge coming and unbonds everything, then tries to leave the registry too
    net.stake.requestUnstake(worker, MIN_STAKE, {"from": worker})
    net.registry.exit(worker, {"from": worker})
    release_at = net.stake.stakeOf(worker)["releaseAt"]
    with reverts("StakeManagerStillUnbonding", worker, release_at):
        net.stake.withdraw(worker, {"from": worker})
    net.bond_ready(v1)
    net.ledger.challenge(sid, "e", {"from": v1})
    # nobody resolves for longer than the unbonding period: the open challenge still locks the stake
    chain.sleep(net.stake.unbondingPeriod() + 1)
    with reverts("StakeManagerOpenChallenges", worker, 1):
        net.stake.withdraw(worker, {"from": worker})
    net.ledger.resolve(sid, {"from": v1})
    slash = net.params()["slashAmount"]
    info = net.stake.stakeOf(worker)
    assert (info["active"], info["unbonding"], info["openChallenges"]) == (0, MIN_STAKE - slash, 0)
    net.stake.withdraw(worker, {"from": worker})  # only what the slash left
    assert net.token.balanceOf(worker) == MIN_STAKE - slash


def test_unbonding_period_cannot_be_shortened_below_pool_exposure(net):
    p = net.params()
    exposure = p["leaseDuration"] + p["windowLength"] + p["votePeriod"]
    assert net.stake.unbondingFloor() == exposure
    with reverts("StakeManagerUnbondingTooShort", exposure, exposure):
        net.stake.setUnbondingPeriod(exposure, {"from": accounts[0]})
    params = list(net.ledger.pool(net.pool_id)["params"])
    params[5] = net.stake.unbondingPeriod()  # windowLength alone as long as the unbonding period
    with reverts("TaskLedgerUnbondingTooShort"):
        net.ledger.createPool(tuple(params), {"from": accounts[3]})


# ------------------------------------------------------------------------- claiming twice / before the window


def test_claim_rewards_twice_or_early_refused(worked):
    net, worker, _, _, sid = worked
    window_end = net.ledger.task(sid)["windowEnd"]
    with reverts("TaskLedgerWindowOpen", sid, window_end):
        net.ledger.claimRewards([sid], {"from": worker})
    chain.sleep(net.params()["windowLength"] + 1)
    with reverts("TaskLedgerNotNodeOrOwner", sid, accounts[7]):
        net.ledger.claimRewards([sid], {"from": accounts[7]})
    with reverts("TaskLedgerInvalidStatus", sid, T_PAID):  # the same id twice in one batch
        net.ledger.claimRewards([sid, sid], {"from": worker})
    net.ledger.claimRewards([sid], {"from": worker})
    with reverts("TaskLedgerInvalidStatus", sid, T_PAID):
        net.ledger.claimRewards([sid], {"from": worker})
    assert net.token.balanceOf(worker) == 4 * net.params()["rewardPerUnit"]


def test_claim_rewards_after_wipe_refused(net):
    """An upheld challenge wipes the worker's other unfinalised rewards: they are voided, never paid."""
    worker = net.register(WORKER, stake=2 * MIN_STAKE)
    v1 = net.register(VALIDATOR)
    net.publish(0)
    good = net.claim(worker)
    net.submit(worker, good)
    bad = net.claim(worker)
    net.submit(worker, bad)
    net.bond_ready(v1)
    net.ledger.challenge(bad, "e", {"from": v1})
    with reverts("TaskLedgerInvalidStatus", bad, T_CHALLENGED):
        net.ledger.claimRewards([bad], {"from": worker})
    net.ledger.resolve(bad, {"from": v1})  # quorum 1, sole validator: upheld at once
    assert net.ledger.task(bad)["status"] == T_UPHELD
    chain.sleep(net.params()["windowLength"] + 1)
    with reverts("TaskLedgerSubmissionVoided", good):
        net.ledger.claimRewards([good], {"from": worker})
    budget = net.ledger.pool(net.pool_id)["budget"]
    net.ledger.voidSubmissions([good], {"from": accounts[8]})
    assert net.ledger.task(good)["status"] == T_VOIDED
    assert net.ledger.pool(net.pool_id)["budget"] == budget + 4 * net.params()["rewardPerUnit"]
    assert net.ledger.pool(net.pool_id)["reserved"] == 0


# ----------------------------------------------------------------------------------------- dust / griefing


def test_submit_work_dust_and_junk_refused(worked):
    net, worker, _, _, _ = worked
    sid = net.claim(worker)
    max_units = net.params()["maxUnitsPerSubmission"]
    with reverts("TaskLedgerInvalidWorkUnits", 0, max_units):
        net.submit(worker, sid, units=0)
    with reverts("TaskLedgerInvalidWorkUnits", max_units + 1, max_units):
        net.submit(worker, sid, units=max_units + 1)
    stranger = net.register(WORKER)
    with reverts("TaskLedgerNotClaimant", sid, stranger):
        net.submit(stranger, sid)
    with reverts("TaskLedgerUnknownTask", 10**9):
        net.submit(worker, 10**9)
    unstaked = net.new_node(WORKER)
    with reverts("TaskLedgerNotEligible", unstaked, WORKER):
        net.ledger.claimTask(net.pool_id, {"from": unstaked})
    chain.sleep(net.params()["leaseDuration"] + 1)
    with reverts("TaskLedgerLeaseExpired"):
        net.submit(worker, sid)


def test_claim_task_flood_reserves_nothing_and_stops_at_the_lease_cap(worked):
    """Claims reserve nothing; and a node cannot hoard leases (issue 21: pick the seeds it likes among many
    claims): past the pool's maxOpenLeases its claims revert until it submits or its leases expire."""
    net, worker, _, _, _ = worked
    before = net.ledger.pool(net.pool_id)
    cap = net.params()["maxOpenLeases"]
    for _ in range(cap):
        net.claim(worker)
    with reverts("TaskLedgerTooManyLeases", worker, cap, cap):
        net.claim(worker)
    after = net.ledger.pool(net.pool_id)
    assert (after["budget"], after["reserved"]) == (before["budget"], before["reserved"])


def test_dust_submission_costs_more_than_it_earns(worked):
    """A 1-unit junk submission earns 1 unit of reward but, challenged and upheld, costs slashAmount."""
    net, worker, v1, _, _ = worked
    sid = net.claim(worker)
    net.submit(worker, sid, units=1)
    p = net.params()
    assert net.ledger.task(sid)["reward"] == p["rewardPerUnit"]
    net.bond_ready(v1)
    net.ledger.challenge(sid, "junk", {"from": v1})
    chain.sleep(p["votePeriod"] + 1)
    net.ledger.resolve(sid, {"from": v1})
    assert p["slashAmount"] > p["rewardPerUnit"]
    assert net.stake.activeStake(worker) == MIN_STAKE - p["slashAmount"]


def test_challenge_griefing_costs_bond(worked):
    """A validator that challenges honest work and loses the vote forfeits its bond to the treasury."""
    net, worker, v1, v2, sid = worked
    v3 = net.register(VALIDATOR)
    bond = net.bond_ready(v1)
    treasury = net.stake.treasury()
    t_before = net.token.balanceOf(treasury)
    net.ledger.challenge(sid, "grief", {"from": v1})
    net.ledger.vote(sid, False, {"from": v2})
    net.ledger.vote(sid, False, {"from": v3})
    chain.sleep(net.params()["votePeriod"] + 1)
    net.ledger.resolve(sid, {"from": worker})
    assert net.ledger.challengeInfo(sid)["status"] == C_REJECTED
    assert net.token.balanceOf(v1) == 0
    assert net.token.balanceOf(treasury) == t_before + bond
    assert net.ledger.task(sid)["status"] == T_SUBMITTED
    assert net.stake.activeStake(worker) == MIN_STAKE
    assert net.stake.stakeOf(worker)["openChallenges"] == 0


# -------------------------------------------------------------------------------------- arithmetic bounds


def test_fund_pool_overflow_boundaries_revert(net):
    admin = accounts[0]
    budget = net.ledger.pool(net.pool_id)["budget"]
    net.fund(admin, 2**129)
    net.token.approve(net.ledger, 2**256 - 1, {"from": admin})
    with reverts("SafeCastOverflowedUintDowncast", 128, 2**128):
        net.ledger.fundPool(net.pool_id, 2**128, {"from": admin})
    net.ledger.fundPool(net.pool_id, 2**128 - 1 - budget, {"from": admin})  # exactly full
    assert net.ledger.pool(net.pool_id)["budget"] == 2**128 - 1
    with pytest.raises(brownie.exceptions.VirtualMachineError) as exc:
        net.ledger.fundPool(net.pool_id, 1, {"from": admin})
    assert "overflow" in str(exc.value).lower() or "0x11" in str(exc.value).lower()
    with reverts("TaskLedgerZeroAmount"):
        net.ledger.fundPool(net.pool_id, 0, {"from": admin})


def test_stake_overflow_and_unstake_underflow_revert(net):
    node = net.register(WORKER)
    # stake amounts are held in 112 bits (5.2e15 tokens; the hot slot also holds role and status)
    net.fund(node, 2**112)
    net.token.approve(net.stake, 2**256 - 1, {"from": node})
    with reverts("SafeCastOverflowedUintDowncast", 112, 2**112):
        net.stake.stake(node, 2**112, {"from": node})
    with pytest.raises(brownie.exceptions.VirtualMachineError):  # active + amount > 2**112 - 1: checked add
        net.stake.stake(node, 2**112 - 1, {"from": node})
    with reverts("StakeManagerInsufficientStake", node, MIN_STAKE, MIN_STAKE + 1):
        net.stake.requestUnstake(node, MIN_STAKE + 1, {"from": node})
    with reverts("StakeManagerZeroAmount"):
        net.stake.requestUnstake(node, 0, {"from": node})
    with reverts("StakeManagerNothingToWithdraw", node):
        net.stake.withdraw(node, {"from": node})


def test_largest_reward_fits_and_step_bounds_hold(net):
    """rewardPerUnit = 2**96-1 times workUnits = 2**32-1 fits the uint128 reward exactly; steps stop at 2**48-2."""
    admin = accounts[0]
    p = dict(net.ledger.pool(net.pool_id)["params"].dict())
    p.update(rewardPerUnit=2**96 - 1, maxUnitsPerSubmission=2**32 - 1, asyncLevel=0, maxReservationBps=10_000)
    fields = ["trainer", "rulesCid", "rewardPerUnit", "challengeBond", "slashAmount", "windowLength",
              "votePeriod", "leaseDuration", "maxUnitsPerSubmission", "asyncLevel", "quorum", "maxOpenLeases",
              "maxReservationBps"]
    pool_id = int(net.ledger.createPool(tuple(p[f] for f in fields), {"from": admin}).return_value)
    reward = (2**96 - 1) * (2**32 - 1)
    assert reward < 2**128
    net.fund(admin, reward)
    net.token.approve(net.ledger, reward, {"from": admin})
    net.ledger.fundPool(pool_id, reward, {"from": admin})
    with reverts("TaskLedgerStepTooLarge", 2**48 - 1):
        net.ledger.publishCheckpoint(pool_id, 2**48 - 1, "cid", {"from": admin})
    with reverts("TaskLedgerStepTooLarge", 2**256 - 1):
        net.ledger.publishCheckpoint(pool_id, 2**256 - 1, "cid", {"from": admin})
    net.ledger.publishCheckpoint(pool_id, 2**48 - 3, "cid", {"from": admin})
    worker = net.register(WORKER)
    # the stake bound on reservations (issue 33: leverage x 100 INTL) would refuse a 2**128 reward first; off here,
    # where the arithmetic bounds are the point (active stake < 2**112 times leverage < 2**32 cannot overflow)
    net.ledger.setPoolBounds(1, 1, 0, {"from": admin})
    sid = int(net.ledger.claimTask(pool_id, {"from": worker}).return_value)
    with reverts("TaskLedgerFuturePolicyStep", 2**48 - 2, 2**48 - 3):
        net.ledger.submitWork(sid, ROLLOUTS_CID, PROOFS_HASH, 1, 2**48 - 2, {"from": worker})
    with reverts("TaskLedgerStalePolicyStep", 0, 2**48 - 3):  # asyncLevel 0: only the latest step
        net.ledger.submitWork(sid, ROLLOUTS_CID, PROOFS_HASH, 1, 0, {"from": worker})
    net.ledger.submitWork(sid, ROLLOUTS_CID, PROOFS_HASH, 2**32 - 1, 2**48 - 3, {"from": worker})
    assert net.ledger.task(sid)["reward"] == reward
    assert net.ledger.pool(pool_id)["budget"] == 0
    sid2 = int(net.ledger.claimTask(pool_id, {"from": worker}).return_value)
    with reverts("TaskLedgerInsufficientBudget", pool_id, 0, 2**96 - 1):
        net.ledger.submitWork(sid2, ROLLOUTS_CID, PROOFS_HASH, 1, 2**48 - 3, {"from": worker})
    net.ledger.publishCheckpoint(pool_id, 2**48 - 2, "cid", {"from": admin})  # the last step there is


def test_stake_manager_share_and_period_bounds_revert(net):
    admin = accounts[0]
    with reverts("StakeManagerInvalidShare", 10_001):
        net.stake.setChallengerShareBps(10_001, {"from": admin})
    with reverts("StakeManagerUnbondingTooShort", 2**32, net.stake.unbondingFloor()):
        net.stake.setUnbondingPeriod(2**32, {"from": admin})
    with reverts("StakeManagerZeroAddress"):
        net.stake.setTreasury("0x" + "00" * 20, {"from": admin})


# -------------------------------------------------------------------------------------------- access control

ADMIN = bytes(32)


def _role(name: str) -> bytes:
    return keccak(text=name)


def _privileged(net, worker, validator, sid):
    """Every privileged function with the check that must stop an outsider (accounts[9])."""
    a = accounts[9]
    L, S, R, T = net.ledger, net.stake, net.registry, net.token
    ac = "AccessControlUnauthorizedAccount"
    return [
        ("IntellectToken.mint", lambda: T.mint(a, 1, {"from": a}), (ac, a, _role("MINTER_ROLE"))),
        ("IntellectToken.grantRole", lambda: T.grantRole(_role("MINTER_ROLE"), a, {"from": a}), (ac, a, ADMIN)),
        ("StakeManager.slash", lambda: S.slash(worker, 1, a, {"from": a}), (ac, a, _role("SLASHER_ROLE"))),
        ("StakeManager.slash(admin)", lambda: S.slash(worker, 1, a, {"from": accounts[0]}),
         (ac, accounts[0], _role("SLASHER_ROLE"))),
        ("StakeManager.challengeOpened", lambda: S.challengeOpened(worker, {"from": a}),
         (ac, a, _role("SLASHER_ROLE"))),
        ("StakeManager.challengeClosed", lambda: S.challengeClosed(worker, {"from": a}),
         (ac, a, _role("SLASHER_ROLE"))),
        ("StakeManager.raiseUnbondingFloor", lambda: S.raiseUnbondingFloor(10**6, {"from": a}),
         (ac, a, _role("SLASHER_ROLE"))),
        ("StakeManager.setMinStake", lambda: S.setMinStake(WORKER, 0, {"from": a}), (ac, a, ADMIN)),
        ("StakeManager.setUnbondingPeriod", lambda: S.setUnbondingPeriod(10**6, {"from": a}), (ac, a, ADMIN)),
        ("StakeManager.setChallengerShareBps", lambda: S.setChallengerShareBps(0, {"from": a}), (ac, a, ADMIN)),
        ("StakeManager.setTreasury", lambda: S.setTreasury(a, {"from": a}), (ac, a, ADMIN)),
        ("StakeManager.grantRole", lambda: S.grantRole(_role("SLASHER_ROLE"), a, {"from": a}), (ac, a, ADMIN)),
        ("StakeManager.requestUnstake", lambda: S.requestUnstake(worker, 1, {"from": a}),
         ("StakeManagerNotOwner", worker, a)),
        ("StakeManager.withdraw", lambda: S.withdraw(worker, {"from": a}), ("StakeManagerNotOwner", worker, a)),
        ("NodeRegistry.update", lambda: R.update(worker, "x", 1, 1, "http://evil", {"from": a}),
         ("NodeRegistryNotOwner", worker, a)),
        ("NodeRegistry.exit", lambda: R.exit(worker, {"from": a}), ("NodeRegistryNotOwner", worker, a)),
        ("TaskLedger.setMinWindowLength", lambda: L.setMinWindowLength(1, {"from": a}), (ac, a, ADMIN)),
        ("TaskLedger.grantRole", lambda: L.grantRole(ADMIN, a, {"from": a}), (ac, a, ADMIN)),
        ("TaskLedger.defundPool", lambda: L.defundPool(net.pool_id, 1, a, {"from": a}),
         ("TaskLedgerNotPoolOwner", net.pool_id, a)),
        ("TaskLedger.announceDefund", lambda: L.announceDefund(net.pool_id, 1, {"from": a}),
         ("TaskLedgerNotPoolOwner", net.pool_id, a)),
        ("TaskLedger.publishCheckpoint", lambda: L.publishCheckpoint(net.pool_id, 7, "evil", {"from": a}),
         ("TaskLedgerNotTrainer", net.pool_id, a)),
        ("TaskLedger.publishCheckpoint(worker)", lambda: L.publishCheckpoint(net.pool_id, 7, "x", {"from": worker}),
         ("TaskLedgerNotTrainer", net.pool_id, worker)),
        ("TaskLedger.submitWork", lambda: L.submitWork(sid, "x", PROOFS_HASH, 1, 0, {"from": a}),
         ("TaskLedgerNotClaimant", sid, a)),
        ("TaskLedger.claimTask", lambda: L.claimTask(net.pool_id, {"from": a}), ("TaskLedgerNotEligible", a, WORKER)),
        ("TaskLedger.claimTask(validator)", lambda: L.claimTask(net.pool_id, {"from": validator}),
         ("TaskLedgerNotEligible", validator, WORKER)),
        ("TaskLedger.challenge", lambda: L.challenge(sid, "x", {"from": a}), ("TaskLedgerNotEligible", a, VALIDATOR)),
        ("TaskLedger.challenge(worker)", lambda: L.challenge(sid, "x", {"from": worker}),
         ("TaskLedgerNotEligible", worker, VALIDATOR)),
        ("TaskLedger.claimRewards", lambda: L.claimRewards([sid], {"from": a}), ("TaskLedgerNotNodeOrOwner", sid, a)),
        ("TaskLedger.voidSubmissions", lambda: L.voidSubmissions([sid], {"from": a}), ("TaskLedgerNotVoidable", sid)),
    ]


def test_privileged_functions_refuse_outsiders(worked):
    net, worker, validator, _, sid = worked
    failures = []
    cases = _privileged(net, worker, validator, sid)
    for name, call, (error, *args) in cases:
        try:
            with reverts(error, *args):
                call()
        except AssertionError as exc:
            failures.append(f"{name}: {exc}")
    assert not failures, "\n".join(failures)
    assert len(cases) >= 28


def test_vote_refuses_non_validators_and_double_votes(worked):
    net, worker, v1, v2, sid = worked
    net.bond_ready(v1)
    net.ledger.challenge(sid, "e", {"from": v1})
    with reverts("TaskLedgerNotEligible", worker, VALIDATOR):
        net.ledger.vote(sid, False, {"from": worker})
    with reverts("TaskLedgerAlreadyVoted", sid, v1):
        net.ledger.vote(sid, True, {"from": v1})
    net.ledger.vote(sid, True, {"from": v2})
    with reverts("TaskLedgerAlreadyVoted", sid, v2):
        net.ledger.vote(sid, False, {"from": v2})


def test_register_with_replayed_signature_refused(net):
    """A node key's consent names its owner and a nonce: an attacker cannot take it over with a copy."""
    node = new_key_account("replay-victim")
    owner = accounts[4]
    deadline = chain.time() + 3600
    sig = registration_signature(net.registry, node, owner.address, WORKER, deadline)
    with reverts("NodeRegistryInvalidSignature"):
        net.registry.register(node, WORKER, "H100", 80, 8, "http://x", deadline, sig, {"from": accounts[9]})
    net.registry.register(node, WORKER, "H100", 80, 8, "http://x", deadline, sig, {"from": owner})
    net.registry.exit(node, {"from": owner})
    with reverts("NodeRegistryInvalidSignature"):  # same signature again: its nonce is spent
        net.registry.register(node, WORKER, "H100", 80, 8, "http://x", deadline, sig, {"from": owner})
    assert TOKEN


# ------------------------------------------------------------------------------------- dishonest validators


def _quorum_pool(net, quorum: int) -> int:
    admin = accounts[0]
    p = dict(net.ledger.pool(net.pool_id)["params"].dict())
    p["quorum"] = quorum
    fields = ["trainer", "rulesCid", "rewardPerUnit", "challengeBond", "slashAmount", "windowLength",
              "votePeriod", "leaseDuration", "maxUnitsPerSubmission", "asyncLevel", "quorum", "maxOpenLeases",
              "maxReservationBps"]
    pool_id = int(net.ledger.createPool(tuple(p[f] for f in fields), {"from": admin}).return_value)
    net.fund(admin, 10_000 * TOKEN)
    net.token.approve(net.ledger, 10_000 * TOKEN, {"from": admin})
    net.ledger.fundPool(pool_id, 10_000 * TOKEN, {"from": admin})
    net.ledger.publishCheckpoint(pool_id, 0, "cid", {"from": admin})
    return pool_id


def test_resolve_silent_validator_does_not_block(net):
    """Quorum 2, 4 validators: one challenges, one votes, two never vote; after the vote period anyone
    resolves and the votes cast decide."""
    pool_id = _quorum_pool(net, 2)
    worker = net.register(WORKER)
    v1, v2 = net.register(VALIDATOR), net.register(VALIDATOR)
    net.register(VALIDATOR)
    net.register(VALIDATOR)
    sid = int(net.ledger.claimTask(pool_id, {"from": worker}).return_value)
    net.ledger.submitWork(sid, ROLLOUTS_CID, PROOFS_HASH, 4, 0, {"from": worker})
    net.bond_ready(v1)
    net.ledger.challenge(sid, "bad", {"from": v1})
    net.ledger.vote(sid, True, {"from": v2})
    with reverts("TaskLedgerVotePeriodActive"):  # 2 of 4 is not more than half of all: no early resolution
        net.ledger.resolve(sid, {"from": accounts[9]})
    chain.sleep(net.params()["votePeriod"] + 1)
    net.ledger.resolve(sid, {"from": accounts[9]})
    assert net.ledger.challengeInfo(sid)["status"] == C_UPHELD


def test_resolve_without_quorum_has_no_outcome(net):
    """A lone challenger on a quorum-2 pool, nobody else votes: the challenge cannot pass alone, so a single
    dishonest validator cannot slash honest work on a real pool. Issue 33: a round below its quorum has no outcome
    and no loser (NoQuorum: the bond goes back, no voter is on a losing side); honest validators, who vote every
    open round, make a griefing round Rejected (bond forfeited)."""
    pool_id = _quorum_pool(net, 2)
    worker = net.register(WORKER)
    v1 = net.register(VALIDATOR)
    net.register(VALIDATOR)
    net.register(VALIDATOR)
    sid = int(net.ledger.claimTask(pool_id, {"from": worker}).return_value)
    net.ledger.submitWork(sid, ROLLOUTS_CID, PROOFS_HASH, 4, 0, {"from": worker})
    bond = net.bond_ready(v1)
    net.ledger.challenge(sid, "grief", {"from": v1})
    chain.sleep(net.params()["votePeriod"] + 1)
    treasury_before = net.token.balanceOf(net.stake.treasury())
    v1_before = net.token.balanceOf(v1)
    net.ledger.resolve(sid, {"from": worker})
    assert net.ledger.challengeInfo(sid)["status"] == 4  # NoQuorum
    assert net.stake.activeStake(worker) == MIN_STAKE
    assert net.token.balanceOf(net.stake.treasury()) == treasury_before
    assert net.token.balanceOf(v1) == v1_before + bond
    assert net.ledger.task(sid)["status"] == T_SUBMITTED


# ------------------------------------------------------------------------- steering the dispute (issue 21)


def test_voters_exiting_after_voting_cannot_flip_the_outcome(net):
    """Issue 21, attack 1: two attacker validators vote to uphold a challenge of honest work, three honest ones
    vote against, then the attacker's two exit the registry. The old ledger divided by the active count at
    resolution (5 -> 3), so 2 for / 3 against resolved early as upheld. The electorate is now fixed when the
    challenge opens (stake at the block before): the honest 300 of 500 reject it and nobody is slashed."""
    attacker = accounts[7]
    worker = net.register(WORKER)
    a1, a2 = net.register(VALIDATOR, owner=attacker), net.register(VALIDATOR, owner=attacker)
    honest = [net.register(VALIDATOR) for _ in range(3)]
    net.publish(0)
    sid = net.claim(worker)
    net.submit(worker, sid)
    bond = net.bond_ready(a1)
    net.ledger.challenge(sid, "fabricated", {"from": a1})
    net.ledger.vote(sid, True, {"from": a2})
    for v in honest:
        net.ledger.vote(sid, False, {"from": v})
    net.registry.exit(a1, {"from": attacker})
    net.registry.exit(a2, {"from": attacker})
    treasury = net.token.balanceOf(net.stake.treasury())
    assert net.ledger.resolve(sid, {"from": attacker}).return_value is False  # 300 of 500 against: early
    assert net.ledger.challengeInfo(sid)["status"] == C_REJECTED
    assert net.stake.activeStake(worker) == MIN_STAKE
    assert net.token.balanceOf(net.stake.treasury()) == treasury + bond  # the attacker's bond is forfeited


def test_sham_challenge_does_not_shield_a_cheater(net):
    """Issue 21, attack 2: a cheating worker's friends (four validator keys of another owner, 400 staked) open a
    sham challenge against its submission and vote it down; it resolves rejected. The old ledger then refused
    every later challenge of that submission (TaskLedgerAlreadyChallenged) and the cheater was paid after the
    window. Now an honest validator (500 staked) challenges again inside the window and the cheater is slashed."""
    friends_owner = accounts[7]
    cheater = net.register(WORKER, owner=accounts[6])
    friends = [net.register(VALIDATOR, owner=friends_owner) for _ in range(4)]
    honest = net.register(VALIDATOR, stake=500 * TOKEN)
    net.publish(0)
    sid = net.claim(cheater)
    net.submit(cheater, sid, units=16)
    net.bond_ready(friends[0])
    net.ledger.challenge(sid, "sham", {"from": friends[0]})
    for v in friends[1:]:
        net.ledger.vote(sid, False, {"from": v})
    # 300 against of a 900 electorate: not decisive early; the friends wait out the vote period
    with reverts("TaskLedgerVotePeriodActive"):
        net.ledger.resolve(sid, {"from": friends_owner})
    chain.sleep(net.params()["votePeriod"] + 1)
    assert net.ledger.resolve(sid, {"from": friends_owner}).return_value is False
    net.bond_ready(honest)
    net.ledger.challenge(sid, "real evidence", {"from": honest})  # round 2, inside the window
    assert net.ledger.challengeInfo(sid)["round"] == 2
    assert net.ledger.resolve(sid, {"from": accounts[9]}).return_value is True  # 500 of 900: early
    assert net.ledger.task(sid)["status"] == T_UPHELD
    assert net.stake.activeStake(cheater) == MIN_STAKE - net.params()["slashAmount"]
    chain.sleep(net.params()["windowLength"] + 1)
    with reverts("TaskLedgerInvalidStatus", sid, T_UPHELD):
        net.ledger.claimRewards([sid], {"from": cheater})


def test_sybil_keys_do_not_outvote_stake(net):
    """Six attacker keys at the minimum stake (600) against two honest validators with 800: the challenge of
    honest work is rejected however the attacker's keys vote."""
    attacker = accounts[7]
    worker = net.register(WORKER)
    keys = [net.register(VALIDATOR, owner=attacker) for _ in range(6)]
    honest = [net.register(VALIDATOR, stake=400 * TOKEN) for _ in range(2)]
    net.publish(0)
    sid = net.claim(worker)
    net.submit(worker, sid)
    net.bond_ready(keys[0])
    net.ledger.challenge(sid, "fabricated", {"from": keys[0]})
    for v in keys[1:]:
        net.ledger.vote(sid, True, {"from": v})
    for v in honest:
        net.ledger.vote(sid, False, {"from": v})
    c = net.ledger.challengeInfo(sid)
    assert (c["votesFor"], c["votesAgainst"]) == (6, 2) and c["weightFor"] < c["weightAgainst"]
    assert net.ledger.resolve(sid, {"from": accounts[9]}).return_value is False
    assert net.stake.activeStake(worker) == MIN_STAKE


# ------------------------------------------------------------------- pool bounds, caps and wipes (issue 21)


def test_honeypot_pool_slash_above_min_stake_refused(net):
    """A pool creator cannot set a slash that takes a node's whole stake: slash <= the workers' minimum stake;
    and a slash is capped at the current minimum when applied (the admin may lower it later)."""
    p = dict(net.ledger.pool(net.pool_id)["params"].dict())
    p["slashAmount"] = MIN_STAKE + 1
    with reverts("TaskLedgerSlashAboveMinStake", MIN_STAKE + 1, MIN_STAKE):
        net.ledger.createPool(tuple(p.values()), {"from": accounts[3]})
    p["slashAmount"] = MIN_STAKE
    net.ledger.createPool(tuple(p.values()), {"from": accounts[3]})
    # the default pool slashes 50; with the minimum lowered to 20 a slash takes 20
    worker = net.register(WORKER)
    v = net.register(VALIDATOR)
    net.stake.setMinStake(WORKER, 20 * TOKEN, {"from": accounts[0]})
    net.publish(0)
    sid = net.claim(worker)
    net.submit(worker, sid)
    net.bond_ready(v)
    net.ledger.challenge(sid, "bad", {"from": v})
    tx = net.ledger.resolve(sid, {"from": accounts[9]})
    assert tx.events["ChallengeResolved"][0]["slashed"] == 20 * TOKEN


def test_pool_bond_and_quorum_floors(net):
    """The protocol's floors (set by the admin: 10 INTL and quorum 3 on public networks) refuse a 1-wei bond
    and a quorum of one."""
    admin = accounts[0]
    with reverts("AccessControlUnauthorizedAccount"):
        net.ledger.setPoolBounds(10 * TOKEN, 3, 10, {"from": accounts[3]})
    tx = net.ledger.setPoolBounds(10 * TOKEN, 3, 10, {"from": admin})
    assert tx.events["PoolBoundsSet"][0]["minQuorum"] == 3
    assert tuple(int(x) for x in net.ledger.poolBounds()) == (10 * TOKEN, 3, 10)
    p = dict(net.ledger.pool(net.pool_id)["params"].dict())
    p.update(challengeBond=1, quorum=3)
    with reverts("TaskLedgerBondTooLow", 1, 10 * TOKEN):
        net.ledger.createPool(tuple(p.values()), {"from": accounts[3]})
    p.update(challengeBond=10 * TOKEN, quorum=1)
    with reverts("TaskLedgerQuorumTooLow", 1, 3):
        net.ledger.createPool(tuple(p.values()), {"from": accounts[3]})
    p.update(quorum=3)
    net.ledger.createPool(tuple(p.values()), {"from": accounts[3]})


def test_one_worker_cannot_lock_the_budget(net):
    """Issue 21: one worker reserved the whole budget with max-unit junk and honest submitWork reverted
    InsufficientBudget; after the upheld challenge the junk stayed reserved and defundPool reverted. Now a node
    holds at most maxReservationBps (25 % on the dev pool) of the escrow, and voiding the wiped junk frees it
    for defunding."""
    pool = net.ledger.pool(net.pool_id)
    budget = pool["budget"]  # 100,000 INTL; 1 INTL per unit
    cap = budget * pool["params"]["maxReservationBps"] // 10_000
    n = cap // (1024 * TOKEN)  # max-size junk submissions that fit the cap
    junk = net.register(WORKER)
    honest = net.register(WORKER)
    v = net.register(VALIDATOR)
    net.publish(0)
    ids = []
    for _ in range(n):
        sid = net.claim(junk)
        net.submit(junk, sid, units=1024)
        ids.append(sid)
    sid = net.claim(junk)
    with reverts("TaskLedgerReservationCap", junk, (n + 1) * 1024 * TOKEN, cap):
        net.submit(junk, sid, units=1024)
    h = net.claim(honest)
    net.submit(honest, h, units=1024)  # the honest worker is not locked out
    net.bond_ready(v)
    net.ledger.challenge(ids[0], "junk", {"from": v})
    assert net.ledger.resolve(ids[0], {"from": accounts[9]}).return_value is True
    # the wipe voided the junk still in its window; anyone returns it to the budget, O(1) per submission
    net.ledger.voidSubmissions(ids[1:], {"from": accounts[9]})
    assert net.ledger.nodeBook(junk, net.pool_id)["reserved"] == 0
    pool = net.ledger.pool(net.pool_id)
    assert pool["reserved"] == 1024 * TOKEN  # the honest submission only
    net.ledger.announceDefund(net.pool_id, pool["budget"], {"from": accounts[0]})
    chain.sleep(pool["params"]["leaseDuration"] + 1)  # a defund is announced a lease duration ahead (issue 33)
    net.ledger.defundPool(net.pool_id, pool["budget"], accounts[0], {"from": accounts[0]})


def test_upheld_challenge_voids_only_rewards_still_in_their_window(net):
    """Issue 21: an upheld challenge voided all of the worker's unclaimed submissions, even those whose window
    had closed before the challenge. Now only those whose window was still open when it was upheld."""
    worker = net.register(WORKER)
    v = net.register(VALIDATOR)
    net.publish(0)
    old = net.claim(worker)
    net.submit(worker, old, units=3)
    chain.sleep(net.params()["windowLength"] + 1)  # old's window closes unclaimed
    live = net.claim(worker)
    net.submit(worker, live, units=5)
    bad = net.claim(worker)
    net.submit(worker, bad, units=7)
    net.bond_ready(v)
    net.ledger.challenge(bad, "bad", {"from": v})
    assert net.ledger.resolve(bad, {"from": accounts[9]}).return_value is True
    with reverts("TaskLedgerNotVoidable", old):
        net.ledger.voidSubmissions([old], {"from": accounts[9]})
    net.ledger.voidSubmissions([live], {"from": accounts[9]})
    assert net.ledger.task(live)["status"] == T_VOIDED
    assert net.ledger.claimRewards([old], {"from": worker}).return_value == 3 * TOKEN
    assert net.ledger.nodeBook(worker, net.pool_id)["reserved"] == 0


def test_lease_hoarding_capped_and_expired_leases_count(net):
    """Issue 21: a worker could claim many tasks and submit only those whose seeds suit it. Now a node holds at
    most maxOpenLeases unsubmitted leases; an expired one keeps its slot until expireLease (anyone, after the
    lease) and stays on the node's record (expiredLeases)."""
    worker = net.register(WORKER)
    net.publish(0)
    a, b = net.claim(worker), net.claim(worker)
    with reverts("TaskLedgerTooManyLeases", worker, 2, 2):
        net.claim(worker)
    expiry = net.ledger.task(a)["leaseExpiry"]
    with reverts("TaskLedgerLeaseNotExpired", a, expiry):
        net.ledger.expireLease(a, {"from": accounts[9]})
    net.submit(worker, b)  # submitting frees its slot
    c = net.claim(worker)
    chain.sleep(net.params()["leaseDuration"] + 1)
    with reverts("TaskLedgerTooManyLeases", worker, 2, 2):  # expired, but still holding their slots
        net.claim(worker)
    tx = net.ledger.expireLease(a, {"from": accounts[9]})
    assert tx.events["LeaseExpired"][0]["expiredLeases"] == 1
    with reverts("TaskLedgerInvalidStatus", a, 7):  # Expired
        net.ledger.expireLease(a, {"from": accounts[9]})
    with reverts("TaskLedgerInvalidStatus", a, 7):
        net.submit(worker, a)
    net.claim(worker)
    book = net.ledger.nodeBook(worker, net.pool_id)
    assert (book["openLeases"], book["expiredLeases"], book["claims"]) == (2, 1, 4)
    del c
