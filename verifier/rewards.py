"""Reward verifiers: math answers, code against tests, and INTELLECT-2's length control.

`reward(task, completion, target_len, completion_len, alpha)` is what a worker uses to score
its rollouts and what a validator recomputes; both must agree bit for bit, so everything here
is deterministic (no sampling, no wall-clock dependence except sandbox limits, which only turn
a pass into a zero).

Math: the final answer is the content of the last `\\boxed{...}` (nested braces allowed), or
else the last number in the completion. Answer and reference are normalised from LaTeX
(`\\frac`, `\\sqrt`, `\\cdot`, `^`, `\\pi`, thousands separators, `$`, `\\text{}`...) and
compared as strings, then as plain numbers (relative tolerance 1e-6), then in the math judge
process: symbolically with sympy (`simplify(a - b) == 0`), else with math-verify's parser and
comparison (sets, intervals, LaTeX sympy's path cannot read). Parsing is done on a whitelist of
characters and names, with powers, total degree and size bounded before anything is evaluated.

The judge's limits (issue 22), the deterministic ones first:

    JUDGE_FUEL            Python calls one comparison may make (counted by a trace function in a fresh
                          fork of a warmed-up judge, hash seed fixed): the same count on every machine and
                          under any load for the pinned sympy/math-verify; past it the comparison is
                          `Judgement.OVER_BUDGET` (scores 0 everywhere)
    JudgeBudget.calls     judge invocations one submission may make (`MAX_JUDGE_CALLS`); which rows reach
                          the judge is decided by the pure fast path, so later rows are OVER_BUDGET on
                          every side alike
    JUDGE_CPU_S           CPU seconds of one comparison (ITIMER_PROF, RLIMIT_CPU behind it)  } machine-dependent
    JudgeBudget.cpu_s     judge CPU seconds of one submission (`SUBMISSION_JUDGE_CPU_S`)     } backstops:
    JUDGE_WALL_S          wall clock of one comparison (liveness only)                       } `UNJUDGEABLE`
    JUDGE_MEMORY_BYTES    address space a comparison may add (RLIMIT_AS)                     } (scores 0 here)

An `UNJUDGEABLE` comparison scores 0 where it happened, but it is no verdict: a validator never rejects
a worker's claimed reward over it (`intellect.verifier.submission` holds that rule), since another
machine may have judged the same answer within its limits.

Length control (INTELLECT-2, §3.2): the prompt ends with a suffix stating a thinking budget
`target_len`; the reward is `task_reward − α·|target_len − len|` with α = 0.0003 for a *solved* completion
(task reward > 0) and `task_reward` (0) for an unsolved one, whatever its length (`applied_length_penalty`,
scope `solved`; pool rules made before this carry scope `all`, the old formula, so they are judged as created).
Penalising wrong answers too made GRPO learn length alone in groups whose answers are all wrong: the group's
std turns tiny length differences into full-size advantages, and since workers sample with the cap at the
target, longer was always better, up to answers cut at the cap that score 0 (issue 17; docs/benchmarks-grpo.md).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import queue
import re
import threading
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict

from intellect.sdk import IntellectError
from intellect.verifier.sandbox import SandboxLimits, SandboxUnavailableError, prompt_prelude, run_python
from intellect.verifier.tasks import Task, VerifierKind

if TYPE_CHECKING:
    import sympy

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_ALPHA",
    "JUDGE_CPU_S",
    "JUDGE_FUEL",
    "JUDGE_WALL_S",
    "MAX_JUDGE_CALLS",
    "SUBMISSION_JUDGE_CPU_S",
    "JudgeBudget",
    "Judgement",
    "LengthScope",
    "MathJudgeUnavailableError",
    "RewardBreakdown",
    "TaskScore",
    "answers_equal",
    "applied_length_penalty",
    "code_reward",
    "compare_answers",
    "extract_answer",
    "extract_code",
    "length_penalty",
    "math_reward",
    "reward",
    "task_reward",
    "task_score",
    "thinking_budget_suffix",
]

DEFAULT_ALPHA = 0.0003
LengthScope = Literal["solved", "all"]
"""Which completions carry the length penalty: `solved` (task reward > 0; the rule since issue 17) or `all` (every
completion; pool rules documents without a `length_scope` field, made before the change)."""
MAX_ANSWER_CHARS = 200
MAX_EXPONENT = 1000
MAX_SYMBOLIC_DEGREE = 64
"""Largest sum of |exponents| of an expression with variables (`(x+1)**999*(x+2)**999` is 1998)."""
MAX_EXPR_NODES = 256
"""Largest number of nodes of a parsed answer."""
JUDGE_FUEL = 1_000_000
"""Python calls one judge comparison may make (deterministic). Honest answers take far fewer: a fraction
vs a decimal ~1,000, `\\frac{\\sqrt{2}}{2}` vs `\\frac{1}{\\sqrt{2}}` ~81,000, an interval ~138,000, a
3-variable degree-30 polynomial ~271,000 (~0.2 s CPU on the 2-core dev box, traced)."""
JUDGE_CPU_S = 4.0
"""CPU seconds of one comparison (backstop for work the call count does not see: polynomial arithmetic
can spend microseconds per call); past it the comparison is UNJUDGEABLE."""
JUDGE_WALL_S = 30.0
"""Wall-clock seconds of one comparison (liveness only: a starved machine); past it UNJUDGEABLE."""
JUDGE_MEMORY_BYTES = 1 << 30
"""Address space one comparison may add to the judge's (RLIMIT_AS); past it UNJUDGEABLE."""
JUDGE_PROCESSES = 2
"""Judge processes per agent (~80 MiB resident each; each comparison adds a short-lived fork)."""
MAX_JUDGE_CALLS = 256
"""Judge invocations per submission; later answers that need the judge are OVER_BUDGET (deterministic)."""
SUBMISSION_JUDGE_CPU_S = 16.0
"""Judge CPU seconds per submission; once spent, later answers that need the judge are UNJUDGEABLE."""


class MathJudgeUnavailableError(IntellectError, RuntimeError):
    """The math judge process cannot start here: math tasks are refused, not scored 0."""


class Judgement(StrEnum):
    """The outcome of one answer comparison."""

    EQUAL = "equal"
    NOT_EQUAL = "not_equal"
    OVER_BUDGET = "over_budget"
    """a deterministic limit ran out (the comparison's fuel, the submission's judge calls): scores 0 on every
    machine, so a validator holds a worker to it"""
    UNJUDGEABLE = "unjudgeable"
    """a machine-dependent limit cut it (CPU, wall clock, memory, the submission's judge CPU, a crash):
    scores 0 here, and is never a reason to reject another machine's claim"""


@dataclass
class JudgeBudget:
    """What the math judge may spend on one submission (its rows scored in file order, by the worker and the
    validator alike), and what it spent. One per submission; `None` where a function takes one means a
    fresh budget per call."""

    calls: int = MAX_JUDGE_CALLS
    """judge invocations left (deterministic)"""
    cpu_s: float = SUBMISSION_JUDGE_CPU_S
    """judge CPU seconds left (machine-dependent)"""
    fuel: int = JUDGE_FUEL
    """Python calls per comparison"""
    cpu_per_call_s: float = JUDGE_CPU_S
    wall_per_call_s: float = JUDGE_WALL_S
    invocations: int = 0
    fuel_used: int = 0
    cpu_used_s: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)

    def stats(self) -> dict[str, Any]:
        return {"invocations": self.invocations, "fuel_used": self.fuel_used,
                "cpu_used_s": round(self.cpu_used_s, 3), "outcomes": dict(self.outcomes)}


class TaskScore(NamedTuple):
    """A task reward and, when the math judge decided it, the judge's outcome (None: decided without it)."""

    value: float
    judged: Judgement | None = None


class RewardBreakdown(BaseModel):
    """The parts of one rollout's reward (stored in rollout files next to the total)."""

    model_config = ConfigDict(frozen=True)

    task_reward: float
    length_penalty: float
    total: float


# ---------------------------------------------------------------------------------------------
# Length control


def thinking_budget_suffix(target_len: int) -> str:
    """The prompt suffix stating the thinking budget (INTELLECT-2's wording)."""
    if target_len <= 0:
        raise ValueError(f"target_len must be positive, got {target_len}")
    return f"\n\nThink for {int(target_len)} tokens before giving a response."


def length_penalty(target_len: int, actual_len: int, alpha: float = DEFAULT_ALPHA) -> float:
    """α·|target_len − actual_len| (subtracted from the task reward)."""
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    return alpha * abs(int(target_len) - int(actual_len))


def applied_length_penalty(task_reward: float, target_len: int | None, actual_len: int, alpha: float,
                           scope: LengthScope = "solved") -> float:
    """The length penalty a completion's reward carries: `length_penalty` when it solved the task (task reward
    > 0), else 0 — an unsolved answer is not scored by its length, so a group of wrong answers stays flat (zero
    advantages) instead of learning length alone; None `target_len` (no thinking budget): 0. `scope="all"`:
    every completion (the old rule, for pools whose rules predate it)."""
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    if scope not in ("solved", "all"):
        raise ValueError(f"length scope must be 'solved' or 'all', got {scope!r}")
    if target_len is None or (scope == "solved" and task_reward <= 0):
        return 0.0
    return length_penalty(target_len, actual_len, alpha)


def reward(
    task: Task,
    completion: str,
    target_len: int,
    completion_len: int,
    alpha: float = DEFAULT_ALPHA,
    *,
    sandbox: SandboxLimits | None = None,
    judge: JudgeBudget | None = None,
    length_scope: LengthScope = "solved",
) -> RewardBreakdown:
    """task_reward − α·|target_len − completion_len| for a solved completion, task_reward (0) for an unsolved
    one (`applied_length_penalty`; completion_len counted in tokens)."""
    tr = task_reward(task, completion, sandbox=sandbox, judge=judge)
    lp = applied_length_penalty(tr, target_len, completion_len, alpha, length_scope)
    return RewardBreakdown(task_reward=tr, length_penalty=lp, total=tr - lp)


def task_reward(task: Task, completion: str, *, sandbox: SandboxLimits | None = None,
                judge: JudgeBudget | None = None) -> float:
    """1.0 if the completion solves the task, else 0.0. Never raises on a bad completion."""
    return task_score(task, completion, sandbox=sandbox, judge=judge).value


def task_score(task: Task, completion: str, *, sandbox: SandboxLimits | None = None,
               judge: JudgeBudget | None = None) -> TaskScore:
    """`task_reward` with the math judge's outcome when the judge decided it (`judge`: the submission's
    budget, spent in place)."""
    try:
        if task.verifier is VerifierKind.MATH:
            return math_score(completion, task.answer or "", judge=judge)
        if task.verifier is VerifierKind.CODE:
            return TaskScore(code_reward(completion, task.tests or [], sandbox, prompt=task.prompt))
    except (SandboxUnavailableError, MathJudgeUnavailableError):
        raise  # nothing here can judge the task: it is refused, never scored 0 against an honest worker
    except Exception:  # a scorer bug must not crash a worker or validator; it scores zero
        logger.exception("reward of task %s failed", task.id)
        return TaskScore(0.0)
    raise ValueError(f"unknown verifier kind {task.verifier!r}")


# ---------------------------------------------------------------------------------------------
# Math

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")


_BRACE = re.compile(r"[{}]")


def _last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} or \\fbox{...}, braces balanced; None if none.

    One pass pairs every brace (a scan to the end from each opening was quadratic: 56,000 characters of
    `\\boxed{` held a validator for 70 s: issue 32)."""
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text)]
    if not starts:
        return None
    closing: dict[int, int] = {}  # index of an opening brace -> index of the brace that closes it
    opened: list[int] = []
    for m in _BRACE.finditer(text):
        if m.group() == "{":
            opened.append(m.start())
        elif opened:
            closing[opened.pop()] = m.start()
    for start in reversed(starts):
        end = closing.get(start - 1)
        if end is not None:
            return text[start:end].strip()
    return None


def extract_answer(completion: str) -> str | None:
    """The final answer: last \\boxed{} content, else the last number; None if neither."""
    boxed = _last_boxed(completion)
    if boxed is not None:
        return boxed
    # after a thinking block, only the response counts
    tail = completion.rsplit("</think>", 1)[-1]
    numbers = _NUMBER.findall(tail)
    return numbers[-1] if numbers else None


def _strip_braces_cmd(s: str, cmd: str) -> str:
    """Replace \\cmd{X} by X (one level, repeated)."""
    pattern = re.compile(r"\\" + cmd + r"\s*\{([^{}]*)\}")
    while True:
        new = pattern.sub(r"\1", s)
        if new == s:
            return s
        s = new


def _normalize(ans: str) -> str:
    s = ans.strip()
    s = s.replace("$", "").replace("\\!", "").replace("\\,", "").replace("\\;", "").replace("\\ ", "")
    s = s.replace("\\left", "").replace("\\right", "").replace("\\displaystyle", "")
    for cmd in ("text", "textbf", "mathrm", "mathbf", "operatorname"):
        s = _strip_braces_cmd(s, cmd)
    s = s.replace("^\\circ", "").replace("^{\\circ}", "").replace("\\%", "").replace("%", "")
    s = re.sub(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"((\1)/(\2))", s)
    s = re.sub(r"\\[dt]?frac\s*(\d)\s*(\d)", r"((\1)/(\2))", s)
    s = re.sub(r"\\sqrt\s*\[([^{}\]]*)\]\s*\{([^{}]*)\}", r"((\2)**(1/(\1)))", s)
    s = re.sub(r"\\sqrt\s*\{([^{}]*)\}", r"sqrt(\1)", s)
    s = re.sub(r"\\sqrt\s*(\d+)", r"sqrt(\1)", s)
    s = s.replace("\\cdot", "*").replace("\\times", "*").replace("\\div", "/").replace("\\pi", "pi")
    s = s.replace("{", "(").replace("}", ")").replace("^", "**").replace("\\", "")
    s = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", s)  # thousands separators
    s = re.sub(r"^[a-zA-Z]\s*=\s*", "", s)  # "x = 5" -> "5"
    s = s.rstrip(".").strip()
    return s


_SAFE = re.compile(r"^[0-9a-zA-Z+\-*/().\s]*$")
_NAMES = {"sqrt", "pi", "e", "E", "I", "i", "oo", "log", "ln", "exp", "sin", "cos", "tan"}


def _parse(expr: str) -> sympy.Expr | None:
    """Parse a normalised answer into sympy, or None if it is not a safe, small expression."""
    if not expr or len(expr) > MAX_ANSWER_CHARS or not _SAFE.match(expr) or "__" in expr:
        return None
    for name in re.findall(r"[a-zA-Z_]+", expr):
        if name not in _NAMES and len(name) > 1:
            return None
    import sympy
    from sympy.parsing.sympy_parser import (
        convert_xor,
        implicit_multiplication_application,
        parse_expr,
        standard_transformations,
    )

    transformations = (*standard_transformations, implicit_multiplication_application, convert_xor)
    local = {"e": sympy.E, "i": sympy.I, "ln": sympy.log, "pi": sympy.pi}
    try:
        tree = parse_expr(expr, local_dict=local, transformations=transformations, evaluate=False)
    except Exception:  # sympy raises many types on bad syntax
        return None
    degree = 0.0
    for nodes, node in enumerate(sympy.preorder_traversal(tree), 1):
        if nodes > MAX_EXPR_NODES:
            return None
        if isinstance(node, sympy.Pow):
            # bound exponents before anything is evaluated: 9^9^9 must not hang the validator
            if node.exp.atoms(sympy.Pow):
                return None
            try:
                exp = sympy.sympify(node.exp)  # no powers inside: cheap
            except Exception:
                return None
            if not exp.is_number or abs(complex(exp)) > MAX_EXPONENT:
                return None
            if node.base.atoms(sympy.Pow) and abs(complex(exp)) > 10:
                return None
            if node.base.free_symbols:
                degree += abs(complex(exp))
        elif isinstance(node, sympy.Number) and abs(node) > 10**100:
            return None
    if degree > MAX_SYMBOLIC_DEGREE:  # expanding (x+1)**999*(x+2)**999 would stall simplify
        return None
    try:
        return sympy.sympify(tree)
    except Exception:
        return None


def answers_equal(given: str, reference: str, *, judge: JudgeBudget | None = None) -> bool:
    """Is the extracted answer equal to the reference, as a string, number or expression?

    Normalised strings and plain numbers are compared here. Anything else goes to the math judge,
    a separate process that runs the bounded sympy comparison and math-verify (its LaTeX parser
    knows sets, intervals, equations, ...) under the limits of the module docstring: a comparison
    past them scores False, it never stalls the caller. Expressions are bounded before anything is
    evaluated (`_parse`).
    """
    outcome, _ = compare_answers(given, reference, judge=judge)
    return outcome is Judgement.EQUAL


def compare_answers(given: str, reference: str, *, judge: JudgeBudget | None = None) -> tuple[Judgement, bool]:
    """(outcome, whether the math judge decided it) for `answers_equal`; `judge` is spent in place."""
    if len(given) > MAX_ANSWER_CHARS:
        return Judgement.NOT_EQUAL, False
    a, b = _normalize(given), _normalize(reference)
    if not a:
        return Judgement.NOT_EQUAL, False
    if a == b:
        return Judgement.EQUAL, False
    fast = _numbers_equal(a, b)
    if fast is not None:
        return (Judgement.EQUAL if fast else Judgement.NOT_EQUAL), False
    return _JUDGE.judge(given, reference, JudgeBudget() if judge is None else judge), True


_PLAIN_NUMBER = re.compile(r"^-?(?:\d+(?:\.\d*)?|\.\d+)(?:/\d+)?$")


def _numbers_equal(a: str, b: str) -> bool | None:
    """Both normalised answers plain decimals or fractions: are they equal (rel. tol. 1e-6)? None otherwise."""
    if not (_PLAIN_NUMBER.match(a) and _PLAIN_NUMBER.match(b)):
        return None
    from fractions import Fraction

    try:
        fa, fb = Fraction(a), Fraction(b)
    except (ValueError, ZeroDivisionError):
        return None
    return abs(fa - fb) <= Fraction(1, 10**6) * max(1, abs(fb))


def _sympy_equal(a: str, b: str) -> bool:
    """The bounded sympy comparison of two normalised answers (runs inside the math judge)."""
    ea, eb = _parse(a), _parse(b)
    if ea is None or eb is None:
        return False
    import sympy

    try:
        if ea.is_number and eb.is_number:
            va, vb = complex(sympy.N(ea, 30)), complex(sympy.N(eb, 30))
            if any(math.isnan(v.real) or math.isinf(v.real) for v in (va, vb)):
                return False
            return abs(va - vb) <= 1e-6 * max(1.0, abs(vb))
        return bool(sympy.simplify(ea - eb) == 0)
    except MemoryError:
        raise
    except Exception:
        return False


def _math_verify_equal(given: str, reference: str) -> bool:
    """math-verify's verdict on two raw answers (LaTeX or plain). Its own timeouts are off: they are
    SIGALRM wall clock, which no two machines share; the judge's fuel and CPU limits bound it instead."""
    from math_verify import parse, verify

    gold = parse("\\boxed{" + reference + "}", parsing_timeout=0)
    pred = parse("\\boxed{" + given + "}", parsing_timeout=0)
    if not gold or not pred:
        return False
    return bool(verify(gold, pred, timeout_seconds=None))


def _judge_compare(given: str, reference: str) -> bool:
    a, b = _normalize(given), _normalize(reference)
    try:
        if _sympy_equal(a, b):
            return True
        return _math_verify_equal(given, reference)
    except MemoryError:
        raise  # a machine-dependent limit, not a verdict (`_judge_child`)
    except Exception:
        return False


class _OutOfFuel(BaseException):
    """Raised by the fuel counter (a BaseException: sympy and math-verify catch Exception)."""


class _OutOfCpu(BaseException):
    """Raised by the SIGPROF handler at the comparison's CPU limit."""


def _judge_child(given: str, reference: str, fuel: int, cpu_s: float) -> tuple[str, int]:
    """One comparison, in a fresh fork of the warmed-up judge: (outcome, Python calls made).

    Every fork starts from the same state (sympy's cache cleared, its random generators seeded, a full
    garbage collection and none after it, the hash seed fixed), so the number of calls a comparison makes
    is a property of the two answers and the pinned libraries, not of the machine, its load or the
    comparisons before it."""
    import gc
    import random
    import resource
    import signal
    import sys

    import sympy
    import sympy.core.random

    limit = math.ceil(cpu_s)
    resource.setrlimit(resource.RLIMIT_CPU, (limit + 1, limit + 2))  # where no Python runs to see SIGPROF
    try:
        with open("/proc/self/statm") as f:
            vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        resource.setrlimit(resource.RLIMIT_AS, (vm + JUDGE_MEMORY_BYTES, vm + JUDGE_MEMORY_BYTES))
    except (OSError, ValueError):
        pass  # no /proc: the CPU and wall limits still hold
    sympy.core.cache.clear_cache()
    # sympy's assumption system checks facts in a random order (its own generator, seeded from the OS)
    sympy.core.random.seed(0)
    random.seed(0)
    # one canonical heap: garbage the judge left (whose weakly-held cache entries a comparison may or may not
    # find, depending on when a collection last ran) is gone, and no collection runs while calls are counted
    gc.collect()
    gc.disable()
    state = {"calls": 0, "fuel": False, "cpu": False, "memory": False}

    def count(frame: Any, event: str, arg: Any) -> None:  # 'call' events only: no local tracer
        state["calls"] += 1
        if state["calls"] > fuel:
            state["fuel"] = True
            raise _OutOfFuel

    def on_cpu(signum: int, frame: Any) -> None:
        state["cpu"] = True
        raise _OutOfCpu

    signal.signal(signal.SIGPROF, on_cpu)
    signal.setitimer(signal.ITIMER_PROF, cpu_s)
    equal = False
    try:
        sys.settrace(count)
        equal = _judge_compare(given, reference)
    except (_OutOfFuel, _OutOfCpu):
        pass
    except MemoryError:  # RLIMIT_AS: where it falls depends on the machine's address space layout
        state["memory"] = True
    finally:
        sys.settrace(None)
        signal.setitimer(signal.ITIMER_PROF, 0)
    # a swallowed _OutOfFuel still counts: the flag was set at the same call on every machine
    if state["fuel"]:
        return Judgement.OVER_BUDGET.value, fuel
    if state["cpu"] or state["memory"]:
        return Judgement.UNJUDGEABLE.value, state["calls"]
    return (Judgement.EQUAL if equal else Judgement.NOT_EQUAL).value, state["calls"]


def _judge_fork(given: str, reference: str, fuel: int, cpu_s: float, wall_s: float) -> tuple[str, int, float]:
    """Run `_judge_child` in a fork, killed at `wall_s`: (outcome, calls, CPU seconds of the fork)."""
    import json
    import select
    import signal

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer on the pipe, never return into the judge's loop
        code = 1
        try:
            os.close(r)
            os.write(w, json.dumps(_judge_child(given, reference, fuel, cpu_s)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    try:
        data = os.read(r, 256) if select.select([r], [], [], wall_s)[0] else b""
    finally:
        os.close(r)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)  # done or not, it goes
        _, _, usage = os.wait4(pid, 0)
    cpu = usage.ru_utime + usage.ru_stime
    try:
        outcome, calls = json.loads(data)
        return str(Judgement(outcome)), int(calls), cpu
    except (ValueError, TypeError):  # killed: wall clock, RLIMIT_CPU, RLIMIT_AS outside Python
        return Judgement.UNJUDGEABLE.value, 0, cpu


def _judge_main(conn: Any) -> None:
    """The math judge process: answer (given, reference, fuel, cpu_s, wall_s) requests until the pipe closes,
    each in a fork of this warmed-up process (nothing a comparison does stays here)."""
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    # load sympy's and math-verify's lazy parts (the LaTeX grammar, simplify) once, so that no comparison
    # pays for (or counts calls of) an import that another machine's judge did earlier
    _judge_compare("\\frac{x^2+2x+1}{x+1}", "x+1")
    _judge_compare("\\{1,2\\}", "\\{2,1\\}")
    _judge_compare("[1,2)", "(1,2]")
    _judge_compare("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}")
    conn.send("ready" if os.environ.get("PYTHONHASHSEED") == "0" else "hash seed not fixed")
    while True:
        try:
            given, reference, fuel, cpu_s, wall_s = conn.recv()
        except (EOFError, OSError):
            return
        conn.send(_judge_fork(given, reference, fuel, cpu_s, wall_s))


def _judge_serve(fd: int) -> None:
    """Entry point of the judge's interpreter (`_MathJudge._start`): serve on the socket `fd`."""
    from multiprocessing.connection import Connection

    _judge_main(Connection(fd))


class _MathJudge:
    """A persistent child process that compares answers, each comparison in a fork of it (fresh state, its
    own CPU, memory and wall-clock limits). The parent only waits: sympy and math-verify code cannot be
    interrupted from another thread. One comparison at a time (one lock); `_JudgePool` runs several."""

    START_TIMEOUT = 120.0  # importing sympy + math-verify on a loaded machine
    SLACK_S = 30.0  # beyond a comparison's own wall clock before the judge process itself is deemed stuck

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: Any = None
        self._conn: Any = None

    def _start(self) -> None:
        import socket
        import subprocess
        import sys
        from multiprocessing.connection import Connection

        # a fresh interpreter that imports this module and nothing of the caller's (not multiprocessing's spawn,
        # which re-imports the caller's __main__: a worker's and a validator's entry points differ, and so would
        # the judge's state and its call counts); the hash seed is fixed, since sympy iterates sets of names
        ours, theirs = socket.socketpair()
        with theirs:
            proc = subprocess.Popen(
                [sys.executable, "-c", "import sys; from intellect.verifier.rewards import _judge_serve; "
                 "_judge_serve(int(sys.argv[1]))", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONHASHSEED": "0"})
        conn = Connection(ours.detach())
        try:
            hello = conn.recv() if conn.poll(self.START_TIMEOUT) else None
        except (EOFError, OSError):  # it died while starting
            hello = None
        if hello != "ready":
            proc.kill()
            proc.wait()
            conn.close()
            raise MathJudgeUnavailableError(
                f"the math judge process did not start within {self.START_TIMEOUT:.0f} s ({hello or 'no answer'}; "
                f"sympy/math-verify missing or the machine overloaded): math tasks cannot be judged here")
        self._proc, self._conn = proc, conn

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait(5)
            self._conn.close()
        self._proc = self._conn = None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def judge(self, given: str, reference: str, budget: JudgeBudget) -> Judgement:
        """One comparison under `budget` (spent in place)."""
        if budget.calls <= 0:
            outcome = Judgement.OVER_BUDGET
        elif budget.cpu_s <= 0:
            outcome = Judgement.UNJUDGEABLE
        else:
            budget.calls -= 1
            budget.invocations += 1
            cpu_s = min(budget.cpu_per_call_s, budget.cpu_s)
            outcome, calls, cpu = self._run(given, reference, budget.fuel, cpu_s, budget.wall_per_call_s)
            budget.fuel_used += calls
            budget.cpu_used_s += cpu
            budget.cpu_s -= cpu
            if outcome is Judgement.UNJUDGEABLE:
                logger.warning("math answer %r vs %r: no verdict within the judge's CPU/wall/memory limits; "
                               "unjudgeable (scores 0 here, never a rejection)", given[:80], reference[:80])
        budget.outcomes[outcome.value] = budget.outcomes.get(outcome.value, 0) + 1
        return outcome

    def _run(self, given: str, reference: str, fuel: int, cpu_s: float, wall_s: float) -> tuple[Judgement, int, float]:
        with self._lock:
            if not self.alive():
                self._stop()
                self._start()
            try:
                self._conn.send((given, reference, fuel, cpu_s, wall_s))
                if self._conn.poll(wall_s + self.SLACK_S):
                    outcome, calls, cpu = self._conn.recv()
                    return Judgement(outcome), int(calls), float(cpu)
            except (EOFError, OSError):
                pass
            logger.warning("the math judge process stopped answering; restarting it")
            self._stop()
            return Judgement.UNJUDGEABLE, 0, cpu_s


class _JudgePool:
    """`JUDGE_PROCESSES` judges, each taken by one comparison at a time: comparisons of different submissions (a
    validator verifies on several threads) run side by side, so one stranger's file holds at most one judge,
    for at most its `JudgeBudget`. Judges start on first use."""

    def __init__(self, size: int) -> None:
        self._judges = [_MathJudge() for _ in range(size)]
        self._free: queue.SimpleQueue[_MathJudge] = queue.SimpleQueue()
        for j in self._judges:
            self._free.put(j)

    def judge(self, given: str, reference: str, budget: JudgeBudget) -> Judgement:
        if budget.calls <= 0 or budget.cpu_s <= 0:  # a spent budget's verdict needs no judge: never queue for one
            return self._judges[0].judge(given, reference, budget)
        j = self._free.get()
        try:
            return j.judge(given, reference, budget)
        finally:
            self._free.put(j)

    def pids(self) -> list[int]:
        """Process ids of the judges running now."""
        return [j._proc.pid for j in self._judges if j.alive()]


_JUDGE: _JudgePool | _MathJudge = _JudgePool(JUDGE_PROCESSES)


def math_reward(completion: str, reference: str, *, judge: JudgeBudget | None = None) -> float:
    return math_score(completion, reference, judge=judge).value


def math_score(completion: str, reference: str, *, judge: JudgeBudget | None = None) -> TaskScore:
    """1.0 if the completion's final answer equals the reference, with the judge's outcome if it decided."""
    ans = extract_answer(completion)
    if ans is None:
        return TaskScore(0.0)
    outcome, judged = compare_answers(ans, reference, judge=judge)
    return TaskScore(1.0 if outcome is Judgement.EQUAL else 0.0, outcome if judged else None)


# ---------------------------------------------------------------------------------------------
# Code

_FENCE = re.compile(r"```(?:python|py|Python)?[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(completion: str) -> str:
    """The last fenced code block (```python ... ```), else the whole response after </think>."""
    tail = completion.rsplit("</think>", 1)[-1]
    blocks = _FENCE.findall(tail)
    if blocks:
        return blocks[-1]
    return tail


def code_reward(
    completion: str, tests: list[str], sandbox: SandboxLimits | None = None, *, prompt: str | None = None
) -> float:
    """1.0 if the completion's code passes every test, run in the bubblewrap sandbox (see
    `intellect.verifier.sandbox`: the completion never decides pass or fail), else 0.0.

    `prompt` is the task's prompt: when it is Python (HumanEval), the helper functions it defines are
    run from the prompt's text on the tests' side, not from the completion. Raises
    `SandboxUnavailableError` where no sandbox can run (code tasks are refused there, not run unconfined).
    """
    code = extract_code(completion)
    if not code.strip():
        return 0.0
    result = run_python(code, tests, sandbox, prelude=prompt_prelude(prompt))
    logger.debug("sandbox: %s in %.2fs (%d calls) %s", result.reason.value, result.wall_seconds,
                 result.calls, result.stderr[:200])
    return 1.0 if result.passed else 0.0
