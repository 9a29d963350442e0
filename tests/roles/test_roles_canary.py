"""Canary submissions (issue 21): the trainer, through a worker key of its own, submits known-bad work; a validator
that attests it without checking (the kit's `lazy` validator) is slashed with its own signature
(`AttesterBook.slashAttester`), an honest validator is not, and the trainer never trains on the canary."""

from __future__ import annotations

import json
import threading

import pytest
from nodes import staked_node  # type: ignore[import-not-found]

from intellect.agents.config import load_config
from intellect.sdk import ChallengeStatus, Role, TaskStatus, dev_account

TOKEN = 10**18
CANARY, CHALLENGER = 7, 8  # dev accounts: the trainer's canary worker and its challenger validator


def _staked_validator(devnet, account: int):
    return staked_node(devnet, account, Role.VALIDATOR)


def _attester_slashes(p, validator: str) -> list:
    return p.get_events(["AttesterSlashed"], filters={"validator": validator})


def test_pool_challenges_an_unchallenged_canary_and_slashes_its_attester(devnet, tmp_path):
    """The injector against a real anvil, in process (`TrainerParts`: the trainer's parts it is lent): no honest
    validator checks the canary, so the pool's challenger key challenges it; once upheld, the validator that signed
    an accepting attestation of it is slashed, the one that did not is not."""
    from intellect.agents.attestation import sign_attestation
    from intellect.agents.models import tiny_model_dir
    from intellect.agents.roles._runtime import load_task_set
    from intellect.agents.roles._state import StateStore
    from intellect.agents.roles.canary import CanaryInjector, TrainerParts, canary_ids
    from intellect.sdk.ipfs import EmbeddedIpfs

    p = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    p.publish_checkpoint(pool_id, 0, "bafkreimanifestcanary")
    lazy, bystander = _staked_validator(devnet, 4), _staked_validator(devnet, 6)
    cfg = load_config(None, env={}, overrides={
        "role": "trainer", "data_dir": str(tmp_path / "t"), "tasks.source": "synthetic:64:0",
        "tasks.budgets": json.dumps({"cpu": [6, 8]}), "trainer.canary.every_n_steps": "1",
        "trainer.canary.dev_account": str(CANARY), "trainer.canary.challenger_dev_account": str(CHALLENGER),
        "trainer.canary.challenge_after": "0"})
    trainer = TrainerParts(  # what a started trainer lends its injector (`TrainerParts.of`)
        cfg=cfg, protocol=p, pool_id=pool_id, pool=p.pool(pool_id), state=StateStore(tmp_path / "state.sqlite"),
        ipfs=EmbeddedIpfs(tmp_path / "ipfs"), data_dir=tmp_path / "t", stop_event=threading.Event(), rules=None,
        checkpoint_path=lambda step: tiny_model_dir(),  # step 0: the tiny base model the trainer starts from
        task_set=load_task_set(cfg.tasks, None, None))
    injector = CanaryInjector(trainer)
    injector.set_up()
    assert p.node(injector.worker.address).owner == injector.worker.address  # its own operator, like any worker

    injector.tick()  # step 0 is published and the schedule says every step: one canary, claimed and submitted
    (sid,) = canary_ids(trainer.state)
    sub = p.submissions(node=injector.worker.address)
    assert [s.submission_id for s in sub] == [sid] and sub[0].status == TaskStatus.SUBMITTED
    rec = trainer.state.record("canary", sid)["data"]
    assert trainer.ipfs.cat(sub[0].rollouts_cid)  # the file is in the trainer's store, served like pushed work

    att = sign_attestation(dev_account(4).key, chain_id=p.chain_id, ledger=p.contracts["TaskLedger"].address,
                           submission_id=sid, rollouts_cid=rec["rollouts_cid"], proofs_hash=rec["proofs_hash"],
                           policy_step=rec["policy_step"])
    trainer.state.put("attestation", f"{sid}:{lazy.address.lower()}", "valid",  # as the trainer keeps one
                      {"submission_id": sid, "validator": lazy.address, "owner": lazy.address,
                       "signature": att.signature})
    injector.tick()  # nobody challenged it (challenge_after 0): the pool's challenger does
    info = p.challenge_info(sid)
    assert info.challenger == injector.challenger.address and info.status == ChallengeStatus.OPEN
    stake = {v.address: p.active_stake(v.address) for v in (lazy, bystander)}
    devnet.increase_time(trainer.pool.params.vote_period + 1)
    injector.tick()  # resolvable: resolved, upheld (the challenger's weight, nobody against)
    assert p.task(sid).status == TaskStatus.UPHELD
    injector.tick()  # upheld: the attester is slashed with its own signature
    (ev,) = _attester_slashes(p, lazy.address)
    assert ev.args["submissionId"] == sid and ev.args["slashed"] == p.attester_slash() > 0
    assert p.active_stake(lazy.address) == stake[lazy.address] - p.attester_slash()
    assert not _attester_slashes(p, bystander.address)
    assert p.active_stake(bystander.address) == stake[bystander.address]
    injector.tick()  # each attester once
    assert len(_attester_slashes(p, lazy.address)) == 1
    assert trainer.state.record("canary", sid)["data"]["slashed"] == [lazy.address.lower()]
    trainer.state.close()


def test_canary_whose_submission_keeps_reverting_is_given_up(devnet, tmp_path):
    """`submitWork` reverts on every try (here: more units than the pool admits, a real revert): the injector
    builds the file once, tries `MAX_SUBMIT_REVERTS` times (one a pass), then closes the canary with the reason
    and sends nothing more; before, every 2 s pass rebuilt the file and resubmitted until the lease ran out."""
    from intellect.agents.models import tiny_model_dir
    from intellect.agents.roles._runtime import load_task_set
    from intellect.agents.roles._state import StateStore
    from intellect.agents.roles.canary import MAX_SUBMIT_REVERTS, CanaryInjector, TrainerParts, canary_ids
    from intellect.sdk.ipfs import EmbeddedIpfs

    p = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    p.publish_checkpoint(pool_id, 0, "bafkreimanifestcanaryrevert")
    cfg = load_config(None, env={}, overrides={
        "role": "trainer", "data_dir": str(tmp_path / "t"), "tasks.source": "synthetic:64:0",
        "tasks.budgets": json.dumps({"cpu": [6, 8]}), "trainer.canary.every_n_steps": "1",
        "trainer.canary.dev_account": str(CANARY)})
    trainer = TrainerParts(
        cfg=cfg, protocol=p, pool_id=pool_id, pool=p.pool(pool_id), state=StateStore(tmp_path / "state.sqlite"),
        ipfs=EmbeddedIpfs(tmp_path / "ipfs"), data_dir=tmp_path / "t", stop_event=threading.Event(), rules=None,
        checkpoint_path=lambda step: tiny_model_dir(), task_set=load_task_set(cfg.tasks, None, None))
    injector = CanaryInjector(trainer)
    injector.set_up()
    builds, tries = [], []
    build, submit = injector._build, injector.worker.submit_work
    injector._build = lambda *a: builds.append(a) or build(*a)  # type: ignore[method-assign]
    too_many = trainer.pool.params.max_units_per_submission + 1

    def reverting(sid, cid, ph, units, step):
        tries.append(sid)
        return submit(sid, cid, ph, too_many, step)  # TaskLedgerInvalidWorkUnits, from the chain

    injector.worker.submit_work = reverting
    for _ in range(MAX_SUBMIT_REVERTS + 3):
        injector.tick()  # a pass never raises for a revert
    (sid,) = canary_ids(trainer.state)
    rec = trainer.state.record("canary", sid)
    assert rec["status"] == "closed" and rec["data"]["submit_reverts"] == MAX_SUBMIT_REVERTS
    assert "TaskLedgerInvalidWorkUnits" in rec["data"]["gave_up"]
    assert tries == [sid] * MAX_SUBMIT_REVERTS and len(builds) == 1  # built once, then only resubmitted
    assert p.task(sid).status == TaskStatus.CLAIMED  # nothing sent; the lease runs out on its own
    trainer.state.close()


@pytest.mark.timeout(300)
def test_lazy_validator_attests_a_canary_and_is_slashed_while_the_honest_one_is_not(swarm, devnet):
    """Agent processes: a trainer with canaries on (every step, no challenger key of its own), the kit's lazy
    validator, then an honest validator. The lazy one attests the canary (the trainer takes the attestation, and
    with it the canary would meet the quorum), the honest one challenges it, the challenge is upheld and the
    trainer slashes the lazy validator. The trainer never trains on the canary (no worker runs: a step trained
    here could only be on it) and its public /status says nothing of canaries."""
    p = devnet.protocol(0)
    pool_id = devnet.deployment.default_pool_id or 1
    params = p.pool(pool_id).params
    canary_node = dev_account(CANARY).address
    trainer = swarm.add("trainer", "trainer", 0, {"trainer": {"canary": {"every_n_steps": 1,
                                                                           "dev_account": CANARY}}}).start()
    lazy = swarm.add("lazy", "validator", 4, {"validator": {"adversary": "lazy"}}).start()

    # 1. the canary is on-chain, submitted by an ordinary worker node; the lazy validator's attestation reaches
    #    the trainer, which counts it like any other
    swarm.wait(lambda: p.submissions(node=canary_node), 180, "the canary submission", 2)
    (canary,) = p.submissions(node=canary_node)
    sid = canary.submission_id
    assert p.node(canary_node).role == Role.WORKER and p.node(canary_node).owner == canary_node
    lazy_node = lazy.status()["node"].lower()

    def attested_by(node: str) -> bool:
        subs = {s["submission_id"]: s for s in trainer.status()["submissions"]}
        return node in subs[sid]["attestations"]

    swarm.wait(lambda: attested_by(lazy_node), 120, "the lazy validator's attestation of the canary at the trainer")
    assert p.task(sid).status == TaskStatus.SUBMITTED  # unchallenged yet: only the exclusion keeps it out

    # 2. an honest validator checks it, rejects it and challenges it; the vote period ends; it is upheld. It joins
    #    after the canary's claim, so it holds no slot of it (the lazy one holds both): it checks it as a volunteer
    #    (`validator.check: all`); an honest validator of the default `assigned` checks only its slots and what is
    #    challenged, and a canary only lazy validators were assigned is then the pool challenger's to open
    #    (test_pool_challenges_an_unchallenged_canary_and_slashes_its_attester)
    honest = swarm.add("honest", "validator", 6, {"validator": {"check": "all"}}).start()
    swarm.wait(lambda: p.task(sid).status == TaskStatus.CHALLENGED, 180, "the honest validator's challenge")
    honest_node = honest.status()["node"].lower()
    assert p.challenge_info(sid).challenger.lower() == honest_node
    stake = {v: p.active_stake(v) for v in (lazy_node, honest_node)}
    devnet.increase_time(params.vote_period + 5)
    swarm.wait(lambda: p.task(sid).status == TaskStatus.UPHELD, 120, "the canary's challenge upheld")

    # 3. the trainer slashes the lazy validator with its own signature; the honest one keeps its stake
    swarm.wait(lambda: _attester_slashes(p, lazy_node), 120, "AttesterSlashed for the lazy validator")
    (ev,) = _attester_slashes(p, lazy_node)
    assert ev.args["submissionId"] == sid and ev.args["slashed"] > 0
    assert ev.args["reporter"].lower() == p.address.lower()
    assert p.active_stake(lazy_node) == stake[lazy_node] - ev.args["slashed"]
    assert not _attester_slashes(p, honest_node)
    assert p.active_stake(honest_node) == stake[honest_node]
    assert any(v["submission_id"] == sid and v["status"] == "rejected" for v in honest.status()["verdicts"])

    # 4. never trained on; nothing in the public status names it a canary, and its entry ends like any upheld
    #    work the trainer did not train on (not `pending` for ever: that would give it away after the fact)
    def trainer_entry() -> str:
        return {s["submission_id"]: s for s in trainer.status()["submissions"]}[sid]["status"]

    swarm.wait(lambda: trainer_entry() == "rejected", 60, "the canary's /status entry rejected once upheld")
    st = trainer.status()
    assert sid not in st["consumed"] and st["policy_step"] == 0
    assert all(sid not in s["submissions"] for s in st["steps"])
    assert "canary" not in json.dumps(st).lower()
