"""What the trainer agent takes from strangers (issue 22): the quorum is a pool rule (> 1 off dev
chains), attestations by the worker's own operator do not count, nor those of validators the chain did not
assign to the submission, rewards and advantages are recomputed from the completions, whatever the
(attested) file says."""

from __future__ import annotations

import pytest

from intellect.agents.grpo import UntrustedValueError
from intellect.agents.roles.trainer import (
    effective_quorum,
    ready_submissions,
    same_operator,
    trusted_submissions,
    verified_samples,
)
from intellect.agents.tasks import synthetic_task_set
from intellect.verifier.rollouts import RolloutFile, RolloutMeta, RolloutRow

WORKER = "0x" + "ab" * 20
OWNER = "0x" + "12" * 20
VALIDATOR = "0x" + "cd" * 20
OTHER = "0x" + "ef" * 20


def test_effective_quorum_is_the_pools_and_above_one_off_dev_chains():
    assert effective_quorum(None, 1, 31337) == 1  # anvil dev pool: one validator suffices
    assert effective_quorum(None, 1, 8453) == 2  # Base mainnet: never a single attestation
    assert effective_quorum(None, 3, 84532) == 3  # the pool's own rule
    assert effective_quorum(1, 3, 84532) == 3  # the trainer's setting never lowers it
    assert effective_quorum(4, 1, 31337) == 4


@pytest.mark.parametrize(("validator", "v_owner", "worker", "w_owner", "same"), [
    (VALIDATOR, OWNER, WORKER, OWNER, True),  # two nodes of one owner
    (WORKER, WORKER, WORKER, WORKER, True),  # the worker's own key
    (VALIDATOR, WORKER, WORKER, WORKER, True),  # a validator owned by the worker's key
    (VALIDATOR, VALIDATOR, WORKER, VALIDATOR, True),  # a worker owned by the validator's key
    (VALIDATOR, VALIDATOR, WORKER, WORKER, False),
    (VALIDATOR, OTHER, WORKER, OWNER, False),
])
def test_same_operator(validator, v_owner, worker, w_owner, same):
    assert same_operator(validator, v_owner, worker, w_owner) is same
    assert same_operator(validator.upper().replace("0X", "0x"), v_owner, worker, w_owner.lower()) is same


def _tokenizer():
    from transformers import AutoTokenizer

    from intellect.agents.models import tiny_model_dir

    return AutoTokenizer.from_pretrained(str(tiny_model_dir()))


def _file(tok, task, texts: list[str], rewards: list[float], advantages: list[float]) -> RolloutFile:
    prompt = tok(task.prompt, add_special_tokens=False)["input_ids"]
    rows = [RolloutRow(problem_id=task.id, prompt_ids=prompt, completion_ids=tok(t, add_special_tokens=False)["input_ids"],
                       reward=r, task_reward=max(r, 0.0), length_penalty=0.0, target_length=None, advantage=a,
                       policy_step=0, proofs=[], worker=WORKER)
            for t, r, a in zip(texts, rewards, advantages, strict=True)]
    meta = RolloutMeta(task_id="1", seed="00" * 8, model="m", worker=WORKER, policy_step=0, group_size=len(rows))
    return RolloutFile(meta, rows)


def test_verified_samples_recompute_rewards_and_advantages():
    """The poisoned row of the issue: advantage 3e38 (and a made-up reward) on a wrong answer."""
    tok = _tokenizer()
    ts = synthetic_task_set(4, seed=0, max_operand=20, ops=("+",))
    task = ts.tasks[0]
    right = f"\\boxed{{{task.answer}}}"
    wrong = f"\\boxed{{{int(task.answer) + 1}}}"
    rf = _file(tok, task, [wrong, right, wrong], [1.0, 0.0, 1.0], [3e38, -1.0, 1.0])
    samples, diffs = verified_samples(rf, ts, tok, alpha=0.0)
    assert [s.reward for s in samples] == [0.0, 1.0, 0.0]
    assert [s.advantage for s in samples] == pytest.approx([-0.5774, 1.1547, -0.5774], abs=1e-3)
    assert diffs["max_reward_diff"] == 1.0 and diffs["max_advantage_diff"] > 1e38


def test_verified_samples_refuses_a_problem_outside_the_task_set():
    tok = _tokenizer()
    ts = synthetic_task_set(4, seed=0, max_operand=20, ops=("+",))
    other = synthetic_task_set(8, seed=99, max_operand=20, ops=("+",)).tasks[7]
    rf = _file(tok, other, [" 1", " 2"], [0.0, 0.0], [0.0, 0.0])
    with pytest.raises((KeyError, UntrustedValueError)):
        verified_samples(rf, ts, tok, alpha=0.0)


def test_poisoned_attested_file_trains_a_finite_checkpoint(tmp_path):
    """Issue 22's poisoned row (advantage 3e38, finite, attested) made 5e47eb6's next GRPO step NaN in every
    weight, published as the next checkpoint. The trainer's path now: the file's numbers are replaced by
    recomputed ones, and the step's checkpoint is finite."""
    import torch
    from safetensors.torch import load_file

    from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer
    from intellect.agents.models import tiny_model_dir

    tok = _tokenizer()
    ts = synthetic_task_set(4, seed=0, max_operand=20, ops=("+",))
    task = ts.tasks[0]
    right, wrong = f"\\boxed{{{task.answer}}}", f"\\boxed{{{int(task.answer) + 1}}}"
    rf = _file(tok, task, [wrong, right, wrong, right], [1.0, 0.0, 1.0, 0.0], [3e38, -1.0, 1.0, -1.0])
    samples, _ = verified_samples(rf, ts, tok, alpha=0.0)
    trainer = GRPOTrainer(tiny_model_dir(), tmp_path / "ckpt", GRPOConfig(lr=1e-2, optimizer_steps=1,
                                                                          max_completion_tokens=16))
    stats = trainer.train_step(samples)
    assert stats.samples == 4 and torch.isfinite(torch.tensor(stats.loss))
    weights = load_file(str(tmp_path / "ckpt" / "step-1" / "model.safetensors"))
    assert all(bool(torch.isfinite(t).all()) for t in weights.values())


def test_trust_counts_assigned_slots_not_keys_and_waits_for_the_rest(tmp_path):
    """Issue 33: slots, not keys or owners. Submission 7's slots are (VALIDATOR, VALIDATOR, OTHER) (VALIDATOR's
    stake drew it twice): VALIDATOR's one attestation fills two slots, a quorum of 2, but not all three, so it
    trains only after the wait; with OTHER's too, every slot attested, at once. An unassigned key weighs nothing."""
    from intellect.agents.roles._state import StateStore

    state = StateStore(tmp_path / "state.sqlite")
    slots = {7: (VALIDATOR, VALIDATOR, OTHER), 8: ()}  # 8: not assignable (yet)

    def attest(sid: int, v: str) -> None:
        state.put("attestation", f"{sid}:{v}", "valid", {"submission_id": sid, "validator": v, "owner": v})

    subs = {7: {"policy_step": 0, "status": "pending", "seen_at": 1000.0},
            8: {"policy_step": 0, "status": "pending", "seen_at": 1000.0}}

    def trusted(now: float) -> set[int]:
        return trusted_submissions(state.records("attestation"), subs, lambda sid: slots[sid], quorum=2, now=now,
                                   wait_s=60.0)

    attest(7, WORKER)  # not assigned: nothing
    attest(8, VALIDATOR)
    assert trusted(5000.0) == set()
    attest(7, VALIDATOR)
    assert trusted(1059.0) == set()  # two slots of three attested: not yet
    assert trusted(1060.0) == {7}  # the wait is over and nobody challenged it (checked on-chain by the caller)
    assert ready_submissions(trusted(1060.0), subs, train_step=0, async_level=2) == ([7], [])
    attest(7, OTHER)
    assert trusted(1000.0) == {7}  # every slot attested: at once
    subs[7]["status"] = "consumed"
    assert trusted(5000.0) == set()
    del subs[8]["seen_at"]  # a record from before issue 33 counts as seen now: never past its wait here
    slots[8] = (VALIDATOR, OTHER)
    assert trusted(5000.0) == set()


def test_only_the_chains_assigned_validators_make_a_submission_ready(devnet, tmp_path):
    """Issue 22: the worker does not pick who vouches for it. Four staked validators of four operators at the
    claim, two assigned from the claim's seed: an attestation by one of the other two is kept but counts for
    nothing; one by an assigned validator makes the submission ready (the trainer's own methods, real chain)."""
    from intellect.agents.roles._state import StateStore
    from intellect.agents.roles.assignment import Assigner
    from intellect.agents.roles.submission_log import assigned_slots
    from intellect.agents.roles.trainer_batch import trust_pending
    from intellect.sdk import Role

    token = 10**18
    validators = []
    for i in (2, 3, 4, 6):
        v = devnet.protocol(i)
        v.drip()
        v.register_node(Role.VALIDATOR, gpu_model="cpu")
        v.stake(v.address, 100 * token)
        validators.append(v.address.lower())
    pool_id = devnet.deployment.default_pool_id or 1
    devnet.protocol(0).publish_checkpoint(pool_id, 0, "bafkreimanifestassigned")
    w = devnet.protocol(1)
    w.drip()
    w.register_node("worker", gpu_model="cpu")
    w.stake(w.address, 100 * token)
    sid = w.claim_task(pool_id).task_id
    w.submit_work(sid, "bafkreirolloutsassigned", b"\x11" * 32, 2, 0)

    state = StateStore(tmp_path / "state.sqlite")
    assigner, cache = Assigner(devnet.protocol(0), k=2, quorum=1), {}

    def slots(s: int) -> tuple[str, ...]:
        return assigned_slots(s, state=state, assigner=assigner, cache=cache)

    assigned = slots(sid)
    assert len(assigned) == 2 and set(assigned) <= set(validators)
    assert tuple(state.record("assignment", sid)["data"]["validators"]) == assigned  # kept: computed once
    assert cache == {sid: assigned}
    outsider = next(v for v in validators if v not in assigned)
    subs = {sid: {"policy_step": 0, "status": "pending", "seen_at": 0.0}}  # long past the wait

    def attest(v: str) -> None:
        state.put("attestation", f"{sid}:{v}", "valid", {"submission_id": sid, "validator": v, "owner": v})

    def trusted() -> set[int]:
        return trusted_submissions(state.records("attestation"), subs, slots, quorum=1,
                                   now=1e9, wait_s=60.0)

    attest(outsider)
    assert trusted() == set()
    assert trust_pending(state, subs, slots, quorum=1, wait_s=60.0) == set()  # the trainer's read of the store
    assert ready_submissions(trusted(), subs, train_step=0, async_level=2) == ([], [])
    attest(assigned[0])
    assert trusted() == {sid}
    assert trust_pending(state, subs, slots, quorum=1, wait_s=60.0) == {sid}
    assert ready_submissions(trusted(), subs, train_step=0, async_level=2) == ([sid], [])
    # had every validator's attestation counted, as before assignment, the outsider alone would have been enough
    assert trusted_submissions(state.records("attestation"), subs, lambda _: (outsider,), quorum=1,
                               now=1e9, wait_s=60.0) == {sid}
