"""Task sources for GRPO: public dataset shapes, a synthetic generator, difficulty filtering.

All of them produce `intellect.verifier.tasks.Task` rows (schema `intellect.taskset/v1`):

- `load_numinamath(path)`, `load_deepscaler(path)`, `load_synthetic1(path)`: local files
  (Parquet, JSONL or a JSON list) in the column shapes of NuminaMath-1.5, Deepscaler and
  SYNTHETIC-1. Rows that cannot be verified (proofs, no answer, unsupported test kinds) are
  skipped and counted in the returned `LoadReport`.
- `synthetic_task_set(n, seed, kinds)`: verifiable problems made offline — arithmetic, multi-step
  word problems, small Python functions with assert tests. Same seed, same tasks.
- `filter_by_difficulty(task_set, engine, ...)`: score each task with a model (k samples) and
  keep those with a solve rate in [low, high] (INTELLECT-2 kept [0.1, 0.8]); the kept tasks carry
  their solve rate in `difficulty`.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from intellect.verifier.rewards import task_reward
from intellect.verifier.tasks import Task, TaskSet, TaskSetError, VerifierKind
from intellect.verifier.tasksets import read_rows

if TYPE_CHECKING:
    from intellect.agents.engines import InferenceEngine, SamplingParams

log = logging.getLogger(__name__)

__all__ = [
    "SYNTHETIC_KINDS",
    "LoadReport",
    "filter_by_difficulty",
    "load_deepscaler",
    "load_numinamath",
    "load_synthetic1",
    "synthetic_task_set",
]

SYNTHETIC_KINDS = ("arithmetic", "word", "code")


@dataclass
class LoadReport:
    """What a loader kept and why it skipped the rest."""

    kept: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


# --------------------------------------------------------------------------------------------
# local files in public dataset shapes


def _read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a downloaded dataset file (the task-set converters' reader: `.jsonl`, `.json`, `.parquet`,
    optionally `.gz`); `TaskSetError` naming the file on anything unreadable."""
    return read_rows(path)


def _clean_answer(answer: Any) -> str | None:
    if answer is None:
        return None
    text = str(answer).strip()
    if not text or text.lower() in {"proof", "notfound", "none", "n/a"}:
        return None
    return text


def _finish(tasks: list[Task], name: str, report: LoadReport) -> tuple[TaskSet, LoadReport]:
    report.kept = len(tasks)
    log.info("loaded %d tasks from %s (skipped %s)", len(tasks), name, report.skipped)
    return TaskSet(tasks, name=name), report


def load_numinamath(path: str | Path, name: str | None = None) -> tuple[TaskSet, LoadReport]:
    """NuminaMath-1.5 rows (problem, solution, answer, problem_type, question_type, source, ...).

    Proof questions and rows whose answer is empty/"proof"/"notfound" cannot be checked
    automatically and are skipped.
    """
    report = LoadReport()
    tasks: list[Task] = []
    seen: set[str] = set()
    for i, row in enumerate(_read_rows(path)):
        if str(row.get("question_type", "")).lower() == "proof":
            report.skip("proof question")
            continue
        answer = _clean_answer(row.get("answer"))
        problem = row.get("problem")
        if not problem or answer is None:
            report.skip("no problem or no checkable answer")
            continue
        task_id = f"numina-{i}"
        if task_id in seen:
            continue
        seen.add(task_id)
        tasks.append(
            Task(id=task_id, prompt=str(problem), verifier=VerifierKind.MATH, answer=answer,
                 source=f"numinamath-1.5/{row.get('source') or 'unknown'}")
        )
    return _finish(tasks, name or Path(path).stem, report)


def load_deepscaler(path: str | Path, name: str | None = None) -> tuple[TaskSet, LoadReport]:
    """Deepscaler rows (problem, answer, solution)."""
    report = LoadReport()
    tasks: list[Task] = []
    for i, row in enumerate(_read_rows(path)):
        answer = _clean_answer(row.get("answer"))
        if not row.get("problem") or answer is None:
            report.skip("no problem or no answer")
            continue
        tasks.append(
            Task(id=f"deepscaler-{i}", prompt=str(row["problem"]), verifier=VerifierKind.MATH,
                 answer=answer, source="deepscaler")
        )
    return _finish(tasks, name or Path(path).stem, report)


def _synthetic1_tests(info: dict[str, Any]) -> tuple[list[str], str | None] | None:
    """Python assert tests from SYNTHETIC-1 `verification_info` test cases, or None."""
    cases = info.get("test_cases") or []
    language = str(info.get("language", "python")).lower()
    if language not in {"python", "python3", "py"} or not isinstance(cases, list) or not cases:
        return None
    if not all(isinstance(case, dict) for case in cases):
        return None
    tests: list[str] = []
    entry_point = None
    for case in cases:
        kind = case.get("type")
        if kind == "function_call" and case.get("fn_name"):
            entry_point = str(case["fn_name"])
            args = case.get("input")
            args = args if isinstance(args, list) else [args]
            expected = case.get("output")
            if isinstance(expected, list) and len(expected) == 1:
                expected = expected[0]
            call = f"{entry_point}(*{args!r})"
            tests.append(f"assert {call} == {expected!r}, {call!r}")
        elif kind == "assert" and case.get("code"):
            tests.append(str(case["code"]))
        else:
            return None  # stdin/stdout programs need a process runner the verifier lacks
    return tests, entry_point


def load_synthetic1(path: str | Path, name: str | None = None) -> tuple[TaskSet, LoadReport]:
    """SYNTHETIC-1 rows: prompt (or problem), task_type, verification_info (JSON text or dict).

    Math rows (task_type containing "math") need `verification_info.ground_truth`; code rows
    (task_type containing "code") need Python test cases of type `function_call` or `assert`.
    Other task types (LLM-judged, stdin/stdout programs, code output prediction) are skipped.
    """
    report = LoadReport()
    tasks: list[Task] = []
    for i, row in enumerate(_read_rows(path)):
        prompt = row.get("prompt") or row.get("problem")
        task_type = str(row.get("task_type", "")).lower()
        info = row.get("verification_info") or {}
        if isinstance(info, str):
            try:
                info = json.loads(info)
            except (ValueError, RecursionError):  # bad JSON, an int over 4300 digits, deep nesting
                report.skip("verification_info is not JSON")
                continue
        task_id = str(row.get("problem_id") or f"synthetic1-{i}")
        if not prompt or not isinstance(info, dict):
            report.skip("no prompt or no verification_info")
            continue
        try:
            if "math" in task_type:
                answer = _clean_answer(info.get("ground_truth"))
                if answer is None:
                    report.skip("math row without ground_truth")
                    continue
                tasks.append(Task(id=task_id, prompt=str(prompt), verifier=VerifierKind.MATH,
                                  answer=answer, source="synthetic-1"))
            elif "code" in task_type and "output" not in task_type:
                converted = _synthetic1_tests(info)
                if converted is None:
                    report.skip("code row without python function/assert tests")
                    continue
                tests, entry_point = converted
                tasks.append(Task(id=task_id, prompt=str(prompt), verifier=VerifierKind.CODE,
                                  tests=tests, entry_point=entry_point, source="synthetic-1"))
            else:
                report.skip(f"unsupported task_type {task_type or '?'}")
        except (ValidationError, RecursionError, ValueError) as exc:  # RecursionError: repr of deep test args
            report.skip("invalid row")
            log.debug("synthetic-1 row %d invalid: %s", i, exc)
    return _finish(tasks, name or Path(path).stem, report)


# --------------------------------------------------------------------------------------------
# synthetic generator

_NAMES = ["Ada", "Ben", "Cleo", "Dan", "Eve", "Finn", "Gia", "Hugo", "Iris", "Jon"]
_ITEMS = ["apples", "marbles", "stickers", "coins", "books", "pencils", "cards", "shells"]


def arithmetic_task(rng: random.Random, index: int, max_operand: int = 99,
                    ops: Sequence[str] = ("+", "-", "*")) -> Task:
    """`What is a op b?` with a non-negative integer answer."""
    op = rng.choice(list(ops))
    a, b = rng.randint(0, max_operand), rng.randint(0, max_operand)
    if op == "-" and b > a:
        a, b = b, a
    if op == "*":
        b = rng.randint(0, min(max_operand, 12))
    value = {"+": a + b, "-": a - b, "*": a * b}[op]
    return Task(id=f"arith-{index}", prompt=f"What is {a} {op} {b}?", verifier=VerifierKind.MATH,
                answer=str(value), source="synthetic/arithmetic")


def word_task(rng: random.Random, index: int) -> Task:
    """A 2–4 step word problem on one quantity (gain, loss, multiply, share)."""
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    value = rng.randint(2, 20)
    sentences = [f"{name} has {value} {item}."]
    for _ in range(rng.randint(1, 3)):
        step = rng.choice(["gain", "lose", "double", "triple"])
        if step == "gain":
            k = rng.randint(1, 15)
            value += k
            sentences.append(f"{name} gets {k} more {item}.")
        elif step == "lose" and value > 1:
            k = rng.randint(1, value - 1)
            value -= k
            sentences.append(f"{name} gives away {k} {item}.")
        elif step == "double":
            value *= 2
            sentences.append(f"{name} doubles the number of {item}.")
        else:
            value *= 3
            sentences.append(f"{name} triples the number of {item}.")
    sentences.append(f"How many {item} does {name} have now?")
    return Task(id=f"word-{index}", prompt=" ".join(sentences), verifier=VerifierKind.MATH,
                answer=str(value), source="synthetic/word")


def _code_templates(rng: random.Random) -> tuple[str, str, list[str]]:
    k = rng.randint(2, 9)
    kind = rng.randrange(6)
    if kind == 0:
        fn = f"add_{k}"
        return fn, f"Write a Python function `{fn}(x)` that returns x plus {k}.", [
            f"assert {fn}({x}) == {x + k}" for x in (0, 5, -3, 100)]
    if kind == 1:
        fn = f"times_{k}"
        return fn, f"Write a Python function `{fn}(x)` that returns x multiplied by {k}.", [
            f"assert {fn}({x}) == {x * k}" for x in (0, 3, -2, 11)]
    if kind == 2:
        fn = "reverse_text"
        return fn, f"Write a Python function `{fn}(s)` that returns the string s reversed.", [
            f"assert {fn}({s!r}) == {s[::-1]!r}" for s in ("", "abc", "hello", "racecar!")]
    if kind == 3:
        fn = "sum_list"
        return fn, f"Write a Python function `{fn}(xs)` that returns the sum of the list xs.", [
            f"assert {fn}({xs!r}) == {sum(xs)}" for xs in ([], [1, 2, 3], [-5, 5, 10], [k])]
    if kind == 4:
        fn = f"count_multiples_{k}"
        return fn, (f"Write a Python function `{fn}(n)` that returns how many integers in "
                    f"1..n are divisible by {k}."), [
            f"assert {fn}({n}) == {n // k}" for n in (0, k, 50, 99)]
    fn = "max_of"
    return fn, f"Write a Python function `{fn}(xs)` that returns the largest element of the non-empty list xs.", [
        f"assert {fn}({xs!r}) == {max(xs)}" for xs in ([1], [3, 9, 2], [-4, -1, -7], [k, k + 1])]


def code_task(rng: random.Random, index: int) -> Task:
    """A small Python function to write, with assert tests."""
    entry, prompt, tests = _code_templates(rng)
    return Task(id=f"code-{index}", prompt=prompt, verifier=VerifierKind.CODE, tests=tests,
                entry_point=entry, source="synthetic/code")


def synthetic_task_set(
    n: int,
    seed: int = 0,
    kinds: Sequence[str] = ("arithmetic",),
    name: str | None = None,
    max_operand: int = 99,
    ops: Sequence[str] = ("+", "-", "*"),
    exclude_prompts: Iterable[str] = (),
) -> TaskSet:
    """`n` seeded synthetic tasks, kinds drawn uniformly from `kinds`.

    Prompts are unique within the set; `exclude_prompts` keeps a held-out set disjoint from a
    training set (pass the training prompts).
    """
    unknown = set(kinds) - set(SYNTHETIC_KINDS)
    if unknown or not kinds:
        raise ValueError(f"unknown synthetic task kinds {sorted(unknown)}; known: {SYNTHETIC_KINDS}")
    rng = random.Random(seed)
    seen = set(exclude_prompts)
    tasks: list[Task] = []
    attempts = 0
    while len(tasks) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise ValueError(f"cannot draw {n} distinct tasks of kinds {kinds} (space exhausted)")
        kind = rng.choice(list(kinds))
        if kind == "arithmetic":
            task = arithmetic_task(rng, len(tasks), max_operand=max_operand, ops=ops)
        elif kind == "word":
            task = word_task(rng, len(tasks))
        else:
            task = code_task(rng, len(tasks))
        if task.prompt in seen:
            continue
        seen.add(task.prompt)
        tasks.append(task.model_copy(update={"id": f"{task.id}-s{seed}"}))
    return TaskSet(tasks, name=name or f"synthetic-{'-'.join(kinds)}-{seed}")


# --------------------------------------------------------------------------------------------
# offline difficulty filtering


def filter_by_difficulty(
    task_set: TaskSet,
    engine: InferenceEngine,
    params: SamplingParams,
    *,
    samples: int = 8,
    low: float = 0.1,
    high: float = 0.8,
    batch_prompts: int = 8,
    prompt_format: Callable[[Task], str] | None = None,
    scorer: Callable[[Task, str], float] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[TaskSet, dict[str, float]]:
    """Keep tasks whose solve rate over `samples` completions lies in [low, high].

    Returns the filtered set (each task's `difficulty` = its solve rate) and every task's solve
    rate by id. A task "solved" means a task reward >= 1 - 1e-9 (the verifier's `task_reward`).
    `progress(done, total)` is called after every batch of `batch_prompts` tasks is scored.
    Raises `TaskSetError` if nothing survives.
    """
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"need 0 <= low <= high <= 1, got [{low}, {high}]")
    score = scorer or (lambda task, text: float(task_reward(task, text)))
    fmt = prompt_format or (lambda task: task.prompt)
    rates: dict[str, float] = {}
    tasks = list(task_set)
    for start in range(0, len(tasks), batch_prompts):
        chunk = tasks[start : start + batch_prompts]
        prompts = [fmt(t) for t in chunk for _ in range(samples)]
        gens = engine.generate(prompts, params)
        for j, task in enumerate(chunk):
            texts = [g.text for g in gens[j * samples : (j + 1) * samples]]
            rates[task.id] = sum(score(task, t) >= 1.0 - 1e-9 for t in texts) / samples
        if progress is not None:
            progress(len(rates), len(tasks))
    return select_by_rate(task_set, rates, low, high), rates


def select_by_rate(task_set: TaskSet, rates: dict[str, float], low: float, high: float) -> TaskSet:
    """The tasks whose solve rate (`rates`, by task id: `filter_by_difficulty`'s measurement, or a stored copy of
    it) lies in [low, high], each with `difficulty` = its rate. Raises `TaskSetError` if a task has no rate or
    nothing survives."""
    tasks = list(task_set)
    missing = [t.id for t in tasks if t.id not in rates]
    if missing:
        raise TaskSetError(f"no solve rate for {len(missing)} task(s) of {task_set.name!r}, e.g. {missing[0]!r}")
    kept = [t.model_copy(update={"difficulty": rates[t.id]}) for t in tasks if low <= rates[t.id] <= high]
    log.info("difficulty filter kept %d/%d tasks in [%.2f, %.2f]", len(kept), len(tasks), low, high)
    if not kept:
        raise TaskSetError(
            f"difficulty filter on {task_set.name!r} kept no task in [{low}, {high}] "
            f"(solve rates ranged {min(rates.values()):.2f}..{max(rates.values()):.2f})"
        )
    return TaskSet(kept, name=f"{task_set.name}-filtered")
