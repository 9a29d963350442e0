"""`intellect pool create`'s default `max_units_per_submission` is what the rules themselves count as an honest
full-length submission (`PoolRules.full_submission_units`: largest budget × group size × problems per task),
whatever form the rules file gave the budgets in; a rules file the default cannot be counted from is refused
as the rules are (exit 2, `PoolRulesError` naming the field), not with a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run_cli

from intellect.sdk.ipfs import compute_cid
from intellect.sdk.poolrules import PoolRules, PoolRulesError

RULES: dict[str, Any] = {"taskset_cid": compute_cid(b"train"), "model": {"family": "tiny"}, "group_size": 4,
                         "problems_per_task": 2, "length_alpha": 0}


def _dry_run(tmp_path: Path, rules: dict[str, Any]) -> tuple[int, str, str]:
    path = tmp_path / "rules.json"
    path.write_text(json.dumps(rules))
    return run_cli(["--json", "pool", "create", "--dry-run", "--rules", str(path), "--ipfs",
                    f"embedded:{tmp_path / 'ipfs'}"])


@pytest.mark.parametrize("budgets", [{"cpu": [64, 128]}, {"cpu": ["64", "128"]}, {"cpu": [96], "gpu-large": [128]}])
def test_default_max_units_is_the_rules_full_submission(tmp_path: Path, budgets: dict[str, list[Any]]) -> None:
    code, out, err = _dry_run(tmp_path, RULES | {"budgets": budgets})
    assert code == 0, err
    rules = PoolRules.build(json.loads(out)["rules"])
    assert rules.max_units_per_submission == rules.full_submission_units == 128 * 4 * 2


def test_default_max_units_from_rules_without_budgets_refused_as_rules(tmp_path: Path) -> None:
    for bad in ({"cpu": []}, {"gpu-large": [128]}):
        code, _, err = _dry_run(tmp_path, RULES | {"budgets": bad})
        assert code == 2, err
    with pytest.raises(PoolRulesError):
        PoolRules.default_max_units(RULES | {"budgets": {"cpu": []}})
