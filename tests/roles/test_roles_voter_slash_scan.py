"""What finding a challenge's losing voters costs (`accountability.losing_voters`, asked once per resolved challenge
by every validator that took part): its log queries start at the latest round's snapshot block, so the chain's
history before the challenge (here 1,010 blocks: eleven eth_getLogs chunks of the 100 blocks this test sets, as
for a provider that caps a log query's range) is never scanned."""

from __future__ import annotations

from nodes import staked_node  # type: ignore[import-not-found]
from rpc_counter import count_rpc  # type: ignore[import-not-found]

from intellect.agents.roles.accountability import losing_voters
from intellect.sdk import ChallengeStatus, Role

TOKEN = 10**18


def _staked(devnet, account: int, role: Role):
    return staked_node(devnet, account, role)


def test_losing_voters_reads_no_log_older_than_the_challenge(devnet):
    trainer = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestvoterscan")
    w = _staked(devnet, 1, Role.WORKER)
    honest, wrong, right = (_staked(devnet, i, Role.VALIDATOR) for i in (2, 3, 4))
    claim = w.claim_task(pool_id)
    w.submit_work(claim.task_id, "bafkreibadworkscan", b"\x46" * 32, 2, 1)
    for _ in range(101):  # a long history before the challenge (small steps: anvil_mine slows with the count)
        devnet.anvil.mine(10)
    honest.log_chunk = 100  # blocks per eth_getLogs: a scan from the deployment would take eleven queries
    sid = claim.task_id
    honest.challenge(sid, "bafkreievidencescan")
    wrong.vote(sid, False)
    right.vote(sid, True)
    devnet.increase_time(trainer.pool(pool_id).params.vote_period + 1)
    assert right.resolve(sid) is True and honest.challenge_info(sid).status == ChallengeStatus.UPHELD

    with count_rpc(honest.w3) as calls:
        assert losing_voters(honest, sid) == (1, [wrong.address])
    assert calls.count("eth_getLogs") <= 2  # the round's ChallengeOpened and its VoteCasts, one chunk each
