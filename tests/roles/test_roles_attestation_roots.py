"""The trainer's side of issue 38's attestation roots against a real anvil and a real IPFS store: the step's used
attestations become one root (one leaf per submission and validator, paid per slot held), its leaves file is on
IPFS under the CID the event names, and a trainer that dies between writing its intent and the chain's answer
finishes the same root after a restart instead of putting the same submissions in a second one."""

from __future__ import annotations

from intellect.agents.roles._state import StateStore
from intellect.agents.roles.attestation_intake import record_attestation_root, release_upheld_leaves
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
    assert release_upheld_leaves(p, t.state, t.ipfs) == 0  # its attesters not handled, its window open
    slash_upheld_attesters(p, t.state)
    devnet.increase_time(params.window_length + 1)
    slash_upheld_attesters(p, t.state)  # window closed: the upheld record is done
    assert release_upheld_leaves(p, t.state, t.ipfs) == REWARD
    assert p.attester_pool_rule(pool_id).budget == budget + REWARD
    (ev,) = p.get_events(["AttesterRewardReleased"])
    assert ev.args["submissionId"] == bad
    assert release_upheld_leaves(p, t.state, t.ipfs) == 0  # once
    f = AttestationRootFile.parse(t.ipfs.cat(t.state.record("attester_record", fine)["data"]["cid"]))
    (fine_leaf,) = [leaf for leaf in f.leaves if leaf.submission_id == fine]
    assert not p.attester_leaf_settled(pool_id, root, fine_leaf.index)  # the validator's to claim
    assert v.claim_attester_leaves(f, v.address, [fine_leaf.index]) == REWARD
    t.state.close()
