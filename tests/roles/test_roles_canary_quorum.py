"""The canary's challenger on a pool whose quorum is above 1 (issue 33; `intellect.agents.roles.canary`).

The pool's lone challenger key cannot reach a quorum of 2 by itself: its round ends NoQuorum (no outcome: the bond
comes back, nobody is slashable, the canary stays challengeable). The injector must count that as neither a catch
nor a miss: it keeps the round's outcome, reopens the challenge (at most `MAX_POOL_ROUNDS` rounds of its own), slashes
the attester once a round with an honest voter upholds it, and closes a canary whose rounds all missed the quorum
as `inconclusive` (nobody slashed), not as `unchallenged` nor as a rejection.

The pool's real trainer agent (connected, not started: no training loop), its real policy (the tiny model's step-0
checkpoint, from which the canary's file is generated) and embedded IPFS store; real anvil and contracts; the
injector's passes are called by hand."""

from __future__ import annotations

import json

from nodes import staked_node  # type: ignore[import-not-found]
from role_config import role_config  # type: ignore[import-not-found]

from intellect.agents.attestation import sign_attestation
from intellect.sdk import ChallengeStatus, PoolParams, Role, TaskStatus, dev_account

TOKEN = 10**18
CANARY, CHALLENGER, LAZY, HONEST = 7, 8, 4, 6  # dev accounts
VOTE_PERIOD, WINDOW = 60, 1_000


def _quorum_pool(devnet, quorum: int) -> int:
    p = devnet.protocol(0)
    params = PoolParams(trainer=p.address, rules_cid="bafkreicanaryquorumrules", reward_per_unit=TOKEN // 100,
                        challenge_bond=TOKEN, slash_amount=10 * TOKEN, window_length=WINDOW,
                        vote_period=VOTE_PERIOD, lease_duration=600, max_units_per_submission=64, quorum=quorum)
    pool_id = p.create_pool(params)
    p.fund_pool(pool_id, 1_000 * TOKEN)
    return pool_id


def _trainer_and_injector(devnet, tmp_path, pool_id: int):
    """The pool's trainer agent, connected, with its policy and store (what `start()` gives the injector), and its
    `CanaryInjector` set up (canary worker and challenger registered and staked); step 0 published."""
    from intellect.agents.roles._runtime import load_task_set
    from intellect.agents.roles.canary import CanaryInjector, TrainerParts
    from intellect.agents.roles.checkpoint_publish import open_policy
    from intellect.agents.roles.trainer import Trainer

    cfg = role_config(devnet, "trainer", tmp_path / "t", 0, {
        "chain.pool_id": str(pool_id), "ipfs.gateway": "false", "tasks.source": "synthetic:64:0",
        "tasks.budgets": json.dumps({"cpu": [6, 8]}), "trainer.canary.every_n_steps": "1",
        "trainer.canary.dev_account": str(CANARY), "trainer.canary.challenger_dev_account": str(CHALLENGER),
        "trainer.canary.challenge_after": "0"})
    t = Trainer(cfg)
    t.connect()
    t.open_ipfs()
    t.task_set = load_task_set(cfg.tasks, None, None)
    t.gt = open_policy(cfg, t.data_dir, t.pool.params.async_level)
    t.protocol.publish_checkpoint(pool_id, 0, "bafkreimanifestcanaryquorum")
    injector = CanaryInjector(TrainerParts.of(t))  # what `start()` lends it
    injector.set_up()
    return t, injector


def _canary(t, injector) -> tuple[int, dict]:
    """Inject one canary (claimed and submitted) and give the trainer the lazy validator's signed attestation of it."""
    from intellect.agents.roles.canary import canary_ids

    injector.tick()
    (sid,) = canary_ids(t.state)
    rec = t.state.record("canary", sid)
    assert rec["status"] == "submitted" and t.protocol.task(sid).status == TaskStatus.SUBMITTED
    d = rec["data"]
    att = sign_attestation(dev_account(LAZY).key, chain_id=t.protocol.chain_id,
                           ledger=t.protocol.contracts["TaskLedger"].address, submission_id=sid,
                           rollouts_cid=d["rollouts_cid"], proofs_hash=d["proofs_hash"], policy_step=d["policy_step"])
    t.state.put("attestation", f"{sid}:{att.validator.lower()}", "valid",  # as the trainer's intake keeps one
                {"submission_id": sid, "validator": att.validator, "owner": att.validator, "signature": att.signature})
    return sid, d


def _resolve_round(devnet, injector) -> None:
    devnet.increase_time(VOTE_PERIOD + 1)
    injector.tick()  # resolvable: resolved by the injector, its outcome kept


def test_no_quorum_round_is_reopened_and_a_later_upheld_round_slashes_the_attester(devnet, tmp_path):
    pool_id = _quorum_pool(devnet, 2)
    lazy, honest = staked_node(devnet, LAZY, Role.VALIDATOR), staked_node(devnet, HONEST, Role.VALIDATOR)
    t, injector = _trainer_and_injector(devnet, tmp_path, pool_id)
    p, ch = t.protocol, injector.challenger
    sid, _ = _canary(t, injector)

    injector.tick()  # nobody challenged it (challenge_after 0): the pool's challenger does, round 1
    assert p.challenge_info(sid).round == 1 and p.challenge_info(sid).challenger == ch.address
    bond, before = t.pool.params.challenge_bond, ch.balance_of()
    stake = p.active_stake(lazy.address)
    _resolve_round(devnet, injector)  # one vote of a quorum of 2: NoQuorum
    assert p.challenge_info(sid).status == ChallengeStatus.NO_QUORUM and p.task(sid).status == TaskStatus.SUBMITTED
    assert ch.balance_of() == before + bond  # the bond came back: no outcome, no loss
    rec = t.state.record("canary", sid)
    assert rec["status"] == "submitted" and rec["data"]["rounds"] == {"1": "no_quorum"}
    assert p.active_stake(lazy.address) == stake and not p.get_events(["AttesterSlashed"])

    injector.tick()  # reopened by the pool's challenger: round 2, and this time an honest validator votes
    info = p.challenge_info(sid)
    assert info.round == 2 and info.status == ChallengeStatus.OPEN and info.challenger == ch.address
    honest.vote(sid, True)
    _resolve_round(devnet, injector)
    assert p.task(sid).status == TaskStatus.UPHELD
    injector.tick()  # upheld: the lazy attester is slashed with its own signature
    (ev,) = p.get_events(["AttesterSlashed"], filters={"validator": lazy.address})
    assert ev.args["submissionId"] == sid and p.active_stake(lazy.address) == stake - p.attester_slash()
    rec = t.state.record("canary", sid)
    assert rec["status"] == "upheld" and rec["data"]["rounds"] == {"1": "no_quorum", "2": "upheld"}
    assert rec["data"]["pool_rounds"] == 2
    t.state.close()


def test_rounds_that_keep_missing_the_quorum_are_capped_and_end_inconclusive(devnet, tmp_path):
    from intellect.agents.roles.canary import MAX_POOL_ROUNDS

    pool_id = _quorum_pool(devnet, 2)
    lazy = staked_node(devnet, LAZY, Role.VALIDATOR)
    t, injector = _trainer_and_injector(devnet, tmp_path, pool_id)
    p = t.protocol
    sid, d = _canary(t, injector)
    stake = p.active_stake(lazy.address)
    for rnd in range(1, MAX_POOL_ROUNDS + 1):
        injector.tick()  # (re)challenged by the pool's challenger
        assert p.challenge_info(sid).round == rnd and p.challenge_info(sid).status == ChallengeStatus.OPEN
        _resolve_round(devnet, injector)  # nobody else votes: NoQuorum
        assert p.challenge_info(sid).status == ChallengeStatus.NO_QUORUM
    injector.tick()  # the cap: no further round
    assert p.challenge_info(sid).round == MAX_POOL_ROUNDS and p.task(sid).status == TaskStatus.SUBMITTED
    rec = t.state.record("canary", sid)
    assert rec["data"]["rounds"] == {str(r): "no_quorum" for r in range(1, MAX_POOL_ROUNDS + 1)}
    assert rec["data"]["pool_rounds"] == MAX_POOL_ROUNDS

    devnet.increase_time(d["window_end"] - p.chain_time() + 1)  # its window closes with no outcome
    injector.tick()
    rec = t.state.record("canary", sid)
    assert rec["status"] == "inconclusive" and rec["data"]["outcome"] == "no_quorum"  # not "unchallenged"
    assert p.active_stake(lazy.address) == stake and not p.get_events(["AttesterSlashed"])  # nobody slashed
    assert not p.get_events(["VoterSlashed"])
    injector.tick()  # terminal: no further transaction, no new canary while the step is decided
    assert t.state.record("canary", sid)["status"] == "inconclusive"
    t.state.close()
