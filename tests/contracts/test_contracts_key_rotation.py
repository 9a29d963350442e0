"""Node key rotation (issue 36): the owner moves a node to a new key (NodeRegistry.rotateKey) with the new key's
consent and without the old key; registration, stake, unbonding, challenge locks and validator weight move; the
old key is retired for good; the old key's pending rewards stay claimable by the owner; and slashes of the old
key's work (challenges open at the rotation or opened after it, attester/voter slashes) land on the moved stake."""

from __future__ import annotations

from brownie import accounts, chain
from contracts_helpers import (
    MIN_STAKE,
    T_PAID,
    T_UPHELD,
    TOKEN,
    VALIDATOR,
    WORKER,
    event,
    new_key_account,
    registration_signature,
    reverts,
)

ROTATED = 3  # INodeRegistry.Status.Rotated
ACTIVE = 1
VOTE = 120  # the dev pool's vote period
SLASH = 50 * TOKEN  # the dev pool's slash


def _rotate(net, old, owner, seed, role=WORKER, **kw):
    new = new_key_account(seed)
    deadline = chain.time() + 600
    sig = registration_signature(net.registry, new, owner.address, role, deadline)
    tx = net.registry.rotateKey(old, new, deadline, sig, {"from": owner, **kw})
    return new, tx


def test_rotation_moves_registration_stake_unbonding_and_weight(net):
    owner = accounts[3]
    old = net.register(VALIDATOR, owner=owner, stake=150 * TOKEN)
    net.registry.update(old, "H200", 141, 4, "https://v.example:8443", {"from": owner})
    net.stake.requestUnstake(old, 20 * TOKEN, {"from": owner})
    before_info, before_stake = net.registry.nodeInfo(old), net.stake.stakeOf(old)
    total_weight, total_staked = net.stake.totalValidatorWeight(), net.stake.totalStaked()
    active_validators = net.registry.activeCount(VALIDATOR)

    new, tx = _rotate(net, old, owner, "rot-validator", role=VALIDATOR)

    assert event(tx, "NodeKeyRotated") == {"oldNode": old, "newNode": new, "owner": owner, "role": VALIDATOR}
    assert event(tx, "StakeMoved") == {"oldNode": old, "newNode": new, "active": 130 * TOKEN,
                                       "unbonding": 20 * TOKEN, "openChallenges": 0}
    info = net.registry.nodeInfo(new)
    # same owner, role, hardware, endpoint and registration time; active
    assert tuple(info) == tuple(before_info)
    assert net.stake.stakeOf(new) == before_stake
    assert [str(x) for x in net.registry.nodeCore(old)] == [owner.address, str(VALIDATOR), str(ROTATED)]
    old_stake = net.stake.stakeOf(old)
    assert (old_stake["active"], old_stake["unbonding"], old_stake["releaseAt"], old_stake["status"]) == (0, 0, 0, ROTATED)
    assert net.stake.validatorWeight(old) == 0 and net.stake.validatorWeight(new) == 130 * TOKEN
    assert net.stake.totalValidatorWeight() == total_weight and net.stake.totalStaked() == total_staked
    assert net.registry.activeCount(VALIDATOR) == active_validators
    assert net.stake.isEligible(new, VALIDATOR) and not net.stake.isEligible(old, VALIDATOR)
    assert net.registry.currentKey(old) == new == net.registry.currentKey(new)

    # the unbonding position moved with its release time: the owner withdraws it through the new key
    with reverts("StakeManagerNothingToWithdraw", old):
        net.stake.withdraw(old, {"from": owner})
    chain.sleep(3601)
    balance = net.token.balanceOf(owner)
    net.stake.withdraw(new, {"from": owner})
    assert net.token.balanceOf(owner) == balance + 20 * TOKEN


def test_lost_key_is_recovered_by_its_owner_alone(net):
    """The owner rotates without any signature of the old key; nobody else may, the node key itself included."""
    owner = accounts[4]
    old = net.register(WORKER, owner=owner)
    net.publish(0)
    stranger = accounts[5]
    new = new_key_account("rot-lost")
    deadline = chain.time() + 600
    sig = registration_signature(net.registry, new, owner.address, WORKER, deadline)
    with reverts("NodeRegistryNotOwner", old, stranger):
        net.registry.rotateKey(old, new, deadline, sig, {"from": stranger})
    with reverts("NodeRegistryNotOwner", old, old):  # the (lost, maybe leaked) node key cannot move the node
        net.registry.rotateKey(old, new, deadline, sig, {"from": old})
    # the new key consents to this owner only: a consent for another owner does not verify
    other_sig = registration_signature(net.registry, new, stranger.address, WORKER, deadline)
    with reverts("NodeRegistryInvalidSignature", new):
        net.registry.rotateKey(old, new, deadline, other_sig, {"from": owner})
    with reverts("NodeRegistryExpiredSignature"):
        net.registry.rotateKey(old, new, chain.time() - 1, sig, {"from": owner})

    net.registry.rotateKey(old, new, deadline, sig, {"from": owner})
    # the old key can no longer claim; the new one works at once with the moved stake
    with reverts("TaskLedgerNotEligible", old, WORKER):
        net.ledger.claimTask(net.pool_id, {"from": old})
    tid = net.claim(new)
    net.submit(new, tid, units=2, step=0)
    assert net.ledger.task(tid)["node"] == new


def test_old_key_is_retired_for_good_and_consents_do_not_replay(net):
    owner = accounts[3]
    a = net.register(WORKER, owner=owner)
    b, _ = _rotate(net, a, owner, "rot-b")
    # the retired key cannot register again, whoever asks and with a fresh consent
    deadline = chain.time() + 600
    for sender in (owner, a):
        sig = registration_signature(net.registry, a, sender.address, WORKER, deadline)
        with reverts("NodeRegistryKeyUsed", a):
            net.registry.register(a, WORKER, "cpu", 0, 0, "", deadline, sig, {"from": sender})
    # nor be rotated again, updated, exited or staked on
    c = new_key_account("rot-c")
    sig_c = registration_signature(net.registry, c, owner.address, WORKER, deadline)
    with reverts("NodeRegistryNotActive", a):
        net.registry.rotateKey(a, c, deadline, sig_c, {"from": owner})
    with reverts("NodeRegistryNotActive", a):
        net.registry.update(a, "cpu", 0, 0, "", {"from": owner})
    with reverts("NodeRegistryNotActive", a):
        net.registry.exit(a, {"from": owner})
    net.fund(owner, TOKEN)
    net.token.approve(net.stake, TOKEN, {"from": owner})
    with reverts("StakeManagerNodeNotActive", a):
        net.stake.stake(a, TOKEN, {"from": owner})
    # a node cannot rotate onto a key that was ever registered (no merging of records), nor back onto a retired one
    other = net.register(WORKER, owner=accounts[6])
    sig_o = registration_signature(net.registry, other, owner.address, WORKER, deadline)
    with reverts("NodeRegistryKeyUsed", other):
        net.registry.rotateKey(b, other, deadline, sig_o, {"from": owner})
    sig_a = registration_signature(net.registry, a, owner.address, WORKER, deadline)
    with reverts("NodeRegistryKeyUsed", a):
        net.registry.rotateKey(b, a, deadline, sig_a, {"from": owner})
    # b's consent was consumed (its nonce moved on): replaying it for a registration fails
    assert net.registry.nonces(b) == 1
    # a chain of rotations: every earlier key resolves to the latest in O(1)
    net.registry.rotateKey(b, c, deadline, sig_c, {"from": owner})
    assert net.registry.currentKey(a) == c == net.registry.currentKey(b)
    assert net.stake.activeStake(c) == MIN_STAKE


def test_rotation_during_an_open_challenge_cannot_escape_the_slash(worked):
    net, worker, validator, tid = worked
    owner = worker  # net.register's default owner is the node itself
    net.bond_ready(validator)
    net.ledger.challenge(tid, "evidence", {"from": validator})
    assert net.stake.stakeOf(worker)["openChallenges"] == 1

    new, tx = _rotate(net, worker, owner, "rot-escape")
    assert event(tx, "StakeMoved")["openChallenges"] == 1
    assert net.stake.stakeOf(new)["openChallenges"] == 1  # the lock moved: the new key cannot withdraw past it
    net.stake.requestUnstake(new, MIN_STAKE, {"from": owner})
    chain.sleep(VOTE + 1)
    tx = net.ledger.resolve(tid, {"from": accounts[9]})
    assert tx.return_value is True and net.ledger.task(tid)["status"] == T_UPHELD
    assert event(tx, "Slashed")["node"] == new and event(tx, "Slashed")["amount"] == SLASH
    s = net.stake.stakeOf(new)
    assert s["active"] + s["unbonding"] == MIN_STAKE - SLASH and s["openChallenges"] == 0


def test_challenge_opened_after_rotation_locks_and_slashes_the_new_key(worked):
    net, worker, validator, tid = worked
    new, _ = _rotate(net, worker, worker, "rot-late")
    net.bond_ready(validator)
    net.ledger.challenge(tid, "evidence", {"from": validator})  # the old key's submission, still in its window
    assert net.stake.stakeOf(new)["openChallenges"] == 1 and net.stake.stakeOf(worker)["openChallenges"] == 0
    net.stake.requestUnstake(new, MIN_STAKE, {"from": worker})
    chain.sleep(3601)
    with reverts("StakeManagerOpenChallenges", new, 1):
        net.stake.withdraw(new, {"from": worker})
    tx = net.ledger.resolve(tid, {"from": accounts[9]})
    assert event(tx, "Slashed")["node"] == new
    assert net.stake.stakeOf(new)["unbonding"] == MIN_STAKE - SLASH


def test_old_keys_pending_rewards_stay_claimable_by_the_owner(net):
    owner = accounts[3]
    worker = net.register(WORKER, owner=owner)
    net.publish(0)
    tid = net.claim(worker)
    net.submit(worker, tid, units=4, step=0)
    new, _ = _rotate(net, worker, owner, "rot-rewards")
    chain.sleep(int(net.ledger.task(tid)["windowEnd"]) - chain.time() + 1)
    chain.mine()
    assert net.ledger.claimable(tid) == 4 * TOKEN
    with reverts("TaskLedgerNotNodeOrOwner", tid, new):  # the new key is not the old work's node
        net.ledger.claimRewards([tid], {"from": new})
    balance = net.token.balanceOf(owner)
    tx = net.ledger.claimRewards([tid], {"from": owner})
    assert event(tx, "RewardClaimed")["owner"] == owner
    assert net.token.balanceOf(owner) == balance + 4 * TOKEN and net.ledger.task(tid)["status"] == T_PAID


def test_slashes_of_a_retired_validator_key_follow_its_stake(net):
    """AttesterBook's attester and voter slashes name the key that signed or voted: they reach the moved stake."""
    owner = accounts[3]
    old = net.register(VALIDATOR, owner=owner)
    new, _ = _rotate(net, old, owner, "rot-slash", role=VALIDATOR)
    slasher = net.stake.SLASHER_ROLE()
    net.stake.grantRole(slasher, net.admin, {"from": net.admin})
    tx = net.stake.slash(old, 10 * TOKEN, accounts[7], {"from": net.admin})
    assert event(tx, "Slashed")["node"] == new and net.stake.activeStake(new) == MIN_STAKE - 10 * TOKEN
    assert net.stake.validatorWeight(new) == MIN_STAKE - 10 * TOKEN
    with reverts("StakeManagerNotRegistry", net.admin):
        net.stake.nodeRotated(new, old, {"from": net.admin})
    assert net.registry.nodeCore(new)[2] == ACTIVE
