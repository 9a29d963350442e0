"""The budget-class rule (issue 21): a claim's class is the lower of the declared class and the class the
node's last decided leases earn (verified tokens per lease-second against each class's threshold)."""

from __future__ import annotations

import pytest

from intellect.verifier.budget_class import (
    ClassRule,
    LeaseOutcome,
    budget_class,
    earned_class,
    lower_class,
    verified_rate,
)

BUDGETS = {"cpu": [64, 128], "gpu-small": [256, 512], "gpu-large": [1024, 2048]}
LEASE = 600
RULE = ClassRule.of(history=4)
# full-length units over half the lease: cpu 0, gpu-small 512*8*4/300, gpu-large 2048*8*4/300 tokens/s
TH = RULE.thresholds(BUDGETS, 8, 4, LEASE)


def ok(units: int, seconds: int, task_id: int = 0) -> LeaseOutcome:
    return LeaseOutcome(task_id, units, seconds, True)


def failed(task_id: int = 0) -> LeaseOutcome:
    return LeaseOutcome(task_id, 0, LEASE, False)


def test_thresholds_are_a_full_submission_in_a_share_of_the_lease() -> None:
    assert TH["cpu"] == 0.0
    assert TH["gpu-small"] == pytest.approx(512 * 8 * 4 / 300)
    assert TH["gpu-large"] == pytest.approx(2048 * 8 * 4 / 300)
    # a class without budgets has cpu's: its threshold is cpu's full submission
    assert ClassRule().thresholds({"cpu": [6]}, 2, 2, 100)["gpu-large"] == pytest.approx(24 / 50)
    assert ClassRule.of() == ClassRule(4, 0.5) and ClassRule.of(0, 0.25) == ClassRule(0, 0.25)


def test_a_new_node_earns_cpu_whatever_it_declares() -> None:
    assert earned_class([], TH, 4) == "cpu"
    assert budget_class("gpu-large", [], TH, 4) == "cpu"
    # fast, but fewer decided leases than the rule's history: not yet
    fast = [ok(4096, 1, k) for k in range(3)]
    assert budget_class("gpu-large", fast, TH, 4) == "cpu"


def test_promotion_by_verified_rate_capped_by_the_declaration() -> None:
    small_rate = [ok(int(TH["gpu-small"] * 10) + 1, 10, k) for k in range(4)]
    assert earned_class(small_rate, TH, 4) == "gpu-small"
    assert budget_class("gpu-large", small_rate, TH, 4) == "gpu-small"
    large_rate = [ok(int(TH["gpu-large"] * 10) + 1, 10, k) for k in range(4)]
    assert earned_class(large_rate, TH, 4) == "gpu-large"
    assert budget_class("gpu-large", large_rate, TH, 4) == "gpu-large"
    assert budget_class("gpu-small", large_rate, TH, 4) == "gpu-small"  # never above the declaration
    assert budget_class("cpu", large_rate, TH, 4) == "cpu"
    # just under a threshold is the class below
    under = [ok(int(TH["gpu-large"] * 10) - 1, 10, k) for k in range(4)]
    assert earned_class(under, TH, 4) == "gpu-small"


def test_expired_or_upheld_leases_demote() -> None:
    large = [ok(int(TH["gpu-large"] * 10) + 1, 10, k) for k in range(4)]
    assert earned_class(large, TH, 4) == "gpu-large"
    # two whole leases at 0 units among the last four: the rate falls under both GPU thresholds
    history = [*large, failed(4), failed(5)]
    assert verified_rate(history[-4:]) < TH["gpu-small"]
    assert earned_class(history, TH, 4) == "cpu"
    # only the last `history` leases count: four good ones after the failures restore the class
    assert earned_class([*history, *large], TH, 4) == "gpu-large"


def test_history_zero_believes_the_declaration() -> None:
    assert budget_class("gpu-large", [], TH, 0) == "gpu-large"
    assert budget_class("gpu-small", [], TH, 0) == "gpu-small"


def test_lower_class_and_rate() -> None:
    assert lower_class("gpu-large", "gpu-small") == lower_class("gpu-small", "gpu-large") == "gpu-small"
    assert lower_class("cpu", "gpu-large") == "cpu" and lower_class("unknown", "gpu-large") == "unknown"
    assert verified_rate([]) == 0.0
    assert verified_rate([ok(100, 10), LeaseOutcome(1, 999, 10, False)]) == pytest.approx(5.0)


def test_class_earned_at_exactly_its_threshold_one_token_less_is_the_class_below() -> None:
    """A full-length gpu-small submission (512 tokens x 8 x 4 = 16384) in exactly half the lease (300 s), four
    times: the rate equals the gpu-small threshold to the bit (the same quotient), which earns the class."""
    at = [ok(16384, 300, k) for k in range(4)]
    assert verified_rate(at) == TH["gpu-small"]
    assert earned_class(at, TH, 4) == "gpu-small"
    short = [ok(16383, 300, 0), *at[1:]]  # one verified token fewer
    assert earned_class(short, TH, 4) == "cpu"
