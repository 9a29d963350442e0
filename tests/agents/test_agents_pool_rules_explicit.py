"""Which local settings count as "set by the operator" against a pool's rules (issue 39, mutmut's survivors on
`agents/roles/pool_rules.py`): every rule field, one at a time, under the name the rules use; the worker's
temperature only when the task section's is not set; nothing for defaults."""

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
