"""Task loaders (NuminaMath-1.5, Deepscaler, SYNTHETIC-1 shapes), the synthetic generator, filtering."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from intellect.agents.tasks import (
    filter_by_difficulty,
    load_deepscaler,
    load_numinamath,
    load_synthetic1,
    select_by_rate,
    synthetic_task_set,
)
from intellect.verifier.rewards import task_reward
from intellect.verifier.tasks import Task, TaskSet, TaskSetError, VerifierKind


def test_synthetic_task_set_seeded_and_verifiable() -> None:
    a = synthetic_task_set(60, seed=5, kinds=("arithmetic", "word", "code"))
    b = synthetic_task_set(60, seed=5, kinds=("arithmetic", "word", "code"))
    assert a.digest() == b.digest()
    assert a.digest() != synthetic_task_set(60, seed=6, kinds=("arithmetic", "word", "code")).digest()
    kinds = {t.source for t in a}
    assert kinds == {"synthetic/arithmetic", "synthetic/word", "synthetic/code"}
    for task in a:  # every generated task is solvable by its own reference
        if task.verifier is VerifierKind.MATH:
            assert task_reward(task, f"The answer is \\boxed{{{task.answer}}}") == 1.0
            assert task_reward(task, "\\boxed{-12345}") == 0.0


def test_synthetic_code_tasks_pass_reference_solution() -> None:
    solutions = {
        "reverse_text": "def reverse_text(s):\n    return s[::-1]\n",
        "sum_list": "def sum_list(xs):\n    return sum(xs)\n",
        "max_of": "def max_of(xs):\n    return max(xs)\n",
    }
    tasks = [t for t in synthetic_task_set(20, seed=1, kinds=("code",)) if t.entry_point in solutions]
    assert tasks
    for task in tasks:
        code = solutions[task.entry_point]  # type: ignore[index]
        assert task_reward(task, f"```python\n{code}```") == 1.0
        assert task_reward(task, "```python\ndef nothing():\n    pass\n```") == 0.0


def test_synthetic_task_set_heldout_disjoint_and_bad_kind() -> None:
    train = synthetic_task_set(80, seed=0, max_operand=9, ops=("+",))
    held = synthetic_task_set(0 + 20, seed=1, max_operand=9, ops=("+",), exclude_prompts=[t.prompt for t in train])
    assert not {t.prompt for t in train} & {t.prompt for t in held}
    with pytest.raises(ValueError, match="unknown synthetic task kinds"):
        synthetic_task_set(3, kinds=("poetry",))
    with pytest.raises(ValueError, match="space exhausted"):
        synthetic_task_set(200, max_operand=3, ops=("+",))


def test_load_numinamath_parquet_skips_proofs(tmp_path: Path) -> None:
    rows = [
        {"problem": "Compute 1+1.", "solution": "2", "answer": "2", "problem_type": "Algebra",
         "question_type": "math-word-problem", "source": "amc"},
        {"problem": "Prove x.", "solution": "...", "answer": "proof", "problem_type": "Algebra",
         "question_type": "proof", "source": "olympiads"},
        {"problem": "Find y.", "solution": "...", "answer": "", "problem_type": "Algebra",
         "question_type": "math-word-problem", "source": "cn_k12"},
        {"problem": "Find $x$ with $x^2=4$, $x>0$.", "solution": "...", "answer": "2",
         "problem_type": "Algebra", "question_type": "math-word-problem", "source": "cn_k12"},
    ]
    path = tmp_path / "numina.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    ts, report = load_numinamath(path)
    assert [t.prompt for t in ts] == ["Compute 1+1.", "Find $x$ with $x^2=4$, $x>0$."]
    assert report.kept == 2 and sum(report.skipped.values()) == 2
    assert all(t.source.startswith("numinamath-1.5/") for t in ts)
    # the loaded set saves and reloads as a task set file
    assert TaskSet.load(ts.save(tmp_path / "numina-tasks.jsonl")).digest() == ts.digest()


def test_load_deepscaler_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "deepscaler.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"problem": "What is 3*4?", "answer": "12", "solution": "..."},
        {"problem": "Nothing", "answer": None, "solution": "..."},
    ]))
    ts, report = load_deepscaler(path)
    assert len(ts) == 1 and ts.tasks[0].answer == "12" and report.skipped
    with pytest.raises(TaskSetError, match="line 1: not JSON"):
        (tmp_path / "bad.jsonl").write_text("{nope\n")
        load_deepscaler(tmp_path / "bad.jsonl")


def test_load_synthetic1_math_and_code(tmp_path: Path) -> None:
    rows = [
        {"problem_id": "s1-math", "prompt": "Evaluate 2^5.", "task_type": "verifiable_math",
         "verification_info": json.dumps({"ground_truth": "32"})},
        {"problem_id": "s1-code", "prompt": "Write square(x).", "task_type": "verifiable_code",
         "verification_info": json.dumps({"language": "python", "test_cases": [
             {"type": "function_call", "fn_name": "square", "input": [3], "output": [9]},
             {"type": "function_call", "fn_name": "square", "input": [-2], "output": [4]}]})},
        {"problem_id": "s1-stdin", "prompt": "Read n, print n.", "task_type": "verifiable_code",
         "verification_info": json.dumps({"language": "python", "test_cases": [
             {"type": "stdin_stdout", "input": "3\n", "output": "3\n"}]})},
        {"problem_id": "s1-judge", "prompt": "Explain.", "task_type": "llm_judgeable_groundtruth_similarity",
         "verification_info": "{}"},
    ]
    path = tmp_path / "synthetic1.json"
    path.write_text(json.dumps(rows))
    ts, report = load_synthetic1(path)
    assert [t.id for t in ts] == ["s1-math", "s1-code"]
    code = ts["s1-code"]
    assert code.entry_point == "square"
    assert task_reward(code, "```python\ndef square(x):\n    return x * x\n```") == 1.0
    assert task_reward(code, "```python\ndef square(x):\n    return x + x\n```") == 0.0
    assert report.skipped == {"code row without python function/assert tests": 1,
                              "unsupported task_type llm_judgeable_groundtruth_similarity": 1}


def test_filter_by_difficulty_keeps_partially_solved(warm_dir: Path, learn_tasks) -> None:
    from intellect.agents.engines import SamplingParams, TransformersEngine
    from intellect.verifier.submission import prompt_text

    # the warm model solves the additions it was warm-started on now and then, these never
    words = [Task(id=f"huge-{i}", prompt=f"What is {i} + 987654321?", verifier=VerifierKind.MATH,
                  answer=str(i + 987654321)) for i in range(3)]
    mixed = TaskSet([*list(learn_tasks)[:6], *words], name="mixed")
    engine = TransformersEngine(warm_dir)
    params = SamplingParams(max_tokens=6, temperature=1.0, seed=0, capture_proofs=False)
    calls: list[tuple[int, int]] = []
    kept, rates = filter_by_difficulty(mixed, engine, params, samples=16, low=0.1, high=0.8,
                                       prompt_format=prompt_text, batch_prompts=4,
                                       progress=lambda done, total: calls.append((done, total)))
    assert calls == [(4, 9), (8, 9), (9, 9)]
    assert set(rates) == {t.id for t in mixed}
    assert all(rates[t.id] == 0.0 for t in words)
    assert kept.tasks and all(0.1 <= (t.difficulty or 0) <= 0.8 for t in kept)
    assert {t.id for t in kept} == {i for i, r in rates.items() if 0.1 <= r <= 0.8}
    with pytest.raises(TaskSetError, match="kept no task"):
        filter_by_difficulty(TaskSet(words), engine, params, samples=4)


def test_select_by_rate_needs_a_rate_for_every_task(learn_tasks) -> None:
    """A stored copy of the filter's rates replays its selection, and one that misses a task is refused."""
    tasks = TaskSet(list(learn_tasks)[:4], name="four")
    rates = {t.id: r for t, r in zip(tasks, (0.0, 0.25, 0.5, 1.0), strict=True)}
    kept = select_by_rate(tasks, rates, 0.1, 0.8)
    assert [(t.id, t.difficulty) for t in kept] == [(t.id, rates[t.id]) for t in list(tasks)[1:3]]
    with pytest.raises(TaskSetError, match="no solve rate for 1 task"):
        select_by_rate(tasks, {k: v for k, v in rates.items() if k != tasks.tasks[0].id}, 0.1, 0.8)
    with pytest.raises(TaskSetError, match="kept no task"):
        select_by_rate(tasks, rates, 0.6, 0.9)
