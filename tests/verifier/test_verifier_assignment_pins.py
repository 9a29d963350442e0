"""The assignment's and the trainer's rule pinned at their limits (issue 39, mutmut's survivors on
`verifier/assignment.py`): a submission with exactly `quorum` slots, and the errors a bad stake or quorum gives.
docs/benchmarks-security.md ("mutmut") lists the mutants."""

from __future__ import annotations

import re

import pytest
from eth_utils import keccak

from intellect.verifier.assignment import assigned_validators, assignment_size, eligible_stakes, trainable

VALIDATORS = ["0x" + f"{i:02x}" * 20 for i in range(1, 5)]


def test_trainable_with_exactly_quorum_slots_when_every_slot_attested() -> None:
    """A pool whose `assigned_validators` rule is at or below its quorum gets k = quorum slots
    (`assignment_size`): a submission every one of whose slots attested trains at once; one slot short never."""
    k = assignment_size(3, 3)
    assert k == 3
    slots = assigned_validators(keccak(b"claim"), dict.fromkeys(VALIDATORS, 100), k)
    assert len(slots) == 3
    assert trainable(slots, set(slots), quorum=3, waited_s=0, wait_s=120)
    assert trainable(slots, set(slots), quorum=3, waited_s=1e9, wait_s=120)
    some = [v for v in VALIDATORS if v != slots[0]]  # the first slot's holder did not attest
    assert not trainable(slots, some, quorum=3, waited_s=1e9, wait_s=120)


def test_trainable_refuses_a_quorum_below_one_naming_it() -> None:
    with pytest.raises(ValueError, match=re.escape("quorum must be >= 1, got 0")):
        trainable(VALIDATORS, VALIDATORS, quorum=0, waited_s=0, wait_s=0)


def test_a_negative_stake_is_refused_naming_the_validator_and_the_stake() -> None:
    with pytest.raises(ValueError, match=re.escape(f"negative stake -5 for {VALIDATORS[1]}")):
        eligible_stakes({VALIDATORS[0]: 10, VALIDATORS[1].upper().replace("0X", "0x"): -5})


def test_a_key_given_twice_in_different_case_counts_once_with_its_stakes_added() -> None:
    """`stakes` as read from events may spell one validator in two cases: one validator, the sum of its stakes
    (neither the last entry alone nor two validators)."""
    mixed = "0x" + "ab" * 20
    shouted = "0x" + "AB" * 20
    assert eligible_stakes({mixed: 100, shouted: 50, VALIDATORS[0]: 30}) == {mixed: 150, VALIDATORS[0]: 30}


def test_an_empty_seed_is_refused_naming_what_a_seed_must_be() -> None:
    with pytest.raises(ValueError, match=r"^seed must be non-empty bytes$"):
        assigned_validators(b"", dict.fromkeys(VALIDATORS, 1), 1)


def test_k_zero_assigns_no_slot_and_only_a_negative_k_is_refused() -> None:
    """k = 0 is a valid size (no slots: the list a larger k extends); a negative k is an error naming it."""
    stakes = dict.fromkeys(VALIDATORS, 100)
    assert assigned_validators(keccak(b"claim"), stakes, 0) == []
    assert assigned_validators(keccak(b"claim"), stakes, 1) == assigned_validators(keccak(b"claim"), stakes, 2)[:1]
    with pytest.raises(ValueError, match=re.escape("k must be >= 0, got -1")):
        assigned_validators(keccak(b"claim"), stakes, -1)
