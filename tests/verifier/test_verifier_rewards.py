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


# -- issue 22: a math answer cannot stall the validator ------------------------------------------


def test_answers_equal_polynomial_bomb_is_bounded():
    """33 characters that passed the parser's bounds and kept sympy.simplify busy > 60 s on 5e47eb6."""
    from intellect.verifier.rewards import _normalize, _parse, answers_equal, math_reward

    bomb = "(x+1)**999*(x+2)**999-(x+3)**998"
    # the bound itself: the parser refuses the expression before sympy expands anything
    assert _parse(_normalize(bomb)) is None
    assert not answers_equal(bomb, "x**2")
    assert math_reward("\\boxed{(x+1)^{999}(x+2)^{999}-(x+3)^{998}}", "x") == 0.0


def test_answers_equal_wall_clock_limit_kills_a_slow_comparison(caplog):
    """Whatever slips past the complexity bounds is cut by the judge process's wall clock and scores 0; the
    next comparison gets a fresh judge."""
    from intellect.verifier.rewards import _JUDGE, answers_equal

    answers_equal("2x", "x+x")  # the judge is up
    slow = "(x+1)**20*(x+2)**20*(x+3)**20-(x+4)**4"  # degree 64: inside the bound, not instant to simplify
    with caplog.at_level("WARNING", logger="intellect.verifier.rewards"):
        assert not answers_equal(slow, "(x+1)**20*(x+2)**20*(x+3)**20-(x+5)**4", timeout=0.01)
    assert "no verdict within" in caplog.text
    assert answers_equal("x^2+2x+1", "(x+1)^2")  # the judge restarted
    assert _JUDGE._proc is not None and _JUDGE._proc.is_alive()


def test_answers_equal_uses_math_verify_for_latex():
    from intellect.verifier.rewards import answers_equal

    assert answers_equal("\\{1,2\\}", "\\{2,1\\}")  # sets: the hand-written sympy path cannot parse them
    assert answers_equal("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}")
    assert answers_equal("0.5", "1/2") and not answers_equal("0.5", "1/3")
    assert not answers_equal("5", "6")


# -- issue 20: code rewards come from the bubblewrap sandbox -------------------------------------

_CYCLIC_PROMPT = '''
def encode_cyclic(s: str):
    groups = [s[(3 * i):min((3 * i + 3), len(s))] for i in range((len(s) + 2) // 3)]
    groups = [(group[1:] + group[0]) if len(group) == 3 else group for group in groups]
    return "".join(groups)


def decode_cyclic(s: str):
    """takes as input string encoded with encode_cyclic function. Returns decoded string."""
'''
_CYCLIC_TESTS = ["def check(candidate):\n    for s in ('abcdefg', 'hello world', 'xy'):\n"
                 "        assert candidate(encode_cyclic(s)) == s\n", "check(decode_cyclic)"]


def test_code_reward_helpers_come_from_the_prompt_not_the_completion():
    """A completion that redefines the prompt's helper (encode as identity, decode as identity) passes a
    harness that takes helpers from the completion's namespace; with the task's prompt it gets 0."""
    from intellect.verifier.rewards import code_reward

    honest = _CYCLIC_PROMPT + "    return encode_cyclic(encode_cyclic(s))\n"
    forged = "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n"
    assert code_reward(honest, _CYCLIC_TESTS, prompt=_CYCLIC_PROMPT) == 1.0
    assert code_reward(forged, _CYCLIC_TESTS) == 1.0  # the hole the prompt closes
    assert code_reward(forged, _CYCLIC_TESTS, prompt=_CYCLIC_PROMPT) == 0.0
    task = Task(id="he38", prompt=_CYCLIC_PROMPT, verifier=VerifierKind.CODE, tests=_CYCLIC_TESTS)
    assert task_reward(task, forged) == 0.0 and task_reward(task, honest) == 1.0


def test_code_reward_mbpp_setup_and_tolerances():
    task = _code(["import math", "assert math.isclose(area(2.0), 12.566, rel_tol=0.001)",
                  "assert abs(area(1) - 3.14159) < 1e-4"])
    assert task_reward(task, "```python\nimport math\ndef area(r):\n    return math.pi * r * r\n```") == 1.0
    assert task_reward(task, "```python\ndef area(r):\n    return 3 * r * r\n```") == 0.0


def test_code_reward_always_equal_object_scores_zero():
    task = _code(["assert add(2, 3) == 5"])
    forged = "```python\nclass E:\n    def __eq__(self, o):\n        return True\ndef add(a, b):\n    return E()\n```"
    assert task_reward(task, forged) == 0.0


def test_code_tasks_are_refused_where_no_sandbox_runs(monkeypatch):
    """No bubblewrap (here: the probe's answer replaced, the one thing this test changes): task_reward
    raises SandboxUnavailableError instead of scoring 0 or running the code unconfined."""
    from intellect.verifier import sandbox
    from intellect.verifier.sandbox import SandboxUnavailableError

    monkeypatch.setattr(sandbox, "_probe", lambda: ([], "bubblewrap (bwrap) is not installed"))
    with pytest.raises(SandboxUnavailableError, match="bubblewrap"):
        task_reward(_code(["assert add(2, 3) == 5"]), "```python\ndef add(a, b):\n    return a + b\n```")
    assert task_reward(_math("12"), "\\boxed{12}") == 1.0  # math tasks are unaffected


def test_task_reward_math_judge_that_cannot_start_refuses_instead_of_scoring_zero(monkeypatch):
    """A validator whose judge process cannot start must not score every honest math answer 0 (and challenge
    it): the task is refused with MathJudgeUnavailableError, as code tasks are without a sandbox."""
    import pytest

    from intellect.sdk import IntellectError
    from intellect.verifier import rewards
    from intellect.verifier.tasks import Task, VerifierKind

    judge = rewards._MathJudge()
    judge.START_TIMEOUT = 0.0  # a real judge process that is given no time to come up
    monkeypatch.setattr(rewards, "_JUDGE", judge)
    task = Task(id="m", prompt="Simplify 2x.", answer="x+x", verifier=VerifierKind.MATH)
    with pytest.raises(rewards.MathJudgeUnavailableError, match="did not start") as err:
        rewards.task_reward(task, "\\boxed{2x}")
    assert isinstance(err.value, IntellectError)
