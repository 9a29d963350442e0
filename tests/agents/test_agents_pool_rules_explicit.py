"""Which local settings count as "set by the operator" against a pool's rules (issue 39, mutmut's survivors on
`agents/roles/pool_rules.py`): every rule field, one at a time, under the name the rules use; the worker's
temperature only when the task section's is not set; nothing for defaults. Applied rules write the class rule
too, and the agent logs which rules it took (or that the pool has none)."""

from __future__ import annotations

import json

import pytest

from intellect.agents.config import load_config
from intellect.agents.roles.pool_rules import explicit_rule_settings

CASES = [
    ("worker.group_size", 6, "group_size"),
    ("worker.problems_per_task", 3, "problems_per_task"),
    ("tasks.budgets", {"cpu": [6, 8]}, "budgets"),
    ("tasks.length_alpha", 0.001, "length_alpha"),
    ("tasks.length_scope", "all", "length_scope"),
    ("tasks.problem_order", "random", "problem_order"),
    ("tasks.temperature", 0.7, "temperature"),
    ("tasks.class_history", 4, "class_history"),
    ("tasks.class_lease_share", 0.5, "class_lease_share"),
    ("worker.temperature", 0.9, "temperature"),
    ("validator.toploc_profile", "fp32", "toploc_profile"),
]


@pytest.mark.parametrize(("setting", "value", "rule"), CASES, ids=[c[0] for c in CASES])
def test_each_explicit_rule_setting_is_reported_under_its_rule_name(setting, value, rule):
    cfg = load_config(None, role="worker", overrides={"worker.gpu_model": "cpu", setting: json.dumps(value)})
    assert explicit_rule_settings(cfg) == {rule: value}


def test_the_task_sections_temperature_wins_over_the_workers():
    cfg = load_config(None, role="worker",
                      overrides={"worker.gpu_model": "cpu", "worker.temperature": "0.9", "tasks.temperature": "0.7"})
    assert explicit_rule_settings(cfg) == {"temperature": 0.7}


def _publish(ipfs, **change):
    from intellect.agents.tasks import synthetic_task_set
    from intellect.sdk.poolrules import PoolRules

    train = synthetic_task_set(8, seed=0, max_operand=9, ops=("+",))
    doc = {"taskset_cid": ipfs.add(train.to_jsonl_bytes()), "model": {"family": "tiny-llama"}, "group_size": 6,
           "problems_per_task": 3, "budgets": {"cpu": [6, 8]}, "length_alpha": 0.001,
           "sampler": {"temperature": 0.8}, "toploc_profile": "fp32", "max_units_per_submission": 8 * 6 * 3,
           **change}
    rules = PoolRules.build(doc)
    return ipfs.add(rules.to_bytes()), rules


def test_applied_rules_write_the_class_rule_and_log_what_the_agent_took(tmp_path, caplog):
    from intellect.agents.roles.pool_rules import apply_pool_rules
    from intellect.sdk.ipfs import EmbeddedIpfs

    ipfs = EmbeddedIpfs(tmp_path / "ipfs")
    cid, rules = _publish(ipfs, class_history=4, class_lease_share=0.5)
    cfg = load_config(None, role="worker", overrides={"worker.gpu_model": "cpu"})
    with caplog.at_level("INFO", logger="intellect.agents.roles.pool_rules"):
        assert apply_pool_rules(cfg, cid, ipfs, pool_id=7) == rules
    assert (cfg.tasks.class_history, cfg.tasks.class_lease_share) == (4, 0.5)
    assert [r.getMessage() for r in caplog.records] == [
        f"pool 7 rules {cid}: task set {rules.taskset_cid} (epochs order), group 6 x 3 problems, budgets "
        f"{rules.budgets}, alpha 0.001 (solved), T 0.8, TOPLOC fp32, chat template {rules.model.chat_template}"]


def test_a_pool_without_rules_logs_that_the_agent_keeps_its_settings(tmp_path, caplog):
    from intellect.agents.roles.pool_rules import apply_pool_rules
    from intellect.sdk.ipfs import EmbeddedIpfs

    cfg = load_config(None, role="worker", overrides={"worker.gpu_model": "cpu"})
    with caplog.at_level("WARNING", logger="intellect.agents.roles.pool_rules"):
        assert apply_pool_rules(cfg, None, EmbeddedIpfs(tmp_path / "ipfs"), pool_id=3) is None
    assert [r.getMessage() for r in caplog.records] == [
        "pool 3 names no rules document (CID None): using this agent's own settings"]


def test_prompts_use_the_tokenizers_chat_template_unless_the_rules_say_none():
    from types import SimpleNamespace

    from intellect.agents.roles.pool_rules import rules_tokenizer

    tok = object()
    assert rules_tokenizer(None, tok) is None
    assert rules_tokenizer(SimpleNamespace(model=SimpleNamespace(chat_template="none")), tok) is None
    assert rules_tokenizer(SimpleNamespace(model=SimpleNamespace(chat_template="auto")), tok) is tok
