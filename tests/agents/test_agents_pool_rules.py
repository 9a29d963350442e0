"""Agents take the pool's rules from the CID the chain names; a contradicting local setting stops them at
start with an error naming the field (issue 17)."""

from __future__ import annotations

from pathlib import Path

import pytest

from intellect.agents.config import load_config
from intellect.agents.roles._runtime import AgentError
from intellect.agents.roles.pool_rules import apply_pool_rules, explicit_rule_settings, fetch_pool_rules
from intellect.agents.tasks import synthetic_task_set
from intellect.sdk.ipfs import EmbeddedIpfs, compute_cid
from intellect.sdk.poolrules import PoolRules


def _publish(ipfs: EmbeddedIpfs, **change: object) -> tuple[str, PoolRules]:
    train = synthetic_task_set(8, seed=0, max_operand=9, ops=("+",))
    doc = {"taskset_cid": ipfs.add(train.to_jsonl_bytes()), "model": {"family": "tiny-llama"}, "group_size": 6,
           "problems_per_task": 3, "budgets": {"cpu": [6, 8], "gpu-large": [16]}, "length_alpha": 0.001,
           "sampler": {"temperature": 0.8}, "toploc_profile": "fp32", "max_units_per_submission": 16 * 6 * 3,
           **change}
    rules = PoolRules.build(doc)
    return ipfs.add(rules.to_bytes()), rules


def test_rules_fill_in_unset_settings(tmp_path: Path) -> None:
    ipfs = EmbeddedIpfs(tmp_path / "ipfs")
    cid, rules = _publish(ipfs)
    cfg = load_config(None, role="worker", overrides={"worker.gpu_model": "cpu"})
    assert explicit_rule_settings(cfg) == {}
    got = apply_pool_rules(cfg, cid, ipfs, pool_id=1)
    assert got == rules
    assert (cfg.worker.group_size, cfg.worker.problems_per_task) == (6, 3)
    assert cfg.tasks.budgets == {"cpu": [6, 8], "gpu-large": [16]} and cfg.tasks.length_alpha == 0.001
    assert cfg.tasks.temperature == 0.8 == cfg.worker.temperature and cfg.validator.toploc_profile == "fp32"
    assert cfg.tasks.length_scope == "solved"  # a new document: the length penalty on solved answers only
    assert cfg.tasks.problem_order == "epochs"  # a new document: claims walk seeded passes over the task set


@pytest.mark.parametrize(("field", "new_value", "stored_value"), [
    ("length_scope", "solved", "all"),
    ("problem_order", "epochs", "random"),
])
def test_rules_made_before_a_field_keep_the_old_rule(tmp_path: Path, field: str, new_value: str,
                                                     stored_value: str) -> None:
    """Issue 17: a document without `length_scope` / `problem_order` (made before it) gives its agents the old
    rule (`all`: every completion carries the length penalty; `random`: problems drawn from each claim's seed), so
    the workers, validators and trainer of an existing pool keep scoring and assigning as its submissions were
    made; a local setting of the new value then stops the agent naming the field."""
    import json

    ipfs = EmbeddedIpfs(tmp_path / "ipfs")
    _, rules = _publish(ipfs)
    doc = json.loads(rules.to_bytes())
    del doc[field]
    cid = ipfs.add(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())
    cfg = load_config(None, role="validator")
    assert getattr(cfg.tasks, field) == new_value  # the agent's own default is the new rule
    assert getattr(apply_pool_rules(cfg, cid, ipfs, pool_id=1), field) == stored_value
    assert getattr(cfg.tasks, field) == stored_value
    explicit = load_config(None, role="worker", overrides={f"tasks.{field}": new_value})
    with pytest.raises(AgentError, match=f"{field}: local '{new_value}', pool rules '{stored_value}'"):
        apply_pool_rules(explicit, cid, ipfs, pool_id=1)


def test_agreeing_explicit_settings_are_fine(tmp_path: Path) -> None:
    ipfs = EmbeddedIpfs(tmp_path / "ipfs")
    cid, rules = _publish(ipfs)
    cfg = load_config(None, role="validator", overrides={"worker.group_size": "6", "tasks.length_alpha": "0.001"})
    assert apply_pool_rules(cfg, cid, ipfs, pool_id=1) == rules  # no AgentError: the explicit values agree
    assert (cfg.worker.group_size, cfg.tasks.length_alpha) == (6, 0.001)
    assert cfg.validator.toploc_profile == "fp32" and cfg.tasks.budgets == {"cpu": [6, 8], "gpu-large": [16]}


def test_contradicting_local_settings_stop_the_agent_naming_each_field(tmp_path: Path) -> None:
    ipfs = EmbeddedIpfs(tmp_path / "ipfs")
    cid, _ = _publish(ipfs)
    cfg = load_config(None, role="worker", env={"INTELLECT_AGENT__WORKER__GROUP_SIZE": "4"},
                      overrides={"tasks.budgets": "{cpu: [64]}", "validator.toploc_profile": "reference"})
    with pytest.raises(AgentError) as err:
        apply_pool_rules(cfg, cid, ipfs, pool_id=7)
    msg = str(err.value)
    assert f"pool 7's rules ({cid})" in msg
    assert "group_size: local 4, pool rules 6" in msg and "budgets: local" in msg and "toploc_profile" in msg
    assert cfg.worker.group_size == 4  # nothing was applied


def test_a_pool_naming_a_bare_task_set_has_no_rules(tmp_path: Path) -> None:
    ipfs = EmbeddedIpfs(tmp_path / "ipfs")
    cid = ipfs.add(synthetic_task_set(4, seed=1).to_jsonl_bytes())
    assert fetch_pool_rules(cid, ipfs) is None
    cfg = load_config(None, role="worker")
    assert apply_pool_rules(cfg, cid, ipfs, pool_id=1) is None and cfg.worker.group_size == 4


def test_validator_judges_by_the_evidence_rules_the_pool_names(tmp_path: Path) -> None:
    """Issue 35, rules per model: a pool names evidence rules calibrated on its model (by CID); a validator takes
    them, and the profile's shipped rules when the pool names none. A named document it cannot read stops it."""
    from intellect.agents.roles.pool_rules import pool_evidence_rules
    from intellect.verifier.evidence import DEFAULT_RULES, FP32_RULES, default_rules

    ipfs = EmbeddedIpfs(tmp_path / "ipfs")
    _, plain = _publish(ipfs)
    assert pool_evidence_rules(plain, ipfs, "fp32") == FP32_RULES
    assert pool_evidence_rules(None, ipfs, "mixed") == DEFAULT_RULES
    own = default_rules({"cpu-bf16": (900, 60, 40, 9, 3, 0, 0, 0, 0), "cpu-fp32": (1000, 0, 0, 0, 0, 0, 0, 0, 0)},
                        {"cpu-bf16": (50, 40, 30, 20, 10, 0, 0, 0, 0), "cpu-fp32": (150, 0, 0, 0, 0, 0, 0, 0, 0)})
    _, named = _publish(ipfs, evidence_rules_cid=ipfs.add(own.to_bytes()))
    got = pool_evidence_rules(named, ipfs, "fp32")
    assert got == own and got.digest() == own.digest() and got != FP32_RULES
    _, wrong = _publish(ipfs, evidence_rules_cid=ipfs.add(b'{"schema": "intellect.poolrules/v1"}'))
    with pytest.raises(AgentError, match=r"evidence rules .*intellect\.evidence-rules/v1"):
        pool_evidence_rules(wrong, ipfs, "mixed")
    _, missing = _publish(ipfs, evidence_rules_cid=compute_cid(b"nobody stored this"))
    with pytest.raises(AgentError, match="cannot use the pool's evidence rules"):
        pool_evidence_rules(missing, ipfs, "mixed")
