"""GRPO's pure functions against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from intellect.agents.grpo import (
    StaleRolloutError,
    check_staleness,
    constant_denominator,
    filter_zero_advantage_groups,
    group_advantages,
    grpo_loss,
    is_fresh,
)


def test_group_advantages_hand_computed() -> None:
    # group 1: rewards 1,0,0,1 → mean 0.5, sample std sqrt(1/3) → ±0.5/0.57735 = ±0.8660
    # group 2: rewards 2,0,1,1 → mean 1, sample std sqrt(2/3) → (1, -1, 0, 0)/0.8165
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 1.0], [2.0, 0.0, 1.0, 1.0]]))
    s = 0.5 / (math.sqrt(1 / 3) + 1e-6)
    t = 1.0 / (math.sqrt(2 / 3) + 1e-6)
    expected = torch.tensor([[s, -s, -s, s], [t, -t, 0.0, 0.0]])
    assert torch.allclose(adv, expected, atol=1e-6)


def test_group_advantages_identical_rewards_zero() -> None:
    adv = group_advantages(torch.tensor([[0.7] * 5]))
    assert torch.equal(adv, torch.zeros(1, 5))


def test_group_advantages_bad_shape_raises() -> None:
    with pytest.raises(ValueError, match="groups, n"):
        group_advantages(torch.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="at least 2"):
        group_advantages(torch.tensor([[1.0]]))


def test_filter_zero_advantage_groups_drops_flat_groups() -> None:
    rewards = torch.tensor([[1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    keep = filter_zero_advantage_groups(group_advantages(rewards))
    assert keep.tolist() == [False, True, False]


def _loss_for(ratio: float, adv: float, eps: float = 0.2, delta: float = 4.0) -> tuple[float, float]:
    """Loss and d loss / d logprob for one token with the given ratio and advantage."""
    new = torch.tensor([[math.log(ratio)]], requires_grad=True)
    old = torch.zeros(1, 1)
    loss, _ = grpo_loss(new, old, torch.tensor([adv]), torch.ones(1, 1), loss_denominator=1.0,
                        epsilon=eps, delta=delta)
    loss.backward()
    return loss.item(), new.grad.item()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("ratio", "adv", "loss", "grad"),
    [
        (1.0, 2.0, -2.0, -2.0),  # on-policy: -A·r, d/dlogp = -A·r
        (1.1, 2.0, -2.2, -2.2),  # inside the clip range
        (1.5, 2.0, -2.4, 0.0),  # A > 0 above 1+ε: clipped to 1.2, no gradient
        (0.5, 2.0, -1.0, -1.0),  # A > 0 below 1-ε: unclipped (pessimistic bound)
        (0.5, -2.0, 1.6, 0.0),  # A < 0 below 1-ε: clipped to 0.8, no gradient
        (3.0, -2.0, 6.0, 6.0),  # A < 0 above 1+ε but below δ: unclipped
        (5.0, -2.0, 8.0, 0.0),  # A < 0 above δ = 4: bounded at δ·|A|, no gradient
    ],
)
def test_grpo_loss_clipping_boundaries(ratio: float, adv: float, loss: float, grad: float) -> None:
    got_loss, got_grad = _loss_for(ratio, adv)
    assert got_loss == pytest.approx(loss, rel=1e-5)
    assert got_grad == pytest.approx(grad, rel=1e-5, abs=1e-7)


def test_grpo_loss_hand_computed_small_batch() -> None:
    # two sequences, three positions; the second sequence's last position is padding
    new = torch.log(torch.tensor([[1.0, 1.1, 1.5], [0.9, 0.5, 9.0]]))
    old = torch.zeros(2, 3)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    adv = torch.tensor([1.0, -0.5])
    # seq 1 (A=1):   -1.0, -1.1, -1.2 (clipped)          sum -3.3
    # seq 2 (A=-.5): 0.5·0.9 = 0.45, 0.5·0.8 = 0.4 (clipped), padding ignored   sum 0.85
    # constant denominator 2 sequences × 4 max tokens = 8 → (-3.3 + 0.85) / 8
    loss, stats = grpo_loss(new, old, adv, mask, loss_denominator=constant_denominator(2, 4))
    assert loss.item() == pytest.approx((-3.3 + 0.85) / 8, rel=1e-5)
    assert stats.tokens == 5
    assert stats.clip_fraction == pytest.approx(2 / 5)  # 1.5 with A>0, 0.5 with A<0


def test_grpo_loss_denominator_is_constant() -> None:
    new = torch.log(torch.tensor([[1.1, 1.1, 1.1, 1.1]]))
    old = torch.zeros(1, 4)
    adv = torch.tensor([1.0])
    short, _ = grpo_loss(new, old, adv, torch.tensor([[1.0, 0, 0, 0]]), loss_denominator=4.0)
    long, _ = grpo_loss(new, old, adv, torch.tensor([[1.0, 1, 1, 1]]), loss_denominator=4.0)
    # per-token weight does not depend on the sequence's length: 4 tokens weigh 4× one token
    assert long.item() == pytest.approx(4 * short.item())
    with pytest.raises(ValueError, match="loss_denominator"):
        grpo_loss(new, old, adv, torch.ones(1, 4), loss_denominator=0.0)


def test_grpo_loss_shape_mismatch_raises() -> None:
    with pytest.raises(ValueError, match="shape mismatch"):
        grpo_loss(torch.zeros(2, 3), torch.zeros(2, 4), torch.zeros(2), torch.ones(2, 3), loss_denominator=1.0)


def test_check_staleness_boundaries() -> None:
    check_staleness(train_step=5, policy_step=3, async_level=2)  # t - s == async_level: ok
    check_staleness(train_step=5, policy_step=5, async_level=0)
    with pytest.raises(StaleRolloutError, match="too stale") as info:
        check_staleness(train_step=5, policy_step=2, async_level=2)
    assert (info.value.train_step, info.value.policy_step) == (5, 2)
    with pytest.raises(ValueError, match="newer than training step"):
        check_staleness(train_step=1, policy_step=2, async_level=2)
    assert not is_fresh(4, 3, 0)
    with pytest.raises(ValueError, match="async_level"):
        is_fresh(1, 1, -1)


def test_grpo_loss_default_bounds_are_the_documented_ones() -> None:
    """ε = 0.2 and δ = 4 without passing them (direct callers get the documented bounds, not a test's)."""
    new = torch.tensor([[math.log(5.0)], [math.log(1.5)]], requires_grad=True)
    loss, _ = grpo_loss(new, torch.zeros(2, 1), torch.tensor([-2.0, 2.0]), torch.ones(2, 1), loss_denominator=1.0)
    assert loss.item() == pytest.approx(8.0 + -2.4, rel=1e-5)  # δ·|A| for the first, -(1+ε)·A for the second


def test_recompute_advantages_clamped_past_max_abs() -> None:
    """One solved answer among 300: its advantage (≈ 17.3) is past MAX_ABS_ADVANTAGE (16) and clamped; among 100
    (≈ 9.9) it is untouched."""
    from intellect.agents.grpo import MAX_ABS_ADVANTAGE, recompute_advantages

    assert MAX_ABS_ADVANTAGE == 16.0
    adv = recompute_advantages([1.0] + [0.0] * 299)
    assert adv[0] == 16.0 and adv[1] == pytest.approx(-1 / math.sqrt(299), rel=1e-2)
    assert 9.0 < recompute_advantages([1.0] + [0.0] * 99)[0] < 16.0
