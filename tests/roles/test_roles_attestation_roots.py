"""The trainer's side of issue 38's attestation roots against a real anvil and a real IPFS store: the step's used
attestations become one root (one leaf per submission and validator, paid per slot held), its leaves file is on
IPFS under the CID the event names, and a trainer that dies between writing its intent and the chain's answer
finishes the same root after a restart instead of putting the same submissions in a second one."""

from __future__ import annotations

import pytest

from intellect.agents.roles._state import StateStore
from intellect.agents.roles.attestation_intake import record_attestation_root
from intellect.agents.roles.attester_release import release_unpayable_leaves
from intellect.sdk.attestation_root import AttestationRootFile
from intellect.sdk.ipfs import EmbeddedIpfs

TOKEN = 10**18
REWARD = 2 * TOKEN


class _Metrics:
    def __init__(self) -> None:
        self.errors: list[str] = []

    def inc(self, name: str, kind: str = "") -> None:
        self.errors.append(kind)


class _DiesAfterSending:
    """The trainer's Protocol, killed right after `recordAttestationRoot` was mined (before its state write) or
    before it was sent."""

    def __init__(self, protocol, *, send: bool) -> None:
        self._p, self._send = protocol, send

    def __getattr__(self, name):
        return getattr(self._p, name)

    def record_attestation_root(self, f, cid):
        if self._send:
            self._p.record_attestation_root(f, cid)
        raise RuntimeError("trainer killed")


def _setup(devnet, tmp_path, n):
    trainer = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    trainer.set_attester_reward(pool_id, REWARD)
    trainer.fund_attester_rewards(pool_id, 100 * TOKEN)
    state = StateStore(tmp_path / "state.sqlite")
    validators = [devnet.protocol(i).address for i in (3, 4)]
    for sid in range(1, n + 1):
        _consume(state, sid, validators)
    return trainer, pool_id, state, validators, EmbeddedIpfs(tmp_path / "ipfs")


def _consume(state, sid, validators):
    state.put("submission", sid, "consumed")
    for v in validators:
        state.put("attestation", f"{sid}:{v.lower()}", "kept", {"submission_id": sid, "validator": v})


def _roots(trainer):
    return trainer.get_events(["AttestationRootRecorded"])


def test_a_step_is_one_root_and_a_restart_finishes_it_instead_of_a_second(devnet, tmp_path):
    trainer, pool_id, state, (v1, v2), ipfs = _setup(devnet, tmp_path, 2)

    def assigned(sid):  # v1 holds two slots of every submission, v2 one
        return (v1.lower(), v1.lower(), v2.lower())

    metrics = _Metrics()
    # killed before the transaction: the submissions stay `recording` under the root and file of this pass
    got = record_attestation_root(_DiesAfterSending(trainer, send=False), state, pool_id, ipfs=ipfs, step=1,
                                  assigned=assigned, metrics=metrics)
    assert got is None and metrics.errors == ["RuntimeError"] and not _roots(trainer)
    pending = state.records("attester_record", "recording")
    assert {int(r["id"]) for r in pending} == {1, 2} and len({r["data"]["root"] for r in pending}) == 1
    root = pending[0]["data"]["root"]
    _consume(state, 3, (v1, v2))  # trained after the restart: a new root, not this one
    got = record_attestation_root(trainer, state, pool_id, ipfs=ipfs, step=2, assigned=assigned, metrics=metrics)
    events = _roots(trainer)
    assert "0x" + events[0].args["root"].removeprefix("0x") == root  # the restarted root was sent first
    assert got is not None and got != root and len(events) == 2
    files = [AttestationRootFile.parse(ipfs.cat(e.args["leavesCid"])) for e in events]
    assert [f.root for f in files] == [root, got]
    assert sorted((leaf.submission_id, leaf.validator, leaf.amount) for f in files for leaf in f.leaves) == sorted(
        (sid, v, amount) for sid in (1, 2, 3) for v, amount in ((v1, 2 * REWARD), (v2, REWARD)))
    assert [int(e.args["total"]) for e in events] == [6 * REWARD, 3 * REWARD]
    assert {r["data"]["root"] for r in state.records("attester_record", "recorded")} == {root, got}
    assert record_attestation_root(trainer, state, pool_id, ipfs=ipfs, step=3, assigned=assigned,
                                   metrics=metrics) is None  # nothing left: no transaction
    assert len(_roots(trainer)) == 2
    state.close()


def test_a_root_mined_before_the_trainer_died_is_not_sent_again(devnet, tmp_path):
    trainer, pool_id, state, (v1, _v2), ipfs = _setup(devnet, tmp_path, 2)
    metrics = _Metrics()
    record_attestation_root(_DiesAfterSending(trainer, send=True), state, pool_id, ipfs=ipfs, step=1,
                            assigned=lambda sid: (v1.lower(),), metrics=metrics)
    assert len(_roots(trainer)) == 1 and state.count("attester_record", "recording") == 2
    record_attestation_root(trainer, state, pool_id, ipfs=ipfs, step=1, assigned=lambda sid: (v1.lower(),),
                            metrics=metrics)
    assert len(_roots(trainer)) == 1 and state.count("attester_record", "recorded") == 2
    assert metrics.errors == ["RuntimeError"]
    state.close()


def test_leaves_of_work_upheld_after_training_go_back_to_the_pools_budget(devnet, tmp_path):
    """The real trainer agent (connected, not started; its follower's events handed to it): two trained
    submissions recorded in one root; one is challenged and upheld afterwards, inside its window. Once its attester
    is slashed and its window closed, the trainer's pass releases that submission's leaf; the other's stays the
    validator's to claim."""
    from nodes import staked_node  # type: ignore[import-not-found]
    from role_config import role_config  # type: ignore[import-not-found]

    from intellect.agents.attestation import sign_attestation
    from intellect.agents.roles.attester_slash import slash_upheld_attesters
    from intellect.agents.roles.trainer import Trainer
    from intellect.sdk import Role, dev_account

    p = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    params = p.pool(pool_id).params
    p.set_attester_reward(pool_id, REWARD)
    p.fund_attester_rewards(pool_id, 100 * TOKEN)
    p.publish_checkpoint(pool_id, 1, "bafkreimanifestrootrelease")
    w, honest = staked_node(devnet, 1, Role.WORKER), staked_node(devnet, 5, Role.WORKER)  # an upheld worker's
    v = staked_node(devnet, 4, Role.VALIDATOR)  # other open work is void: the fine one is another worker's
    challenger = staked_node(devnet, 2, Role.VALIDATOR)
    bad, fine = w.claim_task(pool_id).task_id, honest.claim_task(pool_id).task_id
    subs = {sid: node.submit_work(sid, f"bafkreirootrelease{sid}", bytes([sid % 250 + 1]) * 32, 2, 1)
            for sid, node in ((bad, w), (fine, honest))}
    t = Trainer(role_config(devnet, "trainer", tmp_path / "t", 0))
    t.connect()
    t.ipfs = EmbeddedIpfs(tmp_path / "ipfs")
    for e in p.get_events(["TaskClaimed", "WorkSubmitted"]):
        t._on_event(e)
    for sid in (bad, fine):
        att = sign_attestation(dev_account(4).key, chain_id=p.chain_id, ledger=p.contracts["TaskLedger"].address,
                               submission_id=sid, rollouts_cid=subs[sid].rollouts_cid,
                               proofs_hash="0x" + subs[sid].proofs_hash.hex(), policy_step=1)
        assert t.accept_attestation(att.model_dump(by_alias=True))["ok"]
        t.state.put("submission", sid, "consumed")
    root = record_attestation_root(p, t.state, pool_id, ipfs=t.ipfs, step=1,
                                   assigned=lambda sid: (v.address.lower(),), metrics=_Metrics())
    assert root is not None
    budget = p.attester_pool_rule(pool_id).budget

    challenger.challenge(bad, "bafkreievidencerootrelease")  # its uphold vote alone: upheld
    devnet.increase_time(params.vote_period + 1)
    assert challenger.resolve(bad) is True
    for e in p.get_events(["ChallengeResolved"]):
        t._on_event(e)
    assert release_unpayable_leaves(p, t.state, t.ipfs) == 0  # its attesters not handled, its window open
    slash_upheld_attesters(p, t.state)
    devnet.increase_time(params.window_length + 1)
    slash_upheld_attesters(p, t.state)  # window closed: the upheld record is done
    assert release_unpayable_leaves(p, t.state, t.ipfs) == REWARD
    assert p.attester_pool_rule(pool_id).budget == budget + REWARD
    (ev,) = p.get_events(["AttesterRewardReleased"])
    assert ev.args["submissionId"] == bad
    assert release_unpayable_leaves(p, t.state, t.ipfs) == 0  # once
    f = AttestationRootFile.parse(t.ipfs.cat(t.state.record("attester_record", fine)["data"]["cid"]))
    (fine_leaf,) = [leaf for leaf in f.leaves if leaf.submission_id == fine]
    assert not p.attester_leaf_settled(pool_id, root, fine_leaf.index)  # the validator's to claim
    assert v.claim_attester_leaves(f, v.address, [fine_leaf.index]) == REWARD
    t.state.close()


def _paid_pool(devnet, tag):
    """The default pool paying REWARD per attestation, a checkpoint at step 1, two staked workers (accounts 1 and
    5), two validators (4 and 6) and a challenger (2)."""
    from nodes import staked_node  # type: ignore[import-not-found]

    from intellect.sdk import Role

    p = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    p.set_attester_reward(pool_id, REWARD)
    p.fund_attester_rewards(pool_id, 100 * TOKEN)
    p.publish_checkpoint(pool_id, 1, f"bafkreimanifestroot{tag}")
    workers = staked_node(devnet, 1, Role.WORKER), staked_node(devnet, 5, Role.WORKER)
    validators = staked_node(devnet, 4, Role.VALIDATOR), staked_node(devnet, 6, Role.VALIDATOR)
    return p, pool_id, p.pool(pool_id).params, workers, validators, staked_node(devnet, 2, Role.VALIDATOR)


@pytest.mark.parametrize("voided_by", ["trainer", "anyone"])
def test_leaves_of_work_voided_after_training_go_back_to_the_pools_budget(devnet, tmp_path, voided_by):
    """A worker with two trained submissions recorded in one root is slashed for a third: the other two were open
    when its epoch ended, so they are void and no validator can ever be paid their leaves. The trainer's follower
    sees WorkerWiped; its pass voids them itself (`trainer`) or sees someone else's SubmissionVoided (`anyone`),
    then releases their leaves, one transaction per root and validator. A wiped submission it never trained has
    nothing to release; one it may still train waits. Another worker's leaf stays the validator's to claim."""
    from role_config import role_config  # type: ignore[import-not-found]

    from intellect.agents.attestation import sign_attestation
    from intellect.agents.roles.trainer import Trainer
    from intellect.sdk import TaskStatus, dev_account

    p, pool_id, params, (w, honest), (v, v2), challenger = _paid_pool(devnet, "void")
    t = Trainer(role_config(devnet, "trainer", tmp_path / "t", 0))
    t.connect()
    t.ipfs = EmbeddedIpfs(tmp_path / "ipfs")
    subs = {}
    for node in (w, w, honest, w, w):  # trained: w, w, honest; then one pending, one left out (w's)
        sid = node.claim_task(pool_id).task_id
        subs[sid] = node.submit_work(sid, f"bafkreirootvoid{sid}", bytes([sid % 250 + 1]) * 32, 2, 1)
    trained, fine, (pending, left) = [s for s in subs if subs[s].node == w.address][:2], list(subs)[2], list(subs)[3:]
    for e in p.get_events(["TaskClaimed", "WorkSubmitted"]):
        t._on_event(e)
    for sid in (*trained, fine):
        for key in (4, 6):
            att = sign_attestation(dev_account(key).key, chain_id=p.chain_id,
                                   ledger=p.contracts["TaskLedger"].address, submission_id=sid,
                                   rollouts_cid=subs[sid].rollouts_cid, proofs_hash="0x" + subs[sid].proofs_hash.hex(),
                                   policy_step=1)
            assert t.accept_attestation(att.model_dump(by_alias=True))["ok"]
        t.state.put("submission", sid, "consumed")
    t.state.put("submission", left, "excluded")
    root = record_attestation_root(p, t.state, pool_id, ipfs=t.ipfs, step=1,
                                   assigned=lambda sid: (v.address.lower(), v2.address.lower()), metrics=_Metrics())
    assert root is not None
    budget = p.attester_pool_rule(pool_id).budget

    bad = w.claim_task(pool_id).task_id  # its third: challenged and upheld, which wipes the open two
    w.submit_work(bad, "bafkreirootvoidbad", b"\x07" * 32, 2, 1)
    challenger.challenge(bad, "bafkreievidencerootvoid")
    devnet.increase_time(params.vote_period + 1)
    assert challenger.resolve(bad) is True
    if voided_by == "anyone":
        assert challenger.void_submissions(trained) > 0
    after_root = p.get_events(["AttestationRootRecorded"])[-1].block_number + 1
    for e in p.get_events(["WorkSubmitted", "ChallengeResolved", "WorkerWiped", "SubmissionVoided"],
                          from_block=after_root):  # what the follower sees after the root
        t._on_event(e)
    assert {int(r["id"]) for r in t.state.records("attester_void")} == {*trained, pending, left, bad}

    released = release_unpayable_leaves(p, t.state, t.ipfs)
    assert released == 2 * 2 * REWARD  # two submissions, two validators each
    assert p.attester_pool_rule(pool_id).budget == budget + released
    assert all(p.task(sid).status == TaskStatus.VOIDED for sid in trained)
    voids = [e for e in p.get_events(["SubmissionVoided"]) if int(e.args["submissionId"]) in trained]
    assert len(voids) == 2 and len({e.tx_hash for e in voids}) == 1  # voided once, in one transaction
    rel = p.get_events(["AttesterRewardReleased"])
    assert sorted(int(e.args["submissionId"]) for e in rel) == sorted(trained * 2)
    assert len({e.tx_hash for e in rel}) == 2  # one a validator: both of its leaves in one multiproof
    status = {int(r["id"]): r["status"] for r in t.state.records("attester_void")}
    assert status == {trained[0]: "voided", trained[1]: "voided", pending: "wiped", left: "nothing", bad: "nothing"}
    assert all(t.state.record("attester_record", sid)["data"]["released"] for sid in trained)
    assert {t.state.record("submission", sid)["status"] for sid in trained} == {"consumed"}  # trained stays trained

    t.state.put("submission", pending, "stale")  # never trained: nothing of it to release
    assert release_unpayable_leaves(p, t.state, t.ipfs) == 0  # once
    assert t.state.record("attester_void", pending)["status"] == "nothing"
    assert len(p.get_events(["AttesterRewardReleased"])) == 4
    f = AttestationRootFile.parse(t.ipfs.cat(t.state.record("attester_record", fine)["data"]["cid"]))
    fine_leaves = [leaf.index for leaf in f.leaves if leaf.submission_id == fine and leaf.validator == v.address]
    assert not p.attester_leaf_settled(pool_id, root, fine_leaves[0])  # another worker's: the validator's to claim
    devnet.increase_time(params.window_length + 1)
    assert v.claim_attester_leaves(f, v.address, fine_leaves) == REWARD
    t.state.close()


def test_anyone_releases_the_leaves_of_upheld_work_with_the_cli(devnet, tmp_path):
    """`intellect rewards roots` lists a pool's roots with what each still reserves; `intellect rewards
    release-leaves` (any account) reads each root's leaves file by its CID, checks it against the root, and
    releases the leaves whose work was upheld: one transaction per validator; a second run finds nothing."""
    import json

    from cli_runner import run_cli  # type: ignore[import-not-found]


    p, pool_id, params, (w, honest), (v, v2), challenger = _paid_pool(devnet, "cli")
    bad, fine = w.claim_task(pool_id).task_id, honest.claim_task(pool_id).task_id
    for sid, node in ((bad, w), (fine, honest)):
        node.submit_work(sid, f"bafkreirootcli{sid}", bytes([sid % 250 + 1]) * 32, 2, 1)
    state = StateStore(tmp_path / "state.sqlite")
    for sid in (bad, fine):
        _consume(state, sid, (v.address, v2.address))
    ipfs_dir = tmp_path / "ipfs"
    root = record_attestation_root(p, state, pool_id, ipfs=EmbeddedIpfs(ipfs_dir), step=1,
                                   assigned=lambda sid: (v.address.lower(), v2.address.lower()), metrics=_Metrics())
    assert root is not None
    chain = ["--network", devnet.url, "--deployment", str(devnet.deployment_file)]
    leaves = ["rewards", "release-leaves", str(pool_id), "--ipfs", f"embedded:{ipfs_dir}"]

    code, out, err = run_cli([*chain, "--json", "rewards", "roots", str(pool_id)])
    assert code == 0, err
    (doc,) = json.loads(out)
    assert (doc["root"], doc["leaf_count"], doc["total"], doc["remaining"]) == (root, 4, 4 * REWARD, 4 * REWARD)
    code, out, err = run_cli([*chain, "--dev-account", "7", "--json", *leaves])
    assert code == 0, err
    assert json.loads(out)["released"] == 0  # nothing upheld yet: every leaf may still be paid

    challenger.challenge(bad, "bafkreievidencerootcli")
    devnet.increase_time(params.vote_period + 1)
    assert challenger.resolve(bad) is True
    code, out, err = run_cli([*chain, "--json", *leaves, "--dry-run"])
    assert code == 0, err
    dry = json.loads(out)
    assert dry["dry_run"] and dry["released"] == 2 * REWARD and not p.get_events(["AttesterRewardReleased"])
    assert sorted(b["validator"] for b in dry["batches"]) == sorted((v.address, v2.address))
    budget = p.attester_pool_rule(pool_id).budget
    code, out, err = run_cli([*chain, "--dev-account", "7", *leaves, "--root", root.upper().replace("0X", "0x")])
    assert code == 0, err
    assert "released 4.0" in out or "released 4" in out, out
    assert p.attester_pool_rule(pool_id).budget == budget + 2 * REWARD
    rel = p.get_events(["AttesterRewardReleased"])
    assert [int(e.args["submissionId"]) for e in rel] == [bad, bad] and len({e.tx_hash for e in rel}) == 2
    code, out, err = run_cli([*chain, "--json", "rewards", "roots", str(pool_id)])
    assert json.loads(out)[0]["remaining"] == 2 * REWARD  # fine's two leaves: still the validators'
    code, out, err = run_cli([*chain, "--dev-account", "7", *leaves])
    assert code == 0 and "nothing to release" in out, (out, err)
    code, out, err = run_cli([*chain, *leaves, "--dry-run", "--root", "0x1234"])
    assert code == 2 and "is not a root" in err, (out, err)
    state.close()
