"""What `Protocol.challenge_info` costs in RPC calls (the validator asks it for every open challenge on every
loop turn), counted as eth_calls (web3 also asks eth_chainId around each): one `challengeInfo` read, one `resolve` simulation only while the challenge is open, and the
electorate (validator weight at the round's snapshot block, fixed once that block is past) once per block."""

from __future__ import annotations

from nodes import staked_node  # type: ignore[import-not-found]
from rpc_counter import count_rpc  # type: ignore[import-not-found]

from intellect.sdk import ChallengeStatus, Protocol, Role
from intellect.sdk.devnet import Devnet

TOKEN = 10**18


def _staked(net: Devnet, index: int, role: Role) -> Protocol:
    return staked_node(net, index, role)


def test_challenge_info_reads_the_electorate_once_and_simulates_resolve_only_while_open(net: Devnet) -> None:
    trainer = net.protocol(0)
    pool_id = net.deployment.default_pool_id or 1
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestcalls")
    w = _staked(net, 1, Role.WORKER)
    v, other = _staked(net, 2, Role.VALIDATOR), _staked(net, 3, Role.VALIDATOR)
    claim = w.claim_task(pool_id)
    w.submit_work(claim.task_id, "bafkreibadwork", b"\x44" * 32, 1, 1)
    v.challenge(claim.task_id, "bafkreievidencecalls")
    reader = net.protocol(4)

    with count_rpc(reader.w3) as first:
        info = reader.challenge_info(claim.task_id)
    assert info.status == ChallengeStatus.OPEN and not info.resolvable  # half the weight: the vote is not over
    assert info.electorate == int(reader.call("StakeManager", "totalValidatorWeightAt", info.snapshot_block))
    assert first.count("eth_call") == 3  # challengeInfo, the electorate, the resolve simulation
    with count_rpc(reader.w3) as again:
        assert reader.challenge_info(claim.task_id) == info
    assert again.count("eth_call") == 2  # challengeInfo and resolve: the electorate is kept

    other.vote(claim.task_id, True)  # all the weight for: decided before the vote end
    with count_rpc(reader.w3) as decided:
        info = reader.challenge_info(claim.task_id)
    assert info.resolvable and info.votes_for == 2 and decided.count("eth_call") == 2
    assert v.resolve(claim.task_id) is True
    with count_rpc(reader.w3) as closed:
        info = reader.challenge_info(claim.task_id)
    assert info.status == ChallengeStatus.UPHELD and not info.resolvable and closed.count("eth_call") == 1
