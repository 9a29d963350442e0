"""Seeded task sampling: deterministic, seed-sensitive, documented algorithm."""

from __future__ import annotations

import hashlib

import pytest

from intellect.verifier.tasks import Task, TaskSet, TaskSetError, sample_problems


@pytest.fixture
def task_set() -> TaskSet:
    return TaskSet([Task(id=f"t{i}", prompt=f"p{i}", verifier="math", answer=str(i)) for i in range(50)])


def test_sample_problems_deterministic(task_set):
    seed = hashlib.sha256(b"claim-1").digest()
    a = sample_problems(task_set, seed, 10, [1000, 2000])
    assert a == sample_problems(task_set, seed, 10, [1000, 2000])
    assert len({x.task_id for x in a}) == 10
    assert all(x.target_len in (1000, 2000) and task_set.tasks[x.index].id == x.task_id for x in a)


def test_sample_problems_seed_changes_assignment(task_set):
    a = sample_problems(task_set, b"\x00" * 32, 10, [1000])
    b = sample_problems(task_set, b"\x00" * 31 + b"\x01", 10, [1000])
    assert [x.task_id for x in a] != [x.task_id for x in b]


def test_sample_problems_matches_documented_algorithm(task_set):
    seed = bytes(range(32))
    lengths = [512, 1024, 2048]
    expected, drawn, counter = [], set(), 0
    while len(expected) < 5:
        h = hashlib.sha256(b"intellect.sample/v1" + seed + counter.to_bytes(8, "big")).digest()
        counter += 1
        i, j = int.from_bytes(h[:8], "big"), int.from_bytes(h[8:16], "big")
        if i >= 2**64 - 2**64 % 50 or j >= 2**64 - 2**64 % 3 or i % 50 in drawn:
            continue
        drawn.add(i % 50)
        expected.append((f"t{i % 50}", lengths[j % 3]))
    got = sample_problems(task_set, seed, 5, lengths)
    assert [(a.task_id, a.target_len) for a in got] == expected


def test_sample_problems_whole_set_is_a_permutation(task_set):
    got = sample_problems(task_set, b"\x07" * 32, 50, [1])
    assert sorted(a.index for a in got) == list(range(50))


@pytest.mark.parametrize(
    ("seed", "n", "lengths"),
    [
        (b"\x00" * 31, 1, [1]),
        ("00" * 32, 1, [1]),
        (b"\x00" * 32, 51, [1]),
        (b"\x00" * 32, 1, []),
        (b"\x00" * 32, 1, [0]),
    ],
)
def test_sample_problems_bad_input_raises(task_set, seed, n, lengths):
    with pytest.raises(TaskSetError):
        sample_problems(task_set, seed, n, lengths)
