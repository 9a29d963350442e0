"""Issue 35 end to end on anvil: a validator whose per-worker evidence flags a worker challenges one cited
submission with an evidence claim; the other validators recompute the claim from their own verdicts and vote; the
vote upholds it and the worker is slashed. An ambiguous verdict slashes no one: the first cheating submission,
ambiguous but not yet enough evidence, gets neither an attestation nor a challenge.

Real parts: anvil, the deployed contracts, three real `Validator` agents (connected, not started: their event
handler, `_process`, `add_evidence` and vote pass drive them), their SQLite state stores, an embedded IPFS store
the three share (the evidence document goes through it, as through the network), the evidence rules shipped
with the code. The verdicts' source is simulated to keep the test fast: `verify_submission` returns, for the
worker's k-th submission, a verdict built from the k-th MEASURED 4-bit-copy submission (proven with the real
model) of `tests/verifier/data/evidence_streams.json` (its binned replay margins and TOPLOC exponent mismatches,
from `bench/verifier/bench_evidence.py collect`, the tiny model, a bf16 worker against the CPU fp32 validator):
its LLR is computed by `intellect.verifier.evidence` exactly as `check_submission` computes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nodes import staked_node  # type: ignore[import-not-found]
from role_config import role_config  # type: ignore[import-not-found]

from intellect.agents.config import load_config
from intellect.agents.roles.validator import Validator
from intellect.sdk import ChallengeStatus, Role, TaskStatus
from intellect.sdk.ipfs import EmbeddedIpfs
from intellect.verifier.evidence import DEFAULT_RULES, Observations, submission_llr
from intellect.verifier.submission import EVIDENCE_HIGH, Verdict

TOKEN = 10**18
DATA = Path(__file__).resolve().parents[1] / "verifier" / "data" / "evidence_streams.json"
CHEAT = "4-bit copy, proven with the real model"


def _stream() -> list[dict[str, list[int]]]:
    doc = json.loads(DATA.read_text())
    # the cheat's least conspicuous measured submissions first (the story below: one alone stays under h, two cross it)
    return sorted((s["counts"] for s in doc["cases"][CHEAT] if s["mixed_ok"]),
                  key=lambda c: submission_llr(Observations(counts={k: tuple(v) for k, v in c.items()}), DEFAULT_RULES))


class _MeasuredValidator(Validator):
    """A real validator whose check returns the verdict of a measured submission (see the module docstring)."""

    stream: list[dict[str, list[int]]]
    order: dict[int, int]

    def verify_submission(self, sid: int, sub: dict[str, Any]) -> Verdict:
        counts = self.stream[self.order[sid]]
        obs = Observations(counts={k: tuple(v) for k, v in counts.items()})
        llr = submission_llr(obs, self.evidence_rules)
        if llr >= self.evidence_rules.ambiguous_llr:
            return Verdict(submission_id=sid, accepted=False, outcome="ambiguous", reason=EVIDENCE_HIGH, llr=llr,
                           observations={k: list(v) for k, v in counts.items()})
        return Verdict(submission_id=sid, accepted=True, llr=llr, observations={k: list(v) for k, v in counts.items()})


def _agent(devnet, tmp_path: Path, account: int, ipfs: EmbeddedIpfs, order: dict[int, int],
           mode: str = "enforce") -> _MeasuredValidator:
    cfg = role_config(devnet, "validator", tmp_path, account, {"validator.evidence": mode})
    agent = _MeasuredValidator(cfg)
    agent.stream, agent.order = _stream(), order
    agent.connect()
    agent.ipfs = ipfs
    return agent


def _feed(agent: Validator) -> None:
    """What the agent's follower does: its handler on the chain's events (idempotent)."""
    for e in agent.protocol.get_events(["WorkSubmitted", "ChallengeOpened", "ChallengeResolved"]):
        agent.on_event(e)


def test_flagged_worker_is_challenged_with_evidence_and_the_vote_upholds_it(devnet, tmp_path):
    assert DEFAULT_RULES.threshold > 0 and len(_stream()) >= 3
    trainer = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestevidence")
    w = staked_node(devnet, 1, Role.WORKER, 100 * TOKEN)
    validators = [staked_node(devnet, a, Role.VALIDATOR, 100 * TOKEN) for a in (2, 3, 4)]
    ipfs = EmbeddedIpfs(tmp_path / "ipfs", timeout=5.0)
    order: dict[int, int] = {}
    agents = [_agent(devnet, tmp_path / f"v{a}", a, ipfs, order) for a in (2, 3, 4)]
    challenger, voters = agents[0], agents[1:]
    stake0 = w.active_stake(w.address)

    sids = []
    for k in range(3):
        claim = w.claim_task(pool_id)
        w.submit_work(claim.task_id, f"bafkreicheat{k}", bytes([k + 1]) * 32, 2, 1)
        order[claim.task_id] = k
        sids.append(claim.task_id)
    for a in agents:
        _feed(a)

    # the first submission: ambiguous (its own LLR is high), not enough evidence yet: no attestation, no challenge
    challenger._process(sids[0])
    assert challenger.state.record("submission", sids[0])["status"] == "ambiguous"
    assert challenger.state.records("attestation") == []
    assert challenger.state.records("challenge") == []
    assert w.task(sids[0]).status == TaskStatus.SUBMITTED
    assert w.active_stake(w.address) == stake0  # an ambiguous verdict slashes no one
    ev = challenger.state.record("evidence", w.address.lower())
    assert ev["status"] == "tracking" and ev["data"]["evidence"]["submissions"] == 1

    # the second: the evidence crosses h; the challenger challenges the newest cited submission in its window
    challenger._process(sids[1])
    rec = challenger.state.record("evidence", w.address.lower())
    assert rec["status"] == "challenged", rec
    target = rec["data"]["challenged"]
    assert target == sids[1] and w.task(target).status == TaskStatus.CHALLENGED
    info = w.challenge_info(target)
    assert info.challenger.lower() == validators[0].address.lower()

    # the evidence document on IPFS names the cited run; every voter judges the cited submissions itself (its own
    # verdicts and LLRs), opens no second challenge, recomputes the claim and votes to uphold
    for v in voters:
        _feed(v)
        for sid in sids[:2]:
            v._process(sid)
        assert v.state.record("evidence", w.address.lower())["status"] == "challenged"  # no second challenge
        ch = v.state.record("challenge", target)
        doc = json.loads(ipfs.cat(ch["data"]["evidence_cid"]))
        cited = [c["submission_id"] for c in doc["stats"]["evidence"]["cited"]]
        assert cited == sids[:2] and doc["reason"] == "evidence_accumulated"
        assert v.vote_of(ch["data"], v.state.record("submission", target)) is True
    voters[0]._votes_and_resolutions()  # votes uphold: the outcome is then fixed ...
    voters[0]._votes_and_resolutions()  # ... and its next pass resolves the challenge (round_actions, issue 33)
    (vote,) = w.get_events(["VoteCast"], filters={"challengeId": target})
    assert vote.args["uphold"] is True and vote.args["validator"] == validators[1].address
    assert w.challenge_info(target).status == ChallengeStatus.UPHELD
    assert w.active_stake(w.address) < stake0  # slashed
    # after the upheld challenge nobody challenges the worker again over the same, spent run, nor over a submission
    # it made before the slash (voided by it): its evidence restarts after them
    for a in agents:
        _feed(a)
        a._process(sids[2])
        rec = a.state.record("evidence", w.address.lower())
        assert rec["status"] == "tracking" and rec["data"]["evidence"]["history"] == [], rec
    assert [e.args["challengeId"] for e in w.get_events(["ChallengeOpened"])] == [target]
    for a in agents:
        a.state.close()


def test_tracking_validator_keeps_the_evidence_but_attests_and_challenges_no_one(devnet, tmp_path):
    """`validator.evidence: track` (the default): the same flagged history is recorded, the submissions are attested
    as before, and no challenge is opened on evidence."""
    trainer = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestevidence")
    w = staked_node(devnet, 1, Role.WORKER, 100 * TOKEN)
    staked_node(devnet, 2, Role.VALIDATOR, 100 * TOKEN)
    order: dict[int, int] = {}
    agent = _agent(devnet, tmp_path / "v", 2, EmbeddedIpfs(tmp_path / "ipfs", timeout=5.0), order, mode="track")
    assert load_config(None, env={}, overrides={"role": "validator"}).validator.evidence == "track"
    sids = []
    for k in range(2):
        claim = w.claim_task(pool_id)
        w.submit_work(claim.task_id, f"bafkreicheat{k}", bytes([k + 1]) * 32, 2, 1)
        order[claim.task_id] = k
        sids.append(claim.task_id)
    _feed(agent)
    for sid in sids:
        agent._process(sid)
        assert agent.state.record("submission", sid)["status"] == "accepted"
    assert {int(r["id"]) for r in agent.state.records("attestation")} == set(sids)
    rec = agent.state.record("evidence", w.address.lower())
    assert rec["status"] == "flagged" and rec["data"]["evidence"]["flagged"]
    assert agent.state.records("challenge") == [] and not w.get_events(["ChallengeOpened"])
    agent.state.close()


def test_a_voter_does_not_uphold_a_claim_that_leaves_out_a_submission(tmp_path):
    """The claim must cite every one of the worker's submissions in its range: a challenger cannot cherry-pick."""
    from intellect.agents.roles import evidence as roles_evidence
    from intellect.agents.roles._state import StateStore
    from intellect.verifier.evidence import WorkerEvidence

    st = StateStore(tmp_path / "state.db")
    worker = "0x" + "ab" * 20
    stream = _stream()
    llrs = []
    for k, sid in enumerate((10, 11, 12)):
        obs = Observations(counts={n: tuple(v) for n, v in stream[k].items()})
        llrs.append(submission_llr(obs, DEFAULT_RULES))
        st.put("submission", sid, "ambiguous", {"node": worker, "window_end": 10**12,
                                                 "verdict": {"llr": llrs[-1]}})
        roles_evidence.record_verdict(st, DEFAULT_RULES, sid, {"node": worker, "rollouts_cid": f"c{sid}"}, llrs[-1])
    ev = WorkerEvidence.model_validate(st.record("evidence", worker)["data"]["evidence"])
    assert ev.flagged and ev.submissions == 3  # survived the store: a restarted validator goes on from here
    claim = ev.claim(DEFAULT_RULES)
    assert roles_evidence.vote_on_claim(st, DEFAULT_RULES, claim, worker)[0] is True
    gap = claim.model_copy(update={"cited": tuple(c for c in claim.cited if c.submission_id != 11)})
    ok, why = roles_evidence.vote_on_claim(st, DEFAULT_RULES, gap, worker)
    assert ok is False and "leaves out" in why, why
    assert roles_evidence.vote_on_claim(st, DEFAULT_RULES, claim, "0x" + "cd" * 20)[0] is False
    st.close()
    st = StateStore(tmp_path / "state.db")  # a restart: the running evidence is read back as it was
    again = roles_evidence.worker_evidence(st, worker, DEFAULT_RULES)
    assert again == ev and again.claim(DEFAULT_RULES) == claim
    st.close()
