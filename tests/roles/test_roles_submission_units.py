"""Units that fit the budgets (issue 18): the deploy defaults admit the agents' largest default budget, and a
worker whose full-length submission would exceed its pool's `maxUnitsPerSubmission` says so before it works."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from intellect.agents.config import TaskSettings, WorkerSettings
from intellect.agents.roles._runtime import AgentError
from intellect.agents.roles.leases import check_units_fit, max_submission_units
from intellect.verifier.submission import thinking_budgets

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def test_max_submission_units_is_largest_budget_times_group_times_problems() -> None:
    assert max_submission_units([256, 512], 4, 2) == 4096
    assert max_submission_units([64, 128], 4, 2) == 1024


@pytest.mark.parametrize(("gpu", "vram", "count"), [("cpu", 0, 0), ("RTX 4090", 24, 1), ("H100", 80, 8)])
def test_deploy_default_pool_admits_every_default_hardware_class(gpu: str, vram: int, count: int) -> None:
    from scripts._deployment import PoolParams, dev_params

    w, t = WorkerSettings(), TaskSettings()
    need = max_submission_units(thinking_budgets(t.budgets, gpu, vram, count), w.group_size, w.problems_per_task)
    for params in (PoolParams(), dev_params().defaultPool):
        assert params is not None
        check_units_fit(need, params.maxUnitsPerSubmission, 1, "a full-length submission")  # no error
    assert PoolParams().maxUnitsPerSubmission == 16_384  # gpu-large: 2,048 × 4 × 2


def test_units_over_the_pool_cap_are_refused_with_a_clear_error() -> None:
    check_units_fit(1024, 1024, 7, "task 3's submission")  # at the cap: fits
    with pytest.raises(AgentError, match=r"task 3's submission holds 1025 units but pool 7 admits at most 1024 "
                                         r"per submission \(maxUnitsPerSubmission\): it would revert on-chain"):
        check_units_fit(1025, 1024, 7, "task 3's submission")
