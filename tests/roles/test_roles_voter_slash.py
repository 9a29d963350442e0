"""Validators hold voters to their word (issue 21; `intellect.agents.roles.accountability`): after a challenge the
honest validator opened resolves, its agent code slashes (`AttesterBook.slashVoter`) the validator that voted on
the losing side, once, and not the one that voted with the outcome, and each agent on the winning side claims its
share of the pool's reward per challenge (issue 33); `validator.slash_losing_voters` off slashes nobody and claims
nothing; a challenge whose lookup fails is left for the next pass and the others are still handled. Against a
real anvil, real `Validator` agents (connected, not started) whose event handler and settle pass drive it."""

from __future__ import annotations

from nodes import staked_node  # type: ignore[import-not-found]
from role_config import role_config  # type: ignore[import-not-found]

from intellect.agents.roles.accountability import KIND, losing_voters
from intellect.agents.roles.validator import Validator
from intellect.sdk import ChallengeStatus, Role

TOKEN = 10**18


def _validator(devnet, account: int, stake: int = 100 * TOKEN):
    return staked_node(devnet, account, Role.VALIDATOR, stake)


def _agent(devnet, tmp_path, account: int, unknown: int | None = None, **overrides: str) -> Validator:
    """A real validator agent of dev account `account`, connected to the chain (not started: no threads), its
    state built by its own event handler from the chain's events, as its follower would; `unknown`: first, a
    record of an upheld challenge of its own that the chain does not know."""
    cfg = role_config(devnet, "validator", tmp_path, account, overrides)
    agent = Validator(cfg)
    agent.connect()
    if unknown is not None:
        agent.state.put("challenge", unknown, "upheld", {"mine": True})
    for e in agent.protocol.get_events(["WorkSubmitted", "ChallengeOpened", "ChallengeResolved"]):
        agent.on_event(e)
    return agent


def _voter_slashes(p, validator: str) -> list:
    return p.get_events(["VoterSlashed"], filters={"validator": validator})


def test_honest_validator_slashes_the_voter_against_its_upheld_challenge(devnet, tmp_path):
    trainer = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestvoters")
    trainer.set_voter_reward(pool_id, 4 * TOKEN)
    trainer.fund_attester_rewards(pool_id, 10 * TOKEN)
    w = devnet.protocol(1)
    w.drip()
    w.register_node(Role.WORKER, gpu_model="cpu")
    w.stake(w.address, 100 * TOKEN)
    claim = w.claim_task(pool_id)
    w.submit_work(claim.task_id, "bafkreibadwork", b"\x44" * 32, 2, 1)
    sid = claim.task_id
    honest, wrong, right = _validator(devnet, 2, 300 * TOKEN), _validator(devnet, 3), _validator(devnet, 4)

    honest.challenge(sid, "bafkreievidencevoters")
    wrong.vote(sid, False)  # against the challenge: on the losing side once it is upheld
    right.vote(sid, True)
    devnet.increase_time(trainer.pool(pool_id).params.vote_period + 1)
    assert right.resolve(sid) is True and honest.challenge_info(sid).status == ChallengeStatus.UPHELD
    assert losing_voters(honest, sid) == (1, [wrong.address])

    off = _agent(devnet, tmp_path / "off", 2, **{"validator.slash_losing_voters": "false"})
    assert off.protocol.address == honest.address and off.state.record("challenge", sid)["status"] == "upheld"
    off._settle()
    assert not _voter_slashes(honest, wrong.address)  # the knob off: nobody slashed, no share claimed
    assert not honest.get_events(["VoterRewardPaid"])

    # a challenge the chain does not know (its lookup reverts), handled first: left for the next pass
    agent = _agent(devnet, tmp_path / "on", 2, unknown=0)
    assert [int(r["id"]) for r in agent.state.records("challenge")] == [0, sid]
    rec = agent.state.record("challenge", sid)
    assert rec["status"] == "upheld" and rec["data"]["mine"] and not rec["data"]["voters_slashed"]
    stake = {v.address: honest.active_stake(v.address) for v in (wrong, right)}
    agent._settle()
    (ev,) = _voter_slashes(honest, wrong.address)
    assert ev.args["challengeId"] == sid and ev.args["slashed"] == honest.voter_slash() > 0
    assert honest.active_stake(wrong.address) == stake[wrong.address] - honest.voter_slash()
    assert honest.active_stake(right.address) == stake[right.address] and not _voter_slashes(honest, right.address)
    assert agent.state.record(KIND, sid)["data"]["slashed"] == [wrong.address.lower()]
    assert agent.state.record(KIND, sid)["data"]["paid"] == 3 * TOKEN  # the challenger's 300 of the 400 upholding
    assert [(e.args["validator"], e.args["amount"]) for e in honest.get_events(["VoterRewardPaid"])] == [
        (honest.address, 3 * TOKEN)]
    assert agent.state.record("challenge", sid)["data"]["voters_slashed"] is True
    assert not agent.state.record("challenge", 0)["data"].get("voters_slashed")  # tried again next pass
    assert agent.state.record(KIND, 0) is None

    agent._settle()  # once: remembered in the state store
    assert len(_voter_slashes(honest, wrong.address)) == 1

    # another honest validator's agent that voted with the outcome finds it done: AlreadySlashed is someone else's
    other = _agent(devnet, tmp_path / "other", 4)
    assert other.protocol.address == right.address
    other.state.put("challenge", sid, "upheld", {"voted": True})
    other._settle()
    assert len(_voter_slashes(honest, wrong.address)) == 1
    assert other.state.record(KIND, sid)["data"] == {"round": 1, "slashed": [], "skipped": [wrong.address.lower()],
                                                     "paid": TOKEN}
    assert len(honest.get_events(["VoterRewardPaid"])) == 2  # the loser's agent would claim nothing
    for a in (off, agent, other):
        a.state.close()

