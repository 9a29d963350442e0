"""The seeded sampler's rules pinned exactly (issue 39, mutmut's survivors on `verifier/replay.py`'s rule functions:
`sample_seed`, `problem_seed`, `masked_scores`, `replay_margins`, `gumbel_sample`). docs/benchmarks-security.md
("mutmut") lists the mutants."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest
import torch

from intellect.verifier.replay import (
    SEED_DOMAIN,
    gumbel_noise,
    gumbel_noise_many,
    gumbel_sample,
    masked_scores,
    problem_seed,
    replay_margins,
    sample_seed,
)

CLAIM_SEED = bytes(range(1, 33))


def test_problem_seed_is_the_claim_seeds_first_8_bytes_mod_2_62_plus_the_index() -> None:
    """What the worker passes as the group's sampler seed and the validator recomputes from the chain's claim seed:
    u64be(seed[:8]) mod 2^62 + index (the top two bits of the first byte dropped; later bytes ignored)."""
    base = int.from_bytes(CLAIM_SEED[:8], "big")
    assert problem_seed(CLAIM_SEED, 0) == base % (1 << 62) == 0x0102030405060708
    assert problem_seed(CLAIM_SEED, 3) == 0x0102030405060708 + 3
    high = bytes([0xFF] * 8) + bytes(24)
    assert problem_seed(high, 0) == (1 << 62) - 1 and problem_seed(high, 1) == 1 << 62
    assert problem_seed(CLAIM_SEED[:8], 1) == problem_seed(CLAIM_SEED, 1)  # 8 bytes are enough
    assert problem_seed(CLAIM_SEED[:8] + b"\xff" * 24, 1) == problem_seed(CLAIM_SEED, 1)


def test_problem_seed_refuses_a_short_seed_and_a_negative_index_naming_them() -> None:
    with pytest.raises(ValueError, match=re.escape("claim seed of 7 bytes, need at least 8")):
        problem_seed(CLAIM_SEED[:7], 0)
    with pytest.raises(ValueError, match=re.escape("problem index must be >= 0, got -1")):
        problem_seed(CLAIM_SEED, -1)


def test_a_problems_rows_get_distinct_sampler_seeds() -> None:
    seeds = {sample_seed(problem_seed(CLAIM_SEED, k), i) for k in range(3) for i in range(4)}
    assert len(seeds) == 12


def _spec_seed(base: int, index: int) -> int:
    digest = hashlib.sha256(SEED_DOMAIN + base.to_bytes(8, "big") + index.to_bytes(8, "big")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def test_sample_seed_takes_every_u64_at_both_ends_and_nothing_past_them() -> None:
    """base seed and index 0 and 2^64 − 1 are valid (a claim seed's problem may start at 0); 2^64 is refused."""
    top = (1 << 64) - 1
    for base, index in ((0, 0), (0, 5), (top, top), (5, 0)):
        assert sample_seed(base, index) == _spec_seed(base, index)
    with pytest.raises(ValueError, match=re.escape(f"index {1 << 64} is outside [0, 2^64)")):
        sample_seed(0, 1 << 64)
    with pytest.raises(ValueError, match=re.escape(f"base_seed {1 << 64} is outside [0, 2^64)")):
        sample_seed(1 << 64, 0)


def test_gumbel_sample_refuses_logits_that_are_not_one_row_per_seed() -> None:
    with pytest.raises(ValueError, match=re.escape("logits must be (B, V) with B = 3 seeds, got (3,)")):
        gumbel_sample(torch.zeros(3), [1, 2, 3], [0, 0, 0], 1.0)
    with pytest.raises(ValueError, match=re.escape("logits must be (B, V) with B = 2 seeds, got (3, 4)")):
        gumbel_sample(torch.zeros(3, 4), [1, 2], [0, 0], 1.0)
    with pytest.raises(ValueError, match=re.escape("2 seeds but 3 positions")):
        gumbel_sample(torch.zeros(2, 4), [1, 2], [0, 1, 2], 1.0)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_replay_margins_of_an_empty_completion_are_empty(temperature: float) -> None:
    assert replay_margins(torch.zeros(0, 8), [], 7, temperature).shape == (0,)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_token_id_zero_is_a_valid_token_and_the_vocabulary_bound_is_named(temperature: float) -> None:
    """Id 0 (a real token of every vocabulary) is replayed like any other: margin 0 where it is the argmax
    (greedy) or the seeded draw; V itself is refused naming [0, V)."""
    logits = torch.full((2, 8), -5.0)
    logits[:, 0] = 20.0  # token 0 dominates: greedy picks it, and the Gumbel noise (< 17) cannot move it
    assert replay_margins(logits, [0, 0], 7, temperature).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match=re.escape("token ids must be in [0, 8)")):
        replay_margins(logits, [0, 8], 7, temperature)


def test_masked_scores_divide_by_the_temperature_and_refuse_zero() -> None:
    logits = torch.tensor([[4.0, 3.0, 1.0, -2.0]])
    assert torch.equal(masked_scores(logits, 2.0), logits / 2.0)
    assert torch.equal(masked_scores(logits, 0.5), logits / 0.5)
    assert torch.equal(masked_scores(logits, 1.0), logits)
    with pytest.raises(ValueError, match=re.escape("masked_scores needs temperature > 0, got 0")):
        masked_scores(logits, 0)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_top_k_keeps_exactly_the_k_largest(k: int) -> None:
    logits = torch.tensor([[1.0, 4.0, 3.0, 2.0, 0.5]])
    kept = torch.isfinite(masked_scores(logits, 1.0, top_k=k))[0]
    assert int(kept.sum()) == k
    assert [int(i) for i in torch.nonzero(kept).flatten()] == sorted(torch.topk(logits[0], k).indices.tolist())


def test_top_p_of_one_keeps_every_token_even_of_negligible_mass() -> None:
    """top_p = 1.0 is no nucleus: tokens whose probability is 0 in float32 (the mass before them rounds to 1.0) stay
    samplable; any top_p < 1 drops them."""
    logits = torch.tensor([[0.0, -200.0, -200.0, 5.0]])
    assert bool(torch.isfinite(masked_scores(logits, 1.0, top_p=1.0)).all())
    assert int(torch.isfinite(masked_scores(logits, 1.0, top_p=0.999)).sum()) == 2


def test_noise_takes_any_u64_seed_and_refuses_what_is_outside_naming_it() -> None:
    """The noise's seed is any u64 (a sample seed is 63 bits, a problem seed up to 2^62 + index): 2^64 − 1 works,
    2^64 and −1 are refused with the range; a negative position and an empty vocabulary likewise."""
    top = (1 << 64) - 1
    assert gumbel_noise_many(top, [0, 1], 4).shape == (2, 4)
    assert torch.equal(gumbel_noise_many(top, [1], 4)[0], gumbel_noise(top, 1, 4))
    with pytest.raises(ValueError, match=re.escape(f"seeds must be in [0, 2^64), got {1 << 64} .. {1 << 64}")):
        gumbel_noise_many(1 << 64, [0], 4)
    with pytest.raises(ValueError, match=re.escape("seeds must be in [0, 2^64), got -1 .. -1")):
        gumbel_noise_many(-1, [0], 4)
    with pytest.raises(ValueError, match=re.escape("positions must be >= 0, got -1")):
        gumbel_noise_many(5, [0, -1], 4)
    with pytest.raises(ValueError, match=re.escape("vocab_size must be positive, got 0")):
        gumbel_noise_many(5, [0], 0)
    one = gumbel_noise_many(5, [0, 1], 1)  # a one-token vocabulary is a vocabulary
    assert one.shape == (2, 1) and bool(torch.isfinite(one).all())


def test_gumbel_sample_rows_of_a_batch_use_their_own_u64_seeds_exactly() -> None:
    """Row b of a batch draws with seeds[b] exactly, for any u64 seed: 2^63 + 1 next to 5 (a mixed list must not be
    rounded through float64, which would make it 2^63). Flat logits over 1,000 tokens: the draw is the noise's argmax."""
    logits = torch.zeros(2, 1000)
    big = (1 << 63) + 1
    together = gumbel_sample(logits, [big, 5], [0, 0], 1.0).tolist()
    alone = [int(gumbel_sample(logits[:1], [big], [0], 1.0)[0]), int(gumbel_sample(logits[1:], [5], [0], 1.0)[0])]
    assert together == alone
    assert together[0] == int(torch.argmax(gumbel_noise(big, 0, 1000)))
    assert together[0] != int(gumbel_sample(logits[:1], [1 << 63], [0], 1.0)[0])


def test_gumbel_sample_takes_the_seeds_as_a_numpy_array_too() -> None:
    logits = torch.zeros(2, 1000)
    big = (1 << 63) + 1
    as_list = gumbel_sample(logits, [big, 5], [0, 3], 1.0)
    assert torch.equal(gumbel_sample(logits, np.array([big, 5], dtype=np.uint64), [0, 3], 1.0), as_list)
