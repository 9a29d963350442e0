"""The task-set file formats at their edges (issue 39: `verifier/tasks.py` through mutmut): the canonical JSONL a
pool's task-set CID names, the Parquet form, and every refusal naming the file and what was wrong."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from intellect.verifier.tasks import TASKSET_SCHEMA, Task, TaskSet, TaskSetError, _short

MATH = Task(id="m1", prompt="What is 1 + 1?", verifier="math", answer="2", difficulty=0.5, source="unit")
CODE = Task(id="c1", prompt="Write f.", verifier="code", tests=["assert f() == 1"], entry_point="f")


def _set() -> TaskSet:
    return TaskSet([MATH, CODE], name="io")


def test_canonical_jsonl_bytes_and_digest():
    data = _set().to_jsonl_bytes()
    assert data.split(b"\n") == [
        b'{"name": "io", "schema": "intellect.taskset/v1"}',
        b'{"answer": "2", "difficulty": 0.5, "id": "m1", "prompt": "What is 1 + 1?", "source": "unit", '
        b'"verifier": "math"}',
        b'{"entry_point": "f", "id": "c1", "prompt": "Write f.", "source": "unknown", "tests": ["assert f() == 1"], '
        b'"verifier": "code"}',
        b"",
    ]
    import hashlib

    assert _set().digest() == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_save_and_load_round_trip(tmp_path: Path, suffix: str):
    path = _set().save(tmp_path / f"set{suffix}")
    assert path == tmp_path / f"set{suffix}"
    back = TaskSet.load(path)
    assert back.tasks == [MATH, CODE] and back.name == "io" and back.digest() == _set().digest()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        meta = pq.read_table(path).schema.metadata
        assert meta[b"schema"] == TASKSET_SCHEMA.encode() and meta[b"name"] == b"io"


def test_jsonl_header_name_and_default_name():
    body = b"\n".join(_set().to_jsonl_bytes().split(b"\n")[1:])
    assert TaskSet.from_bytes(b'{"schema": "intellect.taskset/v1"}\n' + body, name="bafy").name == "bafy"
    assert TaskSet.from_bytes(_set().to_jsonl_bytes(), name="bafy").name == "io"
    # blank lines anywhere are skipped
    assert TaskSet.from_bytes(b"\n  \n" + _set().to_jsonl_bytes() + b"\n\n").tasks == [MATH, CODE]


@pytest.mark.parametrize(("data", "message"), [
    ("text", r"^task set 'src': expected bytes, got str$"),
    (b"\xff\xfe", r"^task set 'src' is not UTF-8: 'utf-8' codec can't decode"),
    (b" \n\t\n", r"^task set 'src' is empty$"),
    (b"{nope\n", r"^task set 'src': header line is not JSON: "),
    (b"[1]\n", r"^task set 'src': first line must be a header with a 'schema' field$"),
    (b'{"name": "x"}\n', r"^task set 'src': first line must be a header with a 'schema' field$"),
    (b'{"schema": "intellect.taskset/v9"}\n', r"^task set 'src': unknown schema 'intellect.taskset/v9' "
                                              r"\(this reader knows intellect.taskset/v1\)$"),
    (b'{"schema": "intellect.taskset/v1", "name": 3}\n', r"^task set 'src': header 'name' must be a string, got int$"),
    (b'{"schema": "intellect.taskset/v1"}\n{"id": "a"}\n', r"^task set 'src' line 2: "),
    (b'{"schema": "intellect.taskset/v1"}\n', r"^task set 'src': task set 'src' is empty$"),
])
def test_jsonl_refusals_name_the_source_and_the_fault(data, message):
    with pytest.raises(TaskSetError, match=message):
        TaskSet.from_bytes(data, name="src")  # type: ignore[arg-type]


def test_jsonl_refusal_without_a_name_says_taskset():
    with pytest.raises(TaskSetError, match=r"^task set 'taskset' is empty$"):
        TaskSet.from_bytes(b"\n")


def test_jsonl_duplicate_ids_name_the_source_and_the_header_name():
    line = json.dumps(MATH.model_dump(mode="json", exclude_none=True)).encode()
    data = b'{"schema": "intellect.taskset/v1", "name": "hdr"}\n' + line + b"\n" + line + b"\n"
    with pytest.raises(TaskSetError, match=r"^task set 'src': task set 'hdr' has duplicate task id 'm1'$"):
        TaskSet.from_bytes(data, name="src")


def test_a_long_unknown_schema_is_quoted_short():
    long = "x" * 200
    with pytest.raises(TaskSetError, match=r"unknown schema '" + "x" * 79 + r"\.\.\. \(this reader"):
        TaskSet.from_bytes(json.dumps({"schema": long}).encode() + b"\n", name="src")
    assert _short("abc") == "'abc'" and _short("y" * 100, limit=10) == "'yyyyyyyyy..."
    assert _short("y" * 8, limit=10) == "'yyyyyyyy'"  # exactly the limit: kept whole
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert _short(deep) == "<deeply nested list>"


def test_load_refusals(tmp_path: Path):
    with pytest.raises(TaskSetError, match=r"^task set file .*missing\.jsonl does not exist$"):
        TaskSet.load(tmp_path / "missing.jsonl")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(TaskSetError, match=r"bad\.parquet: not a readable Parquet file: "):
        TaskSet.load(tmp_path / "bad.parquet")
    (tmp_path / "named.jsonl").write_bytes(_set().to_jsonl_bytes().replace(b'"name": "io", ', b""))
    assert TaskSet.load(tmp_path / "named.jsonl").name == "named"  # no header name: the file's stem


def _parquet(path: Path, rows: list[dict], meta: dict[str, str] | None) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows)
    if meta is not None:
        table = table.replace_schema_metadata(meta)
    pq.write_table(table, path)
    return path


def test_parquet_refusals_and_defaults(tmp_path: Path):
    rows = [t.model_dump(mode="json") for t in (MATH, CODE)]  # None cells (a code task's answer) are dropped
    ok = _parquet(tmp_path / "plain.parquet", rows, {"schema": TASKSET_SCHEMA})
    got = TaskSet.load(ok)
    assert got.tasks == [MATH, CODE] and got.name == "plain"
    no_meta = _parquet(tmp_path / "nometa.parquet", rows, None)
    with pytest.raises(TaskSetError, match=r"nometa\.parquet: unknown schema None \(this reader knows "
                                           r"intellect\.taskset/v1\)$"):
        TaskSet.load(no_meta)
    other = _parquet(tmp_path / "other.parquet", rows, {"schema": "intellect.taskset/v2"})
    with pytest.raises(TaskSetError, match=r"other\.parquet: unknown schema 'intellect\.taskset/v2'"):
        TaskSet.load(other)
    bad_row = _parquet(tmp_path / "badrow.parquet", [rows[0], {"id": "x", "prompt": "p", "verifier": "math"}],
                       {"schema": TASKSET_SCHEMA})
    with pytest.raises(TaskSetError, match=r"badrow\.parquet row 1 \(columns id, prompt, verifier, answer, tests, "
                                           r"entry_point, difficulty, source\): (?s:.*)math task 'x' has no answer"):
        TaskSet.load(bad_row)
    wide = _parquet(tmp_path / "wide.parquet", [{**rows[0], **{f"c{i:02d}": i for i in range(14)}}],
                    {"schema": TASKSET_SCHEMA})  # 22 columns: the message names the first 20
    with pytest.raises(TaskSetError, match=r"wide\.parquet row 0 \(columns id, prompt, verifier, answer, tests, "
                                           r"entry_point, difficulty, source, c00, (c\d\d, ){10}c11\): "):
        TaskSet.load(wide)
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows).replace_schema_metadata({b"schema": b"\xff"})
    pq.write_table(table, tmp_path / "latin.parquet")
    with pytest.raises(TaskSetError, match=r"latin\.parquet: Parquet metadata is not UTF-8: "):
        TaskSet.load(tmp_path / "latin.parquet")
