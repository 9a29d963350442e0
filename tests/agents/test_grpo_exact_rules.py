"""agents/grpo.py's rules pinned at their exact values (issue 39, mutmut's survivors on `agents/grpo.py`).

The trainer's guards on numbers from other machines: the reward range is closed at both ends, the error names the
value and what it was, the group's advantages are recomputed from the rewards in float64 (as the validator does)
and clamped on both sides, a group is kept for any non-zero advantage, and a stale rollout's error carries its
three steps; the loss adds no KL term unless asked, stays in the policy's dtype, takes log-probabilities over the
vocabulary axis, and its denominator needs two positive counts. docs/benchmarks-security.md ("mutmut") lists the mutants these kill.
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
    constant_denominator,
    filter_zero_advantage_groups,
    grpo_loss,
    mean_std,
    recompute_advantages,
    token_logprobs,
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


def test_constant_denominator_is_sequences_times_max_tokens_both_positive():
    assert constant_denominator(1, 1) == 1.0 and constant_denominator(3, 7) == 21.0
    for bad in ((0, 5), (5, 0), (-1, 5), (5, -1)):
        with pytest.raises(ValueError) as info:
            constant_denominator(*bad)
        assert str(info.value) == "n_sequences and max_completion_tokens must be positive"


def test_grpo_loss_adds_no_kl_term_unless_a_coefficient_is_given():
    new = torch.tensor([[0.1, -0.2, 0.3]], requires_grad=True)
    old, ref, mask, adv = torch.zeros(1, 3), torch.full((1, 3), -1.0), torch.ones(1, 3), torch.tensor([1.0])
    plain, _ = grpo_loss(new, old, adv, mask, loss_denominator=3.0)
    with_ref, _ = grpo_loss(new, old, adv, mask, loss_denominator=3.0, ref_logprobs=ref)
    assert with_ref.item() == plain.item()
    kl, _ = grpo_loss(new, old, adv, mask, loss_denominator=3.0, ref_logprobs=ref, kl_coef=0.5)
    k3 = sum(math.exp(-1.0 - x) - (-1.0 - x) - 1.0 for x in (0.1, -0.2, 0.3))
    assert kl.item() == pytest.approx(plain.item() + 0.5 * k3 / 3.0, rel=1e-6)


def test_grpo_loss_stays_in_the_policys_dtype_whatever_the_mask_and_advantages():
    new = torch.tensor([[0.1, -0.2]], dtype=torch.float32, requires_grad=True)
    loss, stats = grpo_loss(new, torch.zeros(1, 2), torch.tensor([0.5], dtype=torch.float64),
                            torch.ones(1, 2, dtype=torch.float64), loss_denominator=2.0)
    assert loss.dtype == torch.float32 and stats.tokens == 2


def test_grpo_token_logprobs_normalise_over_the_vocabulary():
    torch.manual_seed(5)
    logits = torch.randn(2, 3, 5)
    targets = torch.tensor([[0, 4, 2], [1, 1, 3]])
    got = token_logprobs(logits, targets)
    for b in range(2):
        for t in range(3):
            row = logits[b, t].double()
            expected = float(row[targets[b, t]] - torch.logsumexp(row, dim=0))
            assert got[b, t].item() == pytest.approx(expected, abs=1e-6)


def test_grpo_loss_kl_needs_a_reference_policy():
    new = torch.tensor([[0.1, -0.2]], requires_grad=True)
    args = (new, torch.zeros(1, 2), torch.tensor([1.0]), torch.ones(1, 2))
    plain, _ = grpo_loss(*args, loss_denominator=2.0)
    no_ref, _ = grpo_loss(*args, loss_denominator=2.0, kl_coef=0.5)  # a coefficient without a reference: no term
    assert no_ref.item() == plain.item()


def test_the_delta_cap_applies_to_negative_advantages_only():
    # A = 0.5 at ratio 1: PPO's term -A·r = -0.5 per token; the cap -A·δ = -2 is for A < 0 only
    new = torch.zeros(1, 2, requires_grad=True)
    loss, _ = grpo_loss(new, torch.zeros(1, 2), torch.tensor([0.5]), torch.ones(1, 2), loss_denominator=2.0)
    assert loss.item() == -0.5


def test_a_ratio_exactly_at_the_clip_bound_is_not_clipped():
    # ε = 0 puts both bounds at ratio 1 = exp(0), exactly representable: the bounds are strict (< 1-ε, > 1+ε)
    new = torch.zeros(1, 2, requires_grad=True)
    _, stats = grpo_loss(new, torch.zeros(1, 2), torch.tensor([[1.0, -1.0]]), torch.ones(1, 2),
                         loss_denominator=2.0, epsilon=0.0)
    assert stats.clip_fraction == 0.0 and stats.ratio_mean == 1.0


def test_clipping_counts_by_the_advantages_sign():
    # ratios 0.5 and 2 (past 1 ± 0.2) with A = 0 and A = 0.5: only A > 0 with a high ratio is clipped
    lr = [math.log(0.5), math.log(2.0), math.log(0.5), math.log(2.0)]
    new = torch.tensor([lr], dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([[0.0, 0.0, 0.5, 0.5]], dtype=torch.float64)
    _, stats = grpo_loss(new, torch.zeros(1, 4, dtype=torch.float64), adv, torch.ones(1, 4), loss_denominator=4.0)
    assert stats.clip_fraction == 0.25


def test_loss_stats_of_a_single_token_are_that_tokens():
    new = torch.tensor([[math.log(1.5)]], dtype=torch.float64, requires_grad=True)
    _, stats = grpo_loss(new, torch.zeros(1, 1, dtype=torch.float64), torch.tensor([1.0]), torch.ones(1, 1),
                         loss_denominator=1.0)
    assert stats.tokens == 1 and stats.clip_fraction == 1.0
    assert stats.ratio_mean == pytest.approx(1.5, rel=1e-12)
    assert stats.approx_kl == pytest.approx(0.5 - math.log(1.5), rel=1e-12)


def test_loss_stats_average_over_the_unmasked_tokens():
    new = torch.tensor([[math.log(1.5), math.log(0.5), math.log(3.0)]], dtype=torch.float64, requires_grad=True)
    _, stats = grpo_loss(new, torch.zeros(1, 3, dtype=torch.float64), torch.tensor([1.0]),
                         torch.tensor([[1.0, 1.0, 0.0]]), loss_denominator=3.0)
    assert stats.tokens == 2 and stats.clip_fraction == 0.5  # 1.5 > 1 + ε with A > 0; 0.5 is not clipped for A > 0
    assert stats.ratio_mean == pytest.approx(1.0, rel=1e-12)
    assert stats.approx_kl == pytest.approx(((0.5 - math.log(1.5)) + (-0.5 - math.log(0.5))) / 2, rel=1e-12)


def test_the_delta_bound_counts_as_clipped_only_past_it_and_for_negative_advantages():
    # δ = 1 = exp(0): a ratio exactly at δ with A < 0 is not clipped (strict)
    new = torch.zeros(1, 1, requires_grad=True)
    _, stats = grpo_loss(new, torch.zeros(1, 1), torch.tensor([-1.0]), torch.ones(1, 1), loss_denominator=1.0,
                         delta=1.0)
    assert stats.clip_fraction == 0.0
    # ratio 5 > δ = 4 with A = 0: not clipped (no advantage, no bound)
    new = torch.tensor([[math.log(5.0)]], dtype=torch.float64, requires_grad=True)
    _, stats = grpo_loss(new, torch.zeros(1, 1, dtype=torch.float64), torch.tensor([0.0]), torch.ones(1, 1),
                         loss_denominator=1.0)
    assert stats.clip_fraction == 0.0


def test_grpo_loss_ignores_the_reference_when_kl_is_off():
    # kl_coef 0 (the default) adds no term at all: not 0 × KL, which is NaN where the reference gives -inf
    new = torch.tensor([[0.1, -0.2]], requires_grad=True)
    args = (new, torch.zeros(1, 2), torch.tensor([1.0]), torch.ones(1, 2))
    plain, _ = grpo_loss(*args, loss_denominator=2.0)
    off, _ = grpo_loss(*args, loss_denominator=2.0, ref_logprobs=torch.tensor([[-math.inf, 0.0]]))
    assert off.item() == plain.item()
