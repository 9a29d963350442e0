"""Pure parts of the role agents: budgets by hardware class, quorum/staleness selection, the
validator's early rejection reasons, the worker's crash-recovery decisions, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from role_config import role_config  # type: ignore[import-not-found]

from intellect.agents.config import load_config
from intellect.agents.roles.trainer import ready_submissions

WORKER = "0x" + "ab" * 20
OTHER = "0x" + "cd" * 20


def _subs(**steps):
    return {int(k[1:]): {"policy_step": v, "status": "pending"} for k, v in steps.items()}


def test_ready_submissions_takes_only_trusted_pending_ones():
    subs = _subs(s1=0, s2=0, s3=0)
    ready, stale = ready_submissions({1}, subs, train_step=0, async_level=2)
    assert ready == [1] and stale == []
    ready, _ = ready_submissions({1, 2, 9}, subs, train_step=0, async_level=2)
    assert ready == [1, 2]


def test_ready_submissions_separates_stale_and_skips_consumed():
    subs = _subs(s1=0, s2=1, s3=3)
    subs[3]["status"] = "consumed"
    ready, stale = ready_submissions({1, 2, 3}, subs, train_step=3, async_level=2)
    assert ready == [2] and stale == [1]


# -- validator: early checks (before any chain access) ------------------------------------------


def _rollout_file(worker=WORKER, units_tokens=(5, 6), step=1, task_id="7"):
    from intellect.verifier.rollouts import RolloutFile, RolloutMeta, RolloutRow

    rows = [RolloutRow(problem_id="p", prompt_ids=[1, 2], completion_ids=list(range(n)), reward=0.0,
                       task_reward=0.0, length_penalty=0.0, advantage=0.0, policy_step=step, worker=worker)
            for n in units_tokens]
    meta = RolloutMeta(task_id=task_id, seed="ab" * 32, model="bafy", worker=worker, policy_step=step,
                       group_size=len(rows))
    return RolloutFile(meta, rows)


@pytest.fixture
def validator(tmp_path):
    from intellect.agents.roles.validator import Validator

    cfg = load_config(None, env={}, overrides={"role": "validator", "data_dir": str(tmp_path / "v")})
    v = Validator(cfg)
    yield v
    v.state.close()


def _check(validator, data: bytes, **sub):
    from intellect.verifier.toploc import proofs_hash

    base = {"node": WORKER, "rollouts_cid": "bafk", "proofs_hash": "0x" + proofs_hash([]).hex(), "work_units": 11,
            "policy_step": 1}
    base.update(sub)
    validator.fetch_rollouts = lambda sid, s: data  # the file as fetched from IPFS
    return validator.verify_submission(7, base)


@pytest.mark.parametrize(("data", "sub", "reason"), [
    (b"not parquet", {}, "bad_file"),
    (None, {"node": OTHER}, "wrong_worker"),
    (None, {"policy_step": 2}, "wrong_policy_step"),
    (None, {"proofs_hash": "0x" + "00" * 32}, "proofs_hash_mismatch"),
    (None, {"work_units": 12}, "work_units_mismatch"),
])
def test_verify_submission_rejects_with_reason(validator, data, sub, reason):
    data = _rollout_file().to_bytes() if data is None else data
    verdict = _check(validator, data, **sub)
    assert not verdict.accepted
    assert verdict.reason == reason, verdict.detail


def test_verify_submission_rejects_other_task(validator):
    verdict = _check(validator, _rollout_file(task_id="8").to_bytes())
    assert verdict.reason == "wrong_task"


# -- worker: crash-recovery decisions ------------------------------------------------------------


@pytest.mark.parametrize(("status", "local"), [
    ("SUBMITTED", "sent"), ("CHALLENGED", "sent"), ("PAID", "sent"), ("CLAIMED", "expired"), ("NONE", "expired"),
])
def test_worker_settled_never_resubmits(tmp_path, status, local):
    from intellect.agents.roles._state import StateStore
    from intellect.agents.roles.leases import record_settled
    from intellect.sdk import Task, TaskStatus

    state = StateStore(tmp_path / "state.sqlite")
    state.put("submission", 5, "planned", {"rollouts_cid": "bafk"})
    task = Task(task_id=5, node=WORKER, pool_id=1, lease_expiry=0, status=TaskStatus[status], reward=0, window_end=0,
                slash_epoch=0)  # the chain's record of the task, as `Protocol.task` returns it
    assert record_settled(state, 5, task) == local
    rec = state.record("submission", 5)
    assert rec["status"] == local and rec["data"]["rollouts_cid"] == "bafk"
    state.close()


def test_worker_done_counts_sent_submissions(tmp_path):
    from intellect.agents.roles.worker import Worker

    cfg = load_config(None, env={}, overrides={"role": "worker", "data_dir": str(tmp_path / "w"),
                                               "worker.max_tasks": "2"})
    w = Worker(cfg)
    w.state.put("submission", 1, "sent")
    w.state.put("submission", 2, "planned")
    assert not w.done()
    w.state.put("submission", 2, "sent")
    assert w.done()
    w.state.close()


def test_adversary_class_unknown_name_is_clear():
    from intellect.agents.adversary import WrongModelWorker, adversary_class

    assert adversary_class("wrong_model") is WrongModelWorker
    with pytest.raises(ValueError, match=r"unknown worker\.adversary 'nope'"):
        adversary_class("nope")


# -- the CLI -------------------------------------------------------------------------------------


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "intellect.agents.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_cli_help_lists_every_field():
    from intellect.agents.cli import config_fields

    out = _cli("--help").stdout
    for key, _, _ in config_fields():
        assert key in out
    assert "worker.gpu_model" in out and "tasks.budgets" in out


def test_cli_print_config_applies_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("role: worker\nworker:\n  group_size: 8\n")
    proc = _cli("--config", str(path), "--set", "worker.group_size=6", "--set", "chain.dev_account=2",
                "--print-config")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["worker"]["group_size"] == 6 and doc["chain"]["dev_account"] == 2


def test_cli_bad_config_exits_2_naming_field(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("role: worker\nworker:\n  group_size: lots\n")
    proc = _cli("--config", str(path))
    assert proc.returncode == 2
    assert "worker.group_size" in proc.stderr


def test_cli_refuses_to_start_without_stake_when_auto_stake_off(devnet, tmp_path):
    cfg = tmp_path / "w.yaml"
    cfg.write_text(
        f"role: worker\ndata_dir: {tmp_path / 'w'}\nchain:\n  rpc_url: {devnet.url}\n"
        f"  deployment_file: {devnet.deployment_file}\n  dev_account: 6\n"
        "worker:\n  auto_stake: false\ntasks:\n  source: synthetic:8:0\n"
    )
    proc = _cli("--config", str(cfg))
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "not registered as worker" in proc.stderr and "auto_stake" in proc.stderr


# -- trainer: attestation intake against the real chain ------------------------------------------


def test_trainer_accept_attestation_checks_signer_and_submission(devnet, tmp_path):
    from intellect.agents.attestation import sign_attestation
    from intellect.agents.roles._server import HttpError
    from intellect.agents.roles.attestation_intake import attestation_sets
    from intellect.agents.roles.trainer import Trainer
    from intellect.sdk import dev_account

    cfg = role_config(devnet, "trainer", tmp_path / "t", 0)
    t = Trainer(cfg)
    t.connect()
    ledger = t.protocol.contracts["TaskLedger"].address
    ph = "0x" + "22" * 32
    t.state.put("submission", 9, "pending", {"node": WORKER, "rollouts_cid": "bafkgood", "proofs_hash": ph,
                                             "policy_step": 1, "work_units": 10})
    key = dev_account(7).key

    def att(**kw):
        args = {"chain_id": t.protocol.chain_id, "ledger": ledger, "submission_id": 9, "rollouts_cid": "bafkgood",
                "proofs_hash": ph, "policy_step": 1} | kw
        return sign_attestation(key, **args).model_dump(by_alias=True)

    with pytest.raises(HttpError) as err:  # account 7 is not a validator yet
        t.accept_attestation(att())
    assert err.value.status == 403
    v = devnet.protocol(7)
    v.register_node("validator")
    v.drip()
    v.stake(v.address, v.min_stake("validator"))
    t.intake.validator_ok.clear()
    assert t.accept_attestation(att())["ok"]
    assert attestation_sets(t.state, [9, 10]) == {9: {v.address.lower()}}
    for bad, status in ((att(rollouts_cid="bafkother"), 400), (att(policy_step=0), 400),
                        (att(chain_id=1), 400), (att(submission_id=10), 404)):
        with pytest.raises(HttpError) as err:
            t.accept_attestation(bad)
        assert err.value.status == status
    forged = att() | {"validator": "0x" + "ee" * 20}
    with pytest.raises(HttpError, match="signed by"):
        t.accept_attestation(forged)
    t.state.close()
