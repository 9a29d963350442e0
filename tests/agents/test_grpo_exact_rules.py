"""agents/grpo.py's rules pinned at their exact values (issue 39, mutmut's survivors on `agents/grpo.py`).

The trainer's guards on numbers from other machines: the reward range is closed at both ends, the error names the
value and what it was, the group's advantages are recomputed from the rewards in float64 (as the validator does)
and clamped on both sides, a group is kept for any non-zero advantage, and a stale rollout's error carries its
three steps. docs/benchmarks-security.md ("mutmut") lists the mutants these kill.
"""

from __future__ import annotations

import math

import pytest
import torch

from intellect.agents.grpo import (
    REWARD_RANGE,
    StaleRolloutError,
    UntrustedValueError,
    check_reward,
    check_staleness,
    filter_zero_advantage_groups,
    mean_std,
    recompute_advantages,
)


def test_reward_range_is_closed_at_both_ends():
    assert REWARD_RANGE == (-2.0, 1.0)
    assert check_reward(-2.0) == -2.0 and check_reward(1.0) == 1.0
    for past in (math.nextafter(-2.0, -math.inf), math.nextafter(1.0, math.inf)):
        with pytest.raises(UntrustedValueError):
            check_reward(past)


def test_reward_error_names_the_value_and_what_it_was():
    with pytest.raises(UntrustedValueError) as info:
        check_reward(float("nan"))
    assert str(info.value) == "reward nan is not a finite number in [-2.0, 1.0]"
    with pytest.raises(UntrustedValueError) as info:
        recompute_advantages([0.5, 7.0])
    assert str(info.value) == "reward 1 of the group 7.0 is not a finite number in [-2.0, 1.0]"


def test_advantages_are_recomputed_from_float64_rewards():
    # 1 and 1 - 1e-9 are the same float32: a float32 recomputation would give a flat group (zeros)
    a, b = 1.0, 1.0 - 1e-9
    std = abs(a - b) / math.sqrt(2)  # sample std (n - 1) of two values
    expected = (a - b) / 2 / (std + 1e-6)  # ≈ 4.9965e-4
    adv = recompute_advantages([a, b])
    assert adv[0] == pytest.approx(expected, rel=1e-6) and adv[1] == pytest.approx(-expected, rel=1e-6)


def test_advantages_are_clamped_on_both_sides():
    assert recompute_advantages([1.0, 0.0, 0.0, 0.0], max_abs=0.25) == [0.25, -0.25, -0.25, -0.25]
    assert recompute_advantages([0.0, 1.0, 1.0, 1.0], max_abs=0.25) == [-0.25, 0.25, 0.25, 0.25]


def test_a_group_is_kept_for_any_non_zero_advantage_by_default():
    adv = torch.tensor([[0.5, -0.5], [0.0, 0.0], [1e-6, 0.0]])
    assert filter_zero_advantage_groups(adv).tolist() == [True, False, True]
    assert filter_zero_advantage_groups(adv, atol=0.5).tolist() == [False, False, False]


def test_stale_rollout_error_carries_its_three_steps():
    with pytest.raises(StaleRolloutError) as info:
        check_staleness(train_step=9, policy_step=5, async_level=3)
    err = info.value
    assert (err.train_step, err.policy_step, err.async_level) == (9, 5, 3)
    assert str(err) == "rollout of policy step 5 is too stale for training step 9: 9 - 5 > async_level 3"


def test_mean_std_is_the_population_mean_and_std():
    assert mean_std([1.0, 2.0, 3.0, 4.0]) == (2.5, math.sqrt(1.25))
    assert mean_std([3.0]) == (3.0, 0.0)
    m, s = mean_std([])
    assert math.isnan(m) and math.isnan(s)
