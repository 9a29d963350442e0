"""Challenge evidence a voter can fetch when its challenger is behind NAT (issue 36): the challenger pushes the
document of each round it opens to the pool trainer's `POST /store/evidence`, which keeps exactly the evidence the
chain names (the round's ChallengeOpened: its challenger, its CID) and nothing a stranger sends, and unpins it once
the submission is no longer challenged and its window has ended.

Real anvil chain and contracts, a real `Trainer` agent (state store, embedded IPFS store and gateway, its HTTP
server) and a real `Validator` agent whose own gateway no voter is given (it is "behind NAT"); the challenge is
opened by the validator's `open_challenge`, the push goes over HTTP."""

from __future__ import annotations

import base64

import pytest
from nodes import staked_node  # type: ignore[import-not-found]
from role_config import swarm_pool_config  # type: ignore[import-not-found]

from intellect.agents.roles._server import HttpError
from intellect.agents.roles.challenges import open_challenge
from intellect.agents.roles.evidence_store import (
    EVIDENCE_SCHEMA,
    MAX_EVIDENCE_BYTES,
    accept_pushed_evidence,
    evidence_request,
    push_challenge_evidence,
    serve_stores,
    sweep_evidence,
)
from intellect.sdk import ContentNotFoundError, TaskStatus
from intellect.sdk.ipfs import EmbeddedIpfs, compute_cid
from intellect.verifier.submission import Verdict


def _push(trainer, p, sid: int, cid: str, data: bytes) -> dict:
    ledger = p.contracts["TaskLedger"].address
    return accept_pushed_evidence(trainer, evidence_request(p.account.key, p.chain_id, ledger, sid, cid, data))


def _refused(trainer, call, rule: str, status: int) -> str:
    with pytest.raises(HttpError) as err:
        call()
    assert err.value.status == status and err.value.message.startswith(rule + ":"), err.value.message
    assert "\n" not in err.value.message
    return err.value.message


@pytest.fixture
def agents(devnet, tmp_path):
    """(trainer agent serving its stores, validator agent behind "NAT", the worker's protocol, pool id)."""
    from intellect.agents.roles.trainer import Trainer
    from intellect.agents.roles.validator import Validator

    pool_id = devnet.deployment.default_pool_id or 1
    devnet.protocol(0).publish_checkpoint(pool_id, 1, "bafkreimanifestevidence")
    trainer = Trainer(swarm_pool_config(devnet, tmp_path / "trainer", "trainer", 0))
    trainer.connect()
    trainer.open_ipfs()
    trainer.start_server()
    serve_stores(trainer)  # as Trainer.start
    trainer.ensure_node(stake_amount=0.0001, auto_stake=True)  # registers the endpoint challengers push to
    worker = staked_node(devnet, 1, "worker")
    staked_node(devnet, 4, "validator")
    staked_node(devnet, 5, "validator")
    validator = Validator(swarm_pool_config(devnet, tmp_path / "validator", "validator", 4, **{"validator.push_evidence": "trainer"}))
    validator.connect()
    validator.open_ipfs()
    try:
        yield trainer, validator, worker, pool_id
    finally:
        validator.close()
        trainer.close()


def _submission(worker, pool_id: int, n: int) -> tuple[int, dict]:
    c = worker.claim_task(pool_id)
    cid = f"bafkreievidencework{n}"
    worker.submit_work(c.task_id, cid, bytes([n + 1]) * 32, 2, 1)
    return c.task_id, {"rollouts_cid": cid, "node": worker.address}


def _challenge(validator, sid: int, sub: dict) -> str:
    verdict = Verdict(submission_id=sid, accepted=False, reason="toploc_mismatch", detail="chunk 3: exponent check",
                      outcome="reject")
    cid = open_challenge(validator.protocol, validator.state, validator.ipfs, sid, sub, verdict)
    assert cid is not None
    return cid


def test_a_nat_challengers_evidence_is_pushed_and_every_voter_fetches_it_from_the_trainer(devnet, agents, tmp_path):
    trainer, validator, worker, pool_id = agents
    sid, sub = _submission(worker, pool_id, 1)
    cid = _challenge(validator, sid, sub)
    doc = validator.ipfs.cat(cid)
    voter = EmbeddedIpfs(tmp_path / "voter-ipfs")
    voter.peers = [trainer.gateway.url]  # the challenger's own gateway is unreachable
    with pytest.raises(ContentNotFoundError):
        voter.cat(cid)  # before the push: nobody reachable holds it

    push_challenge_evidence(validator, cid, sid)  # over HTTP to the trainer's registered endpoint
    assert validator.counters["evidence_pushed"] == 1 and trainer.counters["evidence_stored"] == 1
    assert voter.cat(cid) == doc
    rec = trainer.state.record("evidence", cid)
    assert rec["status"] == "pinned" and rec["data"]["submission_id"] == sid and rec["data"]["round"] == 1
    assert rec["data"]["node"].lower() == validator.protocol.address.lower()
    assert _push(trainer, validator.protocol, sid, cid, doc) == {"cid": cid, "pinned": True}  # a retry: kept once
    assert trainer.counters["evidence_stored"] == 1

    # kept while the submission is challenged or in its window; unpinned once neither
    assert sweep_evidence(trainer) == 0
    info = validator.protocol.challenge_info(sid)
    devnet.increase_time(max(info.vote_end, devnet.protocol(0).task(sid).window_end) - devnet.protocol(0).chain_time() + 1)
    validator.protocol.resolve(sid)
    assert devnet.protocol(0).task(sid).status != TaskStatus.CHALLENGED
    assert sweep_evidence(trainer) == 1
    assert trainer.state.record("evidence", cid)["status"] == "unpinned"
    fresh = EmbeddedIpfs(tmp_path / "late-voter-ipfs")
    fresh.peers = [trainer.gateway.url]
    with pytest.raises(ContentNotFoundError):
        fresh.cat(cid)


def test_the_evidence_store_keeps_only_what_the_chain_names(devnet, agents):
    trainer, validator, worker, pool_id = agents
    other = devnet.protocol(5)  # a staked validator that did not open the round
    sid, sub = _submission(worker, pool_id, 2)
    unchallenged, _ = _submission(worker, pool_id, 3)
    cid = _challenge(validator, sid, sub)
    doc = validator.ipfs.cat(cid)
    vp = validator.protocol
    ledger = vp.contracts["TaskLedger"].address

    _refused(trainer, lambda: accept_pushed_evidence(trainer, {"schema": "intellect.store/v2"}), "evidence.schema", 400)
    body = evidence_request(vp.account.key, vp.chain_id, ledger, sid, cid, doc)
    _refused(trainer, lambda: accept_pushed_evidence(trainer, {**body, "submission_id": "1"}), "evidence.schema", 400)
    _refused(trainer, lambda: accept_pushed_evidence(trainer, {**body, "data": "not base64!"}), "evidence.schema", 400)
    big = b"x" * (MAX_EVIDENCE_BYTES + 1)
    msg = _refused(trainer, lambda: _push(trainer, vp, sid, compute_cid(big), big), "evidence.size", 413)
    assert str(MAX_EVIDENCE_BYTES) in msg
    msg = _refused(trainer, lambda: accept_pushed_evidence(trainer, {**body, "node": other.address}),
                   "evidence.signature", 403)
    assert f"not {other.address}" in msg
    _refused(trainer, lambda: accept_pushed_evidence(trainer, {**body, "signature": "0x1234"}), "evidence.signature",
             400)
    # the chain decides: an unknown submission, one not challenged, a round someone else opened, another CID
    _refused(trainer, lambda: _push(trainer, vp, 10**9, cid, doc), "evidence.challenge", 404)
    msg = _refused(trainer, lambda: _push(trainer, vp, unchallenged, cid, doc), "evidence.challenge", 409)
    assert "submitted, not challenged" in msg
    msg = _refused(trainer, lambda: _push(trainer, other, sid, cid, doc), "evidence.challenge", 403)
    assert f"opened by {vp.address}" in msg
    junk = b'{"reason": "made up"}'
    msg = _refused(trainer, lambda: _push(trainer, vp, sid, compute_cid(junk), junk), "evidence.challenge", 409)
    assert f"names evidence {cid}" in msg
    # the named CID with other bytes
    wrong = {**body, "data": base64.b64encode(junk).decode()}
    _refused(trainer, lambda: accept_pushed_evidence(trainer, wrong), "evidence.cid", 400)
    assert trainer.state.count("evidence") == 0 and cid not in trainer.ipfs.pins()
    assert _push(trainer, vp, sid, cid, doc) == {"cid": cid, "pinned": True}
    assert cid in trainer.ipfs.pins() and trainer.state.count("evidence") == 1
    assert body["schema"] == EVIDENCE_SCHEMA


def test_a_failed_push_is_tried_again_in_the_background_and_logged(devnet, agents, caplog):
    """The trainer refuses the first push (here its chain shows no challenge yet: a trainer whose RPC node is
    behind the challenger's); the validator tries again after `retry_after` seconds, without holding its caller,
    and the evidence is stored once the trainer sees the round."""
    trainer, validator, worker, pool_id = agents
    sid, _ = _submission(worker, pool_id, 4)
    ev = b'{"submission_id": %d, "reason": "toploc_mismatch"}' % sid
    cid = validator.ipfs.add(ev)
    caplog.set_level("INFO", logger="intellect.agents.roles.evidence_store")
    retry = push_challenge_evidence(validator, cid, sid, retry_after=(1.0, 1.0, 30.0))
    assert retry is not None and retry.is_alive()  # refused: the caller goes on
    assert "not challenged" in caplog.text and "trying again in 1 s" in caplog.text
    validator.protocol.challenge(sid, cid)  # the round the trainer will see
    retry.join(timeout=20)
    assert not retry.is_alive()
    assert trainer.state.record("evidence", cid)["status"] == "pinned"
    assert validator.counters["evidence_pushed"] == 1
    assert validator.metrics.render().count('kind="push_evidence"') >= 1


def test_a_push_that_keeps_failing_gives_up_and_the_challenge_stands(devnet, agents, caplog):
    trainer, validator, worker, pool_id = agents
    sid, sub = _submission(worker, pool_id, 5)
    cid = _challenge(validator, sid, sub)
    trainer.server.stop()  # the trainer unreachable for good
    caplog.set_level("WARNING", logger="intellect.agents.roles.evidence_store")
    retry = push_challenge_evidence(validator, cid, sid, retry_after=(0.2,))
    assert retry is not None
    retry.join(timeout=30)
    assert f"evidence {cid} of the challenge of submission {sid}: pushing to trainer failed" in caplog.text
    assert caplog.text.count("pushing to trainer failed") == 2 and "giving up" in caplog.text
    assert validator.protocol.task(sid).status == TaskStatus.CHALLENGED
    validator.cfg.validator.push_evidence = "none"
    assert push_challenge_evidence(validator, cid, sid) is None  # nowhere to push: nothing sent, nothing failed
    assert caplog.text.count("pushing to") == 2
