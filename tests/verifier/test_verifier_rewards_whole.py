"""verifier/rewards.py beyond its rule functions (issue 39): the expression bounds of `_parse`, the bounded sympy
comparison, math-verify's call, the math judge's child-process functions, the judge's budget accounting, and the
code reward's plumbing.

The judge's child functions (`_judge_child`, `_judge_fork`, `_judge_main`, `_judge_serve`, `_judge_compare`,
`_sympy_equal`, `_math_verify_equal`) normally run in the judge's own interpreter, where mutmut cannot see which
tests reach them; here they are called in the test process, each under guards: `_judge_child`'s resource limits
are recorded, not applied (they would bind the test process), and a fork `_judge_fork` makes is never allowed to run
on as a copy of the test (any path out of it ends the process).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import mmap
import os
import random
import resource
import signal
import socket
import sys
import threading
import time
from multiprocessing.connection import Connection
from types import SimpleNamespace

import pytest
import sympy
import sympy.core.random

from intellect.verifier import rewards
from intellect.verifier.rewards import (
    JUDGE_FUEL,
    JUDGE_MEMORY_BYTES,
    JudgeBudget,
    Judgement,
    TaskScore,
    _judge_child,
    _judge_compare,
    _judge_fork,
    _judge_main,
    _judge_serve,
    _JudgePool,
    _math_verify_equal,
    _MathJudge,
    _parse,
    _sympy_equal,
    code_reward,
    extract_code,
    task_score,
)
from intellect.verifier.sandbox import SandboxLimits, prompt_prelude
from intellect.verifier.tasks import Task, VerifierKind

# ---------------------------------------------------------------------------------------------
# _parse: what a safe, small expression is


def test_parse_refuses_an_empty_answer_and_one_past_200_characters():
    at_limit = "1+" * 99 + "11"
    past = "1+" * 100 + "1"
    assert (len(at_limit), len(past)) == (200, 201)
    assert _parse("") is None
    assert _parse(at_limit).doit() == 110
    assert _parse(past) is None


def test_parse_refuses_characters_outside_the_whitelist():
    assert _parse("7%4") is None  # sympy would read it as Mod(7, 4)
    assert _parse("7/4").doit() == sympy.Rational(7, 4)


@pytest.mark.parametrize("name", ["ab", "AB", "xy", "Ab"])
def test_parse_refuses_a_name_of_two_or_more_letters_not_whitelisted(name):
    assert _parse(name) is None
    assert _parse(f"2*{name}") is None


def test_parse_takes_single_letters_and_the_whitelisted_names():
    x = sympy.Symbol("x")
    X = sympy.Symbol("X")
    assert _parse("x") == x
    assert _parse("X") == X
    assert _parse("sqrt(4)").doit() == 2
    assert _parse("sin(0)").doit() == 0


def test_parse_reads_e_as_eulers_number_i_as_the_imaginary_unit_and_ln_as_log():
    assert _parse("e") is sympy.E
    assert _parse("i") is sympy.I
    assert _parse("ln(2)") == sympy.log(2)
    assert _parse("pi") is sympy.pi


def test_parse_multiplies_implicitly_and_keeps_the_tree_unevaluated():
    x = sympy.Symbol("x")
    assert _parse("2x").doit() == 2 * x
    assert _parse("sin x") == sympy.sin(x)
    assert str(_parse("2*3")) == "2*3"  # evaluate=False: the bounds see the tree as written
    nine = _parse("9**999")  # evaluated, a 954-digit integer the number bound would refuse
    assert isinstance(nine, sympy.Pow) and (nine.base, nine.exp) == (9, 999)


def test_parse_counts_at_most_256_nodes():
    n256 = "1/2" + "/2" * 83 + "+1"
    n257 = "1/2" + "/2" * 84
    assert sum(1 for _ in sympy.preorder_traversal(sympy.parse_expr(n256, evaluate=False))) == 256
    assert sum(1 for _ in sympy.preorder_traversal(sympy.parse_expr(n257, evaluate=False))) == 257
    assert _parse(n256) is not None
    assert _parse(n256).doit() == sympy.Rational(1, 2**84) + 1
    assert _parse(n257) is None


def test_parse_bounds_exponents_at_1000_and_refuses_symbolic_or_nested_ones():
    assert _parse("2**1000").doit() == 2**1000
    assert _parse("2**1001") is None
    assert _parse("2**x") is None
    assert _parse("x**(2**2)") is None
    assert _parse("2**(-1000)").doit() == sympy.Rational(1, 2**1000)
    assert _parse("2**(-1001)") is None


def test_parse_bounds_the_power_of_a_power_at_10():
    assert _parse("(2**2)**10").doit() == 4**10
    assert _parse("(2**2)**11") is None
    assert _parse("x**11") == sympy.Symbol("x") ** 11  # a plain base may go past 10


def test_parse_bounds_the_total_degree_at_64():
    x, y = sympy.symbols("x y")
    assert _parse("x**64") == x**64
    assert _parse("x**65") is None
    assert _parse("x**40*y**24").doit() == x**40 * y**24
    assert _parse("x**40*y**25") is None
    assert _parse("x**40*y**30") is None
    assert _parse("x**(-40)*y**(-30)") is None  # |exponent| counts
    assert _parse("2**40*3**30") is not None  # no variables: no degree


def test_parse_bounds_numbers_at_ten_to_the_hundred():
    assert _parse("1" + "0" * 100) == sympy.Integer(10) ** 100
    assert _parse("1" + "0" * 99 + "1") is None
    assert _parse("-1" + "0" * 100).doit() == -(sympy.Integer(10) ** 100)
    assert _parse("1001") == 1001


# ---------------------------------------------------------------------------------------------
# _sympy_equal: numbers within 1e-6 (relative past 1), expressions by simplify


def test_sympy_equal_compares_numbers_within_one_millionth_the_bound_included():
    assert _sympy_equal("1/2", "0.5") is True
    assert _sympy_equal("1/1000000", "0") is True  # exactly 1e-6 apart: equal
    assert _sympy_equal("2/1000000", "0") is False
    assert _sympy_equal("2", "1") is False
    assert _sympy_equal("1/2", "-1/2") is False


def test_sympy_equal_scales_the_bound_by_the_reference_past_one():
    assert _sympy_equal("1000000.5", "1000000") is True  # 0.5 apart, within 1e-6 * 1e6
    assert _sympy_equal("1000002", "1000000") is False
    assert _sympy_equal("2000001", "2000000") is True


def test_sympy_equal_refuses_infinite_values():
    assert _sympy_equal("1", "oo") is False
    assert _sympy_equal("oo", "oo") is False


def test_sympy_equal_simplifies_the_difference_of_expressions():
    assert _sympy_equal("sin(x)**2+cos(x)**2", "1") is True
    assert _sympy_equal("(x+1)**2", "x**2+2x+1") is True
    assert _sympy_equal("x", "x+1") is False
    assert _sympy_equal("x", "-x") is False


def test_sympy_equal_is_false_when_either_side_does_not_parse_or_sympy_fails():
    assert _sympy_equal("7%4", "3") is False
    assert _sympy_equal("3", "7%4") is False
    assert _sympy_equal("1", "") is False
    assert _sympy_equal("sin", "1") is False  # a function, not a number: sympy raises inside


# ---------------------------------------------------------------------------------------------
# _math_verify_equal and _judge_compare


def test_math_verify_compares_sets_and_intervals_boxed():
    assert _math_verify_equal("\\{1,2\\}", "\\{2,1\\}") is True
    assert _math_verify_equal("\\{2,1\\}", "\\{1,2\\}") is True
    assert _math_verify_equal("\\{1,3\\}", "\\{1,2\\}") is False
    assert _math_verify_equal("[1,2)", "[1,2)") is True
    assert _math_verify_equal("[1,2)", "(1,2]") is False


def test_math_verify_is_false_when_an_answer_does_not_parse():
    assert _math_verify_equal("", "1") is False
    assert _math_verify_equal("1", "") is False


def test_math_verify_runs_without_signal_timeouts_so_it_works_off_the_main_thread():
    """Its SIGALRM timeouts are off (parse's and verify's): with them on, math-verify raises outside the main
    thread."""
    out: list[object] = []

    def compare():
        try:
            out.append(_math_verify_equal("\\{1,2\\}", "\\{2,1\\}"))
        except BaseException as e:
            out.append(e)

    t = threading.Thread(target=compare)
    t.start()
    t.join()
    assert out == [True]


def test_judge_compare_takes_sympys_verdict_then_math_verifys():
    assert _judge_compare("1000000.5", "1000000") is True  # sympy only (math-verify rounds: not equal)
    assert _math_verify_equal("1000000.5", "1000000") is False
    assert _judge_compare("\\{1,2\\}", "\\{2,1\\}") is True  # math-verify only
    assert _sympy_equal(rewards._normalize("\\{1,2\\}"), rewards._normalize("\\{2,1\\}")) is False
    assert _judge_compare("\\frac{1}{2}", "0.5") is True  # normalised before sympy
    assert _judge_compare("3", "4") is False


def test_judge_compare_scores_an_error_as_not_equal_and_passes_memory_errors_on(monkeypatch):
    def broken(given, reference):
        raise RuntimeError("math-verify bug")

    monkeypatch.setattr(rewards, "_math_verify_equal", broken)
    assert _judge_compare("\\{1,2\\}", "\\{2,1\\}") is False

    def out_of_memory(a, b):
        raise MemoryError

    monkeypatch.setattr(rewards, "_sympy_equal", out_of_memory)
    with pytest.raises(MemoryError):
        _judge_compare("1", "2")


# ---------------------------------------------------------------------------------------------
# _judge_child, in this process: its limits recorded, not applied


def _statm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def child_here(monkeypatch):
    """Run `_judge_child` in the test process: setrlimit recorded (with the address space at the moment of the
    call), the SIGPROF handler, the profiling timer, tracing and the garbage collector restored after."""
    calls: list[tuple] = []

    def setrlimit(which, limits):
        calls.append((which, limits, _statm_bytes()))

    monkeypatch.setattr(resource, "setrlimit", setrlimit)
    handler = signal.getsignal(signal.SIGPROF)
    # untouched pages: the address space (statm's first field) is well above the resident set (its second)
    reserve = mmap.mmap(-1, 64 << 20)
    try:
        yield calls
    finally:
        reserve.close()
        sys.settrace(None)
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, handler)
        gc.enable()


def test_judge_child_sets_the_cpu_limit_one_past_the_ceiling_and_the_address_space_one_gib_up(child_here):
    outcome, calls = _judge_child("1/2", "0.5", JUDGE_FUEL, 2.5)
    assert outcome == "equal" and calls > 0
    (cpu_which, cpu_limits, _), (as_which, as_limits, vm_now) = child_here
    assert (cpu_which, cpu_limits) == (resource.RLIMIT_CPU, (4, 5))  # ceil(2.5) = 3: soft 4, hard 5
    assert as_which == resource.RLIMIT_AS
    soft, hard = as_limits
    assert soft == hard
    assert abs(soft - (vm_now + JUDGE_MEMORY_BYTES)) < 8 << 20
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)  # the comparison's timer is off after it


def test_judge_child_seeds_pythons_and_sympys_random_generators_with_zero(child_here):
    random.seed(12345)
    sympy.core.random.seed(12345)
    _judge_child("1", "2", JUDGE_FUEL, 2.0)  # a numeric comparison draws no random numbers
    assert random.getstate() == random.Random(0).getstate()
    assert sympy.core.random.rng.getstate() == random.Random(0).getstate()


def test_judge_child_outcomes_equal_and_not_equal(child_here):
    assert _judge_child("1/2", "0.5", JUDGE_FUEL, 2.0)[0] == "equal"
    assert _judge_child("1/3", "0.5", JUDGE_FUEL, 2.0)[0] == "not_equal"
    assert _judge_child("\\{1,2\\}", "\\{2,1\\}", JUDGE_FUEL, 2.0)[0] == "equal"


def test_judge_child_counts_fuel_run_out_even_when_the_comparison_swallows_it(child_here, monkeypatch):
    def swallowing(given, reference):
        try:
            for _ in range(1000):
                abs(-1)
                len("x")
                _statm_bytes()
        except BaseException:
            pass
        return True

    monkeypatch.setattr(rewards, "_judge_compare", swallowing)
    assert _judge_child("1", "1", 50, 4.0) == ("over_budget", 50)


def test_judge_child_is_unjudgeable_past_its_cpu_seconds(child_here, monkeypatch):
    def spinning(given, reference):
        t = time.process_time()
        while time.process_time() - t < 20.0:
            pass
        return True

    monkeypatch.setattr(rewards, "_judge_compare", spinning)
    outcome, calls = _judge_child("1", "1", JUDGE_FUEL, 0.05)
    assert outcome == "unjudgeable"
    assert calls > 0
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)


def test_judge_child_is_unjudgeable_on_a_memory_error(child_here, monkeypatch):
    def out_of_memory(given, reference):
        raise MemoryError

    monkeypatch.setattr(rewards, "_judge_compare", out_of_memory)
    outcome, calls = _judge_child("1", "1", JUDGE_FUEL, 2.0)
    assert outcome == "unjudgeable"
    assert calls >= 1


# ---------------------------------------------------------------------------------------------
# _judge_fork: the comparison in a fork, under guards


@pytest.fixture
def forks(monkeypatch, tmp_path):
    """Guards for a fork made in the test process: the fork's exit code is written to a file before it exits (any
    path out of it ends it; none runs on as a copy of the test), the parent waits (at most 10 s) for that file
    before it kills the fork, no resource limit is set in the test process, and the parent's kill and wait
    calls are recorded (the wait's CPU usage replaced by fixed values)."""
    parent = os.getpid()
    real_fork, real_exit, real_kill, real_wait4 = os.fork, os._exit, os.kill, os.wait4
    real_setrlimit = resource.setrlimit
    seen = SimpleNamespace(forks=[], kills=[], waits=[], await_exit=True, dir=tmp_path)

    def fork():
        pid = real_fork()
        if pid:
            seen.forks.append(pid)
        return pid

    def _exit(code):
        if os.getpid() == parent:
            raise AssertionError(f"os._exit({code!r}) in the test process")
        part = tmp_path / f"exit-{os.getpid()}.part"  # renamed whole: the parent never reads a half-written code
        part.write_text(repr(code))
        os.replace(part, tmp_path / f"exit-{os.getpid()}")
        real_exit(code if isinstance(code, int) else 70)

    def kill(pid, sig):
        if os.getpid() != parent:
            real_exit(71)
        if pid <= 0:
            raise AssertionError(f"os.kill({pid}, ...) would signal a process group")
        seen.kills.append((pid, sig))
        marker = tmp_path / f"exit-{pid}"
        deadline = time.monotonic() + 10
        while seen.await_exit and not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        real_kill(pid, sig)

    def wait4(pid, options):
        got, status, _ = real_wait4(pid, options)
        seen.waits.append((pid, options, got))
        return got, status, SimpleNamespace(ru_utime=0.25, ru_stime=0.5)

    def setrlimit(which, limits):
        if os.getpid() == parent:
            raise AssertionError("a resource limit set in the test process")
        real_setrlimit(which, limits)

    monkeypatch.setattr(os, "fork", fork)
    monkeypatch.setattr(os, "_exit", _exit)
    monkeypatch.setattr(os, "kill", kill)
    monkeypatch.setattr(os, "wait4", wait4)
    monkeypatch.setattr(resource, "setrlimit", setrlimit)

    def exit_code(pid):
        marker = tmp_path / f"exit-{pid}"
        return marker.read_text() if marker.exists() else None

    seen.exit_code = exit_code
    yield seen
    for pid in seen.forks:  # nothing left behind
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_judge_fork_answers_the_forks_outcome_and_calls_and_its_cpu_seconds(forks):
    outcome, calls, cpu = _judge_fork("1/2", "0.5", JUDGE_FUEL, 4.0, 30.0)
    assert (outcome, cpu) == ("equal", 0.75)  # user + system CPU of the fork (0.25 + 0.5 as recorded)
    assert type(outcome) is str and type(calls) is int and calls > 0
    (pid,) = forks.forks
    assert forks.kills == [(pid, signal.SIGKILL)]
    assert forks.waits == [(pid, 0, pid)]  # a blocking wait: the fork is reaped
    assert forks.exit_code(pid) == "0"
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_judge_fork_passes_fuel_and_cpu_seconds_to_the_comparison(forks):
    assert _judge_fork("1/2", "0.5", 10, 4.0, 30.0)[:2] == ("over_budget", 10)
    assert _judge_fork("1/3", "0.5", JUDGE_FUEL, 4.0, 30.0)[0] == "not_equal"
    assert _judge_fork("\\{1,2\\}", "\\{2,1\\}", JUDGE_FUEL, 4.0, 30.0)[0] == "equal"


def test_judge_fork_that_fails_exits_with_one_and_is_unjudgeable(forks, monkeypatch):
    def failing(given, reference, fuel, cpu_s):
        raise RuntimeError("the fork broke")

    monkeypatch.setattr(rewards, "_judge_child", failing)
    assert _judge_fork("1", "1", JUDGE_FUEL, 4.0, 30.0) == ("unjudgeable", 0, 0.75)
    (pid,) = forks.forks
    assert forks.exit_code(pid) == "1"


def test_judge_fork_that_does_not_answer_within_the_wall_clock_is_killed_and_unjudgeable(forks, monkeypatch):
    parent = os.getpid()

    def hanging(given, reference, fuel, cpu_s):
        deadline = time.monotonic() + 20
        while os.getppid() == parent and time.monotonic() < deadline:
            time.sleep(0.02)
        return "equal", 1

    forks.await_exit = False
    monkeypatch.setattr(rewards, "_judge_child", hanging)
    assert _judge_fork("1", "1", JUDGE_FUEL, 4.0, 0.2) == ("unjudgeable", 0, 0.75)
    (pid,) = forks.forks
    assert forks.kills == [(pid, signal.SIGKILL)]
    assert forks.waits == [(pid, 0, pid)]


# ---------------------------------------------------------------------------------------------
# _judge_main and _judge_serve


class _Conn:
    def __init__(self, requests, end=EOFError):
        self.requests = list(requests)
        self.end = end
        self.sent: list[object] = []

    def recv(self):
        if not self.requests:
            raise self.end
        return self.requests.pop(0)

    def send(self, obj):
        self.sent.append(obj)


@pytest.fixture
def math_verify_logger():
    mv = logging.getLogger("math_verify")
    root = logging.getLogger()
    levels = mv.level, root.level
    mv.setLevel(logging.NOTSET)
    yield mv
    mv.setLevel(levels[0])
    root.setLevel(levels[1])


def test_judge_main_says_ready_with_the_hash_seed_fixed_then_answers_each_request(forks, monkeypatch,
                                                                                   math_verify_logger):
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    root_level = logging.getLogger().level
    conn = _Conn([("1/2", "0.5", JUDGE_FUEL, 4.0, 30.0), ("1/3", "0.5", JUDGE_FUEL, 4.0, 30.0),
                  ("1/2", "0.5", 10, 4.0, 30.0)])
    _judge_main(conn)
    assert conn.sent[0] == "ready"
    assert [s[0] for s in conn.sent[1:]] == ["equal", "not_equal", "over_budget"]
    assert conn.sent[3][1] == 10
    assert all(s[2] == 0.75 for s in conn.sent[1:])
    assert math_verify_logger.level == logging.ERROR
    assert logging.getLogger().level == root_level


@pytest.mark.parametrize("seed", [None, "1", "random"])
def test_judge_main_says_the_hash_seed_is_not_fixed_unless_it_is_zero(forks, monkeypatch, seed,
                                                                      math_verify_logger):
    if seed is None:
        monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    else:
        monkeypatch.setenv("PYTHONHASHSEED", seed)
    conn = _Conn([], end=OSError)
    _judge_main(conn)
    assert conn.sent == ["hash seed not fixed"]


def test_judge_main_passes_the_wall_clock_on_to_the_fork(forks, monkeypatch, math_verify_logger):
    parent = os.getpid()

    def hanging(given, reference, fuel, cpu_s):
        deadline = time.monotonic() + 20
        while os.getppid() == parent and time.monotonic() < deadline:
            time.sleep(0.02)
        return "equal", 1

    monkeypatch.setenv("PYTHONHASHSEED", "0")
    forks.await_exit = False
    monkeypatch.setattr(rewards, "_judge_child", hanging)
    conn = _Conn([("1", "1", JUDGE_FUEL, 4.0, 0.2)])
    _judge_main(conn)
    assert conn.sent == ["ready", ("unjudgeable", 0, 0.75)]


def test_judge_serve_serves_on_the_socket_it_is_given(forks, monkeypatch, math_verify_logger):
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    ours, theirs = socket.socketpair()
    client = Connection(ours.detach())
    client.send(("1/2", "0.5", JUDGE_FUEL, 4.0, 30.0))
    s = socket.socket(fileno=os.dup(client.fileno()))
    s.shutdown(socket.SHUT_WR)
    s.close()
    _judge_serve(theirs.detach())
    assert client.recv() == "ready"
    outcome, calls, cpu = client.recv()
    assert (outcome, cpu) == ("equal", 0.75) and calls > 0
    client.close()


# ---------------------------------------------------------------------------------------------
# _MathJudge.judge: the submission's budget, spent in place


class _Runs:
    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls: list[tuple] = []

    def __call__(self, given, reference, fuel, cpu_s, wall_s):
        self.calls.append((given, reference, fuel, cpu_s, wall_s))
        return self.answers.pop(0)


def _judge_with(*answers):
    j = _MathJudge()
    runs = _Runs(*answers)
    j._run = runs
    return j, runs


def test_judge_with_one_call_left_judges_and_with_none_is_over_budget():
    j, runs = _judge_with((Judgement.EQUAL, 7, 0.25))
    b = JudgeBudget(calls=1)
    assert j.judge("a", "b", b) is Judgement.EQUAL
    assert b.calls == 0
    assert j.judge("a", "b", b) is Judgement.OVER_BUDGET
    assert len(runs.calls) == 1
    assert b.outcomes == {"equal": 1, "over_budget": 1}
    assert b.invocations == 1


def test_judge_with_cpu_seconds_left_judges_and_with_none_is_unjudgeable():
    j, runs = _judge_with((Judgement.NOT_EQUAL, 3, 0.5))
    b = JudgeBudget(cpu_s=0.5)
    assert j.judge("a", "b", b) is Judgement.NOT_EQUAL
    assert runs.calls[0][3] == 0.5  # the per-call CPU limit, cut to what the submission has left
    assert b.cpu_s == 0.0
    assert j.judge("a", "b", b) is Judgement.UNJUDGEABLE
    assert len(runs.calls) == 1
    assert b.calls == JudgeBudget().calls - 1  # an unjudgeable-by-budget answer spends no call


def test_judge_passes_fuel_cpu_and_wall_clock_and_adds_up_what_was_spent():
    j, runs = _judge_with((Judgement.EQUAL, 7, 0.25), (Judgement.NOT_EQUAL, 5, 0.125))
    b = JudgeBudget(calls=10, cpu_s=8.0, fuel=1234, cpu_per_call_s=3.0, wall_per_call_s=9.0, invocations=4,
                    fuel_used=100, cpu_used_s=1.0, outcomes={"equal": 2})
    assert j.judge("given", "reference", b) is Judgement.EQUAL
    assert runs.calls == [("given", "reference", 1234, 3.0, 9.0)]
    assert (b.calls, b.invocations, b.fuel_used, b.cpu_used_s, b.cpu_s) == (9, 5, 107, 1.25, 7.75)
    assert b.outcomes == {"equal": 3}
    assert j.judge("g2", "r2", b) is Judgement.NOT_EQUAL
    assert (b.calls, b.invocations, b.fuel_used, b.cpu_used_s, b.cpu_s) == (8, 6, 112, 1.375, 7.625)
    assert b.outcomes == {"equal": 3, "not_equal": 1}


def test_judge_warns_of_an_unjudgeable_answer_with_the_first_80_characters_of_each(caplog):
    given, reference = "g" * 100, "r" * 100
    j, _ = _judge_with((Judgement.UNJUDGEABLE, 0, 0.5), (Judgement.EQUAL, 1, 0.5))
    with caplog.at_level(logging.WARNING, logger=rewards.logger.name):
        assert j.judge(given, reference, JudgeBudget()) is Judgement.UNJUDGEABLE
        (record,) = caplog.records
        assert record.getMessage() == (
            f"math answer {'g' * 80!r} vs {'r' * 80!r}: no verdict within the judge's CPU/wall/memory limits; "
            "unjudgeable (scores 0 here, never a rejection)")
        caplog.clear()
        assert j.judge(given, reference, JudgeBudget()) is Judgement.EQUAL
        assert caplog.records == []


def test_judge_budget_stats_round_cpu_to_a_millisecond_and_copy_the_outcomes():
    b = JudgeBudget(invocations=3, fuel_used=4567, cpu_used_s=1.23456, outcomes={"equal": 2, "unjudgeable": 1})
    stats = b.stats()
    assert stats == {"invocations": 3, "fuel_used": 4567, "cpu_used_s": 1.235,
                     "outcomes": {"equal": 2, "unjudgeable": 1}}
    stats["outcomes"]["equal"] = 99
    assert b.outcomes == {"equal": 2, "unjudgeable": 1}


def test_a_spent_budget_does_not_queue_for_a_judge_the_pool_lacks():
    pool = _JudgePool(1)
    taken = pool._free.get()  # the only judge is busy
    assert taken is pool._judges[0]
    out: list[Judgement] = []
    t = threading.Thread(target=lambda: out.append(pool.judge("x^2", "y", JudgeBudget(calls=0))), daemon=True)
    t.start()
    t.join(10)
    answered = list(out)  # while the only judge was still taken
    pool._free.put(taken)
    t.join(10)
    assert answered == [Judgement.OVER_BUDGET]


@pytest.mark.parametrize("left", [{"calls": 1}, {"cpu_s": 0.5}], ids=["one-call", "half-cpu-second"])
def test_a_budget_with_anything_left_takes_a_free_judge_from_the_queue(left):
    budget = JudgeBudget(**left)  # a fresh one each run: judging spends it
    pool = _JudgePool(2)
    first, second = pool._free.get(), pool._free.get()
    assert (first, second) == (pool._judges[0], pool._judges[1])
    first._run, second._run = _Runs(), _Runs((Judgement.EQUAL, 1, 0.125))
    pool._free.put(second)  # only the second judge is free
    assert pool.judge("a", "b", budget) is Judgement.EQUAL
    assert (first._run.calls, len(second._run.calls)) == ([], 1)
    assert pool._free.get() is second  # handed back


# ---------------------------------------------------------------------------------------------
# task_score's paths


def test_task_score_math_passes_the_answer_and_the_budget():
    task = Task(id="m", prompt="p", verifier=VerifierKind.MATH, answer="12")
    assert task_score(task, "so \\boxed{12}") == TaskScore(1.0, None)
    assert task_score(task, "so \\boxed{13}") == TaskScore(0.0, None)
    spent = JudgeBudget(calls=0)
    assert task_score(task, "so \\boxed{x^2}", judge=spent) == TaskScore(0.0, Judgement.OVER_BUDGET)
    assert spent.outcomes == {"over_budget": 1}


def test_task_score_math_without_a_reference_compares_with_the_empty_answer():
    task = Task.model_construct(id="m", prompt="p", verifier=VerifierKind.MATH, answer=None, tests=None)  # unvalidated
    assert task_score(task, "\\boxed{XXXX}", judge=JudgeBudget(calls=0)) == TaskScore(0.0, Judgement.OVER_BUDGET)


def test_task_score_of_a_completion_that_breaks_the_scorer_is_zero_and_logged(caplog):
    task = Task(id="t-bad", prompt="p", verifier=VerifierKind.MATH, answer="1")
    with caplog.at_level(logging.ERROR, logger=rewards.logger.name):
        assert task_score(task, None) == TaskScore(0.0, None)  # not a string: the scorer raises inside
    (record,) = caplog.records
    assert record.getMessage() == "reward of task t-bad failed"
    assert record.exc_info is not None


def test_task_score_refuses_an_unknown_verifier_kind_by_name():
    task = Task.model_construct(id="u", prompt="p", verifier="lean", answer="1", tests=None)
    with pytest.raises(ValueError, match=r"^unknown verifier kind 'lean'$"):
        task_score(task, "\\boxed{1}")


def test_task_score_code_passes_the_tests_sandbox_and_prompt_on(monkeypatch):
    seen: list[tuple] = []
    real = rewards.code_reward

    def spy(completion, tests, sandbox=None, *, prompt=None):
        seen.append((completion, tests, sandbox, prompt))
        return real(completion, tests, sandbox, prompt=prompt)

    monkeypatch.setattr(rewards, "code_reward", spy)
    limits = SandboxLimits(cpu_seconds=2)
    task = Task(id="c", prompt="def f():\n    pass\n", verifier=VerifierKind.CODE, tests=["assert f() == 1"])
    good = "```python\ndef f():\n    return 1\n```"
    assert task_score(task, good, sandbox=limits) == TaskScore(1.0, None)
    assert seen == [(good, ["assert f() == 1"], limits, "def f():\n    pass\n")]
    no_tests = Task.model_construct(id="c0", prompt="p", verifier=VerifierKind.CODE, answer=None, tests=None)
    task_score(no_tests, good)
    assert seen[1][1] == []


# ---------------------------------------------------------------------------------------------
# extract_code and code_reward


def test_extract_code_takes_the_last_fenced_block_after_the_last_think_close():
    three = "```python\nA\n```\n```py\nB\n```\n```Python\nC\n```"
    assert extract_code(three) == "C\n"
    assert extract_code("```python\nA\n```") == "A\n"
    assert extract_code("a</think>```python\nA\n```</think>plain answer") == "plain answer"
    assert extract_code("```python\nA\n```</think>```python\nB\n```") == "B\n"
    assert extract_code("no fence here, x = 1") == "no fence here, x = 1"
    assert extract_code("think</think> x = 1") == " x = 1"


def test_code_reward_of_blank_code_is_zero_without_a_sandbox(monkeypatch):
    def no_sandbox(*a, **k):
        raise AssertionError("blank code reached the sandbox")

    monkeypatch.setattr(rewards, "run_python", no_sandbox)
    assert code_reward("```python\n   \n```", ["assert f() == 1"]) == 0.0
    assert code_reward("</think>  \n ", ["assert f() == 1"]) == 0.0


def test_code_reward_runs_the_extracted_code_with_the_tests_limits_and_prompt_prelude(monkeypatch, caplog):
    seen: list[tuple] = []
    results = []
    real = rewards.run_python

    def spy(code, tests, limits=None, *, prelude=None):
        seen.append((code, tests, limits, prelude))
        results.append(real(code, tests, limits, prelude=prelude))
        return results[-1]

    monkeypatch.setattr(rewards, "run_python", spy)
    prompt = "import math\n\ndef helper():\n    return 1\n\ndef f():\n    pass\n"
    limits = SandboxLimits(cpu_seconds=2)
    tests = ["assert f() == helper()"]
    with caplog.at_level(logging.DEBUG, logger=rewards.logger.name):
        assert code_reward("```python\ndef f():\n    return 1\n```", tests, limits, prompt=prompt) == 1.0
        assert code_reward("```python\ndef f():\n    return 2\n```", ["assert f() == 1, 'why ' * 100"],
                           limits, prompt=prompt) == 0.0
    assert seen[0] == ("def f():\n    return 1\n", tests, limits, prompt_prelude(prompt))
    assert prompt_prelude(prompt) is not None
    passed, failed = results
    assert len(failed.stderr) > 200
    debug = [r for r in caplog.records if r.name == rewards.logger.name and r.levelno == logging.DEBUG]
    assert [r.msg for r in debug] == ["sandbox: %s in %.2fs (%d calls) %s"] * 2
    assert debug[0].args == ("passed", passed.wall_seconds, passed.calls, "")
    assert debug[1].args == ("failed", failed.wall_seconds, failed.calls, failed.stderr[:200])


def test_a_judge_that_dies_while_starting_is_unavailable_with_its_reason(monkeypatch):
    """The judge's interpreter exits before saying "ready" (here: /bin/true instead of Python): math tasks are
    refused with the start timeout and "no answer" named, and nothing is left running."""
    monkeypatch.setattr(sys, "executable", "/bin/true")
    judge = _MathJudge()
    judge.START_TIMEOUT = 60.0
    with pytest.raises(rewards.MathJudgeUnavailableError) as err:
        judge._start()
    assert str(err.value) == ("the math judge process did not start within 60 s (no answer; sympy/math-verify "
                              "missing or the machine overloaded): math tasks cannot be judged here")
    assert judge._proc is None and judge._conn is None and not judge.alive()


def test_the_fuel_counter_counts_each_python_call_once_from_zero(child_here, monkeypatch):
    def ten_calls(given, reference):
        for _ in range(10):
            _noop()
        return True

    monkeypatch.setattr(rewards, "_judge_compare", ten_calls)
    assert _judge_child("1", "1", JUDGE_FUEL, 4.0) == ("equal", 11)  # the comparison itself and its 10 calls
    assert _judge_child("1", "1", 11, 4.0) == ("equal", 11)
    assert _judge_child("1", "1", 10, 4.0) == ("over_budget", 10)


def _noop() -> None:
    return None


def test_compare_answers_refuses_answers_past_200_characters_without_the_judge():
    assert rewards.compare_answers("0" * 199 + "1", "1") == (Judgement.EQUAL, False)  # 200 characters: compared
    assert rewards.compare_answers("0" * 200 + "1", "1") == (Judgement.NOT_EQUAL, False)
    assert rewards.compare_answers("$ $", "1") == (Judgement.NOT_EQUAL, False)  # empty once normalised


def test_a_new_judge_holds_no_process_and_is_not_alive():
    j = _MathJudge()
    assert j._proc is None and j._conn is None and not j.alive()
    assert j._lock.acquire(blocking=False)
    j._lock.release()


def test_a_judge_is_alive_while_its_process_runs():
    j = _MathJudge()
    j._proc = SimpleNamespace(poll=lambda: None)
    assert j.alive()
    j._proc = SimpleNamespace(poll=lambda: 0)
    assert not j.alive()


def test_stopping_a_judge_kills_and_reaps_its_process_and_closes_its_pipe():
    done: list[object] = []
    j = _MathJudge()
    j._proc = SimpleNamespace(kill=lambda: done.append("kill"), wait=lambda t: done.append(("wait", t)))
    j._conn = SimpleNamespace(close=lambda: done.append("close"))
    j._stop()
    assert done == ["kill", ("wait", 5), "close"]
    assert j._proc is None and j._conn is None
    j._stop()  # nothing to stop: nothing done
    assert done == ["kill", ("wait", 5), "close"]


class _DeadConn:
    def __init__(self, answers: bool):
        self.answers = answers
        self.sent: list[object] = []

    def send(self, obj):
        if not self.answers:
            raise BrokenPipeError
        self.sent.append(obj)

    def poll(self, timeout):
        self.sent.append(("poll", timeout))
        return False

    def close(self):
        pass


@pytest.mark.parametrize("answers", [False, True], ids=["broken-pipe", "no-answer-in-time"])
def test_a_judge_that_stops_answering_is_unjudgeable_with_no_calls_and_is_stopped(answers, caplog, monkeypatch):
    j = _MathJudge()
    killed: list[str] = []
    j._proc = SimpleNamespace(poll=lambda: None, kill=lambda: killed.append("kill"), wait=lambda t: None)
    conn = j._conn = _DeadConn(answers)
    with caplog.at_level(logging.WARNING, logger=rewards.logger.name):
        assert j._run("a", "b", 123, 1.5, 2.0) == (Judgement.UNJUDGEABLE, 0, 1.5)
    assert [r.getMessage() for r in caplog.records] == ["the math judge process stopped answering; restarting it"]
    assert killed == ["kill"] and j._proc is None
    if answers:
        assert conn.sent == [("a", "b", 123, 1.5, 2.0), ("poll", 2.0 + _MathJudge.SLACK_S)]
