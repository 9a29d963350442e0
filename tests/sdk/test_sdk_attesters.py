"""intellect.sdk.Protocol's AttesterBook calls (issue 21) against a real anvil with scripts/deploy.py's contracts:
the trainer records the attestations it used, validators claim their rewards after the window, anyone slashes an
attester of upheld work (with its own EIP-712 signature) and a voter on the losing side."""

from __future__ import annotations

import json

import pytest
from eth_account import Account
from nodes import staked_node  # type: ignore[import-not-found]

from intellect.sdk import ChallengeStatus, ConfigError, ContractRevert, Deployment, Protocol, Role
from intellect.sdk.devnet import Devnet

TOKEN = 10**18
REWARD = 2 * TOKEN
CID = "bafkreirolloutsattested"
PROOFS = b"\x33" * 32


def _validator(net: Devnet, index: int, stake: int = 100 * TOKEN) -> Protocol:
    return staked_node(net, index, Role.VALIDATOR, stake)


def _submitted(net: Devnet, step: int = 1) -> tuple[Protocol, Protocol, int]:
    """(trainer with a funded attester rule, worker, submission id) on the default pool."""
    trainer = net.protocol(0)
    pool_id = net.deployment.default_pool_id or 1
    rule = trainer.set_attester_reward(pool_id, REWARD)
    assert rule.reward_per_attestation == REWARD and rule.budget == 0
    assert trainer.fund_attester_rewards(pool_id, 10 * TOKEN).budget == 10 * TOKEN
    trainer.publish_checkpoint(pool_id, step, "bafkreimanifestattesters")
    w = net.protocol(1)
    w.drip()
    w.register_node("worker", gpu_model="cpu")
    w.stake(w.address, 100 * TOKEN)
    claim = w.claim_task(pool_id)
    w.submit_work(claim.task_id, CID, PROOFS, 2, step)
    return trainer, w, claim.task_id


def _signature(p: Protocol, sid: int, step: int, accepted: bool = True) -> bytes:
    """The validator's attestation: its node key's signature of the book's EIP-712 digest."""
    digest = p.attestation_digest(sid, CID, PROOFS, step, accepted)
    assert p.account is not None
    return bytes(Account.unsafe_sign_hash(digest, p.account.key).signature)


def test_attester_rewards_recorded_then_claimed_after_the_window(net: Devnet) -> None:
    trainer, w, sid = _submitted(net)
    v1, v2 = _validator(net, 2), _validator(net, 3)
    records = trainer.record_attestations(sid, [v1.address, v2.address])
    assert [(r.validator, r.reward) for r in records] == [(v1.address, REWARD), (v2.address, REWARD)]
    assert trainer.attester_pool_rule(1).budget == 10 * TOKEN - 2 * REWARD
    assert [(r.submission_id, r.reserved) for r in v1.attester_records()] == [(sid, REWARD)]
    with pytest.raises(ContractRevert) as err:  # the trainer records each validator once
        trainer.record_attestations(sid, [v1.address])
    assert err.value.name == "AttesterBookBadRecord" and err.value.error_args["validator"] == v1.address
    with pytest.raises(ContractRevert) as err:  # only the pool's trainer records
        w.record_attestations(sid, [v2.address])
    assert err.value.name == "AttesterBookNotTrainer"
    assert v1.claim_attester_rewards() == 0  # window open: nothing sent
    net.increase_time(w.pool(1).params.window_length + 1)
    with pytest.raises(ContractRevert) as err:
        trainer.record_attestations(sid, [w.address])
    assert err.value.name == "AttesterBookWindowClosed"
    before = v1.balance_of()
    assert v1.claim_attester_rewards() == REWARD
    assert v1.balance_of() == before + REWARD and v1.attester_records() == []
    assert w.claim_attester_reward(sid, v2.address) == REWARD  # anyone sends it; paid to the validator's owner
    assert [r.reserved for r in v2.attester_records(unsettled_only=False)] == [0]
    with pytest.raises(ContractRevert) as err:
        trainer.set_attester_reward(1, 1)
    assert err.value.name == "AttesterBookRewardAlreadySet" and err.value.error_args == {"poolId": 1}


def test_attester_of_upheld_work_and_losing_voter_slashed(net: Devnet) -> None:
    trainer, w, sid = _submitted(net, step=3)
    checker = _validator(net, 2, stake=300 * TOKEN)
    lazy = _validator(net, 3)
    trainer.record_attestations(sid, [lazy.address])
    sig = _signature(lazy, sid, 3)
    with pytest.raises(ContractRevert) as err:
        trainer.slash_attester(sid, lazy.address, rollouts_cid=CID, proofs_hash=PROOFS, policy_step=3, signature=sig)
    assert err.value.name == "AttesterBookNotUpheld"
    checker.challenge(sid, "bafkreievidence")
    lazy.vote(sid, False)
    net.increase_time(w.pool(1).params.vote_period + 1)
    assert checker.resolve(sid) is True
    assert checker.challenge_info(sid).status == ChallengeStatus.UPHELD
    with pytest.raises(ContractRevert) as err:  # a rejecting attestation is no accepting one
        trainer.slash_attester(sid, lazy.address, rollouts_cid=CID, proofs_hash=PROOFS, policy_step=3,
                               signature=_signature(lazy, sid, 3, accepted=False))
    assert err.value.name == "AttesterBookBadSignature"
    before = lazy.stake_of().active
    slashed = trainer.slash_attester(sid, lazy.address, rollouts_cid=CID, proofs_hash="0x" + PROOFS.hex(),
                                     policy_step=3, signature="0x" + sig.hex())
    assert slashed == trainer.attester_slash() == 20 * TOKEN
    assert lazy.attestation_reserved(sid, lazy.address) == 0  # its reward went back to the pool
    assert trainer.slash_voter(sid, lazy.address) == trainer.voter_slash() == 10 * TOKEN
    assert lazy.stake_of().active == before - 30 * TOKEN
    with pytest.raises(ContractRevert) as err:
        trainer.slash_voter(sid, lazy.address)
    assert err.value.name == "AttesterBookAlreadySlashed"


def test_winning_side_claims_its_share_of_the_voter_reward(net: Devnet) -> None:
    """Issue 33: the pool's reward per resolved challenge, shared by the winning side by stake weight."""
    trainer, w, sid = _submitted(net, step=4)
    assert trainer.voter_reward(1) == 0
    assert trainer.set_voter_reward(1, 3 * TOKEN) == 3 * TOKEN
    checker, voter, loser = _validator(net, 2, stake=200 * TOKEN), _validator(net, 3), _validator(net, 4)
    checker.challenge(sid, "bafkreievidence")
    voter.vote(sid, True)
    loser.vote(sid, False)
    with pytest.raises(ContractRevert) as err:  # not resolved yet
        voter.claim_voter_reward(sid)
    assert err.value.name == "AttesterBookNotWinningVoter"
    net.increase_time(w.pool(1).params.vote_period + 1)
    assert checker.resolve(sid) is True
    budget = trainer.attester_pool_rule(1).budget
    before = voter.balance_of()
    assert voter.claim_voter_reward(sid) == TOKEN  # 100 of the 300 upholding
    assert voter.balance_of() == before + TOKEN
    assert w.claim_voter_reward(sid, checker.address) == 2 * TOKEN  # anyone sends it
    assert trainer.attester_pool_rule(1).budget == budget - 3 * TOKEN
    for who, name in ((voter, "AttesterBookVoteSettled"), (loser, "AttesterBookNotWinningVoter")):
        with pytest.raises(ContractRevert) as err:
            who.claim_voter_reward(sid)
        assert err.value.name == name and err.value.error_args["validator"] == who.address


def test_attester_calls_need_the_book_in_the_deployment(net: Devnet) -> None:
    p = net.protocol(0)
    contracts = {k: v.address for k, v in p.deployment.contracts.items() if k != "AttesterBook"}
    dep = Deployment.model_validate({"schema": "intellect.deployment/v1", "chainId": p.chain_id,
                                     "contracts": contracts})
    old = Protocol(p.w3, dep, p.account)
    assert old.pool(1).pool_id == 1
    with pytest.raises(ConfigError, match="no AttesterBook"):
        old.attester_slash()


def test_claim_attester_rewards_is_incremental_and_resumes_from_its_cursor(net: Devnet, tmp_path) -> None:
    """`claim_attester_rewards` scans only the blocks after its last pass and asks only about unsettled records:
    nothing while their windows are open, one eth_call each when due, nothing once settled; with `cursor_path`
    a new program resumes where the last stopped. Before, every call scanned AttestationRecorded from the
    deployment block and made one eth_call per record ever made (two per unsettled one)."""
    from rpc_counter import count_rpc, log_ranges  # type: ignore[import-not-found]

    trainer, w, first = _submitted(net)
    v = _validator(net, 2)
    pool_id = net.deployment.default_pool_id or 1
    trainer.record_attestations(first, [v.address])
    net.increase_time(w.pool(pool_id).params.window_length + 1)
    cursor = tmp_path / "attester.json"
    assert v.claim_attester_rewards(cursor_path=cursor) == REWARD  # the past: scanned once, paid
    sids = []
    for i in range(3):  # new records, windows open
        c = w.claim_task(pool_id)
        w.submit_work(c.task_id, f"{CID}{i}", PROOFS, 2, 1)
        trainer.record_attestations(c.task_id, [v.address])
        sids.append(c.task_id)

    again = net.protocol(2)  # a restarted program: the cursor file, not a rescan
    scanned = json.loads(cursor.read_text())["scanned_to"]
    with count_rpc(again.w3) as calls, log_ranges(again.w3) as ranges:
        assert again.claim_attester_rewards(cursor_path=cursor) == 0
    assert ranges and all(lo > scanned for lo, _ in ranges), ranges
    assert calls.count("eth_call") == len(sids)  # each new record's window end, read once; the paid one: nothing
    with count_rpc(again.w3) as calls, log_ranges(again.w3) as ranges:
        assert again.claim_attester_rewards(cursor_path=cursor) == 0
    assert "eth_call" not in calls  # windows open: nothing asked

    net.increase_time(w.pool(pool_id).params.window_length + 1)
    w.claim_attester_reward(sids[0], v.address)  # someone else sent one
    before = again.balance_of()
    with count_rpc(again.w3) as calls:
        assert again.claim_attester_rewards(cursor_path=cursor) == REWARD * (len(sids) - 1)
    assert again.balance_of() == before + REWARD * (len(sids) - 1)
    assert calls.count("eth_sendRawTransaction") == len(sids) - 1
    with count_rpc(again.w3) as calls:
        assert again.claim_attester_rewards(cursor_path=cursor) == 0
    assert "eth_call" not in calls and "eth_sendRawTransaction" not in calls  # nothing unsettled is left
