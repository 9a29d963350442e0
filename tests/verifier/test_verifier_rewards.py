"""Reward verifiers: math answers, code in the sandbox, length control."""

from __future__ import annotations

import time

import pytest

from intellect.verifier.rewards import (
    answers_equal,
    applied_length_penalty,
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


def test_unsolved_completion_carries_no_length_penalty():
    """Issue 17: a wrong answer scores 0 at any length (its length is no learning signal)."""
    for n in (1, 100, 130, 5000):
        r = reward(_math("3"), "\\boxed{4}", target_len=100, completion_len=n, alpha=0.001)
        assert (r.task_reward, r.length_penalty, r.total) == (0.0, 0.0, 0.0)
    assert applied_length_penalty(1.0, 100, 130, 0.001) == pytest.approx(0.03)
    assert applied_length_penalty(0.0, 100, 130, 0.001) == 0.0
    assert applied_length_penalty(1.0, None, 130, 0.001) == 0.0
    with pytest.raises(ValueError):
        applied_length_penalty(0.0, 100, 130, -1.0)


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


def _judged(given, reference, **limits):
    """(outcome, budget) of one comparison under a fresh budget with `limits`."""
    from intellect.verifier.rewards import JudgeBudget, compare_answers

    budget = JudgeBudget(**limits)
    outcome, judged = compare_answers(given, reference, judge=budget)
    assert judged  # these answers are not decided by the fast path
    return outcome, budget


@pytest.fixture
def busy_cores():
    """Two processes spinning on the CPU (the machine under load) for the length of a test."""
    import subprocess
    import sys

    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield
    for p in procs:
        p.kill()
        p.wait()


def test_judge_limit_is_a_call_count_the_same_under_load_and_in_a_fresh_judge(busy_cores):
    """The judge's limit that decides a score is deterministic: a comparison's Python call count. At the exact
    boundary (one call short of what the comparison needs) the outcome is OVER_BUDGET, at the count itself
    EQUAL, with two cores spinning, after unrelated comparisons, and in a second judge process alike. (The
    2 s wall clock of 5e47eb6 decided this by the machine's speed and load.)"""
    from intellect.verifier import rewards
    from intellect.verifier.rewards import Judgement

    given, reference = "x^2+2x+1", "(x+1)^2"
    outcome, budget = _judged(given, reference)
    need = budget.fuel_used
    assert outcome is Judgement.EQUAL and 1_000 < need < rewards.JUDGE_FUEL
    for _ in range(2):
        assert _judged(given, reference, fuel=need - 1)[0] is Judgement.OVER_BUDGET
        at, spent = _judged(given, reference, fuel=need)
        assert at is Judgement.EQUAL and spent.fuel_used == need
        _judged("\\{1,2\\}", "\\{2,1\\}")  # other work in between leaves no trace in the next comparison
    over, spent = _judged(given, reference, fuel=need - 1)
    assert over is Judgement.OVER_BUDGET and spent.fuel_used == need - 1 and spent.outcomes == {"over_budget": 1}

    fresh = rewards._MathJudge()  # another process, started under load
    try:
        b = rewards.JudgeBudget(fuel=need)
        assert fresh.judge(given, reference, b) is Judgement.EQUAL and b.fuel_used == need
        assert fresh.judge(given, reference, rewards.JudgeBudget(fuel=need - 1)) is Judgement.OVER_BUDGET
    finally:
        fresh._stop()


def test_judge_over_budget_scores_zero_and_the_polynomial_is_over_budget_everywhere():
    """A 4-variable degree-24 quotient passes the parser's bounds; its comparison is cut by the call count
    (deterministic: OVER_BUDGET, scored 0 on every machine), not by a clock."""
    from intellect.verifier.rewards import JUDGE_FUEL, Judgement, math_score

    slow = ("(a+b+c+d+1)^{16}/(a-b)^{8}", "(a+b+c+d+2)^{16}/(a+b)^{8}")
    outcome, budget = _judged(*slow, cpu_per_call_s=60.0)  # a CPU limit far beyond what the count allows
    assert outcome is Judgement.OVER_BUDGET and budget.fuel_used == JUDGE_FUEL
    assert math_score(f"\\boxed{{{slow[0]}}}", slow[1]) == (0.0, Judgement.OVER_BUDGET)


def test_judge_cut_by_cpu_or_wall_clock_is_unjudgeable_and_the_judge_lives_on(caplog):
    """What the call count does not see (polynomial arithmetic spends microseconds per call) is cut by the
    machine-dependent backstops: UNJUDGEABLE, scored 0 here; the judge process itself stays up."""
    from intellect.verifier import rewards
    from intellect.verifier.rewards import Judgement

    slow = ("(a+b+c+d+1)^{16}/(a-b)^{8}", "(a+b+c+d+2)^{16}/(a+b)^{8}")
    with caplog.at_level("WARNING", logger="intellect.verifier.rewards"):
        outcome, budget = _judged(*slow, fuel=10**12, cpu_per_call_s=0.05)
        assert outcome is Judgement.UNJUDGEABLE and budget.outcomes == {"unjudgeable": 1}
        pids = rewards._JUDGE.pids()
        assert _judged(*slow, fuel=10**12, wall_per_call_s=0.05)[0] is Judgement.UNJUDGEABLE
    assert "unjudgeable" in caplog.text
    assert pids and set(pids) <= set(rewards._JUDGE.pids())  # the forks were killed, not the judges
    assert _judged("x^2+2x+1", "(x+1)^2")[0] is Judgement.EQUAL


def test_a_slow_submission_holds_one_judge_and_another_submission_is_judged_meanwhile():
    """The judges are a pool: while one thread's comparison runs to its CPU backstop, another thread's comparison
    gets a verdict from the other judge (it is done before the slow one is)."""
    import threading

    from intellect.verifier import rewards
    from intellect.verifier.rewards import Judgement

    assert rewards.JUDGE_PROCESSES >= 2
    _judged("2x", "x+x")
    _judged("3x", "x+2x")
    slow: list = []
    t = threading.Thread(target=lambda: slow.append(_judged("(a+b+c+d+1)^{16}/(a-b)^{8}", "(a+b+c+d+2)^{16}/(a+b)^{8}",
                                                            fuel=10**12, cpu_per_call_s=3.0)[0]))
    t.start()
    try:
        # the slow comparison has taken a judge before the fast one asks (not a race on thread start-up)
        deadline = time.monotonic() + 60
        while rewards._JUDGE._free.qsize() == rewards.JUDGE_PROCESSES and not slow and time.monotonic() < deadline:
            time.sleep(0.01)
        assert rewards._JUDGE._free.qsize() == rewards.JUDGE_PROCESSES - 1 and not slow
        assert _judged("x^2+2x+1", "(x+1)^2")[0] is Judgement.EQUAL  # served by the other judge
        assert not slow  # ... while the slow comparison still holds its own (3 s of CPU to its backstop)
    finally:
        t.join()
    assert slow == [Judgement.UNJUDGEABLE]


def _slow_group(n):
    from intellect.verifier.tasks import Task, VerifierKind

    task = Task(id="poly", prompt="p", verifier=VerifierKind.MATH, answer="(a+b+c+d+2)^{16}/(a+b)^{8}")
    return task, [f"\\boxed{{(a+b+c+d+1)^{{16}}/(a-b)^{{{k}}}}}" for k in range(1, n + 1)]


def test_a_submission_of_slow_answers_spends_at_most_its_judge_calls():
    """A stranger's file full of slow answers holds the (serialised) judge for a bounded number of comparisons:
    beyond the submission's judge calls every answer is OVER_BUDGET without a judge run, on the worker and
    the validator alike (which answers reach the judge is decided by the pure fast path)."""
    from intellect.verifier.rewards import JudgeBudget
    from intellect.verifier.submission import score_group

    task, texts = _slow_group(12)
    budget = JudgeBudget(calls=3, fuel=20_000)
    scored = score_group(task, texts, [1] * len(texts), None, 0.0, judge=budget)
    assert [tr for tr, *_ in scored] == [0.0] * 12
    assert budget.invocations == 3 and budget.calls == 0
    assert budget.outcomes == {"over_budget": 12} and budget.fuel_used == 3 * 20_000
    # a fresh budget, as the validator's own: the same invocations, the same scores
    again = JudgeBudget(calls=3, fuel=20_000)
    assert score_group(task, texts, [1] * len(texts), None, 0.0, judge=again) == scored and again.stats() == \
        {**budget.stats(), "cpu_used_s": again.stats()["cpu_used_s"]}


def test_a_submission_of_slow_answers_spends_at_most_its_judge_cpu():
    """Answers cut by the CPU backstop: once the submission's judge CPU is spent, later answers are UNJUDGEABLE
    without a judge run; the invocations are bounded by (submission CPU / per-comparison CPU) + 1."""
    import math

    from intellect.verifier.rewards import JudgeBudget
    from intellect.verifier.submission import score_group

    task, texts = _slow_group(40)
    budget = JudgeBudget(fuel=10**12, cpu_per_call_s=0.1, cpu_s=0.25)
    scored = score_group(task, texts, [1] * len(texts), None, 0.0, judge=budget)
    assert [tr for tr, *_ in scored] == [0.0] * 40 and budget.outcomes == {"unjudgeable": 40}
    assert 1 <= budget.invocations <= math.ceil(0.25 / 0.1) + 1  # each run spent >= 0.1 s of the 0.25 s
    assert budget.cpu_s <= 0.0


def test_accepted_task_reward_never_holds_a_worker_to_a_limit_its_machine_may_not_share():
    """The validator's rule (docs/verifier.md, Rewards): exact, except that an UNJUDGEABLE comparison of the
    validator's is no verdict (the worker's 0 or 1 stands), and a worker's 0 stands where the validator's
    judge said EQUAL (the worker's own comparison may have been cut). Deterministic outcomes bind."""
    from intellect.verifier.rewards import Judgement, TaskScore
    from intellect.verifier.submission import accepted_task_reward

    J = Judgement
    cases = [  # (validator's score, worker's claim, the reward the validator holds the worker to)
        (TaskScore(0.0, J.UNJUDGEABLE), 1.0, 1.0), (TaskScore(0.0, J.UNJUDGEABLE), 0.0, 0.0),
        (TaskScore(0.0, J.UNJUDGEABLE), 0.5, 0.0),  # not a reward any judge gives: held to 0, a mismatch
        (TaskScore(1.0, J.EQUAL), 0.0, 0.0), (TaskScore(1.0, J.EQUAL), 1.0, 1.0),
        (TaskScore(0.0, J.NOT_EQUAL), 1.0, 0.0), (TaskScore(0.0, J.OVER_BUDGET), 1.0, 0.0),
        (TaskScore(1.0, None), 0.0, 1.0), (TaskScore(0.0, None), 1.0, 0.0),  # no judge: exact
    ]
    for score, claim, held in cases:
        assert accepted_task_reward(score, claim) == held, (score, claim)


def test_validator_takes_the_claim_of_a_row_it_cannot_judge_into_the_group_advantages():
    """A validator whose judge is out of CPU (a slow machine) recomputes the group with the worker's claims
    for the rows it could not judge: an honest worker's rewards and advantages match, nothing is rejected."""
    from intellect.verifier.rewards import JudgeBudget
    from intellect.verifier.submission import score_group

    task = Task(id="m", prompt="p", verifier=VerifierKind.MATH, answer="(x+1)^2")
    texts = ["\\boxed{x^2+2x+1}", "\\boxed{x^2+1}", "\\boxed{(x+1)^2}", "\\boxed{7}"]
    worker = score_group(task, texts, [5] * 4, 8, 0.01, judge=JudgeBudget())
    assert [tr for tr, *_ in worker] == [1.0, 0.0, 1.0, 0.0]
    starved = JudgeBudget(cpu_s=0.0)  # the validator's machine judged nothing in time
    claims = [tr for tr, *_ in worker]
    validator = score_group(task, texts, [5] * 4, 8, 0.01, judge=starved, claimed=claims)
    assert validator == worker and starved.invocations == 0
    assert starved.outcomes == {"unjudgeable": 3}  # "(x+1)^2" itself is the string fast path
    # without the claims, the starved validator would have scored every judged row 0
    alone = score_group(task, texts, [5] * 4, 8, 0.01, judge=JudgeBudget(cpu_s=0.0))
    assert [tr for tr, *_ in alone] == [0.0, 0.0, 1.0, 0.0]


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


def test_a_spent_budget_is_answered_without_waiting_for_a_judge():
    """A submission whose judge budget is spent gets its verdict (OVER_BUDGET / UNJUDGEABLE) even while every judge
    is held by other submissions: it never queues behind them."""
    import threading

    from intellect.verifier import rewards
    from intellect.verifier.rewards import JudgeBudget, Judgement

    held = [rewards._JUDGE._free.get() for _ in range(rewards.JUDGE_PROCESSES)]  # every judge busy
    try:
        out: list = []
        spent = [JudgeBudget(calls=0), JudgeBudget(cpu_s=0.0)]
        t = threading.Thread(target=lambda: out.extend(rewards._JUDGE.judge("2x", "x+x", b) for b in spent),
                             daemon=True)
        t.start()
        t.join(30)  # a liveness bound, not a speed check: queued behind held judges it would never return
        assert out == [Judgement.OVER_BUDGET, Judgement.UNJUDGEABLE]
        assert all(b.invocations == 0 for b in spent)
    finally:
        for j in held:
            rewards._JUDGE._free.put(j)
