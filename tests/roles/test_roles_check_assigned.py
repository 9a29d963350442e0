"""A validator checks what it is paid to check, and what it must vote on (issue 33, `validator.check`).

Attesters are paid per assigned slot and a worker's slash goes to the treasury, so the shipped validator checks by
default (`assigned`) only the submissions the chain assigned to it, plus every one whose challenge opens (its vote
needs its own verdict); `all` (a volunteer) checks every submission. Before this setting the agent checked every
submission, assigned ones first, and lost money doing so (docs/economics.md).

Real parts: anvil, the deployed contracts, real `Validator` agents (connected, not started: their event handler is fed
the chain's events as the follower would, their dispatcher runs the checks on a real thread pool, their dispute pass
is called by hand), the chain's assignment (`Assigner` over the real stake history). The check itself is the one
stand-in: `verify_submission` records that it ran and returns the verdict the test gave the submission (the checks
that produce verdicts are `verifier.submission`'s, tested on their own; here what matters is which submissions are
checked, attested, challenged and voted on).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from nodes import staked_node  # type: ignore[import-not-found]
from role_config import role_config  # type: ignore[import-not-found]

from intellect.agents.roles.validator import Validator
from intellect.sdk import ChallengeStatus, Role
from intellect.verifier.submission import Verdict

TOKEN = 10**18
VALIDATORS = (2, 3, 4, 6)


class _Recorded(Validator):
    """A real validator whose check records the submission and returns the verdict the test set for it."""

    bad: set[int]
    checked: list[int]

    def verify_submission(self, sid: int, sub: dict[str, Any]) -> Verdict:
        with self._lock_checked:
            self.checked.append(sid)
        if sid in self.bad:
            return Verdict(submission_id=sid, accepted=False, reason="reward_mismatch", detail="row 2: reward 1.0")
        return Verdict(submission_id=sid, accepted=True)


def _agent(devnet, tmp_path: Path, account: int, bad: set[int], **overrides: str) -> _Recorded:
    agent = _Recorded(role_config(devnet, "validator", tmp_path, account, {"ipfs.gateway": "false", **overrides}))
    agent.bad, agent.checked, agent._lock_checked = bad, [], threading.Lock()
    agent.connect()
    agent.open_ipfs()
    agent._executor = ThreadPoolExecutor(max_workers=2)
    return agent


def _follow(agent: Validator) -> None:
    """What the agent's event follower does: the chain's events, in order, through its handler (idempotent)."""
    for e in agent.protocol.get_events(["TaskClaimed", "WorkSubmitted", "ChallengeOpened", "ChallengeResolved"]):
        agent.on_event(e)


def _run_checks(agent: Validator) -> None:
    """Dispatcher passes, each check they start run to its end, until a pass starts none (a pass starts at most
    2 x `validator.concurrency`)."""
    agent._dispatch()
    while agent._inflight:
        for fut in list(agent._inflight.values()):
            fut.result(timeout=60)
        agent._dispatch()


def _submissions(devnet, pool_id: int, me: str, others: list[str]) -> tuple[list[int], list[int]]:
    """Submissions of one worker until the chain has assigned at least one to `me` and two only to others
    (k = quorum 1 + 1 = 2 slots over 4 equal stakes: `me` holds a slot of one with probability 7/16)."""
    from intellect.agents.roles.claim_lookup import validator_assigner

    w = staked_node(devnet, 1, Role.WORKER)
    assigner = validator_assigner(w, w.pool(pool_id).params.quorum, None)
    mine: list[int] = []
    not_mine: list[int] = []
    for _ in range(40):
        c = w.claim_task(pool_id)
        w.submit_work(c.task_id, f"bafkreicheckassigned{c.task_id}", b"\x44" * 32, 2, 1)
        slots = assigner.for_task(c.task_id, (c.seed, c.block_number, w.address))
        assert slots and set(slots) <= {me, *others}
        (mine if me in slots else not_mine).append(c.task_id)
        if mine and len(not_mine) >= 2:
            return mine, not_mine
    raise AssertionError(f"40 claims gave {len(mine)} assigned and {len(not_mine)} unassigned")


def _setup(devnet):
    trainer = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestcheckassigned")
    nodes = {a: staked_node(devnet, a, Role.VALIDATOR) for a in VALIDATORS}
    me = nodes[VALIDATORS[0]].address.lower()
    mine, not_mine = _submissions(devnet, pool_id, me, [nodes[a].address.lower() for a in VALIDATORS[1:]])
    return nodes, mine, not_mine


def test_assigned_validator_checks_its_slots_and_every_challenged_submission(devnet, tmp_path):
    nodes, mine, (good_other, bad_other, *rest) = _setup(devnet)
    agent = _agent(devnet, tmp_path / "v", VALIDATORS[0], bad={bad_other})
    assert agent.cfg.validator.check == "assigned"  # the default
    _follow(agent)
    _run_checks(agent)

    # its slots are checked and the good work attested; the others are not checked at all: no verdict, no
    # attestation, not in the backlog
    assert sorted(agent.checked) == sorted(mine)
    for sid in mine:
        assert agent.state.record("submission", sid)["status"] == "accepted"
        assert agent.state.record("attestation", sid) is not None
    for sid in (good_other, bad_other, *rest):
        assert agent.state.record("submission", sid)["status"] == "unassigned"
        assert agent.state.record("attestation", sid) is None
    doc = agent.status()
    assert doc["backlog"] == 0 and agent.state.count("submission", "unassigned") == 2 + len(rest)
    assert {v["submission_id"] for v in doc["verdicts"]} == set(mine) and doc["verdicts_total"] == len(mine)
    _run_checks(agent)
    assert sorted(agent.checked) == sorted(mine)  # left alone on later passes

    # another validator challenges the bad one it does not hold a slot of: the agent checks it, and votes uphold
    challenger = nodes[VALIDATORS[1]]
    challenger.challenge(bad_other, "bafkreicheckassignedevidence")
    _follow(agent)
    assert agent.state.record("submission", bad_other)["status"] == "queued"
    _run_checks(agent)
    assert agent.checked.count(bad_other) == 1 and good_other not in agent.checked
    assert agent.state.record("submission", bad_other)["status"] == "rejected"
    agent._votes_and_resolutions()
    assert agent.protocol.vote_of(bad_other, agent.protocol.address) == (1, True)
    assert agent.protocol.challenge_info(bad_other).status in (ChallengeStatus.OPEN, ChallengeStatus.UPHELD)
    assert [e.args["challengeId"] for e in agent.protocol.get_events(["ChallengeOpened"])] == [bad_other]  # no 2nd
    agent._executor.shutdown(wait=True)
    agent.state.close()


def test_volunteer_checks_every_submission(devnet, tmp_path):
    _, mine, not_mine = _setup(devnet)
    bad = {not_mine[1]}
    agent = _agent(devnet, tmp_path / "v", VALIDATORS[0], bad=bad, **{"validator.check": "all"})
    _follow(agent)
    _run_checks(agent)
    assert sorted(agent.checked) == sorted(mine + not_mine)
    assert {int(r["id"]) for r in agent.state.records("submission", "accepted")} == set(mine + not_mine) - bad
    # the bad one it holds no slot of is challenged by it, as before
    assert agent.protocol.challenge_info(not_mine[1]).challenger.lower() == agent.protocol.address.lower()
    agent._executor.shutdown(wait=True)
    agent.state.close()


def test_unreadable_assignment_waits_and_is_checked_before_the_window_ends(devnet, tmp_path):
    """A claim made before any validator was staked (a dev chain): its assignment is unknown until one is. The
    submission is neither checked nor given up as `unassigned`: it waits, asked again later; with the assignment
    still unknown as its window nears its end, it is checked."""
    trainer = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestcheckunknown")
    w = staked_node(devnet, 1, Role.WORKER)
    c = w.claim_task(pool_id)
    w.submit_work(c.task_id, "bafkreicheckunknown", b"\x45" * 32, 2, 1)
    agent = _agent(devnet, tmp_path / "v", VALIDATORS[0], bad=set())  # not staked: no validator is
    _follow(agent)
    _run_checks(agent)
    rec = agent.state.record("submission", c.task_id)
    assert agent.checked == [] and rec["status"] == "queued" and rec["data"]["assignment_tries"] == 1
    assert agent.state.record("assignment", c.task_id) is None
    window = w.pool(pool_id).params.window_length
    devnet.increase_time(window - max(60, window // 10))
    agent.state.put("submission", c.task_id, "queued", {"retry_at": 0})  # its backoff over
    _run_checks(agent)
    assert agent.checked == [c.task_id]
    assert agent.state.record("submission", c.task_id)["status"] == "accepted"
    agent._executor.shutdown(wait=True)
    agent.state.close()


def test_evidence_claim_queues_the_cited_submissions_it_left_unassigned(devnet, tmp_path):
    """A challenge of a flagged worker (issue 35) carries an evidence claim citing several of its submissions; a voter
    recomputes it from its own verdicts of each. Those it left `unassigned` are checked once it has judged the
    challenged one, and then it votes."""
    from intellect.agents.roles.challenges import Evidence
    from intellect.agents.roles.evidence import EVIDENCE_REASON
    from intellect.verifier.evidence import Cited, EvidenceClaim

    nodes, _mine, (cited, target, *_rest) = _setup(devnet)
    agent = _agent(devnet, tmp_path / "v", VALIDATORS[0], bad=set())
    _follow(agent)
    _run_checks(agent)
    assert {agent.state.record("submission", s)["status"] for s in (cited, target)} == {"unassigned"}
    agent.checked.clear()  # its own slots' checks
    worker = devnet.protocol(1).address
    claim = EvidenceClaim(worker=worker, rules="0" * 64, compute_class="cpu", statistic=9.0, threshold=5.0,
                          cited=(Cited(submission_id=cited, llr=4.0), Cited(submission_id=target, llr=5.0)))
    doc = Evidence(submission_id=target, rollouts_cid="bafkreicited", node=worker, reason=EVIDENCE_REASON,
                   detail="flagged", stats={"evidence": claim.model_dump(by_alias=True, mode="json")},
                   validator=nodes[VALIDATORS[1]].address, checked_at=0.0)
    evidence_cid = agent.ipfs.add(doc.model_dump_json(by_alias=True).encode())
    nodes[VALIDATORS[1]].challenge(target, evidence_cid)

    _follow(agent)  # the challenged one is queued and checked; the vote pass then finds the other cited one unjudged
    _run_checks(agent)
    assert agent.checked == [target] and agent.state.record("submission", target)["status"] == "accepted"
    agent._votes_and_resolutions()
    assert agent.protocol.vote_of(target, agent.protocol.address)[0] == 0  # not yet: `cited` has no verdict here
    assert agent.state.record("submission", cited)["status"] == "queued"
    _run_checks(agent)
    assert agent.checked == [target, cited]
    agent._votes_and_resolutions()
    assert agent.protocol.vote_of(target, agent.protocol.address)[0] == 1  # voted in round 1, from its own verdicts
    agent._executor.shutdown(wait=True)
    agent.state.close()
