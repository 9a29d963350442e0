"""Honest validators follow every round to its end (issue 33; `intellect.agents.roles.accountability.round_actions`).

The sham-challenge race, against a real anvil and real `Validator` agents (connected, not started: their event
handler is fed the chain's events as the follower would, their dispute pass is called by hand): the cheater's
friend challenges its junk at once and a second friend votes the round down before any honest verdict exists. An
honest validator whose own verdict rejects the work then opens a new round inside the window, another honest one
votes uphold in that round though it did not open it, and the round upholds: the junk is never paid. A round that
misses its quorum has no losing voter: no agent slashes the honest uphold voter of it.

The verdicts are put in the agents' state stores as `_process` records them (the checks that produce them are
`verifier.submission`'s, tested on their own).
"""

from __future__ import annotations

from nodes import staked_node  # type: ignore[import-not-found]
from role_config import role_config  # type: ignore[import-not-found]

from intellect.agents.roles.accountability import MAX_OWN_ROUNDS, RoundAction, losing_voters, round_actions
from intellect.agents.roles.validator import Validator
from intellect.sdk import ChallengeStatus, PoolParams, Role, TaskStatus
from intellect.verifier.submission import Verdict

TOKEN = 10**18


def _agent(devnet, tmp_path, account: int, **overrides: str) -> Validator:
    cfg = role_config(devnet, "validator", tmp_path, account, {"ipfs.gateway": "false", **overrides})
    agent = Validator(cfg)
    agent.connect()
    agent.open_ipfs()
    return agent


_CURSORS: dict[int, int] = {}


def _follow(agent: Validator) -> None:
    """What the agent's event follower does: the chain's new events, in order, through its handler."""
    start = _CURSORS.get(id(agent), 0)
    head = agent.protocol.block_number()
    for e in agent.protocol.get_events(["WorkSubmitted", "ChallengeOpened", "ChallengeResolved"], from_block=start,
                                       to_block=head):
        agent.on_event(e)
    _CURSORS[id(agent)] = head + 1


def _reject(agent: Validator, sid: int) -> None:
    """The agent's own verdict on `sid`: rejected (as `_process` records it)."""
    v = Verdict(submission_id=sid, accepted=False, reason="reward_mismatch", detail="row 3: reward 1.0, replay 0.0")
    agent.state.put("submission", sid, "rejected", {"verdict": v.model_dump()})


def _junk(devnet, pool_id: int) -> int:
    w = staked_node(devnet, 1, Role.WORKER)
    claim = w.claim_task(pool_id)
    w.submit_work(claim.task_id, "bafkreishamjunk", b"\x33" * 32, 2, 1)
    return claim.task_id


def test_an_honest_validator_rechallenges_a_sham_round_that_ended_rejected(devnet, tmp_path):
    trainer = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestsham")
    sid = _junk(devnet, pool_id)
    friend, friend2 = staked_node(devnet, 2, Role.VALIDATOR), staked_node(devnet, 3, Role.VALIDATOR)
    staked_node(devnet, 4, Role.VALIDATOR)
    staked_node(devnet, 5, Role.VALIDATOR)
    vote_period = trainer.pool(pool_id).params.vote_period

    # the sham round: opened at once, voted down by the second friend (a tie rejects), before any honest verdict
    friend.challenge(sid, "bafkreishamevidence")
    friend2.vote(sid, False)
    devnet.increase_time(vote_period + 1)
    assert friend.resolve(sid) is False and friend.challenge_info(sid).status == ChallengeStatus.REJECTED
    assert friend.chain_time() < friend.task(sid).window_end  # window left: the work is not cleared yet

    honest, honest2 = _agent(devnet, tmp_path / "h", 4), _agent(devnet, tmp_path / "h2", 5)
    for a in (honest, honest2):
        _follow(a)
        assert a.state.record("challenge", sid)["status"] == "rejected"
    assert round_actions(honest.protocol, honest.state) == []  # no verdict yet: nothing to do
    _reject(honest, sid)
    assert round_actions(honest.protocol, honest.state) == [RoundAction("rechallenge", sid, 1)]

    honest._votes_and_resolutions()  # opens round 2 with its own evidence
    info = honest.protocol.challenge_info(sid)
    assert (info.status, info.round, info.challenger) == (ChallengeStatus.OPEN, 2, honest.protocol.address)
    opened = honest.protocol.get_events(["ChallengeOpened"], filters={"challengeId": sid})
    assert opened[-1].args["evidenceCid"] != "bafkreishamevidence"
    rec = honest.state.record("challenge", sid)
    assert rec["status"] == "open" and rec["data"]["own"] == [2]

    # the other honest validator votes in the round it did not open, once
    _follow(honest2)
    _reject(honest2, sid)
    assert round_actions(honest2.protocol, honest2.state) == [RoundAction("vote", sid, 2, uphold=True)]
    honest2._votes_and_resolutions()
    assert honest2.protocol.vote_of(sid, honest2.protocol.address) == (2, True)
    assert round_actions(honest2.protocol, honest2.state) == []
    friend2.vote(sid, False)

    devnet.increase_time(vote_period + 1)
    assert round_actions(honest.protocol, honest.state) == [RoundAction("resolve", sid, 2)]
    honest._votes_and_resolutions()
    assert honest.protocol.challenge_info(sid).status == ChallengeStatus.UPHELD
    assert honest.protocol.task(sid).status == TaskStatus.UPHELD
    assert honest.state.record("challenge", sid)["status"] == "upheld"
    for a in (honest, honest2):
        a.state.close()


def test_no_quorum_round_slashes_nobody_and_is_reopened_up_to_the_limit(devnet, tmp_path):
    """Quorum 3: honest A challenges, honest B votes uphold, C is offline. The round ends NoQuorum: no agent finds a
    losing voter (B keeps its stake), and A's agent, whose verdict rejects the work, challenges again, at most
    MAX_OWN_ROUNDS rounds of its own."""
    trainer = devnet.protocol(0)
    params = PoolParams(trainer=trainer.address, rules_cid="bafkreinoquorumrules", reward_per_unit=TOKEN,
                        challenge_bond=TOKEN, slash_amount=10 * TOKEN, window_length=2_000, vote_period=60,
                        lease_duration=600, max_units_per_submission=16, quorum=3)
    pool_id = trainer.create_pool(params)
    trainer.fund_pool(pool_id, 1_000 * TOKEN)
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestnoquorum")
    sid = _junk(devnet, pool_id)
    staked_node(devnet, 2, Role.VALIDATOR)
    b = staked_node(devnet, 3, Role.VALIDATOR)
    staked_node(devnet, 4, Role.VALIDATOR)

    a = _agent(devnet, tmp_path / "a", 2, **{"chain.pool_id": str(pool_id)})
    _follow(a)
    _reject(a, sid)
    a._challenge(sid, a.state.record("submission", sid)["data"], Verdict(submission_id=sid, accepted=False))
    b.vote(sid, True)
    for rnd in range(1, MAX_OWN_ROUNDS + 1):
        devnet.increase_time(61)
        _follow(a)
        actions = round_actions(a.protocol, a.state)
        assert actions == [RoundAction("resolve", sid, rnd)]
        a._votes_and_resolutions()
        assert a.protocol.challenge_info(sid).status == ChallengeStatus.NO_QUORUM
        _follow(a)
        assert a.state.record("challenge", sid)["status"] == "no_quorum"
        assert losing_voters(a.protocol, sid) == (rnd, [])
        stake_b = a.protocol.active_stake(b.address)
        a._settle()
        assert a.protocol.active_stake(b.address) == stake_b  # nobody slashed for a round without outcome
        expected = [RoundAction("rechallenge", sid, rnd)] if rnd < MAX_OWN_ROUNDS else []
        assert round_actions(a.protocol, a.state) == expected
        a._votes_and_resolutions()
        _follow(a)
        if rnd < MAX_OWN_ROUNDS:
            assert a.protocol.challenge_info(sid).round == rnd + 1
    assert a.protocol.challenge_info(sid).round == MAX_OWN_ROUNDS
    a.state.close()
