"""A validator checks the submissions the chain assigned to it first (issue 22); only those unless it volunteers
(`validator.check`, issue 33)."""

from __future__ import annotations

from types import SimpleNamespace

from role_config import role_config  # type: ignore[import-not-found]

from intellect.verifier.assignment import assigned_validators

TOKEN = 10**18


class _Executor:
    def __init__(self) -> None:
        self.order: list[int] = []

    def submit(self, fn, sid):  # the ThreadPoolExecutor call the dispatcher makes
        self.order.append(sid)
        return SimpleNamespace(done=lambda: False)


def test_validator_dispatches_its_assigned_submissions_first(devnet, tmp_path):
    from intellect.agents.roles._state import StateStore
    from intellect.agents.roles.claim_lookup import assigned_to, validator_assigner
    from intellect.agents.roles.validator import Validator
    from intellect.sdk import Role

    validators = {}
    for i in (2, 3, 4, 6):
        v = devnet.protocol(i)
        v.drip()
        v.register_node(Role.VALIDATOR, gpu_model="cpu")
        v.stake(v.address, 100 * TOKEN)
        validators[i] = v
    pool_id = devnet.deployment.default_pool_id or 1
    devnet.protocol(0).publish_checkpoint(pool_id, 0, "bafkreimanifestpriority")
    w = devnet.protocol(1)
    w.drip()
    w.register_node("worker", gpu_model="cpu")
    w.stake(w.address, 100 * TOKEN)
    claims = []
    for _ in range(8):  # two open leases at most: submit as we go
        c = w.claim_task(pool_id)
        w.submit_work(c.task_id, f"bafkreirollouts{c.task_id}", b"\x22" * 32, 2, 0)
        claims.append(c)
    # a validator that is assigned some of the eight and not others (k = quorum 1 + 1 = 2 slots of 4 equal
    # stakes: each validator is in a claim's slots with probability 7/16)
    stakes_at = {v.address.lower(): 100 * TOKEN for v in validators.values()}
    picks = {c.task_id: assigned_validators(c.seed, stakes_at, 2) for c in claims}
    index, me = next((i, v) for i, v in validators.items()
                     if 0 < sum(v.address.lower() in p for p in picks.values()) < len(claims))
    mine = [sid for sid, p in picks.items() if me.address.lower() in p]

    # the validator agent of that account, connected, not started: its dispatcher hands the executor the queue;
    # a volunteer (`validator.check: all`) checks its assigned submissions first, then every other one; the
    # default (`assigned`, issue 33: paid per slot) only its own, the others left `unassigned`
    others = [c.task_id for c in claims if c.task_id not in mine]
    by_id = {c.task_id: c for c in claims}
    for check, expected in (("all", mine + others), ("assigned", mine)):
        val = Validator(role_config(devnet, "validator", tmp_path / check, index,
                                    {"validator.concurrency": "8", "validator.check": check}))
        val.connect()
        val._executor = _Executor()
        for sid in others + mine:  # queued in this order (as the event follower records them, claims first)
            c = by_id[sid]
            val.state.put("claim", sid, "claimed", {"seed": c.seed.hex(), "block": c.block_number, "node": w.address})
            val.state.put("submission", sid, "queued", {"node": w.address})
        val._dispatch()
        assert val._executor.order == expected, check  # each in queue order
        assert all(val.state.record("assignment", sid)["data"]["mine"] == (sid in mine) for sid in picks)
        assert {int(r["id"]) for r in val.state.records("submission", "unassigned")} == \
            (set(others) if check == "assigned" else set())
        val.state.close()

    # the lookup itself: kept once known, asked of the chain only then
    assigner = validator_assigner(me, me.pool(pool_id).params.quorum, None)
    fresh = StateStore(tmp_path / "fresh.sqlite")
    for c in claims:
        fresh.put("claim", c.task_id, "claimed", {"seed": c.seed.hex(), "block": c.block_number, "node": w.address})
    assert [assigned_to(fresh, sid, me.address, lambda: assigner) for sid in picks] == [sid in mine for sid in picks]
    def no_chain():  # a second ask is answered from the state store's `assignment` record
        raise AssertionError("asked the chain again")

    assert [assigned_to(fresh, sid, me.address, no_chain) for sid in picks] == [sid in mine for sid in picks]
    fresh.close()


def test_dev_chain_fallback_is_the_same_whenever_a_party_asks(devnet):
    """A claim made before `quorum` validators were staked (a local swarm starting): every party assigns it from
    the set of the first block after the claim that had enough validators, whenever it asks. The fallback to the
    set of "now" gave the trainer and a validator asking at different times different lists."""
    from nodes import staked_node  # type: ignore[import-not-found]

    from intellect.agents.roles.assignment import Assigner
    from intellect.sdk import Role

    pool_id = devnet.deployment.default_pool_id or 1
    devnet.protocol(0).publish_checkpoint(pool_id, 0, "bafkreimanifestdevfallback")
    w = staked_node(devnet, 1, "worker")
    claim = w.claim_task(pool_id)  # no validator staked yet
    claim_info = (claim.seed, claim.block_number, w.address)
    trainer_side = Assigner(devnet.protocol(0), k=3, quorum=2)
    assert trainer_side.for_task(claim.task_id, claim_info) is None  # not assignable yet: asked again later

    first = [staked_node(devnet, i, Role.VALIDATOR) for i in (2, 3)]  # the quorum is reached at the second's stake
    trainer_got = trainer_side.for_task(claim.task_id, claim_info)
    assert trainer_got is not None and len(trainer_got) == 3 and set(trainer_got) <= {v.address.lower() for v in first}
    for i in (4, 6, 7):  # more validators join before a validator asks
        staked_node(devnet, i, Role.VALIDATOR)
    validator_side = Assigner(devnet.protocol(4), k=3, quorum=2)
    assert validator_side.for_task(claim.task_id, claim_info) == trainer_got
    assert Assigner(devnet.protocol(0), k=3, quorum=2).for_task(claim.task_id) == trainer_got  # from the logs too
