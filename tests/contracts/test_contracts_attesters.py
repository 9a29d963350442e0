"""AttesterBook (issue 21): validators paid for the attestations the trainer used, slashed for accepting
attestations of work the ledger upheld as bad; canaries (bad work the trainer submits itself) make attesting
without checking lose. The attestations are the agents' own EIP-712 signatures (intellect.agents.attestation)."""

from __future__ import annotations

import pytest
from brownie import accounts, chain
from contracts_helpers import MIN_STAKE, PROOFS_HASH, ROLLOUTS_CID, TOKEN, VALIDATOR, WORKER, event, reverts
from eth_utils import keccak

from intellect.agents.attestation import sign_attestation

REWARD = 2 * TOKEN  # per attestation
ATTESTER_SLASH = 20 * TOKEN  # dev_params default


@pytest.fixture
def book(net):
    b = net.d.attester_book
    assert b is not None and net.stake.hasRole(net.stake.SLASHER_ROLE(), b)
    owner = accounts[0]  # owner and trainer of the default pool
    b.setAttesterReward(net.pool_id, REWARD, {"from": owner})
    net.token.approve(b, 100 * TOKEN, {"from": owner})
    b.fundAttesterRewards(net.pool_id, 100 * TOKEN, {"from": owner})
    return b


def _attest(net, validator, sid, accepted=True):
    a = sign_attestation(validator.private_key, chain_id=chain.id, ledger=net.ledger.address, submission_id=sid,
                         rollouts_cid=ROLLOUTS_CID, proofs_hash=PROOFS_HASH, policy_step=0, accepted=accepted)
    return (keccak(text=ROLLOUTS_CID), PROOFS_HASH, 0, a.signature)


def test_reward_rule_set_once_by_the_pool_owner(net, book):
    with reverts("AttesterBookRewardAlreadySet", net.pool_id):
        book.setAttesterReward(net.pool_id, 1, {"from": accounts[0]})
    with reverts("AttesterBookNotPoolOwner", net.pool_id, accounts[3]):
        book.setAttesterReward(net.pool_id, 1, {"from": accounts[3]})
    assert tuple(int(x) for x in book.poolRule(net.pool_id)) == (REWARD, 100 * TOKEN)


def test_a_validator_holding_several_slots_is_paid_per_slot(worked, book):
    """Issue 33: assignment slots are stake draws with replacement, so one key may hold two; paying it once would
    make splitting the same stake over two keys pay double. Listed once per slot (adjacent), it is paid per slot."""
    net, _worker, v1, tid = worked
    v2 = net.register(VALIDATOR, owner=accounts[4])
    trainer = accounts[0]
    with reverts("AttesterBookBadRecord", tid, v1):  # entries of one validator not adjacent: a second record
        book.recordAttestations(tid, [v1, v2, v1], {"from": trainer})
    tx = book.recordAttestations(tid, [v1, v1, v1, v2], {"from": trainer})
    assert [(e["validator"], e["reward"]) for e in tx.events["AttestationRecorded"]] == [(v1, 3 * REWARD),
                                                                                          (v2, REWARD)]
    assert book.poolRule(net.pool_id)[1] == 100 * TOKEN - 4 * REWARD
    assert book.recorded(tid, v1) == 3 * REWARD
    chain.sleep(301)
    owner = net.registry.ownerOf(v1)
    before = net.token.balanceOf(owner)
    book.claimAttesterReward(tid, v1, {"from": accounts[9]})
    assert net.token.balanceOf(owner) == before + 3 * REWARD


def test_attesters_paid_after_the_window_like_the_worker(worked, book):
    net, worker, v1, tid = worked
    v2 = net.register(VALIDATOR, owner=accounts[4])
    own = net.register(VALIDATOR, owner=worker)
    trainer = accounts[0]
    with reverts("AttesterBookNotTrainer", tid, accounts[3]):
        book.recordAttestations(tid, [v1], {"from": accounts[3]})
    with reverts("AttesterBookNotAttester", tid, own):  # the worker's own owner's validator earns nothing
        book.recordAttestations(tid, [own], {"from": trainer})
    with reverts("AttesterBookNotAttester", tid, worker):
        book.recordAttestations(tid, [worker], {"from": trainer})
    tx = book.recordAttestations(tid, [v1, v2], {"from": trainer})
    assert len(tx.events["AttestationRecorded"]) == 2
    assert book.poolRule(net.pool_id)[1] == 100 * TOKEN - 2 * REWARD
    with reverts("AttesterBookBadRecord", tid, v1):
        book.recordAttestations(tid, [v1], {"from": trainer})
    with reverts("AttesterBookNotPayable", tid, v1):  # window open
        book.claimAttesterReward(tid, v1, {"from": accounts[9]})
    chain.sleep(301)
    with reverts("AttesterBookWindowClosed"):
        book.recordAttestations(tid, [net.register(VALIDATOR)], {"from": trainer})
    before = net.token.balanceOf(accounts[4])
    tx = book.claimAttesterReward(tid, v2, {"from": accounts[9]})  # anyone; paid to the validator's owner
    assert event(tx, "AttesterRewardPaid")["owner"] == accounts[4]
    assert net.token.balanceOf(accounts[4]) == before + REWARD
    net.ledger.claimRewards([tid], {"from": worker})  # also payable once the worker was paid
    book.claimAttesterReward(tid, v1, {"from": v1})
    with reverts("AttesterBookBadRecord", tid, v1):
        book.claimAttesterReward(tid, v1, {"from": v1})


def test_canary_attested_without_checking_costs_the_attester(net, book):
    """The trainer's own worker submits known-bad work (a canary, on-chain like any submission). A lazy
    validator attests it and the trainer uses the attestation; the trainer's validator challenges it, it is
    upheld, and the lazy validator is slashed with its own signature; its reward returns to the pool."""
    trainer = accounts[0]
    canary_worker = net.register(WORKER, owner=accounts[5])  # the trainer's, under another key
    checker = net.register(VALIDATOR, owner=accounts[6], stake=300 * TOKEN)  # the trainer's validator
    lazy = net.register(VALIDATOR)
    net.publish(0)
    sid = net.claim(canary_worker)
    net.submit(canary_worker, sid, units=4, step=0)
    book.recordAttestations(sid, [lazy], {"from": trainer})
    proof = _attest(net, lazy, sid)
    with reverts("AttesterBookNotUpheld", sid):  # nobody is slashed for attesting work that was not upheld
        book.slashAttester(sid, lazy, *proof, {"from": trainer})
    net.bond_ready(checker)
    net.ledger.challenge(sid, "canary", {"from": checker})
    net.ledger.vote(sid, False, {"from": lazy})  # the lazy validator defends what it attested: outweighed
    chain.sleep(121)
    assert net.ledger.resolve(sid, {"from": accounts[9]}).return_value is True
    with reverts("AttesterBookBadSignature", lazy, checker):  # someone else's signature proves nothing
        book.slashAttester(sid, lazy, *_attest(net, checker, sid), {"from": trainer})
    rejecting = _attest(net, lazy, sid, accepted=False)  # a rejecting attestation is not an accepting one
    with reverts("AttesterBookBadSignature"):
        book.slashAttester(sid, lazy, *rejecting, {"from": trainer})
    budget = book.poolRule(net.pool_id)[1]
    before = net.token.balanceOf(trainer)
    tx = book.slashAttester(sid, lazy, *proof, {"from": trainer})
    assert event(tx, "AttesterSlashed")["slashed"] == ATTESTER_SLASH
    assert net.stake.activeStake(lazy) == MIN_STAKE - ATTESTER_SLASH
    assert net.token.balanceOf(trainer) >= before + ATTESTER_SLASH // 2  # the reporter's share
    assert book.poolRule(net.pool_id)[1] == budget + REWARD  # no pay for attesting bad work
    with reverts("AttesterBookAlreadySlashed", sid, lazy):
        book.slashAttester(sid, lazy, *proof, {"from": trainer})
    with reverts("AttesterBookBadRecord", sid, lazy):
        book.claimAttesterReward(sid, lazy, {"from": lazy})


def test_reward_of_upheld_work_released_to_the_pool(worked, book):
    net, worker, v1, tid = worked
    v2 = net.register(VALIDATOR)
    book.recordAttestations(tid, [v2], {"from": accounts[0]})
    with reverts("AttesterBookNotReleasable", tid, v2):
        book.releaseAttesterReward(tid, v2, {"from": accounts[9]})
    net.bond_ready(v1)
    net.ledger.challenge(tid, "bad", {"from": v1})
    net.ledger.vote(tid, True, {"from": v2})
    assert net.ledger.resolve(tid, {"from": accounts[9]}).return_value is True
    chain.sleep(301)
    with reverts("AttesterBookNotPayable", tid, v2):
        book.claimAttesterReward(tid, v2, {"from": v2})
    budget = book.poolRule(net.pool_id)[1]
    book.releaseAttesterReward(tid, v2, {"from": accounts[9]})
    assert book.poolRule(net.pool_id)[1] == budget + REWARD
    del worker


def test_voter_against_the_outcome_slashed_once(worked, book):
    net, worker, v1, tid = worked
    v2 = net.register(VALIDATOR, stake=400 * TOKEN)
    v3 = net.register(VALIDATOR)
    net.bond_ready(v1)
    net.ledger.challenge(tid, "bad", {"from": v1})
    net.ledger.vote(tid, True, {"from": v2})
    net.ledger.vote(tid, False, {"from": v3})
    assert tuple(net.ledger.voteOf(tid, v3)) == (1, False)
    with reverts("AttesterBookNotLosingVoter", tid, v3):  # not resolved yet
        book.slashVoter(tid, v3, {"from": accounts[9]})
    assert net.ledger.resolve(tid, {"from": accounts[9]}).return_value is True  # 500 of 600 for
    with reverts("AttesterBookNotLosingVoter", tid, v2):  # voted with the outcome
        book.slashVoter(tid, v2, {"from": accounts[9]})
    with reverts("AttesterBookNotLosingVoter", tid, v1):  # the challenger's vote is its challenge
        book.slashVoter(tid, v1, {"from": accounts[9]})
    tx = book.slashVoter(tid, v3, {"from": accounts[9]})
    assert event(tx, "VoterSlashed")["slashed"] == book.voterSlash() == 10 * TOKEN
    assert net.stake.activeStake(v3) == MIN_STAKE - 10 * TOKEN
    with reverts("AttesterBookAlreadySlashed", tid, v3):
        book.slashVoter(tid, v3, {"from": accounts[9]})
    del worker


VOTER_REWARD = 8 * TOKEN  # per resolved challenge; the dev pool's bond is 10


def test_voter_reward_set_once_by_the_pool_owner_below_the_bond(worked, book):
    net = worked[0]
    bond = int(net.pool()["params"]["challengeBond"])
    with reverts("AttesterBookNotPoolOwner", net.pool_id, accounts[3]):
        book.setVoterReward(net.pool_id, 1, {"from": accounts[3]})
    with reverts("AttesterBookVoterRewardTooHigh", net.pool_id, bond, bond):  # at the bond: one step past
        book.setVoterReward(net.pool_id, bond, {"from": accounts[0]})
    tx = book.setVoterReward(net.pool_id, bond - 1, {"from": accounts[0]})  # the limit: just below the bond
    assert event(tx, "VoterRewardSet")["rewardPerChallenge"] == book.voterReward(net.pool_id) == bond - 1
    with reverts("AttesterBookVoterRewardAlreadySet", net.pool_id):
        book.setVoterReward(net.pool_id, 1, {"from": accounts[0]})


def test_no_voter_reward_set_pays_nothing(worked, book):
    net, _worker, v1, tid = worked
    v2 = net.register(VALIDATOR)
    net.bond_ready(v1)
    net.ledger.challenge(tid, "bad", {"from": v1})
    net.ledger.vote(tid, True, {"from": v2})
    with reverts("AttesterBookNotWinningVoter", tid, v2):  # open: no outcome yet
        book.claimVoterReward(tid, v2, {"from": accounts[9]})
    chain.sleep(121)
    net.ledger.resolve(tid, {"from": accounts[9]})
    with reverts("AttesterBookNoVoterReward", net.pool_id):
        book.claimVoterReward(tid, v2, {"from": accounts[9]})


def test_winning_side_of_an_upheld_round_paid_by_stake_once(worked, book):
    """Issue 33: votes with the outcome cost a check and were unpaid, so a validator that voted only on its slots
    out-earned the honest one. The pool's reward per challenge goes to the winning side (the challenger of an upheld
    round included) by stake weight at the snapshot: one owner's 400 split over two keys earns what one key of 400
    would, and the loser is slashed, not paid."""
    net, _worker, v1, tid = worked  # v1: MIN_STAKE (100)
    book.setVoterReward(net.pool_id, VOTER_REWARD, {"from": accounts[0]})
    owner2 = accounts[5]
    v2a = net.register(VALIDATOR, owner=owner2, stake=200 * TOKEN)
    v2b = net.register(VALIDATOR, owner=owner2, stake=200 * TOKEN)
    v3 = net.register(VALIDATOR)
    net.bond_ready(v1)
    net.ledger.challenge(tid, "bad", {"from": v1})
    for v, up in ((v2a, True), (v2b, True), (v3, False)):
        net.ledger.vote(tid, up, {"from": v})
    chain.sleep(121)
    assert net.ledger.resolve(tid, {"from": accounts[9]}).return_value is True  # 500 for, 100 against
    budget = book.poolRule(net.pool_id)[1]
    o1, b1, b2 = net.registry.ownerOf(v1), net.token.balanceOf(net.registry.ownerOf(v1)), net.token.balanceOf(owner2)
    tx = book.claimVoterReward(tid, v1, {"from": accounts[9]})  # the challenger: 100 of the 500 upholding
    assert (event(tx, "VoterRewardPaid")["amount"], event(tx, "VoterRewardPaid")["round"]) == (VOTER_REWARD // 5, 1)
    book.claimVoterReward(tid, v2a, {"from": accounts[9]})
    book.claimVoterReward(tid, v2b, {"from": accounts[9]})
    assert net.token.balanceOf(o1) == b1 + VOTER_REWARD // 5
    assert net.token.balanceOf(owner2) == b2 + VOTER_REWARD * 4 // 5  # two keys of 200: one stake of 400's share
    assert book.poolRule(net.pool_id)[1] == budget - VOTER_REWARD  # the shares add up to the reward, no more
    with reverts("AttesterBookVoteSettled", tid, v2a):
        book.claimVoterReward(tid, v2a, {"from": accounts[9]})
    with reverts("AttesterBookNotWinningVoter", tid, v3):
        book.claimVoterReward(tid, v3, {"from": accounts[9]})
    with reverts("AttesterBookNotWinningVoter", tid, accounts[7]):  # never voted
        book.claimVoterReward(tid, accounts[7], {"from": accounts[9]})
    assert event(book.slashVoter(tid, v3, {"from": accounts[9]}), "VoterSlashed")["slashed"] == 10 * TOKEN
    with reverts("AttesterBookNotLosingVoter", tid, v2a):  # paid as winning: not slashable
        book.slashVoter(tid, v2a, {"from": accounts[9]})


def test_sham_challenge_costs_its_bond_more_than_its_friends_win(worked, book):
    """A challenge of good work resolved Rejected: the voters against are paid, the challenger is not (it lost its
    bond); a sham challenger whose friend holds the whole winning side wins back less than the bond (reward < bond)."""
    net, _worker, v1, tid = worked
    book.setVoterReward(net.pool_id, VOTER_REWARD, {"from": accounts[0]})
    attacker = accounts.at(net.registry.ownerOf(v1), force=True)
    friend = net.register(VALIDATOR, owner=attacker, stake=400 * TOKEN)
    net.bond_ready(v1)
    before = net.token.balanceOf(attacker)  # v1 is its own owner: the bond and the friend's share both land here
    net.ledger.challenge(tid, "sham", {"from": v1})
    net.ledger.vote(tid, False, {"from": friend})
    chain.sleep(121)
    assert net.ledger.resolve(tid, {"from": accounts[9]}).return_value is False
    with reverts("AttesterBookNotWinningVoter", tid, v1):  # the challenger of a rejected round lost
        book.claimVoterReward(tid, v1, {"from": accounts[9]})
    assert event(book.claimVoterReward(tid, friend, {"from": accounts[9]}), "VoterRewardPaid")["amount"] == VOTER_REWARD
    bond = int(net.pool()["params"]["challengeBond"])
    assert net.token.balanceOf(attacker) == before - bond + VOTER_REWARD < before
