"""AttesterBook's per-step attestation roots (issue 38): one Merkle root of a step's used attestations instead of
one record per submission, each leaf claimed with an OpenZeppelin multiproof under the rules of a record. The tree
and the proofs are the SDK's (`intellect.sdk.attestation_root`), so these tests also pin that the Python tree is the
one the contract verifies."""

from __future__ import annotations

import pytest
from brownie import accounts, chain, web3
from contracts_helpers import PROOFS_HASH, ROLLOUTS_CID, TOKEN, VALIDATOR, WORKER, event, reverts
from eth_utils import keccak

from intellect.agents.attestation import sign_attestation
from intellect.sdk.attestation_root import AttestationRootFile

REWARD = 2 * TOKEN


@pytest.fixture
def book(net):
    b = net.d.attester_book
    owner = accounts[0]  # owner and trainer of the default pool
    b.setAttesterReward(net.pool_id, REWARD, {"from": owner})
    net.token.approve(b, 100 * TOKEN, {"from": owner})
    b.fundAttesterRewards(net.pool_id, 100 * TOKEN, {"from": owner})
    return b


@pytest.fixture
def step(net):
    """Three submissions of one worker at step 0; validators v1, v2 (other owners)."""
    worker = net.register(WORKER)
    v1 = net.register(VALIDATOR, owner=accounts[4])
    v2 = net.register(VALIDATOR, owner=accounts[5])
    net.publish(0)
    sids = []
    for _ in range(3):
        sid = net.claim(worker)
        net.submit(worker, sid, units=4, step=0)
        sids.append(sid)
    return worker, v1, v2, sids


def _file(net, book, entries):
    return AttestationRootFile.build(chain_id=chain.id, book=book.address, pool_id=net.pool_id, step=0,
                                     entries=[(sid, str(v), amount) for sid, v, amount in entries])


def _b(root):
    """a root as brownie prints a bytes32 in a revert"""
    return bytes.fromhex(root[2:])


def _args(f, validator, indices):
    proof, flags = f.tree().multiproof(indices)
    leaves = [(f.leaves[i].index, f.leaves[i].submission_id, f.leaves[i].amount) for i in sorted(indices)]
    return (f.pool_id, f.root, validator, leaves, proof, flags)


def _record(book, f, sender=None):
    return book.recordAttestationRoot(f.pool_id, f.root, len(f.leaves), f.total, "bafyleaves",
                                      {"from": sender or accounts[0]})


def test_a_root_pays_each_leaf_once_after_its_window_to_the_validators_owner(net, book, step):
    _worker, v1, v2, sids = step
    entries = [(sid, v1, REWARD) for sid in sids] + [(sids[0], v2, 2 * REWARD)]  # v2 held two slots
    f = _file(net, book, entries)
    with reverts("AttesterBookNotPoolTrainer", net.pool_id, accounts[3]):
        _record(book, f, accounts[3])
    tx = _record(book, f)
    e = event(tx, "AttestationRootRecorded")
    assert (e["root"], e["leafCount"], e["total"], e["leavesCid"]) == (f.root, 4, 5 * REWARD, "bafyleaves")
    assert book.poolRule(net.pool_id)[1] == 100 * TOKEN - 5 * REWARD  # the root reserves its total at once
    with reverts("AttesterBookBadRoot", _b(f.root)):
        _record(book, f)
    mine = [leaf.index for leaf in f.of(str(v1))]
    assert mine == [0, 1, 2] or mine == [1, 2, 3]  # one validator's leaves are consecutive
    with reverts("AttesterBookNotPayable", sids[0], v1):  # windows open
        book.claimAttesterRewards(*_args(f, v1, mine), {"from": accounts[9]})
    chain.sleep(301)
    before = net.token.balanceOf(accounts[4])
    tx = book.claimAttesterRewards(*_args(f, v1, mine), {"from": accounts[9]})  # anyone; paid to the owner
    assert [(p["submissionId"], p["owner"], p["amount"]) for p in tx.events["AttesterRewardPaid"]] == [
        (sid, accounts[4], REWARD) for sid in sids]
    assert net.token.balanceOf(accounts[4]) == before + 3 * REWARD
    assert all(book.leafSettled(f.pool_id, f.root, i) for i in mine)
    with reverts("AttesterBookLeafSettled", _b(f.root), mine[1]):
        book.claimAttesterRewards(*_args(f, v1, mine[1:2]), {"from": accounts[9]})
    (v2_leaf,) = [leaf.index for leaf in f.of(str(v2))]
    book.claimAttesterRewards(*_args(f, v2, [v2_leaf]), {"from": v2})
    assert net.token.balanceOf(accounts[5]) >= 2 * REWARD
    assert tuple(book.attestationRoot(f.pool_id, f.root))[1:] == (4, 0)


def test_a_forged_leaf_or_proof_is_refused(net, book, step):
    _worker, v1, v2, sids = step
    f = _file(net, book, [(sid, v1, REWARD) for sid in sids])
    _record(book, f)
    chain.sleep(301)
    pid, root, _v, leaves, proof, flags = _args(f, v1, [0])
    with reverts("AttesterBookBadProof", _b(f.root)):  # a bigger amount than the leaf's
        book.claimAttesterRewards(pid, root, v1, [(0, leaves[0][1], leaves[0][2] * 10)], proof, flags, {"from": v1})
    with reverts("AttesterBookBadProof", _b(f.root)):  # another validator's claim on v1's leaf
        book.claimAttesterRewards(pid, root, v2, leaves, proof, flags, {"from": v2})
    with reverts("AttesterBookUnknownRoot", b"\x11" * 32):
        book.claimAttesterRewards(pid, "0x" + "11" * 32, v1, leaves, proof, flags, {"from": v1})
    with reverts("AttesterBookBadBatch", 0):
        book.claimAttesterRewards(pid, root, v1, [], [f.root], [], {"from": v1})
    assert book.claimAttesterRewards(*_args(f, v1, [0]), {"from": v1}).return_value == REWARD


def test_a_root_over_the_budget_or_over_its_total_pays_nothing_more(net, book, step):
    _worker, v1, _v2, sids = step
    big = _file(net, book, [(sids[0], v1, 101 * TOKEN)])
    with reverts("AttesterBookInsufficientBudget", net.pool_id, 100 * TOKEN, 101 * TOKEN):
        _record(book, big)
    f = _file(net, book, [(sid, v1, REWARD) for sid in sids])
    # a trainer that records fewer leaves and less than its tree holds: the record, not the tree, bounds the pay
    book.recordAttestationRoot(f.pool_id, f.root, 2, REWARD, "cid", {"from": accounts[0]})
    chain.sleep(301)
    with reverts("AttesterBookLeafSettled", _b(f.root), 2):  # leaf 2 is past the recorded count
        book.claimAttesterRewards(*_args(f, v1, [0, 1, 2]), {"from": v1})
    with reverts("AttesterBookRootSpent", _b(f.root), REWARD, 2 * REWARD):
        book.claimAttesterRewards(*_args(f, v1, [0, 1]), {"from": v1})
    book.claimAttesterRewards(*_args(f, v1, [0]), {"from": v1})


def test_leaves_of_upheld_work_or_of_the_workers_own_validator_return_to_the_budget(net, book, step):
    worker, v1, v2, sids = step
    own = net.register(VALIDATOR, owner=worker)  # the worker's own owner's validator earns nothing
    f = _file(net, book, [(sids[0], v2, REWARD), (sids[1], v2, REWARD), (sids[0], own, REWARD)])
    _record(book, f)
    v2_leaves = [leaf.index for leaf in f.of(str(v2))]
    with reverts("AttesterBookNotReleasable", sids[0], v2):  # payable work is not released
        book.releaseAttesterRewards(*_args(f, v2, v2_leaves[:1]), {"from": accounts[9]})
    net.bond_ready(v1)
    net.ledger.challenge(sids[0], "bad", {"from": v1})
    net.ledger.vote(sids[0], True, {"from": v2})
    assert net.ledger.resolve(sids[0], {"from": accounts[9]}).return_value is True
    chain.sleep(301)
    # sids[0] upheld: not payable; a claim that includes it pays nothing (the whole call reverts)
    with reverts("AttesterBookNotPayable", sids[0], v2):
        book.claimAttesterRewards(*_args(f, v2, v2_leaves), {"from": v2})
    net.ledger.voidSubmissions([sids[1]], {"from": accounts[9]})  # the upheld worker's other open work is void
    budget = book.poolRule(net.pool_id)[1]
    assert book.releaseAttesterRewards(*_args(f, v2, v2_leaves), {"from": accounts[9]}).return_value == 2 * REWARD
    (own_leaf,) = [leaf.index for leaf in f.of(str(own))]
    with reverts("AttesterBookNotAttester", sids[0], own):
        book.claimAttesterRewards(*_args(f, own, [own_leaf]), {"from": own})
    book.releaseAttesterRewards(*_args(f, own, [own_leaf]), {"from": accounts[9]})
    assert book.poolRule(net.pool_id)[1] == budget + 3 * REWARD
    assert tuple(book.attestationRoot(f.pool_id, f.root))[2] == 0


def test_a_root_recorded_after_a_window_closed_pays_nothing_for_it(net, book, step):
    """The record's rule, at its limit: recorded inside the window pays, recorded at or after its end does not."""
    worker, v1, _v2, sids = step
    chain.sleep(301)  # the three windows closed
    late = net.claim(worker)
    net.submit(worker, late, units=4, step=0)
    f = _file(net, book, [(sids[0], v1, REWARD), (late, v1, REWARD)])
    _record(book, f)
    chain.sleep(301)
    by_sid = {leaf.submission_id: leaf.index for leaf in f.leaves}
    with reverts("AttesterBookNotAttester", sids[0], v1):
        book.claimAttesterRewards(*_args(f, v1, [by_sid[sids[0]]]), {"from": v1})
    assert book.claimAttesterRewards(*_args(f, v1, [by_sid[late]]), {"from": v1}).return_value == REWARD
    assert book.releaseAttesterRewards(*_args(f, v1, [by_sid[sids[0]]]), {"from": v1}).return_value == REWARD


def test_an_attester_of_upheld_work_in_a_root_is_slashed_and_its_leaf_released(net, book, step):
    _worker, v1, v2, sids = step
    f = _file(net, book, [(sids[0], v2, REWARD)])
    _record(book, f)
    net.bond_ready(v1)
    net.ledger.challenge(sids[0], "bad", {"from": v1})
    chain.sleep(121)
    assert net.ledger.resolve(sids[0], {"from": accounts[9]}).return_value is True
    a = sign_attestation(v2.private_key, chain_id=chain.id, ledger=net.ledger.address, submission_id=sids[0],
                         rollouts_cid=ROLLOUTS_CID, proofs_hash=PROOFS_HASH, policy_step=0, accepted=True)
    tx = book.slashAttester(sids[0], v2, keccak(text=ROLLOUTS_CID), PROOFS_HASH, 0, a.signature,
                            {"from": accounts[9]})
    assert event(tx, "AttesterSlashed")["slashed"] > 0
    chain.sleep(301)
    with reverts("AttesterBookNotPayable", sids[0], v2):  # no pay for attesting bad work
        book.claimAttesterRewards(*_args(f, v2, [0]), {"from": v2})
    budget = book.poolRule(net.pool_id)[1]
    book.releaseAttesterRewards(*_args(f, v2, [0]), {"from": accounts[9]})
    assert book.poolRule(net.pool_id)[1] == budget + REWARD


@pytest.mark.parametrize("n", [1, 2, 5, 17])
def test_python_multiproofs_verify_for_any_subset(net, book, n):
    """The SDK's tree and multiproof against OpenZeppelin's verifier, for trees of 1..17 leaves and subsets of
    consecutive and scattered leaves. The submissions do not exist: a verified proof gets as far as reading the
    first one (TaskLedgerUnknownTask), a forged leaf stops at the proof."""
    v = net.register(VALIDATOR, owner=accounts[4])
    f = AttestationRootFile.build(chain_id=chain.id, book=book.address, pool_id=net.pool_id, step=0,
                                  entries=[(1000 + i, str(v), 1) for i in range(n)])
    _record(book, f)
    subsets = [[0], [n - 1], list(range(n)), list(range(0, n, 2)), list(range(1, n, 3))]
    for s in filter(None, subsets):
        pid, root, vv, leaves, proof, flags = _args(f, v, s)
        with reverts("TaskLedgerUnknownTask", 1000 + s[0]):
            book.claimAttesterRewards(pid, root, vv, leaves, proof, flags, {"from": v})
        with reverts("AttesterBookBadProof"):
            book.claimAttesterRewards(pid, root, vv, [(x[0], x[1] + 1, x[2]) for x in leaves], proof, flags,
                                      {"from": v})


def test_the_recording_window_at_the_second(net, book, step):
    """A root counts for a submission when recorded before its window's end: at end − 1 s it pays, at the end it
    does not (the rule of `recordAttestations`, which refuses at the end: `block.timestamp >= windowEnd`)."""
    _worker, v1, v2, sids = step
    end = int(net.ledger.task(sids[0])["windowEnd"])
    inside = _file(net, book, [(sids[0], v1, REWARD)])
    at_end = _file(net, book, [(sids[0], v2, REWARD)])
    web3.provider.make_request("evm_setNextBlockTimestamp", [end - 1])
    tx = _record(book, inside)
    assert web3.eth.get_block(tx.block_number).timestamp == end - 1
    web3.provider.make_request("evm_setNextBlockTimestamp", [end])
    tx = _record(book, at_end)
    assert web3.eth.get_block(tx.block_number).timestamp == end
    chain.sleep(301)
    assert book.claimAttesterRewards(*_args(inside, v1, [0]), {"from": v1}).return_value == REWARD
    with reverts("AttesterBookNotAttester", sids[0], v2):
        book.claimAttesterRewards(*_args(at_end, v2, [0]), {"from": v2})


def test_a_leaf_of_another_pools_submission_is_not_paid_from_this_pools_root(net, book, step):
    """A trainer of two pools cannot pay one pool's submissions from the other's attester budget."""
    worker, v1, _v2, _sids = step
    tx = net.ledger.createPool(tuple(net.pool()["params"]), {"from": accounts[0]})
    other = int(tx.return_value)
    net.token.approve(net.ledger, 100 * TOKEN, {"from": accounts[0]})
    net.ledger.fundPool(other, 100 * TOKEN, {"from": accounts[0]})
    net.publish(0, pool=other)
    sid = net.claim(worker, pool=other)
    net.ledger.submitWork(sid, ROLLOUTS_CID, PROOFS_HASH, 4, 0, {"from": worker})
    f = _file(net, book, [(sid, v1, REWARD)])  # recorded in the default pool, whose budget it reserves
    _record(book, f)
    chain.sleep(301)
    with reverts("AttesterBookNotAttester", sid, v1):
        book.claimAttesterRewards(*_args(f, v1, [0]), {"from": v1})
    assert book.releaseAttesterRewards(*_args(f, v1, [0]), {"from": accounts[9]}).return_value == REWARD


def test_another_pools_trainer_cannot_take_a_root_first(net, book, step):
    """Roots are per pool: the trainer of a pool anyone can create records the very root this pool's trainer is
    about to record (seen in the mempool); this pool's trainer still records it, and its validators are paid."""
    _worker, v1, _v2, sids = step
    f = _file(net, book, [(sid, v1, REWARD) for sid in sids])
    griefer = accounts[7]
    params = list(net.pool()["params"])
    params[0] = griefer.address  # the new pool's trainer
    other = int(net.ledger.createPool(tuple(params), {"from": griefer}).return_value)
    book.setAttesterReward(other, REWARD, {"from": griefer})
    net.token.transfer(griefer, 10 * TOKEN, {"from": accounts[0]})
    net.token.approve(book, 10 * TOKEN, {"from": griefer})
    book.fundAttesterRewards(other, 10 * TOKEN, {"from": griefer})
    book.recordAttestationRoot(other, f.root, 3, 3 * REWARD, "cid", {"from": griefer})
    _record(book, f)  # not refused: this pool has no such root yet
    chain.sleep(301)
    assert book.claimAttesterRewards(*_args(f, v1, [0, 1, 2]), {"from": v1}).return_value == 3 * REWARD
    # the griefer's copy pays nothing (its leaves are another pool's submissions): released back to its budget
    _pid, root, v, leaves, proof, flags = _args(f, v1, [0, 1, 2])
    with reverts("AttesterBookNotAttester", sids[0], v1):
        book.claimAttesterRewards(other, root, v, leaves, proof, flags, {"from": v1})
    assert book.releaseAttesterRewards(other, root, v, leaves, proof, flags, {"from": griefer}).return_value == \
        3 * REWARD
    assert book.poolRule(other)[1] == 10 * TOKEN
