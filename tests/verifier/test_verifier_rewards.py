"""Reward verifiers: math answers, code in the sandbox, length control."""

from __future__ import annotations

import pytest

from intellect.verifier.rewards import (
    answers_equal,
    extract_answer,
    extract_code,
    length_penalty,
    reward,
    task_reward,
    thinking_budget_suffix,
)
from intellect.verifier.tasks import Task, VerifierKind


def _math(answer: str) -> Task:
    return Task(id="m", prompt="p", verifier=VerifierKind.MATH, answer=answer)


def _code(tests: list[str]) -> Task:
    return Task(id="c", prompt="p", verifier=VerifierKind.CODE, tests=tests)


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("so the answer is \\boxed{42}.", "42"),
        ("\\boxed{1} then \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("nested \\boxed{\\frac{\\sqrt{2}}{2}}", "\\frac{\\sqrt{2}}{2}"),
        ("<think>maybe 7</think> it is 12", "12"),
        ("total: 1,234 apples", "1,234"),
        ("no number here", None),
        ("unbalanced \\boxed{12", "12"),  # falls back to the last number
    ],
)
def test_extract_answer_boxed_or_last_number(completion, expected):
    assert extract_answer(completion) == expected


@pytest.mark.parametrize(
    ("given", "reference"),
    [
        ("\\frac{1}{2}", "0.5"),
        ("\\dfrac{3}{4}", "3/4"),
        ("1,234", "1234"),
        ("2\\sqrt{2}", "sqrt(8)"),
        ("x^2+2x+1", "(x+1)^2"),
        ("x = 5", "5"),
        ("\\pi", "3.14159265358979"),
        ("50\\%", "50"),
        ("10^{3}", "1000"),
        ("\\text{7}", "7"),
    ],
)
def test_answers_equal_equivalent_forms(given, reference):
    assert answers_equal(given, reference)


@pytest.mark.parametrize(
    ("given", "reference"),
    [("3", "4"), ("x^2", "x^3"), ("0.5001", "0.5"), ("", "0"), ("abc", "7"), ("oo", "1")],
)
def test_answers_equal_different_answers(given, reference):
    assert not answers_equal(given, reference)


@pytest.mark.parametrize(
    "evil",
    ["9^9^9", "2^(10^10)", "((2^1000)^1000)^1000", "__import__('os').system('true')", "exec('1')", "a" * 500],
)
def test_answers_equal_adversarial_is_fast_and_false(evil):
    assert not answers_equal(evil, "1")


def test_task_reward_math_is_one_or_zero():
    assert task_reward(_math("12"), "... \\boxed{12}") == 1.0
    assert task_reward(_math("12"), "... \\boxed{13}") == 0.0
    assert task_reward(_math("12"), "") == 0.0


def test_length_penalty_and_budget_suffix():
    assert length_penalty(1000, 1000) == 0.0
    assert length_penalty(1000, 1500) == pytest.approx(0.15)
    assert length_penalty(1000, 500, alpha=0.001) == pytest.approx(0.5)
    assert "1000 tokens" in thinking_budget_suffix(1000)
    with pytest.raises(ValueError):
        thinking_budget_suffix(0)
    with pytest.raises(ValueError):
        length_penalty(1, 2, alpha=-1)


def test_reward_total_is_task_minus_penalty():
    r = reward(_math("3"), "\\boxed{3}", target_len=100, completion_len=130, alpha=0.001)
    assert r.task_reward == 1.0 and r.length_penalty == pytest.approx(0.03)
    assert r.total == pytest.approx(0.97)


def test_extract_code_last_fenced_block():
    text = "```python\ndef f(): return 1\n```\nbetter:\n```python\ndef f(): return 2\n```"
    assert extract_code(text).strip() == "def f(): return 2"
    assert extract_code("def g(): pass").strip() == "def g(): pass"


def test_task_reward_code_passes_and_fails():
    task = _code(["assert add(2, 3) == 5", "assert add(-1, 1) == 0"])
    assert task_reward(task, "```python\ndef add(a, b):\n    return a + b\n```") == 1.0
    assert task_reward(task, "```python\ndef add(a, b):\n    return a - b\n```") == 0.0
    assert task_reward(task, "```python\nimport os\nos._exit(0)\n```") == 0.0
