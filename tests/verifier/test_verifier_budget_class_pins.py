"""The budget-class rule pinned at its limits (issue 39, mutmut's survivors on `verifier/budget_class.py`).

The module's `TH` in test_verifier_budget_class.py is computed at import, before any mutant is active, so the
thresholds' own arithmetic is computed here inside the tests. docs/benchmarks-security.md ("mutmut") lists the
mutants."""

from __future__ import annotations

import pytest

from intellect.verifier.budget_class import (
    CLASSES,
    ClassRule,
    LeaseOutcome,
    budget_class,
    earned_class,
    lower_class,
    verified_rate,
)

BUDGETS = {"cpu": [64, 128], "gpu-small": [256, 512], "gpu-large": [1024, 2048]}


def ok(units: int, seconds: int, task_id: int = 0) -> LeaseOutcome:
    return LeaseOutcome(task_id, units, seconds, True)


def test_thresholds_per_class_cpu_zero_each_gpu_class_its_own_largest_budget() -> None:
    """cpu needs no rate; gpu-small and gpu-large each their own largest budget × group × problems over half the
    lease (600 s): 512·8·4/300 and 2048·8·4/300 tokens per second."""
    th = ClassRule(4, 0.5).thresholds(BUDGETS, 8, 4, 600)
    assert th == {"cpu": 0.0, "gpu-small": 512 * 8 * 4 / 300, "gpu-large": 2048 * 8 * 4 / 300}


def test_thresholds_lease_share_floored_at_one_second() -> None:
    """A share of the lease under one second counts as one second (1 s × 0.5 → 1 s): the threshold is the full
    submission's units per second, never more."""
    th = ClassRule(4, 0.5).thresholds({"cpu": [2], "gpu-small": [4]}, 2, 1, 1)
    assert th["gpu-small"] == 8.0 and th["gpu-large"] == 4.0  # gpu-large has no budgets: cpu's
    assert ClassRule(4, 0.5).thresholds({"cpu": [2], "gpu-small": [4]}, 2, 1, 4)["gpu-small"] == 4.0


def test_thresholds_of_a_pool_without_budgets_are_zero() -> None:
    assert ClassRule().thresholds({}, 8, 4, 600) == dict.fromkeys(CLASSES, 0.0)


def test_verified_rate_counts_a_lease_decided_within_a_second_as_one_second() -> None:
    """Submit time − claim time of 0 or 1 s is one second: no division by zero, and a 1-s lease is not halved."""
    assert verified_rate([ok(100, 0)]) == 100.0
    assert verified_rate([ok(100, 1)]) == 100.0
    assert verified_rate([ok(100, 1), ok(50, 3)]) == 150 / 4


def test_history_of_one_lease_is_the_rule_on_not_off() -> None:
    """`history=1`: the last decided lease alone decides (a slow one earns cpu); only `history=0` believes the
    declaration."""
    th = ClassRule(1, 0.5).thresholds(BUDGETS, 8, 4, 600)
    slow = [ok(1, 300)]
    assert earned_class(slow, th, 1) == "cpu"
    assert budget_class("gpu-large", slow, th, 1) == "cpu"
    assert earned_class([ok(10**9, 1)], th, 1) == "gpu-large"
    assert budget_class("gpu-large", slow, th, 0) == "gpu-large"


def test_a_class_without_a_threshold_is_never_earned() -> None:
    """Thresholds that leave a class out (a pool rule naming fewer classes) never award it, whatever the rate."""
    fast = [ok(10**9, 1, k) for k in range(4)]
    assert earned_class(fast, {"cpu": 0.0, "gpu-small": 1.0}, 4) == "gpu-small"
    assert earned_class(fast, {"cpu": 0.0}, 4) == "cpu"


def test_an_unknown_class_name_counts_as_cpu_on_either_side() -> None:
    """The lower of a GPU class and a name the rule does not know is the unknown one (judged by cpu's budgets),
    whichever argument it is."""
    assert lower_class("gpu-small", "tpu") == "tpu"
    assert lower_class("tpu", "gpu-small") == "tpu"
    assert lower_class("gpu-large", "tpu") == "tpu"


@pytest.mark.parametrize("cls", CLASSES)
def test_lower_class_of_a_class_and_itself_is_itself(cls: str) -> None:
    assert lower_class(cls, cls) == cls


def test_lower_class_of_cpu_and_an_unknown_name_is_the_first_argument() -> None:
    """cpu and a name the rule does not know have the same rank (both cpu): the tie goes to the first argument
    (`budget_class` passes the declared class first). Both are judged by cpu's budgets in every pool (`PoolRules`
    refuses budgets for other names), but the function's value is this rule (issue 39: mutmut's
    `rank.get(a, 1)` and `<` for `<=` return the second)."""
    assert lower_class("tpu", "cpu") == "tpu"
    assert lower_class("cpu", "tpu") == "cpu"
    assert lower_class("tpu", "xpu") == "tpu"
