"""Attesters of upheld work are slashed, canary or not (issue 33; `intellect.agents.roles.attester_slash`): the
pool's real trainer agent (connected, not started: its follower's events are handed to it, as the follower would)
holds the validators' signed attestations; once a challenge of a submission is upheld, its pass slashes every
validator whose accepting attestation of that submission it holds (`AttesterBook.slashAttester`), each once,
a bounded number per pass, across a restart, and a late attester too; an attester of work whose challenge was
rejected is not slashed. Real anvil, real contracts, the trainer's own intake of the attestations."""

from __future__ import annotations

from nodes import staked_node  # type: ignore[import-not-found]
from role_config import role_config  # type: ignore[import-not-found]
from rpc_counter import count_rpc  # type: ignore[import-not-found]

from intellect.agents.attestation import sign_attestation
from intellect.agents.roles.attester_slash import KIND, slash_upheld_attesters
from intellect.sdk import ChallengeStatus, Role, TaskStatus, dev_account

TOKEN = 10**18
LAZY, LATE, CHALLENGER, DEFENDER = 4, 6, 2, 3  # dev accounts of the validators


def _trainer(devnet, data_dir):
    from intellect.agents.roles.trainer import Trainer

    t = Trainer(role_config(devnet, "trainer", data_dir, 0))
    t.connect()
    for e in t.protocol.get_events(["TaskClaimed", "WorkSubmitted", "ChallengeResolved"]):
        t._on_event(e)  # what its event follower hands it
    return t


def _attest(t, account: int, sid: int, sub) -> None:
    """Validator `account`'s accepting attestation of submission `sid`, through the trainer's own intake."""
    p = t.protocol
    att = sign_attestation(dev_account(account).key, chain_id=p.chain_id, ledger=p.contracts["TaskLedger"].address,
                           submission_id=sid, rollouts_cid=sub.rollouts_cid, proofs_hash="0x" + sub.proofs_hash.hex(),
                           policy_step=1)
    assert t.accept_attestation(att.model_dump(by_alias=True))["ok"]


def _slashes(p, validator: str) -> list:
    return p.get_events(["AttesterSlashed"], filters={"validator": validator})


def test_trainer_slashes_the_attesters_of_upheld_work_not_of_rejected_challenges(devnet, tmp_path):
    p = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    params = p.pool(pool_id).params
    p.publish_checkpoint(pool_id, 1, "bafkreimanifestattesterslash")
    w = staked_node(devnet, 1, Role.WORKER)
    lazy, late = staked_node(devnet, LAZY, Role.VALIDATOR), staked_node(devnet, LATE, Role.VALIDATOR)
    challenger = staked_node(devnet, CHALLENGER, Role.VALIDATOR)
    defender = staked_node(devnet, DEFENDER, Role.VALIDATOR, 300 * TOKEN)
    bad, fine = w.claim_task(pool_id).task_id, w.claim_task(pool_id).task_id
    subs = {sid: w.submit_work(sid, f"bafkreiattesterslash{sid}", bytes([sid % 250 + 1]) * 32, 2, 1)
            for sid in (bad, fine)}
    t = _trainer(devnet, tmp_path / "t")
    for sid in (bad, fine):
        _attest(t, LAZY, sid, subs[sid])

    challenger.challenge(bad, "bafkreievidencebad")  # its uphold vote alone: upheld
    challenger.challenge(fine, "bafkreievidencefine")
    defender.vote(fine, False)  # 300 against 100: rejected
    devnet.increase_time(params.vote_period + 1)
    assert challenger.resolve(bad) is True and challenger.resolve(fine) is False
    assert p.challenge_info(fine).status == ChallengeStatus.REJECTED and p.task(bad).status == TaskStatus.UPHELD
    for e in p.get_events(["ChallengeResolved"]):
        t._on_event(e)
    assert [int(r["id"]) for r in t.state.records(KIND)] == [bad]  # the upheld one only

    stake = {v.address: p.active_stake(v.address) for v in (lazy, late)}
    # were it a canary of a running injector, the injector's own pass would slash it: this pass leaves it
    t.state.put("canary", bad, "upheld", {})
    assert slash_upheld_attesters(t.protocol, t.state, canaries=True) == 0 and not _slashes(p, lazy.address)
    assert slash_upheld_attesters(t.protocol, t.state) == p.attester_slash() > 0  # canaries off: this pass does
    (ev,) = _slashes(p, lazy.address)
    assert ev.args["submissionId"] == bad and ev.args["reporter"] == p.address
    assert p.active_stake(lazy.address) == stake[lazy.address] - p.attester_slash()  # for `bad`, not for `fine`
    rec = t.state.record(KIND, bad)
    assert rec["status"] == "pending" and rec["data"]["slashed"] == [lazy.address.lower()]

    with count_rpc(t.protocol.w3) as calls:  # handled: the next pass sends nothing, reads no log
        assert slash_upheld_attesters(t.protocol, t.state) == 0
    assert "eth_sendRawTransaction" not in calls and "eth_getLogs" not in calls and "eth_call" not in calls, calls

    # a late attester of the upheld work (its window still open), after a restart: slashed too, the first not again
    _attest(t, LATE, bad, subs[bad])
    t.state.close()
    t = _trainer(devnet, tmp_path / "t")
    assert slash_upheld_attesters(t.protocol, t.state) == p.attester_slash()
    assert len(_slashes(p, lazy.address)) == 1 and len(_slashes(p, late.address)) == 1
    assert p.active_stake(late.address) == stake[late.address] - p.attester_slash()
    assert [e.args["submissionId"] for e in p.get_events(["AttesterSlashed"])] == [bad, bad]  # never `fine`

    devnet.increase_time(params.window_length + 1)  # the window closed: the record is done, passes cost nothing
    slash_upheld_attesters(t.protocol, t.state)
    assert t.state.record(KIND, bad)["status"] == "done"
    with count_rpc(t.protocol.w3) as calls:
        slash_upheld_attesters(t.protocol, t.state)
    assert calls == []
    t.state.close()


def test_attester_slashes_are_bounded_per_pass_and_refusals_are_not_retried(devnet, tmp_path):
    """Three attesters of one upheld submission with one try a pass: at most one slashed per pass; an
    attestation the book refuses (here a signature over another policy step) is logged, kept as refused and not
    sent again; the pass never raises for it."""
    p = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    p.publish_checkpoint(pool_id, 1, "bafkreimanifestattesterbound")
    w = staked_node(devnet, 1, Role.WORKER)
    accounts = (LAZY, LATE, DEFENDER)
    validators = {a: staked_node(devnet, a, Role.VALIDATOR) for a in accounts}
    challenger = staked_node(devnet, CHALLENGER, Role.VALIDATOR)
    sid = w.claim_task(pool_id).task_id
    sub = w.submit_work(sid, "bafkreiattesterbound", b"\x31" * 32, 2, 1)
    t = _trainer(devnet, tmp_path / "t")
    for a in accounts:
        _attest(t, a, sid, sub)
    forged = t.state.record("attestation", f"{sid}:{validators[DEFENDER].address.lower()}")["data"]
    other = sign_attestation(dev_account(DEFENDER).key, chain_id=p.chain_id, ledger=p.contracts["TaskLedger"].address,
                             submission_id=sid, rollouts_cid=sub.rollouts_cid, proofs_hash="0x" + sub.proofs_hash.hex(),
                             policy_step=2)  # not the submission's step: the book recovers another signer
    t.state.put("attestation", f"{sid}:{validators[DEFENDER].address.lower()}", "valid",
                {**forged, "signature": other.signature})
    challenger.challenge(sid, "bafkreievidencebound")
    devnet.increase_time(p.pool(pool_id).params.vote_period + 1)
    assert challenger.resolve(sid) is True
    for e in p.get_events(["ChallengeResolved"]):
        t._on_event(e)

    sent = []
    for _ in range(4):
        with count_rpc(t.protocol.w3) as calls:
            slash_upheld_attesters(t.protocol, t.state, max_tx=1)
        sent.append(calls.count("eth_sendRawTransaction"))
    d = t.state.record(KIND, sid)["data"]
    assert sorted(d["slashed"]) == sorted(validators[a].address.lower() for a in (LAZY, LATE))
    assert d["refused"] == {validators[DEFENDER].address.lower(): "AttesterBookBadSignature"}
    # one try a pass (the refused one's is an estimate that reverts: a pass of its own, nothing sent), each once
    assert sorted(sent) == [0, 0, 1, 1] and sent[-1] == 0
    assert not _slashes(p, validators[DEFENDER].address)
    t.state.close()
