"""The chain's assignment of validators to a claim (issue 22): rendezvous hashing over the validator set at
the claim, from the claim's seed. Pure; the set's chain side is tests/sdk/test_sdk_validator_history.py."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
from eth_utils import keccak

from intellect.verifier.assignment import (
    assigned_validators,
    assignment_size,
    effective_quorum,
    validator_rank,
)

VALIDATORS = ["0x" + f"{i:02x}" * 20 for i in range(1, 11)]
WORKER = "0x" + "ab" * 20


def _seed(i: int) -> bytes:
    return keccak(i.to_bytes(32, "big"))


def test_rank_is_keccak_of_seed_and_address():
    seed = _seed(0)
    assert validator_rank(seed, VALIDATORS[0]) == keccak(seed + bytes.fromhex(VALIDATORS[0][2:]))
    assert validator_rank(seed, VALIDATORS[0].upper().replace("0X", "0x")) == validator_rank(seed, VALIDATORS[0])


def test_lowest_k_ranks_are_assigned_deterministically():
    seed = _seed(1)
    got = assigned_validators(seed, VALIDATORS, 3)
    assert got == sorted(VALIDATORS, key=lambda v: validator_rank(seed, v))[:3]
    assert got == assigned_validators(seed, list(VALIDATORS), 3)  # same inputs, same answer
    assert assigned_validators(_seed(2), VALIDATORS, 3) != got  # another claim, another draw
    assert assigned_validators(seed, VALIDATORS, 4)[:3] == got  # a larger k extends the list
    assert assigned_validators(seed, VALIDATORS, 50) == sorted(VALIDATORS, key=lambda v: validator_rank(seed, v))
    assert assigned_validators(seed, [], 3) == []


def test_independent_of_list_order_case_and_duplicates():
    seed = _seed(3)
    want = assigned_validators(seed, VALIDATORS, 3)
    rng = random.Random(0)
    for _ in range(20):
        shuffled = VALIDATORS[:]
        rng.shuffle(shuffled)
        assert assigned_validators(seed, shuffled, 3) == want
    assert assigned_validators(seed, [v.upper().replace("0X", "0x") for v in VALIDATORS] + VALIDATORS, 3) == want
    assert assigned_validators(seed, set(VALIDATORS), 3) == want
    assert assigned_validators(seed, dict.fromkeys(reversed(VALIDATORS), "0x" + "00" * 20), 3) == want


def test_spread_is_uniform_over_many_seeds():
    """3,000 claims, 10 validators, 3 assigned each: every validator is assigned ~900 times (binomial σ ≈ 25),
    and holds the best rank ~300 times."""
    counts: Counter[str] = Counter()
    first: Counter[str] = Counter()
    for i in range(3000):
        got = assigned_validators(_seed(i), VALIDATORS, 3)
        assert len(got) == 3 == len(set(got))
        counts.update(got)
        first[got[0]] += 1
    assert set(counts) == set(VALIDATORS)
    assert all(780 <= n <= 1020 for n in counts.values()), counts
    assert all(220 <= n <= 380 for n in first.values()), first


def test_leaving_the_set_moves_only_the_leavers_slot():
    """Rendezvous hashing: removing a validator changes nobody else's assignment."""
    for i in range(50):
        seed = _seed(i)
        full = assigned_validators(seed, VALIDATORS, 4)
        for gone in VALIDATORS:
            rest = assigned_validators(seed, [v for v in VALIDATORS if v != gone], 3)
            assert rest == [v for v in full if v != gone][:3]


def test_a_validator_added_after_the_claim_changes_nothing_of_the_claims_set():
    """The assignment is of the set at the claim: whatever joins later is not in that set. Here, the same
    claim evaluated against a later set would differ, which is why the set must be the claim's."""
    late = "0x" + "ee" * 20
    moved = 0
    for i in range(200):
        seed = _seed(i)
        at_claim = assigned_validators(seed, VALIDATORS, 3)
        assert late not in at_claim
        moved += assigned_validators(seed, [*VALIDATORS, late], 3) != at_claim
    assert 20 < moved < 120  # ~3/11 of later sets would have put the newcomer in


def test_one_validator_per_operator_and_never_the_workers_own():
    owner_a, owner_b = "0x" + "a1" * 20, "0x" + "b2" * 20
    owners = {v: (owner_a if i < 5 else owner_b) for i, v in enumerate(VALIDATORS)}
    for i in range(30):
        got = assigned_validators(_seed(i), owners, 3, owners=owners)
        assert len(got) == 2 and {owners[v] for v in got} == {owner_a, owner_b}
        assert got[0] == min(VALIDATORS, key=lambda v: validator_rank(_seed(i), v))
        only_b = assigned_validators(_seed(i), owners, 3, owners=owners, exclude=(WORKER, owner_a))
        assert len(only_b) == 1 and owners[only_b[0]] == owner_b
    # the worker's own key as a validator, and a validator whose owner is the worker's key
    own = {VALIDATORS[0]: VALIDATORS[0], VALIDATORS[1]: WORKER, VALIDATORS[2]: VALIDATORS[2]}
    assert assigned_validators(_seed(0), own, 3, owners=own, exclude=(VALIDATORS[0], WORKER)) == [VALIDATORS[2]]


@pytest.mark.parametrize("bad", [["0x1234"], ["ab" * 21], ["0x" + "zz" * 20]])
def test_refuses_what_is_not_an_address(bad):
    with pytest.raises(ValueError):
        assigned_validators(_seed(0), bad, 1)


def test_refuses_an_empty_seed_or_negative_k():
    with pytest.raises(ValueError):
        assigned_validators(b"", VALIDATORS, 1)
    with pytest.raises(ValueError):
        assigned_validators(_seed(0), VALIDATORS, -1)


def test_assignment_size_is_the_rule_never_below_the_quorum():
    assert assignment_size(1) == 2  # dev pool: quorum 1, two assigned
    assert assignment_size(2) == 3
    assert assignment_size(3, 5) == 5
    assert assignment_size(3, 2) == 3  # a rule below the quorum could never be met
    assert [effective_quorum(None, q, c) for q, c in itertools.product((1, 3), (31337, 8453))] == [1, 2, 3, 3]
