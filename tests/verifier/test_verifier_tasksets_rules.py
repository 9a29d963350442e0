"""Every converter rule of `verifier/tasksets.py` at its edge (issue 39: the module through mutmut): each public
format's row → the exact `Task`, and each malformed row → the exact `RowError` (source, row, field, problem)."""

from __future__ import annotations

import pytest

from intellect.verifier.tasks import Task, TaskSetError
from intellect.verifier.tasksets import ConvertReport, RowError, convert

DEF_F = "def f(x):\n    return x\n"
CHECK = "def check(candidate):\n    assert candidate(1) == 1\n"


def _one(fmt: str, row: dict) -> Task:
    ts, report = convert([row], fmt, name="set", source="src")
    assert report.kept == 1 and not report.skipped
    return ts.tasks[0]


@pytest.mark.parametrize(("fmt", "row", "want"), [
    ("gsm8k", {"question": "Q?", "answer": "work\n#### 1,234."},
     Task(id="gsm8k-0", prompt="Q?", verifier="math", answer="1234", source="gsm8k")),
    ("gsm8k", {"question": "Q?", "answer": "#### 7  \n", "id": " GSM8K-12 "},
     Task(id="GSM8K-12", prompt="Q?", verifier="math", answer="7", source="gsm8k")),
    ("gsm8k", {"question": "Q?", "answer": "#### 7", "task_id": 5, "id": "x"},
     Task(id="gsm8k-5", prompt="Q?", verifier="math", answer="7", source="gsm8k")),
    ("gsm8k", {"question": "Q?", "answer": "#### 7", "problem_id": True},
     Task(id="gsm8k-0", prompt="Q?", verifier="math", answer="7", source="gsm8k")),
    ("gsm8k", {"question": "Q?", "answer": "#### 7", "id": "  "},
     Task(id="gsm8k-0", prompt="Q?", verifier="math", answer="7", source="gsm8k")),
    ("math", {"problem": "P", "solution": "so \\boxed{3} then \\boxed{4}", "type": "Algebra", "level": "Level 2"},
     Task(id="math-0", prompt="P", verifier="math", answer="4", source="math/Algebra/Level 2")),
    ("math", {"problem": "P", "solution": "\\boxed{3}", "type": "", "level": 5},
     Task(id="math-0", prompt="P", verifier="math", answer="3", source="math")),
    ("math", {"problem": "P", "solution": "\\fbox{9}", "level": "Level 1"},
     Task(id="math-0", prompt="P", verifier="math", answer="9", source="math/Level 1")),
    ("numinamath", {"problem": "P", "answer": 12, "source": "olympiads"},
     Task(id="numina-0", prompt="P", verifier="math", answer="12", source="numinamath/olympiads")),
    ("numinamath", {"problem": "P", "answer": " 2.5 ", "source": 7},
     Task(id="numina-0", prompt="P", verifier="math", answer="2.5", source="numinamath")),
    ("numinamath", {"problem": "P", "answer": "N/A", "solution": "thus \\boxed{8}"},
     Task(id="numina-0", prompt="P", verifier="math", answer="8", source="numinamath")),
    ("numinamath", {"problem": "P", "solution": "\\boxed{x+1}", "question_type": "math-word-problem"},
     Task(id="numina-0", prompt="P", verifier="math", answer="x+1", source="numinamath")),
    ("mbpp", {"text": " Return x. ", "code": "import os\ndef g():\n    pass\ndef f(x):\n    return x\n",
              "test_list": ["assert f(1) == 1", "assert f(2) == 2"], "task_id": 11},
     Task(id="mbpp-11", prompt="You are an expert Python programmer, and here is your task: Return x. Your code should "
                               "pass these tests:\n\nassert f(1) == 1\nassert f(2) == 2",
          verifier="code", tests=["assert f(1) == 1", "assert f(2) == 2"], entry_point="f", source="mbpp")),
    ("mbpp", {"prompt": "Return x.", "code": DEF_F, "test_list": ["assert f (1) == 1"],
              "test_setup_code": "import math"},
     Task(id="mbpp-0", prompt="You are an expert Python programmer, and here is your task: Return x. Your code should "
                              "pass these tests:\n\nassert f (1) == 1",
          verifier="code", tests=["import math", "assert f (1) == 1"], entry_point="f", source="mbpp")),
    ("mbpp", {"text": "T", "code": DEF_F, "test_list": ["assert f(1) == 1"], "test_setup_code": "  "},
     Task(id="mbpp-0", prompt="You are an expert Python programmer, and here is your task: T Your code should pass "
                              "these tests:\n\nassert f(1) == 1",
          verifier="code", tests=["assert f(1) == 1"], entry_point="f", source="mbpp")),
    ("humaneval", {"task_id": "HumanEval/3", "prompt": DEF_F, "test": CHECK, "entry_point": " f "},
     Task(id="HumanEval/3", prompt=DEF_F, verifier="code", tests=[CHECK, "check(f)"], entry_point="f",
          source="humaneval")),
])
def test_each_format_converts_a_row_exactly(fmt: str, row: dict, want: Task) -> None:
    assert _one(fmt, row) == want


@pytest.mark.parametrize(("fmt", "row", "field", "problem"), [
    ("gsm8k", {"answer": "#### 1"}, "question", "missing"),
    ("gsm8k", {"question": None, "answer": "#### 1"}, "question", "missing"),
    ("gsm8k", {"question": 3, "answer": "#### 1"}, "question", "expected a string, got int"),
    ("gsm8k", {"question": " \n", "answer": "#### 1"}, "question", "empty"),
    ("gsm8k", {"question": "Q", "answer": "1"}, "answer", "no final answer line '#### N'"),
    ("gsm8k", {"question": "Q", "answer": "#### ,."}, "answer", "empty final answer after '####'"),
    ("math", {"problem": "P", "solution": "no box"}, "solution", "no \\boxed{} answer"),
    ("math", {"problem": "P", "solution": "\\boxed{}"}, "solution", "no \\boxed{} answer"),
    ("numinamath", {"problem": "P", "answer": [1]}, "answer", "expected a string or number, got list"),
    ("numinamath", {"problem": "P", "answer": "none", "solution": "no box"}, "answer",
     "no answer and no \\boxed{} in 'solution'"),
    ("numinamath", {"problem": "P", "solution": 5}, "answer", "no answer and no \\boxed{} in 'solution'"),
    ("mbpp", {"text": "T", "code": DEF_F}, "test_list", "missing"),
    ("mbpp", {"text": "T", "code": DEF_F, "test_list": []}, "test_list", "expected a non-empty list of assert strings"),
    ("mbpp", {"text": "T", "code": DEF_F, "test_list": "assert f(1)"}, "test_list",
     "expected a non-empty list of assert strings"),
    ("mbpp", {"text": "T", "code": DEF_F, "test_list": ["assert f(1)", " "]}, "test_list",
     "expected a non-empty list of assert strings"),
    ("mbpp", {"text": "T", "code": DEF_F, "test_list": ["assert f(1)", 2]}, "test_list",
     "expected a non-empty list of assert strings"),
    ("mbpp", {"text": "T", "code": DEF_F, "test_list": ["assert f(1)"], "test_setup_code": 3}, "test_setup_code",
     "expected a string, got int"),
    ("mbpp", {"text": "T", "code": DEF_F, "test_list": ["assert ff(1)"]}, "code",
     "defines no function that test_list calls"),
    ("mbpp", {"code": DEF_F, "test_list": ["assert f(1)"]}, "prompt", "missing"),
    ("humaneval", {"prompt": DEF_F, "test": CHECK, "entry_point": "f g"}, "entry_point",
     "'f g' is not a Python identifier"),
    ("humaneval", {"prompt": DEF_F, "test": "assert True", "entry_point": "f"}, "test", "defines no check(candidate)"),
    ("humaneval", {"prompt": "def fx(x):\n", "test": CHECK, "entry_point": "f"}, "prompt",
     "does not define entry point 'f'"),
])
def test_each_malformed_row_names_its_field_and_problem(fmt: str, row: dict, field: str, problem: str) -> None:
    with pytest.raises(RowError) as info:
        convert([row], fmt, name="set", source="src")
    err = info.value
    assert (err.source, err.row, err.field) == ("src", 0, field)
    assert str(err) == f"src row 0 field {field!r}: {problem}"


def test_uncheckable_numinamath_rows_are_skipped_and_counted() -> None:
    rows = [{"problem": "P", "question_type": "Proof"}, {"problem": "P", "answer": "proof"},
            {"problem": "P", "answer": "notfound", "solution": "\\boxed{2}"}, {"problem": "Q", "answer": "3"}]
    ts, report = convert(rows, "numinamath", name="set")
    assert [t.answer for t in ts] == ["3"] and ts.tasks[0].id == "numina-3"
    assert (report.kept, report.skipped, report.errors) == (1, {"uncheckable (proof or no answer)": 3}, [])


def test_convert_whole_sets_errors_and_skips() -> None:
    good = {"question": "Q", "answer": "#### 1"}
    with pytest.raises(TaskSetError, match=r"^unknown dataset format 'csv'; known: gsm8k, humaneval, math, mbpp, "
                                           r"numinamath$"):
        convert([good], "csv")
    with pytest.raises(RowError, match=r"^set row 1 field '<row>': is a list, not an object$"):
        convert([good, [1]], "gsm8k", name="set")  # no source: errors name the set
    with pytest.raises(RowError, match=r"^set row 1 field 'task_id': duplicate id 'gsm8k-7' \(first at row 0\)$"):
        convert([{**good, "id": 7}, {**good, "id": 7}], "gsm8k", name="set")
    with pytest.raises(RowError, match=r"^set row 0 field 'id': String should have at most 256 characters$"):
        convert([{**good, "id": "x" * 300}], "gsm8k", name="set")
    rows = [good, {"answer": "1"}, [2], {**good, "id": 0}] + [{"question": "Q"}] * 25
    ts, report = convert(rows, "gsm8k", name="set", skip_bad=True)
    assert ts.name == "set" and [t.id for t in ts] == ["gsm8k-0"] and report.kept == 1
    assert report.skipped == {"bad question": 1, "bad <row>": 1, "bad task_id": 1, "bad answer": 25}
    assert len(report.errors) == 20 and report.errors[0] == "set row 1 field 'question': missing"
    with pytest.raises(TaskSetError, match=r"^src: no convertible gsm8k rows \(skipped \{'bad answer': 1\}\)$"):
        convert([{"question": "Q"}], "gsm8k", source="src", skip_bad=True)


def test_report_skip_counts_every_reason_and_keeps_the_first_twenty_errors() -> None:
    r = ConvertReport()
    for k in range(25):
        r.skip("a", f"e{k}")
    r.skip("b")
    assert r.skipped == {"a": 25, "b": 1} and r.errors == [f"e{k}" for k in range(20)]
