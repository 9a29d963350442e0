"""Online difficulty filtering (issue 37): the difficulty table's schema and bounds, its weights in exact integer
arithmetic, and the `adaptive` problem order every node derives alike."""

from __future__ import annotations

import bisect
import hashlib
import json
import logging
from fractions import Fraction

import pytest

from intellect.verifier.difficulty import (
    COUNT_UNIT,
    DIFFICULTY_FILE,
    MAX_CACHED_TABLES,
    MAX_TABLE_BYTES,
    SOLVED_AT,
    WEIGHT_FLOOR,
    WEIGHT_SCALE,
    DifficultyError,
    DifficultyTable,
    cached_weights,
    record_completions,
    table_after,
    table_file,
    table_for,
    table_in,
    weights,
)
from intellect.verifier.tasks import (
    MAX_ADAPTIVE_DRAWS,
    Task,
    TaskSet,
    TaskSetError,
    adaptive_problems,
    assign_problems,
)


@pytest.fixture
def task_set() -> TaskSet:
    return TaskSet([Task(id=f"t{i}", prompt=f"p{i}", verifier="math", answer=str(i)) for i in range(50)])


U = COUNT_UNIT


def _table(counts: dict[str, tuple[int, int]], g: int = 4) -> DifficultyTable:
    """A table of `counts` in completions (stored in COUNT_UNITs)."""
    return DifficultyTable(group_size=g, counts={k: (t * U, s * U) for k, (t, s) in counts.items()})


def _weight_by_fractions(table: DifficultyTable, task_id: str) -> int:
    """The documented rule, in rationals: max(floor, ⌊scale · (1 − p^G − (1 − p)^G)⌋), p shrunk to the pool's."""
    tried_all, solved_all = table.totals()
    p0 = Fraction(solved_all + U, tried_all + 2 * U)  # (S + 1) / (N + 2) in completions
    n, s = table.counts.get(task_id, (0, 0))
    p = (s + 2 * U * p0) / (n + 2 * U) if n else Fraction(1, 2)
    g = table.group_size
    return max(WEIGHT_FLOOR, int((1 - p**g - (1 - p) ** g) * WEIGHT_SCALE))


def test_empty_table_weighs_every_problem_alike():
    w = weights(DifficultyTable.empty(4), ["a", "b", "c"])
    assert w == (WEIGHT_SCALE * 14 // 16,) * 3  # p = 1/2: 1 − 2/16 of groups of 4 have signal


def test_weights_follow_the_documented_rule_exactly():
    table = _table({"never": (16, 0), "always": (16, 16), "half": (8, 4), "once": (4, 1), "big": (2**40, 2**39),
                    "untried": (0, 0)}, g=8)
    table = DifficultyTable(group_size=8, counts={**table.counts, "faded": (7, 3)})  # a trace of old evidence
    ids = ["never", "always", "half", "once", "big", "untried", "faded", "unseen"]
    assert weights(table, ids) == tuple(_weight_by_fractions(table, i) for i in ids)


def test_problems_near_half_solved_outweigh_those_never_or_always_solved():
    table = _table({"never": (16, 0), "always": (16, 16), "half": (8, 4), "once": (4, 1), "unseen": (0, 0)})
    w = dict(zip(["never", "always", "half", "once", "unseen"],
                 weights(table, ["never", "always", "half", "once", "unseen"]), strict=True))
    assert w["half"] > w["once"] > w["never"] and w["half"] > w["always"]
    # a problem never tried weighs the most (p = 1/2): explored before anything is revisited
    assert w["unseen"] == WEIGHT_SCALE * 14 // 16 > w["half"]
    # one tried problem's p is shrunk towards the pool's, p₀ = (21 + 1) / (44 + 2): 1 of 4 → (1 + 2 p₀) / 6
    p = (1 + 2 * 22 / 46) / 6
    assert abs(w["once"] / WEIGHT_SCALE - (1 - p**4 - (1 - p) ** 4)) < 1e-5
    # a problem never solved in a pool that solves almost nothing is at the floor: drawn now and then, not starved
    w = weights(_table({"never": (1000, 0), "half": (8, 4)}), ["never", "half"])
    assert w[0] == WEIGHT_FLOOR and w[1] > 20 * WEIGHT_FLOOR


def test_record_completions_counts_tried_and_solved_at_the_limit():
    table = record_completions(DifficultyTable.empty(4), [("a", SOLVED_AT), ("a", SOLVED_AT - 1e-9), ("b", 1.0),
                                                          ("a", -0.2)])
    assert table.counts == {"a": (3 * U, U), "b": (U, U)}
    assert record_completions(table, [("b", 0.0)], decay=False).counts["b"] == (2 * U, U)
    assert table.counts["b"] == (U, U)  # tables are immutable


def test_each_step_fades_the_older_evidence_by_seven_eighths():
    table = _table({"a": (8, 8), "b": (1, 0)})
    nxt = record_completions(table, [("b", 1.0)])
    assert nxt.counts == {"a": (8 * U - U, 8 * U - U), "b": (U - U // 8 + U, U)}
    tiny = DifficultyTable(group_size=4, counts={"a": (7, 7), "b": (8, 0)})
    assert record_completions(tiny, []).counts == {"a": (7, 7), "b": (7, 0)}  # x − ⌊x/8⌋, never below a trace
    # a problem solved in none of its first 32 tries and in all of its last 16 (2 a step) is weighed by the
    # recent ones: ~1/2 solved, where the whole history says 1/3
    faded = _table({"p": (32, 0)})
    for _ in range(8):
        faded = record_completions(faded, [("p", 1.0)] * 2)
    kept = record_completions(_table({"p": (32, 0)}), [("p", 1.0)] * 16, decay=False)
    assert faded.counts["p"][1] / faded.counts["p"][0] > 0.45 > 0.34 > kept.counts["p"][1] / kept.counts["p"][0]


def test_table_round_trips_and_refuses_what_it_cannot_read():
    table = _table({"x": (3, 1)})
    assert DifficultyTable.from_bytes(table.to_bytes()) == table
    assert table.to_bytes() == b'{"counts":{"x":[768,256]},"group_size":4,"schema":"intellect.difficulty/v1"}'
    doc = json.loads(table.to_bytes())
    for bad, what in [
        ({**doc, "schema": "intellect.difficulty/v2"}, "unknown difficulty table schema 'intellect.difficulty/v2'"),
        ({k: v for k, v in doc.items() if k != "schema"}, "no `schema` field"),
        ({**doc, "counts": {"x": [1, 2]}}, r"problem 'x': counts \[1, 2\]"),
        ({**doc, "group_size": 1}, "group_size"),
        ({**doc, "extra": 1}, "extra"),
    ]:
        with pytest.raises(DifficultyError, match=what):
            DifficultyTable.from_bytes(json.dumps(bad).encode())
    with pytest.raises(DifficultyError, match="not JSON"):
        DifficultyTable.from_bytes(b"\xff{")
    with pytest.raises(DifficultyError, match="a JSON object expected"):
        DifficultyTable.from_bytes(b"[1]")
    with pytest.raises(DifficultyError, match=f"more than the {MAX_TABLE_BYTES}"):
        DifficultyTable.from_bytes(b" " * (MAX_TABLE_BYTES + 1))


def test_table_in_a_checkpoint_missing_or_refused_is_the_empty_table(tmp_path, caplog):
    assert table_in(tmp_path, 4) == DifficultyTable.empty(4) and table_file(tmp_path) is None
    (tmp_path / DIFFICULTY_FILE).write_bytes(_table({"x": (2, 1)}).to_bytes())
    assert table_in(tmp_path, 4).counts == {"x": (2 * U, U)}
    assert table_for("adaptive", tmp_path, 4) == table_in(tmp_path, 4)
    assert table_for("epochs", tmp_path, 4) is None and table_for("random", tmp_path, 4) is None
    (tmp_path / DIFFICULTY_FILE).write_bytes(b'{"schema": "intellect.difficulty/v9", "group_size": 4}')
    with caplog.at_level(logging.WARNING):
        assert table_in(tmp_path, 4) == DifficultyTable.empty(4)
    assert "difficulty table refused" in caplog.text and "intellect.difficulty/v9" in caplog.text


def test_table_after_adds_the_batch_to_the_checkpoints_table(tmp_path):
    class S:
        def __init__(self, pid: str, reward: float) -> None:
            self.problem_id, self.reward = pid, reward

    (tmp_path / DIFFICULTY_FILE).write_bytes(_table({"x": (2, 1)}).to_bytes())
    got = table_after(tmp_path, [S("x", 1.0), S("x", 0.0), S("y", 0.0)], 4)
    assert got.counts == {"x": (2 * U - 2 * U // 8 + 2 * U, U - U // 8 + U), "y": (U, 0)}  # faded, then added


def _documented_adaptive(task_set: TaskSet, table: DifficultyTable, seed: bytes, n: int, lengths: list[int],
                         cap: int = 4096):
    """`adaptive_problems` reimplemented from its docstring."""
    w = weights(table, [t.id for t in task_set])
    cum, acc = [], 0
    for x in w:
        acc += x
        cum.append(acc)
    total, picked, words, counter, draws = acc, [], [], 0, 0
    while len(picked) < n and draws < cap:
        if not words:
            h = hashlib.sha256(b"intellect.sample-adaptive/v1" + seed + counter.to_bytes(8, "big")).digest()
            counter += 1
            words = [h[0:8], h[8:16], h[16:24], h[24:32]]
        draws += 1
        u = int.from_bytes(words.pop(0), "big")
        if u >= 2**64 - 2**64 % total:
            continue
        i = bisect.bisect_right(cum, u % total)  # the first problem whose running sum exceeds u mod T
        if i not in picked:
            picked.append(i)
    picked += [i for i in range(len(task_set)) if i not in picked][: n - len(picked)]  # the fill, in set order
    out, counter = [], 0
    for i in picked:
        while True:
            h = hashlib.sha256(b"intellect.sample-lengths/v1" + seed + counter.to_bytes(8, "big")).digest()
            counter += 1
            j = int.from_bytes(h[0:8], "big")
            if j < 2**64 - 2**64 % len(lengths):
                break
        out.append((task_set.tasks[i].id, lengths[j % len(lengths)]))
    return out


def test_adaptive_problems_match_the_documented_algorithm(task_set):
    table = _table({"t3": (8, 4), "t7": (8, 0), "t9": (4, 2), "t11": (12, 12)})
    for k in range(5):
        seed = hashlib.sha256(f"claim-{k}".encode()).digest()
        got = adaptive_problems(task_set, table, seed, 6, [6, 8, 10])
        assert [(a.task_id, a.target_len) for a in got] == _documented_adaptive(task_set, table, seed, 6, [6, 8, 10])
        assert len({a.index for a in got}) == 6 and all(task_set.tasks[a.index].id == a.task_id for a in got)
        assert got == adaptive_problems(task_set, table, seed, 6, [6, 8, 10])  # every node derives the same


def test_adaptive_problems_draw_at_most_4096_words_then_fill_in_set_order():
    """A claim of the whole of a 1,000-problem set needs ~7,500 draws to collect every problem: the draw stops at
    MAX_ADAPTIVE_DRAWS words and the problems not drawn follow in task-set order, as documented."""
    big = TaskSet([Task(id=f"b{i}", prompt="p", verifier="math", answer="1") for i in range(1000)], name="big")
    table = _table({f"b{i}": (8, 4) if i % 3 else (8, 0) for i in range(1000)})
    seed = hashlib.sha256(b"whole").digest()
    got = adaptive_problems(big, table, seed, 1000, [8])
    assert [(a.task_id, a.target_len) for a in got] == _documented_adaptive(big, table, seed, 1000, [8])
    assert sorted(a.index for a in got) == list(range(1000))
    tail = [a.index for a in got][-20:]
    assert tail == sorted(tail)  # the fill: the last problems are the undrawn ones in set order
    # the cap is 4,096 words, not one more: a seed whose 4,097th word would have drawn a new problem
    seed = next(s for s in (hashlib.sha256(b"cap-%d" % k).digest() for k in range(2000))
                if _documented_adaptive(big, table, s, 1000, [8]) != _documented_adaptive(big, table, s, 1000, [8],
                                                                                            cap=4097))
    assert [(a.task_id, a.target_len) for a in adaptive_problems(big, table, seed, 1000, [8])] == \
        _documented_adaptive(big, table, seed, 1000, [8])
    # a claim of 30 problems uses more than one hash's four words: every word is the documented one
    assert [(a.task_id, a.target_len) for a in adaptive_problems(big, table, seed, 30, [6, 8, 10])] == \
        _documented_adaptive(big, table, seed, 30, [6, 8, 10])


def test_adaptive_problems_favour_problems_with_signal(task_set):
    # 40 problems never solved in 16 tries, 10 solved half the time: the half-solved ones are drawn far more
    table = _table({f"t{i}": (16, 8) if i < 10 else (16, 0) for i in range(50)})
    picks = [a.index for k in range(400)
             for a in adaptive_problems(task_set, table, hashlib.sha256(b"%d" % k).digest(), 1, [8])]
    share = sum(1 for i in picks if i < 10) / len(picks)
    w_half, w_never = weights(table, ["t0", "t10"])
    expected = 10 * w_half / (10 * w_half + 40 * w_never)
    assert expected > 0.8 and abs(share - expected) < 0.05, (share, expected)
    # uniform draws (epochs, random) would give the half-solved ones 20 %
    uniform = [a.index for k in range(400) for a in assign_problems(
        task_set, "random", seed=hashlib.sha256(b"%d" % k).digest(), task_id=k, n=1, target_lengths=[8])]
    assert sum(1 for i in uniform if i < 10) / len(uniform) < 0.3


def test_adaptive_problems_whole_set_and_bounds(task_set):
    table = _table({f"t{i}": (16, 8) for i in range(3)})
    got = adaptive_problems(task_set, table, b"\x05" * 32, 50, [1])  # every problem, the fill after the draws
    assert sorted(a.index for a in got) == list(range(50)) and MAX_ADAPTIVE_DRAWS >= 50
    with pytest.raises(TaskSetError, match="cannot take 51"):
        adaptive_problems(task_set, table, b"\x05" * 32, 51, [1])
    with pytest.raises(TaskSetError, match="needs the difficulty table"):
        assign_problems(task_set, "adaptive", seed=b"\x05" * 32, task_id=1, n=2, target_lengths=[8])
    assert assign_problems(task_set, "adaptive", seed=b"\x05" * 32, task_id=1, n=2, target_lengths=[8],
                           difficulty=table) == adaptive_problems(task_set, table, b"\x05" * 32, 2, [8])


def test_table_changes_the_assignment(task_set):
    seed = hashlib.sha256(b"claim").digest()
    empty = adaptive_problems(task_set, DifficultyTable.empty(4), seed, 4, [8])
    learnt = adaptive_problems(task_set, _table({a.task_id: (32, 0) for a in empty}), seed, 4, [8])
    # the four problems drawn with no evidence, since found never solved, are not drawn again for the same seed
    assert {a.task_id for a in empty}.isdisjoint({a.task_id for a in learnt})


def test_table_size_limit_is_exact(tmp_path):
    data = _table({"x": (3, 1)}).to_bytes()
    at_limit = data + b" " * (MAX_TABLE_BYTES - len(data))  # JSON may end in whitespace
    assert DifficultyTable.from_bytes(at_limit).counts == {"x": (3 * U, U)}
    (tmp_path / DIFFICULTY_FILE).write_bytes(at_limit)
    assert table_in(tmp_path, 4).counts == {"x": (3 * U, U)}
    (tmp_path / DIFFICULTY_FILE).write_bytes(at_limit + b" ")
    assert table_in(tmp_path, 4) == DifficultyTable.empty(4)


def test_refusals_name_the_file_and_what_was_wrong(tmp_path, caplog):
    with pytest.raises(DifficultyError, match=r"^difficulty table: a JSON object expected, got list$"):
        DifficultyTable.from_bytes(b"[1]")
    doc = json.loads(_table({"x": (3, 1)}).to_bytes())
    with pytest.raises(DifficultyError, match=r"^t\.json: Value error, problem 'x': .*\(at counts\)$"):
        DifficultyTable.from_bytes(json.dumps({**doc, "counts": {"x": [1, 2]}}).encode(), name="t.json")
    with pytest.raises(DifficultyError, match=r"^t\.json: Input should be a valid integer.*\(at counts\.x\.1\)$"):
        DifficultyTable.from_bytes(json.dumps({**doc, "counts": {"x": [1, "a"]}}).encode(), name="t.json")
    path = tmp_path / DIFFICULTY_FILE
    path.write_bytes(b"[1]")
    with caplog.at_level(logging.WARNING):
        table_in(tmp_path, 4)
    assert caplog.records[0].getMessage() == (f"difficulty table refused, problems drawn with equal weights: {path}: "
                                              "a JSON object expected, got list")
    caplog.clear()
    path.write_bytes(b" " * (MAX_TABLE_BYTES + 1))
    with caplog.at_level(logging.WARNING):
        table_in(tmp_path, 4)
    assert f"{path}: {MAX_TABLE_BYTES + 1} bytes, more than the {MAX_TABLE_BYTES} a table may have" in caplog.text


def test_an_empty_table_takes_the_pools_group_size(tmp_path):
    assert table_in(tmp_path, 8).group_size == 8
    assert table_for("adaptive", tmp_path, 16).group_size == 16
    assert table_after(tmp_path, [], 6) == DifficultyTable.empty(6)


def test_cached_weights_are_kept_for_the_last_few_tables(task_set):
    ids = [t.id for t in task_set]
    first = _table({"t0": (4, 1)})
    got = cached_weights(first, task_set)
    assert got == weights(first, ids) and cached_weights(first, task_set) is got  # computed once
    for k in range(MAX_CACHED_TABLES - 1):
        cached_weights(_table({"t1": (k + 1, 0)}), task_set)
    assert cached_weights(first, task_set) is got  # still one of the last MAX_CACHED_TABLES
    cached_weights(_table({"t2": (1, 1)}), task_set)  # one more than MAX_CACHED_TABLES
    again = cached_weights(first, task_set)
    assert again == got and again is not got  # the oldest was dropped, then computed again


def test_a_table_file_is_read_once_per_version(tmp_path):
    """A worker asks for its checkpoint's table at every claim: the file is parsed once per (path, size, mtime),
    and a rewritten file, even of the same size, is read again."""
    import os

    path = tmp_path / DIFFICULTY_FILE
    path.write_bytes(_table({"x": (3, 1)}).to_bytes())
    first = table_file(tmp_path)
    assert table_file(tmp_path) is first  # the same version: not parsed again
    again = _table({"x": (3, 2)}).to_bytes()
    assert len(again) == path.stat().st_size
    before = path.stat().st_mtime_ns
    path.write_bytes(again)
    os.utime(path, ns=(before + 10**9, before + 10**9))
    assert table_file(tmp_path).counts == {"x": (3 * U, 2 * U)}
