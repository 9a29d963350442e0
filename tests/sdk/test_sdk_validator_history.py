"""`ValidatorHistory` (issue 22): the validator set at a past block, read from registration, minimum-stake and weight events
against a real anvil with scripts/deploy.py's contracts. What happens after a claim does not change the set
its assignment is drawn from."""

from __future__ import annotations

from itertools import pairwise

import pytest

from intellect.sdk import Protocol, Role, RpcError, ValidatorHistory
from intellect.sdk.devnet import Devnet
from intellect.verifier.assignment import assigned_validators

TOKEN = 10**18


def _validator(net: Devnet, index: int, stake: int = 100 * TOKEN) -> Protocol:
    p = net.protocol(index)
    p.drip()
    p.register_node(Role.VALIDATOR, gpu_model="cpu")
    if stake:
        p.stake(p.address, stake)
    return p


def _claim(net: Devnet):
    trainer = net.protocol(0)
    pool_id = net.deployment.default_pool_id or 1
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifesthistory")
    w = net.protocol(1)
    w.drip()
    w.register_node("worker", gpu_model="cpu")
    w.stake(w.address, 100 * TOKEN)
    return w, w.claim_task(pool_id)


def test_the_set_at_the_claim_is_fixed_before_it(net: Devnet) -> None:
    a, b = _validator(net, 2), _validator(net, 3)
    under = _validator(net, 6, stake=1 * TOKEN)  # registered, staked below the validator minimum
    _validator(net, 7, stake=0)  # registered, never staked
    w, claim = _claim(net)
    before = claim.block_number - 1
    # after the claim: a newcomer stakes, `a` starts unbonding everything, `under` tops up past the minimum
    late = _validator(net, 4)
    a.request_unstake(a.address, 100 * TOKEN)
    under.stake(under.address, 200 * TOKEN)
    net.protocol(0).publish_checkpoint(claim.pool_id, 2, "bafkreinextblock")  # one more block past the last change

    history = ValidatorHistory(net.protocol(5))
    at_claim = history.at(before)
    assert at_claim == {a.address.lower(): a.address.lower(), b.address.lower(): b.address.lower()}
    now = history.at(net.protocol(5).block_number() - 1)
    assert set(now) == {b.address.lower(), late.address.lower(), under.address.lower()}
    assert history.min_stake_at(before) == 100 * TOKEN
    stakes = history.stakes_at(before)  # the weights the assignment draws from: their stakes at that block
    assert stakes == {a.address.lower(): 100 * TOKEN, b.address.lower(): 100 * TOKEN}
    assert history.stakes_at(net.protocol(5).block_number() - 1)[under.address.lower()] == 201 * TOKEN
    for k in (1, 2, 5):  # however many slots, never a validator that joined after the claim
        got = assigned_validators(claim.seed, stakes, k, owners=at_claim, exclude=(w.address, w.address))
        assert late.address.lower() not in got and under.address.lower() not in got
        assert len(got) == k and set(got) <= set(at_claim)
    assert history.at(before) == at_claim  # cached, and a fresh reader agrees
    assert ValidatorHistory(net.protocol(8)).at(before) == at_claim


def test_task_claim_reads_the_claims_block_and_seed(net: Devnet) -> None:
    w, claim = _claim(net)
    got = net.protocol(5).task_claim(claim.task_id)
    assert got is not None
    assert (got.seed, got.block_number, got.node.lower()) == (claim.seed, claim.block_number, w.address.lower())
    assert net.protocol(5).task_claim(claim.task_id + 1) is None


def _per_validator(p: Protocol, history: ValidatorHistory, block: int) -> dict[str, str]:
    """The computation `at` made before it was incremental (main at 98bd84d): one `validatorWeightAt` call per
    validator ever registered up to `block`, against the minimum at `block`."""
    floor = history.min_stake_at(block)
    out = {}
    for node, owner in history.candidates_at(block).items():
        weight = p.validator_weight_at(node, block)
        if weight > 0 and weight >= floor:
            out[node] = owner
    return out


def test_at_is_incremental_and_agrees_with_per_validator_weights_at_every_block(net: Devnet) -> None:
    """Registrations, stakes, top-ups, unstakes, an exit and minimum changes across blocks:
    the event-built set equals the per-validator `validatorWeightAt` computation at every block, and a call
    for a new block scans only the new blocks (one eth_getLogs) and makes no eth_call."""
    from rpc_counter import count_rpc  # type: ignore[import-not-found]

    admin = net.protocol(0)
    start = admin.block_number()
    a, b, c = _validator(net, 2), _validator(net, 3), _validator(net, 4, stake=50 * TOKEN)  # c under the minimum
    d = _validator(net, 6, stake=0)
    admin.set_min_stake(Role.VALIDATOR, 40 * TOKEN)  # c is now above it
    d.stake(d.address, 60 * TOKEN)
    a.request_unstake(a.address, 70 * TOKEN)  # a drops to 30: under the minimum
    b.stake(b.address, 5 * TOKEN)
    c.exit_node()  # weight 0
    admin.set_min_stake(Role.VALIDATOR, 20 * TOKEN)  # a counts again
    e = _validator(net, 7)
    d.request_unstake(d.address, 60 * TOKEN)  # all of it
    admin.publish_checkpoint(net.deployment.default_pool_id or 1, 1, "bafkreimanifestincremental")
    head = admin.block_number()

    reader = net.protocol(5)
    history, reference = ValidatorHistory(reader), ValidatorHistory(net.protocol(8))
    seen = set()
    for block in range(start, head):
        with count_rpc(reader.w3) as calls:
            got = history.at(block)
        assert got == _per_validator(net.protocol(8), reference, block), block
        assert "eth_call" not in calls and calls.count("eth_getLogs") <= 1, (block, calls)
        stakes = history.stakes_at(block)  # the assignment's weights (issue 33): the chain's own, same validators
        assert stakes == {v: net.protocol(8).validator_weight_at(v, block) for v in got}, block
        seen.add(tuple(sorted(got)))
    assert len(seen) >= 6  # the set really moved along the way
    assert set(history.at(head - 1)) == {a.address.lower(), b.address.lower(), e.address.lower()}
    with pytest.raises(RpcError):  # a block not mined yet is refused, not scanned short and cached
        ValidatorHistory(reader).at(head + 5)
    changes = history.change_blocks(start, head - 1)
    assert changes
    for x, y in pairwise(changes):  # constant between two changes
        assert all(history.at(z) == history.at(x) for z in range(x, y))


def test_a_rotated_validator_stays_in_the_set_under_its_new_key(net: Devnet) -> None:
    """Issue 36: the owner moves a validator to a new key; from that block the set holds the new key (same owner,
    same stake) and not the old one, as the chain's own weights say."""
    from eth_account import Account
    from eth_utils import keccak

    a, b = _validator(net, 2), _validator(net, 3)
    new = Account.from_key(keccak(text="intellect-validator-history-rotation"))
    a.rotate_node_key(a.address, new_node_account=new)
    rotated_at = a.block_number()
    net.protocol(0).drip()  # one more block past the rotation
    history = ValidatorHistory(net.protocol(5))
    before, after = history.at(rotated_at - 1), history.at(rotated_at)
    assert before == {a.address.lower(): a.address.lower(), b.address.lower(): b.address.lower()}
    assert after == {new.address.lower(): a.address.lower(), b.address.lower(): b.address.lower()}
    assert history.stakes_at(rotated_at)[new.address.lower()] == 100 * TOKEN
    for node in (a.address, new.address):
        for block in (rotated_at - 1, rotated_at):
            assert history.weight_at(node, block) == a.validator_weight_at(node, block)
