"""Seeded task sampling: deterministic, seed-sensitive, documented algorithm."""

from __future__ import annotations

import hashlib

import pytest

from intellect.verifier.tasks import (
    Task,
    TaskSet,
    TaskSetError,
    assign_problems,
    epoch_permutation,
    epoch_problems,
    sample_problems,
)


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


# -- epochs: a claim's slot in seeded shuffled passes over the set --------------------------------


def _documented_permutation(n_tasks: int, epoch: int) -> list[int]:
    """`epoch_permutation` written out from its docstring."""
    order, words, counter, i = list(range(n_tasks)), [], 0, n_tasks - 1
    while i > 0:
        if not words:
            h = hashlib.sha256(b"intellect.sample-epochs/v1" + epoch.to_bytes(8, "big")
                               + counter.to_bytes(8, "big")).digest()
            counter += 1
            words = [h[k:k + 8] for k in (0, 8, 16, 24)]
        w = int.from_bytes(words.pop(0), "big")
        if w >= 2**64 - 2**64 % (i + 1):
            continue
        j = w % (i + 1)
        order[i], order[j] = order[j], order[i]
        i -= 1
    return order


def test_epoch_permutation_matches_documented_algorithm():
    for n, epoch in ((50, 0), (50, 7), (3, 1), (1, 0)):
        assert list(epoch_permutation(n, epoch)) == _documented_permutation(n, epoch)
    assert epoch_permutation(50, 0) != epoch_permutation(50, 1)


def test_epoch_problems_serve_every_problem_once_per_pass(task_set):
    # 50 problems, 4 per claim: a pass is 12 claims (48 problems, 2 left over, different ones each pass)
    per_pass, left_over = [], []
    for epoch in range(3):
        served = [a.index for t in range(epoch * 12, epoch * 12 + 12)
                  for a in epoch_problems(task_set, t, hashlib.sha256(b"%d" % t).digest(), 4, [64])]
        assert len(served) == len(set(served)) == 48
        per_pass.append(set(served))
        left_over.append(set(range(50)) - set(served))
    assert len({frozenset(x) for x in left_over}) == 3
    assert all(len(s) == 48 for s in per_pass)


def test_epoch_problems_lengths_come_from_the_claim_seed(task_set):
    a = epoch_problems(task_set, 5, b"\x00" * 32, 3, [100, 200, 300, 400])
    b = epoch_problems(task_set, 5, b"\x01" * 32, 3, [100, 200, 300, 400])
    assert [x.task_id for x in a] == [x.task_id for x in b]  # the slot fixes the problems
    seed, expected, counter = b"\x00" * 32, [], 0
    while len(expected) < 3:
        h = hashlib.sha256(b"intellect.sample-lengths/v1" + seed + counter.to_bytes(8, "big")).digest()
        counter += 1
        w = int.from_bytes(h[:8], "big")
        if w < 2**64 - 2**64 % 4:
            expected.append([100, 200, 300, 400][w % 4])
    assert [x.target_len for x in a] == expected
    assert [x.index for x in a] == list(epoch_permutation(50, 0)[15:18])


@pytest.mark.parametrize("task_id", [-1, "3", 2.0, True])
def test_epoch_problems_refuse_a_bad_task_id(task_set, task_id):
    with pytest.raises(TaskSetError, match="task_id"):
        epoch_problems(task_set, task_id, b"\x00" * 32, 2, [1])


def test_epoch_problems_refuse_more_problems_than_the_set(task_set):
    with pytest.raises(TaskSetError, match="cannot take 51"):
        epoch_problems(task_set, 0, b"\x00" * 32, 51, [1])


def test_assign_problems_dispatches_on_the_pools_order(task_set):
    seed = hashlib.sha256(b"claim").digest()
    assert assign_problems(task_set, "random", seed=seed, task_id=9, n=4, target_lengths=[8]) == \
        sample_problems(task_set, seed, 4, [8])
    assert assign_problems(task_set, "epochs", seed=seed, task_id=9, n=4, target_lengths=[8]) == \
        epoch_problems(task_set, 9, seed, 4, [8])
    with pytest.raises(TaskSetError, match="unknown problem order 'sorted'"):
        assign_problems(task_set, "sorted", seed=seed, task_id=9, n=4, target_lengths=[8])  # type: ignore[arg-type]


# -- every rule at its limit (issue 39: verifier/tasks.py through mutmut) --------------------------------------


def test_uniform_rejects_exactly_the_biased_tail():
    """A word is rejected iff it is ≥ 2⁶⁴ − 2⁶⁴ mod n (big-endian): the draw is then exactly uniform."""
    from intellect.verifier.tasks import _uniform

    for n in (3, 5, 50, 2**63 + 1):
        limit = 2**64 - 2**64 % n
        assert _uniform((limit - 1).to_bytes(8, "big"), n) == (limit - 1) % n
        assert _uniform(limit.to_bytes(8, "big"), n) is None
        assert _uniform(b"\xff" * 8, n) is None
    assert _uniform(b"\xff" * 8, 4) == 3  # a power of two rejects nothing
    assert _uniform(b"\x00" * 7 + b"\x05", 50) == 5 and _uniform(b"\x05" + b"\x00" * 7, 50) == (5 << 56) % 50


def test_bad_inputs_are_refused_naming_what_was_wrong(task_set):
    with pytest.raises(TaskSetError, match=r"^seed must be 32 bytes, not str \(decode hex first\)$"):
        sample_problems(task_set, "00" * 32, 1, [1])  # type: ignore[arg-type]
    with pytest.raises(TaskSetError, match=r"^seed must be 32 bytes, got 31$"):
        sample_problems(task_set, b"\x00" * 31, 1, [1])
    with pytest.raises(TaskSetError, match=r"^target_lengths must be a non-empty list of positive ints, got \[\]$"):
        sample_problems(task_set, b"\x00" * 32, 1, [])
    with pytest.raises(TaskSetError, match=r"^cannot draw 51 distinct problems from task set 'taskset' of 50$"):
        sample_problems(task_set, b"\x00" * 32, 51, [1])
    with pytest.raises(TaskSetError, match=r"^task set 'empty' is empty$"):
        TaskSet([], name="empty")
    t = Task(id="t0", prompt="p", verifier="math", answer="1")
    with pytest.raises(TaskSetError, match=r"^task set 'dup' has duplicate task id 't0'$"):
        TaskSet([t, t], name="dup")
    with pytest.raises(KeyError, match=r"task 'nope' is not in task set 'taskset'"):
        task_set["nope"]
    assert "t0" in task_set and "nope" not in task_set
    with pytest.raises(TaskSetError, match=r"^unknown problem order 'sorted' \(known: epochs, random, adaptive\)$"):
        assign_problems(task_set, "sorted", seed=b"\x00" * 32, task_id=1, n=1, target_lengths=[1])  # type: ignore
    with pytest.raises(TaskSetError, match=r"^problem order `adaptive` needs the difficulty table of the "
                                           r"submission's checkpoint$"):
        assign_problems(task_set, "adaptive", seed=b"\x00" * 32, task_id=1, n=1, target_lengths=[1])


def test_claim_sizes_at_their_limits(task_set):
    from intellect.verifier.difficulty import DifficultyTable
    from intellect.verifier.tasks import adaptive_problems

    seed = b"\x02" * 32
    assert sample_problems(task_set, seed, 0, [1]) == []  # a claim of no problems draws none
    for n in (1, 50):  # one problem, and the whole set, are claims
        assert len(epoch_problems(task_set, 0, seed, n, [1])) == n
        assert len(adaptive_problems(task_set, DifficultyTable.empty(4), seed, n, [1])) == n
    with pytest.raises(TaskSetError, match=r"^cannot take 0 distinct problems per claim"):
        epoch_problems(task_set, 0, seed, 0, [1])
    with pytest.raises(TaskSetError, match=r"^cannot take 0 distinct problems per claim"):
        adaptive_problems(task_set, DifficultyTable.empty(4), seed, 0, [1])


def test_epoch_problems_lengths_use_whole_words_with_rejection(task_set):
    """Three lengths: 2⁶⁴ mod 3 ≠ 0, so the rejection and every byte of the word matter."""
    got = epoch_problems(task_set, 9, b"\x03" * 32, 8, [6, 8, 10])
    expected, counter = [], 0
    while len(expected) < 8:
        h = hashlib.sha256(b"intellect.sample-lengths/v1" + b"\x03" * 32 + counter.to_bytes(8, "big")).digest()
        counter += 1
        w = int.from_bytes(h[:8], "big")
        if w < 2**64 - 2**64 % 3:
            expected.append([6, 8, 10][w % 3])
    assert [a.target_len for a in got] == expected
