"""The task-set tools of `verifier/tasksets.py` beyond the converters (issue 39, written against mutmut's
survivors): `split` (its bounds and the sha256 rank, reimplemented here from its docstring), `merge`, `stats`
(every figure), `shuffled`, `parse_config_items`, `reasoning_gym_task_set` (a real reasoning-gym dataset) and
`read_rows`' refusals, each with its exact text."""

from __future__ import annotations

import gzip
import hashlib
import json
import random
from pathlib import Path

import pytest

from intellect.verifier.tasks import Task, TaskSet, TaskSetError
from intellect.verifier.tasksets import (
    RowError,
    merge,
    parse_config_items,
    read_rows,
    reasoning_gym_task_set,
    shuffled,
    split,
    stats,
)


def _set(n: int, name: str = "s") -> TaskSet:
    return TaskSet([Task(id=f"t{i}", prompt="p" * (i + 1), verifier="math", answer=str(i)) for i in range(n)],
                   name=name)


# ------------------------------------------------------------------------------------------ split


def _rank(ts: TaskSet, seed: int) -> list[str]:
    return [t.id for t in sorted(ts.tasks, key=lambda t: hashlib.sha256(f"{seed}\x00{t.id}".encode()).digest())]


@pytest.mark.parametrize(("n", "held_out", "k"), [
    (10, 0.1, 1), (10, 0.04, 1),  # round(0.4) = 0: at least one
    (10, 0.99, 9),  # round(9.9) = 10: at most n − 1
    (10, 0.25, 2),  # round(2.5) = 2 (Python rounds half to even)
    (10, 0.35, 4), (2, 0.5, 1), (7, 0.5, 4),
])
def test_split_takes_round_held_out_times_n_between_1_and_n_minus_1_by_the_sha256_rank(n, held_out, k):
    ts = _set(n)
    for seed in (0, 3):
        train, held = split(ts, held_out=held_out, seed=seed)
        chosen = set(_rank(ts, seed)[:k])
        assert [t.id for t in held.tasks] == [t.id for t in ts.tasks if t.id in chosen]  # the file's order
        assert [t.id for t in train.tasks] == [t.id for t in ts.tasks if t.id not in chosen]
        assert (train.name, held.name) == ("s-train", "s-heldout")


def test_split_defaults_and_refusals():
    ts = _set(20)
    _train, held = split(ts)  # held_out 0.1, seed 0
    assert [t.id for t in held.tasks] == [t.id for t in ts.tasks if t.id in set(_rank(ts, 0)[:2])]
    for bad in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(TaskSetError) as exc:
            split(ts, held_out=bad)
        assert str(exc.value) == f"held_out must be in (0, 1), got {bad}"
    with pytest.raises(TaskSetError) as exc:
        split(_set(1, name="one"))
    assert str(exc.value) == "task set 'one' has 1 task: nothing to split"
    assert len(split(_set(2), held_out=0.5)[1]) == 1  # two tasks split


# ------------------------------------------------------------------------------------------ merge, shuffle


def test_merge_keeps_order_and_names_a_duplicate_with_both_sets():
    a, b = _set(2, name="a"), TaskSet([Task(id="x", prompt="q", verifier="math", answer="1")], name="b")
    m = merge([a, b], "ab")
    assert [t.id for t in m.tasks] == ["t0", "t1", "x"] and m.name == "ab"
    with pytest.raises(TaskSetError) as exc:
        merge([a, b, _set(1, name="c")], "abc")
    assert str(exc.value) == "task id 't0' is in both 'a' and 'c'"


def test_shuffled_is_the_seeded_shuffle_and_keeps_the_name():
    ts = _set(12)
    want = list(ts.tasks)
    random.Random(5).shuffle(want)
    got = shuffled(ts, 5)
    assert got.tasks == want and got.name == "s" and shuffled(ts, 6).tasks != want


# ------------------------------------------------------------------------------------------ stats


def test_stats_reports_every_figure():
    tasks = [Task(id="a", prompt="xx", verifier="math", answer="1", source="gsm8k", difficulty=0.25),
             Task(id="b", prompt="xxxx", verifier="math", answer="1", source="math", difficulty=0.75),
             Task(id="c", prompt="x", verifier="code", tests=["assert True"], source="math"),
             Task(id="d", prompt="xxxxxxx", verifier="math", answer="1", source="math", difficulty=0.5)]
    ts = TaskSet(tasks, name="mix")
    assert stats(ts) == {
        "name": "mix", "tasks": 4, "sha256": ts.digest(),
        "by_verifier": {"math": 3, "code": 1},
        "by_source": {"math": 3, "gsm8k": 1},  # most common first
        "prompt_chars": {"min": 1, "median": 4, "max": 7},  # sorted 1, 2, 4, 7: the upper median
        "difficulty": {"filtered": 3, "mean": 0.5, "min": 0.25, "max": 0.75},
    }
    assert list(stats(ts)["by_source"]) == ["math", "gsm8k"]
    plain = stats(_set(3))
    assert "difficulty" not in plain and plain["prompt_chars"] == {"min": 1, "median": 2, "max": 3}


# ------------------------------------------------------------------------------------------ config items


def test_parse_config_items_reads_json_values_else_text():
    assert parse_config_items(["a=1", " b =x", "c= [1, 2]", "d=", "e=a=b", 'f="q"', "g=true"]) == {
        "a": 1, "b": "x", "c": [1, 2], "d": "", "e": "a=b", "f": "q", "g": True}
    assert parse_config_items([]) == {}
    for bad in ("nokey", "=1", "  =1"):
        with pytest.raises(TaskSetError) as exc:
            parse_config_items([bad])
        assert str(exc.value) == f"config item {bad!r}: expected key=value"


# ------------------------------------------------------------------------------------------ reasoning-gym


def test_reasoning_gym_task_set_is_the_datasets_entries_as_math_tasks():
    import reasoning_gym

    ts = reasoning_gym_task_set("basic_arithmetic", 3, seed=4)
    entries = list(reasoning_gym.create_dataset("basic_arithmetic", size=3, seed=4))
    assert ts.name == "rg-basic_arithmetic-4"
    assert ts.tasks == [Task(id=f"rg-basic_arithmetic-4-{i}", prompt=e["question"], verifier="math",
                             answer=str(e["answer"]).strip(), source="reasoning-gym/basic_arithmetic")
                        for i, e in enumerate(entries)]
    assert reasoning_gym_task_set("basic_arithmetic", 2, name="mine").name == "mine"
    assert reasoning_gym_task_set("basic_arithmetic", 2).tasks[0].id == "rg-basic_arithmetic-0-0"  # seed 0
    small = reasoning_gym_task_set("basic_arithmetic", 2, config={"min_terms": 2, "max_terms": 2})
    assert small.tasks == reasoning_gym_task_set("basic_arithmetic", 2, config={"min_terms": 2, "max_terms": 2}).tasks


def test_reasoning_gym_refusals_name_the_dataset_and_config():
    with pytest.raises(TaskSetError) as exc:
        reasoning_gym_task_set("no_such_dataset", 2)
    assert str(exc.value).startswith("reasoning-gym dataset 'no_such_dataset' with config {}: ")
    with pytest.raises(TaskSetError) as exc:
        reasoning_gym_task_set("basic_arithmetic", 2, config={"no_such_key": 1})
    assert str(exc.value).startswith("reasoning-gym dataset 'basic_arithmetic' with config {'no_such_key': 1}: ")


@pytest.mark.parametrize(("entry", "field", "problem"), [
    ({"question": "  ", "answer": "1"}, "question", "missing or empty"),
    ({"answer": "1"}, "question", "missing or empty"),
    ({"question": "Q", "answer": None}, "answer", "missing or empty"),
    ({"question": "Q", "answer": " "}, "answer", "missing or empty"),
    ({"question": "Q", "answer": "}"}, "answer", "'}' is not an answer the math verifier can check"),
])
def test_reasoning_gym_entries_the_pool_cannot_use_are_refused_by_row(monkeypatch, entry, field, problem):
    """Entries reasoning-gym's datasets do not produce today (every dataset tried gives a question and an answer
    the math verifier reads): the library's factory returns them here, so each refusal is seen with its text."""
    import reasoning_gym

    monkeypatch.setattr(reasoning_gym, "create_dataset", lambda *_a, **_k: [{"question": "ok", "answer": "2"}, entry])
    with pytest.raises(RowError) as row:
        reasoning_gym_task_set("basic_arithmetic", 2)
    assert (row.value.source, row.value.row, row.value.field) == ("reasoning-gym:basic_arithmetic", 1, field)
    assert problem in str(row.value)


# ------------------------------------------------------------------------------------------ read_rows


def test_read_rows_formats_and_refusals(tmp_path: Path):
    rows = [{"q": "a"}, {"q": "b"}]
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "r.json").write_text(json.dumps(rows))
    (tmp_path / "r.json.gz").write_bytes(gzip.compress(json.dumps(rows).encode()))
    (tmp_path / "r.jsonl.gz").write_bytes(gzip.compress((tmp_path / "r.jsonl").read_bytes()))
    for name in ("r.jsonl", "r.json", "r.json.gz", "r.jsonl.gz"):
        assert read_rows(tmp_path / name) == rows, name

    def refused(name: str, data: bytes) -> str:
        (tmp_path / name).write_bytes(data)
        with pytest.raises(TaskSetError) as exc:
            read_rows(tmp_path / name)
        return str(exc.value)

    missing = tmp_path / "none.jsonl"
    with pytest.raises(TaskSetError) as exc:
        read_rows(missing)
    assert str(exc.value) == f"dataset file {missing} does not exist"
    assert refused("o.json", b'{"q": 1}') == f"dataset {tmp_path / 'o.json'}: a .json dataset must be a list of rows"
    assert refused("b.json", b"[1,").startswith(f"dataset {tmp_path / 'b.json'}: not JSON: ")
    assert refused("u.jsonl", b"\xff\n").startswith(f"dataset {tmp_path / 'u.jsonl'}: not readable UTF-8 text: ")
    assert refused("g.jsonl.gz", b"not gzip").startswith(f"dataset {tmp_path / 'g.jsonl.gz'}: not readable UTF-8")
    assert refused("p.parquet", b"PAR1 no").startswith(f"dataset {tmp_path / 'p.parquet'}: not a readable Parquet file")
