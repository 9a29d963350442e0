"""Validators hold voters to their word (issue 21; `intellect.agents.roles.accountability`): after a challenge the
honest validator opened resolves, its agent code slashes (`AttesterBook.slashVoter`) the validator that voted on
the losing side, once, and not the one that voted with the outcome; `validator.slash_losing_voters` off slashes
nobody. Against a real anvil, the validator's own event handlers and settle pass driving it (no agent process)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from nodes import staked_node  # type: ignore[import-not-found]

from intellect.agents.config import load_config
from intellect.agents.roles._state import StateStore
from intellect.agents.roles.accountability import KIND, losing_voters
from intellect.agents.roles.validator import Validator
from intellect.sdk import ChallengeStatus, Role

TOKEN = 10**18


def _validator(devnet, account: int, stake: int = 100 * TOKEN):
    return staked_node(devnet, account, Role.VALIDATOR, stake)


def _agent(protocol, tmp_path, pool_id: int, **overrides: str) -> SimpleNamespace:
    """What `Validator`'s event handler and settle pass use of a started validator."""
    cfg = load_config(None, env={}, overrides={"role": "validator", "data_dir": str(tmp_path), **overrides})
    metrics = SimpleNamespace(inc=lambda *a, **k: None)
    agent = SimpleNamespace(cfg=cfg, protocol=protocol, pool_id=pool_id, state=StateStore(tmp_path / "state.sqlite"),
                            _tx_lock=threading.Lock(), metrics=metrics, _claim_attester_rewards=lambda: None)
    for e in protocol.get_events(["WorkSubmitted", "ChallengeOpened", "ChallengeResolved"]):
        Validator.on_event(agent, e)  # type: ignore[arg-type]
    return agent


def _voter_slashes(p, validator: str) -> list:
    return p.get_events(["VoterSlashed"], filters={"validator": validator})


def test_honest_validator_slashes_the_voter_against_its_upheld_challenge(devnet, tmp_path):
    trainer = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestvoters")
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

    off = _agent(honest, tmp_path / "off", pool_id, **{"validator.slash_losing_voters": "false"})
    assert off.state.record("challenge", sid)["status"] == "upheld"
    Validator._settle(off)  # type: ignore[arg-type]
    assert not _voter_slashes(honest, wrong.address)  # the knob off: nobody slashed

    agent = _agent(honest, tmp_path / "on", pool_id)
    rec = agent.state.record("challenge", sid)
    assert rec["status"] == "upheld" and rec["data"]["mine"] and not rec["data"]["voters_slashed"]
    stake = {v.address: honest.active_stake(v.address) for v in (wrong, right)}
    Validator._settle(agent)  # type: ignore[arg-type]
    (ev,) = _voter_slashes(honest, wrong.address)
    assert ev.args["challengeId"] == sid and ev.args["slashed"] == honest.voter_slash() > 0
    assert honest.active_stake(wrong.address) == stake[wrong.address] - honest.voter_slash()
    assert honest.active_stake(right.address) == stake[right.address] and not _voter_slashes(honest, right.address)
    assert agent.state.record(KIND, sid)["data"]["slashed"] == [wrong.address.lower()]
    assert agent.state.record("challenge", sid)["data"]["voters_slashed"] is True

    Validator._settle(agent)  # once: remembered in the state store
    assert len(_voter_slashes(honest, wrong.address)) == 1

    # another honest validator's agent that voted with the outcome finds it done: AlreadySlashed is someone else's
    other = _agent(right, tmp_path / "other", pool_id)
    other.state.put("challenge", sid, "upheld", {"voted": True})
    Validator._settle(other)  # type: ignore[arg-type]
    assert len(_voter_slashes(honest, wrong.address)) == 1
    assert other.state.record(KIND, sid)["data"] == {"round": 1, "slashed": [], "skipped": [wrong.address.lower()]}
    for a in (off, agent, other):
        a.state.close()


def test_one_failing_challenge_does_not_stop_the_pass(tmp_path, monkeypatch):
    """An RPC error on one resolved challenge leaves that one for the next pass; the others are still handled."""
    from intellect.agents.roles import accountability

    state = StateStore(tmp_path / "state.sqlite")
    for cid in (1, 2):
        state.put("challenge", cid, "upheld", {"mine": True})

    def losing_voters(protocol, cid):
        if cid == 1:
            raise ConnectionError("RPC down for this one")
        return 1, []

    monkeypatch.setattr(accountability, "losing_voters", losing_voters)
    assert accountability.slash_losing_voters(SimpleNamespace(address="0x" + "11" * 20), state) == 0
    assert not state.record("challenge", 1)["data"].get("voters_slashed")  # tried again next pass
    assert state.record("challenge", 2)["data"].get("voters_slashed")
