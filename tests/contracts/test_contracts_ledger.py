"""TaskLedger: pools, checkpoints, claims, submissions, challenges, votes, resolution, rewards."""

from __future__ import annotations

import brownie
from brownie import ZERO_ADDRESS as ZERO
from brownie import accounts, chain
from contracts_helpers import (
    C_NO_QUORUM,
    C_OPEN,
    C_REJECTED,
    C_UPHELD,
    MANIFEST_CID,
    MIN_STAKE,
    PROOFS_HASH,
    ROLLOUTS_CID,
    T_CHALLENGED,
    T_CLAIMED,
    T_PAID,
    T_SUBMITTED,
    T_UPHELD,
    T_VOIDED,
    TOKEN,
    VALIDATOR,
    WORKER,
    event,
    has_voted,
    reverts,
)


def pool_params(net, **over):
    p = {
        "trainer": accounts[0].address,
        "rulesCid": MANIFEST_CID,
        "rewardPerUnit": TOKEN,
        "challengeBond": 10 * TOKEN,
        "slashAmount": 50 * TOKEN,
        "windowLength": 300,
        "votePeriod": 120,
        "leaseDuration": 600,
        "maxUnitsPerSubmission": 16,
        "asyncLevel": 2,
        "quorum": 1,
        "maxOpenLeases": 2,
        "maxReservationBps": 10_000,
    }
    p.update(over)
    return tuple(p.values())


# ------------------------------------------------------------------ pools


def test_createPool_emits_and_stores(net):
    tx = net.ledger.createPool(pool_params(net, maxUnitsPerSubmission=7), {"from": accounts[3]})
    ev = event(tx, "PoolCreated")
    pid = ev["poolId"]
    assert pid == net.ledger.poolCount() == 2
    assert ev["owner"] == accounts[3] and ev["trainer"] == accounts[0]
    view = net.ledger.pool(pid)
    assert view["owner"] == accounts[3]
    assert view["params"]["maxUnitsPerSubmission"] == 7
    assert view["params"]["rulesCid"] == MANIFEST_CID
    assert view["budget"] == 0 and view["reserved"] == 0 and not view["hasCheckpoint"]


def test_createPool_invalid_params_named(net):
    for field, value in [
        ("trainer", ZERO),
        ("rulesCid", ""),
        ("rewardPerUnit", 0),
        ("challengeBond", 0),
        ("votePeriod", 0),
        ("leaseDuration", 0),
        ("maxUnitsPerSubmission", 0),
        ("quorum", 0),
        ("maxOpenLeases", 0),
        ("maxReservationBps", 0),
        ("maxReservationBps", 10_001),
        ("windowLength", 2**24),
        ("leaseDuration", 2**24),
        ("asyncLevel", 256),
    ]:
        with reverts("TaskLedgerInvalidPoolParam", field):
            net.ledger.createPool(pool_params(net, **{field: value}), {"from": accounts[3]})


def test_createPool_window_too_short(net):
    with reverts("TaskLedgerWindowTooShort", 59, 60):
        net.ledger.createPool(pool_params(net, windowLength=59), {"from": accounts[3]})


def test_createPool_unbonding_not_longer_than_exposure(net):
    # unbonding 3600 on dev: lease 600 + window 2000 + vote 1000 = 3600 is not shorter
    with reverts("TaskLedgerUnbondingTooShort", 3600, 3600):
        net.ledger.createPool(
            pool_params(net, leaseDuration=600, windowLength=2000, votePeriod=1000), {"from": accounts[3]}
        )


def test_createPool_raises_unbonding_floor(net):
    net.ledger.createPool(pool_params(net, leaseDuration=600, windowLength=2000, votePeriod=999), {"from": accounts[3]})
    assert net.stake.unbondingFloor() == 3599
    with reverts("StakeManagerUnbondingTooShort", 3599, 3599):
        net.stake.setUnbondingPeriod(3599, {"from": accounts[0]})


def test_fundPool_and_defundPool(net):
    budget = net.pool()["budget"]
    net.fund(accounts[4], 50 * TOKEN)
    net.token.approve(net.ledger, 50 * TOKEN, {"from": accounts[4]})
    tx = net.ledger.fundPool(net.pool_id, 50 * TOKEN, {"from": accounts[4]})
    assert event(tx, "PoolFunded")["budget"] == budget + 50 * TOKEN
    with reverts("TaskLedgerNotPoolOwner", net.pool_id, accounts[4]):
        net.ledger.defundPool(net.pool_id, TOKEN, accounts[4], {"from": accounts[4]})
    with reverts("TaskLedgerNotPoolOwner", net.pool_id, accounts[4]):
        net.ledger.announceDefund(net.pool_id, TOKEN, {"from": accounts[4]})
    # issue 33: a defund is announced a lease duration (600 s on the dev pool) before it can be taken
    tx = net.ledger.announceDefund(net.pool_id, 10**30, {"from": accounts[0]})
    assert event(tx, "PoolDefundAnnounced")["executableAt"] == tx.timestamp + 600
    with reverts("TaskLedgerDefundNotAnnounced", net.pool_id, 10**30, tx.timestamp + 600):
        net.ledger.defundPool(net.pool_id, 20 * TOKEN, accounts[5], {"from": accounts[0]})
    chain.sleep(601)
    before = net.token.balanceOf(accounts[5])
    tx = net.ledger.defundPool(net.pool_id, 20 * TOKEN, accounts[5], {"from": accounts[0]})
    assert event(tx, "PoolDefunded")["amount"] == 20 * TOKEN
    assert net.token.balanceOf(accounts[5]) == before + 20 * TOKEN
    with reverts("TaskLedgerInsufficientBudget"):
        net.ledger.defundPool(net.pool_id, 10**29, accounts[5], {"from": accounts[0]})
    with reverts("TaskLedgerZeroAmount"):
        net.ledger.fundPool(net.pool_id, 0, {"from": accounts[4]})
    with reverts("TaskLedgerUnknownPool", 99):
        net.ledger.fundPool(99, 1, {"from": accounts[4]})
    with reverts("TaskLedgerInvalidPoolParam", "to"):
        net.ledger.defundPool(net.pool_id, 1, ZERO, {"from": accounts[0]})


# ------------------------------------------------------------------ checkpoints


def test_publishCheckpoint_steps_strictly_increase(net):
    tx = net.ledger.publishCheckpoint(net.pool_id, 5, "cid-5", {"from": accounts[0]})
    assert event(tx, "CheckpointPublished") == {"poolId": net.pool_id, "step": 5, "manifestCid": "cid-5"}
    assert net.ledger.latestStep(net.pool_id) == 5
    assert net.ledger.checkpoint(net.pool_id, 5) == "cid-5"
    with reverts("TaskLedgerStepNotIncreasing", net.pool_id, 5, 5):
        net.ledger.publishCheckpoint(net.pool_id, 5, "x", {"from": accounts[0]})
    with reverts("TaskLedgerStepNotIncreasing", net.pool_id, 4, 5):
        net.ledger.publishCheckpoint(net.pool_id, 4, "x", {"from": accounts[0]})
    net.ledger.publishCheckpoint(net.pool_id, 6, "cid-6", {"from": accounts[0]})
    assert net.ledger.checkpoint(net.pool_id, 5) == "cid-5"
    with reverts("TaskLedgerUnknownCheckpoint", net.pool_id, 3):
        net.ledger.checkpoint(net.pool_id, 3)


def test_publishCheckpoint_only_trainer(net):
    with reverts("TaskLedgerNotTrainer", net.pool_id, accounts[2]):
        net.ledger.publishCheckpoint(net.pool_id, 0, "x", {"from": accounts[2]})
    with reverts("TaskLedgerUnknownPool", 42):
        net.ledger.publishCheckpoint(42, 0, "x", {"from": accounts[0]})


def test_publishCheckpoint_bad_inputs(net):
    with reverts("TaskLedgerStepTooLarge", 2**48 - 1):
        net.ledger.publishCheckpoint(net.pool_id, 2**48 - 1, "x", {"from": accounts[0]})
    with reverts("TaskLedgerInvalidPoolParam", "manifestCid"):
        net.ledger.publishCheckpoint(net.pool_id, 1, "", {"from": accounts[0]})
    with reverts("TaskLedgerNoCheckpoint", net.pool_id):
        net.ledger.latestStep(net.pool_id)


# ------------------------------------------------------------------ claims


def test_claimTask_needs_checkpoint(net):
    worker = net.register(WORKER)
    with reverts("TaskLedgerNoCheckpoint", net.pool_id):
        net.ledger.claimTask(net.pool_id, {"from": worker})
    with reverts("TaskLedgerUnknownPool", 9):
        net.ledger.claimTask(9, {"from": worker})


def test_claimTask_emits_seed_and_lease(net):
    worker = net.register(WORKER)
    net.publish(0)
    tx = net.ledger.claimTask(net.pool_id, {"from": worker})
    ev = event(tx, "TaskClaimed")
    assert ev["taskId"] == tx.return_value == 1
    assert ev["node"] == worker and ev["poolId"] == net.pool_id
    assert ev["leaseExpiry"] == chain[tx.block_number].timestamp + 600
    t = net.ledger.task(1)
    assert t["status"] == T_CLAIMED and t["node"] == worker and t["leaseExpiry"] == ev["leaseExpiry"]
    tx2 = net.ledger.claimTask(net.pool_id, {"from": worker})
    assert tx2.block_number != tx.block_number  # hence a different block hash, hence a different seed
    assert net.ledger.nextTaskId() == 3


def test_claimTask_seed_is_the_claim_blocks_hash_mixed_with_node_and_id(net):
    from eth_abi import encode
    from eth_utils import keccak

    from intellect.sdk import claim_seed

    worker = net.register(WORKER)
    net.publish(0)
    tx = net.ledger.claimTask(net.pool_id, {"from": worker})
    assert "seed" not in event(tx, "TaskClaimed")  # not knowable inside the claim transaction
    block_hash = bytes(brownie.web3.eth.get_block(tx.block_number)["hash"])
    expected = keccak(encode(["bytes32", "address", "uint256"], [block_hash, worker.address, 1]))
    assert claim_seed(block_hash, worker.address, 1) == expected


def test_claimTask_refuses_ineligible_nodes(net):
    unstaked = net.register(WORKER, stake=0)
    validator = net.register(VALIDATOR)
    net.publish(0)
    with reverts("TaskLedgerNotEligible", unstaked, WORKER):
        net.ledger.claimTask(net.pool_id, {"from": unstaked})
    with reverts("TaskLedgerNotEligible", validator, WORKER):
        net.ledger.claimTask(net.pool_id, {"from": validator})
    with reverts("TaskLedgerNotEligible", accounts[7], WORKER):
        net.ledger.claimTask(net.pool_id, {"from": accounts[7]})
    worker = net.register(WORKER)
    net.registry.exit(worker, {"from": worker})
    with reverts("TaskLedgerNotEligible", worker, WORKER):
        net.ledger.claimTask(net.pool_id, {"from": worker})


# ------------------------------------------------------------------ submissions


def test_submitWork_reserves_and_opens_window(net):
    worker = net.register(WORKER)
    net.publish(0)
    tid = net.claim(worker)
    budget = net.pool()["budget"]
    tx = net.ledger.submitWork(tid, ROLLOUTS_CID, PROOFS_HASH, 4, 0, {"from": worker})
    ev = event(tx, "WorkSubmitted")
    assert ev["submissionId"] == tid and ev["node"] == worker and ev["rolloutsCid"] == ROLLOUTS_CID
    assert ev["proofsHash"] == PROOFS_HASH and ev["workUnits"] == 4 and ev["policyStep"] == 0
    assert ev["reward"] == 4 * TOKEN
    assert ev["windowEnd"] == chain[tx.block_number].timestamp + 300
    p = net.pool()
    assert p["budget"] == budget - 4 * TOKEN and p["reserved"] == 4 * TOKEN
    t = net.ledger.task(tid)
    assert t["status"] == T_SUBMITTED and t["reward"] == 4 * TOKEN and t["windowEnd"] == ev["windowEnd"]


def test_submitWork_only_claimant_once_inside_lease(net):
    worker = net.register(WORKER)
    other = net.register(WORKER)
    net.publish(0)
    tid = net.claim(worker)
    with reverts("TaskLedgerUnknownTask", 77):
        net.ledger.submitWork(77, ROLLOUTS_CID, PROOFS_HASH, 1, 0, {"from": worker})
    with reverts("TaskLedgerNotClaimant", tid, other):
        net.ledger.submitWork(tid, ROLLOUTS_CID, PROOFS_HASH, 1, 0, {"from": other})
    net.submit(worker, tid, 1, 0)
    with reverts("TaskLedgerInvalidStatus", tid, T_SUBMITTED):
        net.submit(worker, tid, 1, 0)
    tid2 = net.claim(worker)
    expiry = net.ledger.task(tid2)["leaseExpiry"]
    chain.sleep(601)
    with reverts("TaskLedgerLeaseExpired", tid2, expiry):
        net.submit(worker, tid2, 1, 0)


def test_submitWork_work_units_bounds(net):
    worker = net.register(WORKER)
    net.publish(0)
    tid = net.claim(worker)
    top = net.pool()["params"]["maxUnitsPerSubmission"]
    with reverts("TaskLedgerInvalidWorkUnits", 0, top):
        net.submit(worker, tid, 0, 0)
    with reverts("TaskLedgerInvalidWorkUnits", top + 1, top):
        net.submit(worker, tid, top + 1, 0)


def test_submitWork_policy_step_window(net):
    worker = net.register(WORKER)
    for step in (0, 3, 5, 7):
        net.publish(step)
    # latest 7, asyncLevel 2: 5..7 accepted
    tid = net.claim(worker)
    with reverts("TaskLedgerStalePolicyStep", 4, 5):
        net.submit(worker, tid, 1, 4)
    with reverts("TaskLedgerFuturePolicyStep", 8, 7):
        net.submit(worker, tid, 1, 8)
    net.submit(worker, tid, 1, 5)
    tid = net.claim(worker)
    net.submit(worker, tid, 1, 7)


def test_submitWork_insufficient_budget(net):
    worker = net.register(WORKER)
    net.publish(0)
    net.defund(net.pool()["budget"] - 3 * TOKEN)
    tid = net.claim(worker)
    with reverts("TaskLedgerInsufficientBudget", net.pool_id, 3 * TOKEN, 4 * TOKEN):
        net.submit(worker, tid, 4, 0)


# ------------------------------------------------------------------ rewards


def test_claimRewards_after_window_pays_owner(net):
    owner = accounts[6]
    worker = net.register(WORKER, owner=owner)
    net.publish(0)
    tid = net.claim(worker)
    net.submit(worker, tid, 4, 0)
    assert net.ledger.claimable(tid) == 0
    end = net.ledger.task(tid)["windowEnd"]
    with reverts("TaskLedgerWindowOpen", tid, end):
        net.ledger.claimRewards([tid], {"from": worker})
    chain.sleep(301)
    chain.mine()
    assert net.ledger.claimable(tid) == 4 * TOKEN
    before = net.token.balanceOf(owner)
    tx = net.ledger.claimRewards([tid], {"from": worker})
    assert event(tx, "RewardClaimed") == {"submissionId": tid, "node": worker, "owner": owner, "amount": 4 * TOKEN}
    assert net.token.balanceOf(owner) == before + 4 * TOKEN
    assert net.ledger.task(tid)["status"] == T_PAID
    assert net.pool()["reserved"] == 0
    with reverts("TaskLedgerInvalidStatus", tid, T_PAID):
        net.ledger.claimRewards([tid], {"from": owner})


def test_claimRewards_batch_and_caller_checks(net):
    owner = accounts[6]
    w1 = net.register(WORKER, owner=owner)
    w2 = net.register(WORKER, owner=owner)
    w3 = net.register(WORKER)
    net.publish(0)
    ids = []
    for w in (w1, w2, w1, w3):
        tid = net.claim(w)
        net.submit(w, tid, 2, 0)
        ids.append(tid)
    chain.sleep(301)
    with reverts("TaskLedgerEmptyBatch"):
        net.ledger.claimRewards([], {"from": owner})
    with reverts("TaskLedgerNotNodeOrOwner", ids[0], accounts[8]):
        net.ledger.claimRewards([ids[0]], {"from": accounts[8]})
    with reverts("TaskLedgerUnknownTask", 999):
        net.ledger.claimRewards([999], {"from": owner})
    with reverts("TaskLedgerNotNodeOrOwner", ids[3], owner):
        net.ledger.claimRewards(ids, {"from": owner})
    before = net.token.balanceOf(owner)
    tx = net.ledger.claimRewards(ids[:3], {"from": owner})
    assert tx.return_value == 6 * TOKEN and len(tx.events["RewardClaimed"]) == 3
    assert net.token.balanceOf(owner) == before + 6 * TOKEN
    # w1 (owned by `owner`) also owns a node m: a batch of w1's and m's work mixes two payees
    m = net.register(WORKER, owner=w1)
    t1, t2 = net.claim(w1), net.claim(m)
    net.submit(w1, t1, 1, 0)
    net.submit(m, t2, 1, 0)
    chain.sleep(301)
    with reverts("TaskLedgerMixedOwners", t2, w1, owner):
        net.ledger.claimRewards([t1, t2], {"from": w1})


# ------------------------------------------------------------------ challenges


def test_challenge_opens_locks_and_pulls_bond(worked):
    net, worker, validator, tid = worked
    net.bond_ready(validator)
    bal = net.token.balanceOf(validator)
    tx = net.ledger.challenge(tid, "evidence-cid", {"from": validator})
    ev = event(tx, "ChallengeOpened")
    assert ev["challengeId"] == tid == tx.return_value
    assert ev["node"] == worker and ev["challenger"] == validator and ev["evidenceCid"] == "evidence-cid"
    assert ev["voteEnd"] == chain[tx.block_number].timestamp + 120
    assert net.token.balanceOf(validator) == bal - 10 * TOKEN
    c = net.ledger.challengeInfo(tid)
    assert c["status"] == C_OPEN and c["votesFor"] == 1 and c["votesAgainst"] == 0
    assert has_voted(net, tid, validator)
    assert net.ledger.task(tid)["status"] == T_CHALLENGED
    assert net.stake.stakeOf(worker)["openChallenges"] == 1
    assert event(tx, "ChallengeLockUpdated")["openChallenges"] == 1


def test_challenge_refusals(worked):
    net, worker, validator, tid = worked
    net.bond_ready(validator)
    with reverts("TaskLedgerUnknownTask", 50):
        net.ledger.challenge(50, "e", {"from": validator})
    with reverts("TaskLedgerNotEligible", worker, VALIDATOR):
        net.ledger.challenge(tid, "e", {"from": worker})
    # a validator of the worker's owner may not judge it
    own_validator = net.register(VALIDATOR, owner=worker)
    with reverts("TaskLedgerConflictOfInterest", tid, own_validator):
        net.ledger.challenge(tid, "e", {"from": own_validator})
    claimed = net.claim(worker)
    with reverts("TaskLedgerInvalidStatus", claimed, T_CLAIMED):
        net.ledger.challenge(claimed, "e", {"from": validator})
    net.ledger.challenge(tid, "e", {"from": validator})
    with reverts("TaskLedgerAlreadyChallenged", tid):
        net.ledger.challenge(tid, "e", {"from": validator})


def test_challenge_window_closed(worked):
    net, _worker, validator, tid = worked
    net.bond_ready(validator)
    end = net.ledger.task(tid)["windowEnd"]
    chain.sleep(300)
    with reverts("TaskLedgerWindowClosed", tid, end):
        net.ledger.challenge(tid, "e", {"from": validator})


def test_challenge_without_bond_allowance_reverts(worked):
    net, _worker, validator, tid = worked
    with reverts("ERC20InsufficientAllowance"):
        net.ledger.challenge(tid, "e", {"from": validator})


def test_vote_rules(worked):
    net, worker, validator, tid = worked
    v2 = net.register(VALIDATOR)
    v3 = net.register(VALIDATOR)
    own = net.register(VALIDATOR, owner=worker)
    net.bond_ready(validator)
    with reverts("TaskLedgerUnknownChallenge", tid):
        net.ledger.vote(tid, True, {"from": v2})
    net.ledger.challenge(tid, "e", {"from": validator})
    with reverts("TaskLedgerAlreadyVoted", tid, validator):
        net.ledger.vote(tid, True, {"from": validator})
    with reverts("TaskLedgerConflictOfInterest", tid, own):
        net.ledger.vote(tid, False, {"from": own})
    with reverts("TaskLedgerNotEligible", worker, VALIDATOR):
        net.ledger.vote(tid, False, {"from": worker})
    tx = net.ledger.vote(tid, False, {"from": v2})
    ev = event(tx, "VoteCast")
    assert ev == {"challengeId": tid, "validator": v2, "uphold": False, "weight": MIN_STAKE}
    c = net.ledger.challengeInfo(tid)
    assert (c["votesFor"], c["votesAgainst"], c["weightFor"], c["weightAgainst"]) == (1, 1, MIN_STAKE, MIN_STAKE)
    assert has_voted(net, tid, v2)
    with reverts("TaskLedgerAlreadyVoted", tid, v2):
        net.ledger.vote(tid, True, {"from": v2})
    end = net.ledger.challengeInfo(tid)["voteEnd"]
    chain.sleep(121)
    with reverts("TaskLedgerVotePeriodOver", tid, end):
        net.ledger.vote(tid, True, {"from": v3})


def test_resolve_upheld_slashes_wipes_and_returns_bond(worked):
    net, worker, validator, tid = worked
    # a second, older-window submission of the same worker gets wiped too
    tid2 = net.claim(worker)
    net.submit(worker, tid2, 2, 0)
    net.register(VALIDATOR)
    net.bond_ready(validator)
    net.ledger.challenge(tid, "e", {"from": validator})
    v_bal = net.token.balanceOf(validator)
    treasury = net.stake.treasury()
    t_bal = net.token.balanceOf(treasury)
    reserved = net.pool()["reserved"]
    # 2 active validators: the challenger's vote alone is not a majority -> wait for the vote period
    with reverts("TaskLedgerVotePeriodActive"):
        net.ledger.resolve(tid, {"from": accounts[9]})
    chain.sleep(121)
    tx = net.ledger.resolve(tid, {"from": accounts[9]})
    assert tx.return_value is True
    ev = event(tx, "ChallengeResolved")
    assert ev["upheld"] and ev["slashed"] == 50 * TOKEN
    assert event(tx, "WorkerWiped") == {"node": worker, "newEpoch": 1}
    # issue 33: the whole slash to the treasury (no challenger share a friendly challenger could win back)
    assert event(tx, "Slashed")["challengerReward"] == 0
    assert net.token.balanceOf(validator) == v_bal + 10 * TOKEN
    assert net.token.balanceOf(treasury) == t_bal + 50 * TOKEN
    assert net.stake.stakeOf(worker)["active"] == MIN_STAKE - 50 * TOKEN
    assert net.stake.stakeOf(worker)["openChallenges"] == 0
    assert net.ledger.task(tid)["status"] == T_UPHELD
    assert net.ledger.challengeInfo(tid)["status"] == C_UPHELD
    assert net.pool()["reserved"] == reserved - 4 * TOKEN
    with reverts("TaskLedgerChallengeNotOpen", tid, C_UPHELD):
        net.ledger.resolve(tid, {"from": accounts[9]})
    # the other submission is void: no reward, reservation released by anyone
    chain.sleep(301)
    assert net.ledger.claimable(tid2) == 0
    with reverts("TaskLedgerSubmissionVoided", tid2):
        net.ledger.claimRewards([tid2], {"from": worker})
    tx = net.ledger.voidSubmissions([tid2], {"from": accounts[9]})
    assert event(tx, "SubmissionVoided") == {"submissionId": tid2, "node": worker, "released": 2 * TOKEN}
    assert net.ledger.task(tid2)["status"] == T_VOIDED
    assert net.pool()["reserved"] == 0
    # the slashed worker is below the minimum: no more tasks
    with reverts("TaskLedgerNotEligible", worker, WORKER):
        net.ledger.claimTask(net.pool_id, {"from": worker})


def test_resolve_early_with_majority_of_all_validators(worked):
    net, _worker, validator, tid = worked
    net.bond_ready(validator)
    net.ledger.challenge(tid, "e", {"from": validator})
    # one active validator: its vote is a majority of all -> resolvable at once
    tx = net.ledger.resolve(tid, {"from": accounts[9]})
    assert event(tx, "ChallengeResolved")["upheld"]


def test_resolve_rejected_forfeits_bond_and_submission_stays_claimable(worked):
    net, worker, validator, tid = worked
    v2 = net.register(VALIDATOR)
    v3 = net.register(VALIDATOR)
    net.bond_ready(validator)
    net.ledger.challenge(tid, "e", {"from": validator})
    net.ledger.vote(tid, False, {"from": v2})
    # 3 validators; 1 against is not decisive yet
    with reverts("TaskLedgerVotePeriodActive"):
        net.ledger.resolve(tid, {"from": accounts[9]})
    net.ledger.vote(tid, False, {"from": v3})
    treasury = net.stake.treasury()
    t_bal = net.token.balanceOf(treasury)
    tx = net.ledger.resolve(tid, {"from": accounts[9]})  # 2 of 3 against: decisive early
    assert tx.return_value is False
    assert event(tx, "ChallengeResolved")["slashed"] == 0
    assert net.token.balanceOf(treasury) == t_bal + 10 * TOKEN
    assert net.ledger.challengeInfo(tid)["status"] == C_REJECTED
    assert net.ledger.task(tid)["status"] == T_SUBMITTED
    assert net.stake.stakeOf(worker)["openChallenges"] == 0
    chain.sleep(301)
    assert net.ledger.claimRewards([tid], {"from": worker}).return_value == 4 * TOKEN


def test_resolve_tie_rejects_after_vote_period(worked):
    net, _worker, validator, tid = worked
    v2 = net.register(VALIDATOR)
    net.register(VALIDATOR)
    net.bond_ready(validator)
    net.ledger.challenge(tid, "e", {"from": validator})
    net.ledger.vote(tid, False, {"from": v2})
    chain.sleep(121)
    assert net.ledger.resolve(tid, {"from": accounts[9]}).return_value is False


def test_resolve_quorum_not_met_has_no_outcome(net):
    pid = event(net.ledger.createPool(pool_params(net, quorum=3), {"from": accounts[0]}), "PoolCreated")["poolId"]
    net.fund(accounts[0], 100 * TOKEN)
    net.token.approve(net.ledger, 100 * TOKEN, {"from": accounts[0]})
    net.ledger.fundPool(pid, 100 * TOKEN, {"from": accounts[0]})
    worker = net.register(WORKER)
    validator = net.register(VALIDATOR)
    net.register(VALIDATOR)
    net.ledger.publishCheckpoint(pid, 0, "m", {"from": accounts[0]})
    tid = net.claim(worker, pool=pid)
    net.ledger.submitWork(tid, ROLLOUTS_CID, PROOFS_HASH, 1, 0, {"from": worker})
    net.fund(validator, 10 * TOKEN)
    net.token.approve(net.ledger, 10 * TOKEN, {"from": validator})
    net.ledger.challenge(tid, "e", {"from": validator})
    chain.sleep(121)
    assert net.ledger.resolve(tid, {"from": accounts[9]}).return_value is False  # 1 vote < quorum 3
    assert net.ledger.challengeInfo(tid)["status"] == C_NO_QUORUM  # issue 33: no outcome, no loser


def test_resolve_unknown_challenge(net):
    with reverts("TaskLedgerUnknownChallenge", 5):
        net.ledger.resolve(5, {"from": accounts[0]})
    with reverts("TaskLedgerUnknownChallenge", 5):
        net.ledger.challengeInfo(5)


def test_challenged_submission_cannot_be_claimed_until_resolved(worked):
    net, worker, validator, tid = worked
    net.register(VALIDATOR)
    net.bond_ready(validator)
    net.ledger.challenge(tid, "e", {"from": validator})
    chain.sleep(301)
    with reverts("TaskLedgerInvalidStatus", tid, T_CHALLENGED):
        net.ledger.claimRewards([tid], {"from": worker})
    assert net.ledger.claimable(tid) == 0


def test_voidSubmissions_refuses_live_submissions(worked):
    net, worker, _validator, tid = worked
    with reverts("TaskLedgerNotVoidable", tid):
        net.ledger.voidSubmissions([tid], {"from": accounts[9]})
    with reverts("TaskLedgerEmptyBatch"):
        net.ledger.voidSubmissions([], {"from": accounts[9]})
    with reverts("TaskLedgerUnknownTask", 404):
        net.ledger.voidSubmissions([404], {"from": accounts[9]})
    claimed = net.claim(worker)
    with reverts("TaskLedgerInvalidStatus", claimed, T_CLAIMED):
        net.ledger.voidSubmissions([claimed], {"from": accounts[9]})


def test_task_view_unknown(net):
    with reverts("TaskLedgerUnknownTask", 3):
        net.ledger.task(3)
    assert net.ledger.slashEpoch(accounts[1]) == 0


def test_setMinWindowLength_admin_only(net):
    tx = net.ledger.setMinWindowLength(120, {"from": accounts[0]})
    assert event(tx, "MinWindowLengthSet")["minWindowLength"] == 120
    assert net.ledger.minWindowLength() == 120
    with reverts("AccessControlUnauthorizedAccount"):
        net.ledger.setMinWindowLength(1, {"from": accounts[1]})
    with reverts("TaskLedgerInvalidPoolParam", "minWindowLength"):
        net.ledger.setMinWindowLength(0, {"from": accounts[0]})
