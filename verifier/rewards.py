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
characters and names, with powers, total degree and size bounded before anything is evaluated, and
the judge is killed after `MATH_TIMEOUT_S` of wall clock (scoring 0), so an adversarial completion
cannot run code or hang the validator.

Length control (INTELLECT-2, §3.2): the prompt ends with a suffix stating a thinking budget
`target_len`; the reward is `task_reward − α·|target_len − len|` with α = 0.0003.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from intellect.sdk import IntellectError
from intellect.verifier.sandbox import SandboxLimits, SandboxUnavailableError, prompt_prelude, run_python
from intellect.verifier.tasks import Task, VerifierKind

if TYPE_CHECKING:
    import sympy

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_ALPHA",
    "MathJudgeUnavailableError",
    "RewardBreakdown",
    "answers_equal",
    "code_reward",
    "extract_answer",
    "extract_code",
    "length_penalty",
    "math_reward",
    "reward",
    "task_reward",
    "thinking_budget_suffix",
]

DEFAULT_ALPHA = 0.0003
MAX_ANSWER_CHARS = 200
MAX_EXPONENT = 1000
MAX_SYMBOLIC_DEGREE = 64
"""Largest sum of |exponents| of an expression with variables (`(x+1)**999*(x+2)**999` is 1998)."""
MAX_EXPR_NODES = 256
"""Largest number of nodes of a parsed answer."""
MATH_TIMEOUT_S = 2.0
"""Wall-clock limit of one symbolic comparison (the judge process is killed past it; scores 0)."""


class MathJudgeUnavailableError(IntellectError, RuntimeError):
    """The math judge process cannot start here: math tasks are refused, not scored 0."""


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


def reward(
    task: Task,
    completion: str,
    target_len: int,
    completion_len: int,
    alpha: float = DEFAULT_ALPHA,
    *,
    sandbox: SandboxLimits | None = None,
) -> RewardBreakdown:
    """task_reward − α·|target_len − completion_len| (completion_len counted in tokens)."""
    tr = task_reward(task, completion, sandbox=sandbox)
    lp = length_penalty(target_len, completion_len, alpha)
    return RewardBreakdown(task_reward=tr, length_penalty=lp, total=tr - lp)


def task_reward(task: Task, completion: str, *, sandbox: SandboxLimits | None = None) -> float:
    """1.0 if the completion solves the task, else 0.0. Never raises on a bad completion."""
    try:
        if task.verifier is VerifierKind.MATH:
            return math_reward(completion, task.answer or "")
        if task.verifier is VerifierKind.CODE:
            return code_reward(completion, task.tests or [], sandbox, prompt=task.prompt)
    except (SandboxUnavailableError, MathJudgeUnavailableError):
        raise  # nothing here can judge the task: it is refused, never scored 0 against an honest worker
    except Exception:  # a scorer bug must not crash a worker or validator; it scores zero
        logger.exception("reward of task %s failed", task.id)
        return 0.0
    raise ValueError(f"unknown verifier kind {task.verifier!r}")


# ---------------------------------------------------------------------------------------------
# Math

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")


def _last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} or \\fbox{...}, braces balanced; None if none."""
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text)]
    for start in reversed(starts):
        depth = 1
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i].strip()
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


def answers_equal(given: str, reference: str, *, timeout: float | None = None) -> bool:
    """Is the extracted answer equal to the reference, as a string, number or expression?

    Normalised strings and plain numbers are compared here. Anything else goes to the math judge,
    a separate process that runs the bounded sympy comparison and math-verify (its LaTeX parser
    knows sets, intervals, equations, ...) and is killed when it takes longer than `timeout`
    seconds of wall clock (default `MATH_TIMEOUT_S`): a slow comparison scores 0, it never stalls
    the caller. Expressions are bounded before anything is evaluated (`_parse`).
    """
    if len(given) > MAX_ANSWER_CHARS:
        return False
    a, b = _normalize(given), _normalize(reference)
    if not a:
        return False
    if a == b:
        return True
    fast = _numbers_equal(a, b)
    if fast is not None:
        return fast
    return bool(_JUDGE.equal(given, reference, MATH_TIMEOUT_S if timeout is None else timeout))


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
    except Exception:
        return False


def _math_verify_equal(given: str, reference: str, seconds: int) -> bool:
    """math-verify's verdict on two raw answers (LaTeX or plain), with its own timeouts (signal-based:
    it runs in the judge process's main thread)."""
    from math_verify import parse, verify

    gold = parse("\\boxed{" + reference + "}", parsing_timeout=seconds)
    pred = parse("\\boxed{" + given + "}", parsing_timeout=seconds)
    if not gold or not pred:
        return False
    return bool(verify(gold, pred, timeout_seconds=seconds))


def _judge_compare(given: str, reference: str, seconds: int) -> bool:
    a, b = _normalize(given), _normalize(reference)
    try:
        if _sympy_equal(a, b):
            return True
        return _math_verify_equal(given, reference, seconds)
    except Exception:  # math-verify's TimeoutException included: not equal
        return False


def _judge_main(conn: Any) -> None:
    """The math judge process: answer (given, reference, seconds) requests until the pipe closes."""
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    # load sympy's and math-verify's lazy parts (the LaTeX grammar, simplify) before the first timed
    # comparison: a cold first call could otherwise outlive the wall-clock limit on a loaded machine
    _judge_compare("\\frac{x^2+2x+1}{x+1}", "x+1", 60)
    _judge_compare("\\{1,2\\}", "\\{2,1\\}", 60)
    conn.send("ready")
    while True:
        try:
            given, reference, seconds = conn.recv()
        except (EOFError, OSError):
            return
        conn.send(_judge_compare(given, reference, seconds))


class _MathJudge:
    """A persistent child process that compares answers, killed (and restarted on the next call) when
    one comparison outlives its wall-clock limit: sympy and math-verify code cannot be interrupted
    from another thread, and validators verify on several threads."""

    START_TIMEOUT = 120.0  # importing sympy + math-verify on a loaded machine

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: Any = None
        self._conn: Any = None

    def _start(self) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")  # no fork of a process holding torch threads
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_judge_main, args=(child,), name="math-judge", daemon=True)
        proc.start()
        child.close()
        if not parent.poll(self.START_TIMEOUT) or parent.recv() != "ready":
            proc.kill()
            raise MathJudgeUnavailableError(
                f"the math judge process did not start within {self.START_TIMEOUT:.0f} s (sympy/math-verify "
                f"missing or the machine overloaded): math tasks cannot be judged here")
        self._proc, self._conn = proc, parent

    def _stop(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(5)
        self._proc = self._conn = None

    def equal(self, given: str, reference: str, timeout: float) -> bool:
        with self._lock:
            if self._proc is None or not self._proc.is_alive():
                self._start()
            try:
                self._conn.send((given, reference, max(1, math.ceil(timeout))))
                if self._conn.poll(timeout):
                    return bool(self._conn.recv())
            except (EOFError, OSError):
                pass
            logger.warning("math answer %r vs %r: no verdict within %.1f s; scored as not equal",
                           given[:80], reference[:80], timeout)
            self._stop()
            return False


_JUDGE = _MathJudge()


def math_reward(completion: str, reference: str) -> float:
    ans = extract_answer(completion)
    return 1.0 if ans is not None and answers_equal(ans, reference) else 0.0


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
