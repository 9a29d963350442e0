"""Verifiable tasks: the task-set format that workers solve and validators re-check.

A task set is a JSONL or Parquet file of `Task` rows (schema `intellect.taskset/v1`). The
trainer names it in its pool by CID; workers take a claim's problems from it by the pool's problem order
(`assign_problems`: drawn with the seed the chain gave the claim, `sample_problems`, or the claim's slot in
seeded shuffled passes over the set, `epoch_problems`), so a validator can recompute exactly what was assigned.

Loaders for public dataset shapes (NuminaMath-1.5, Deepscaler, SYNTHETIC-1) and the synthetic
generator live in `intellect.agents.tasks`; they produce these `Task` rows.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from intellect.sdk import IntellectError
from intellect.sdk.poolrules import PROBLEM_ORDERS, ProblemOrder
from intellect.verifier.difficulty import DifficultyTable, cached_weights

TASKSET_SCHEMA = "intellect.taskset/v1"


class TaskSetError(IntellectError, ValueError):
    """A task-set file is malformed, of an unknown schema version, or inconsistent."""


class VerifierKind(StrEnum):
    """How a completion to a task is scored."""

    MATH = "math"  # final answer (\\boxed{} or last number/expression) compared with `answer`
    CODE = "code"  # completion's code run against `tests` in a sandbox


class Task(BaseModel):
    """One verifiable problem."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=256)
    prompt: str = Field(min_length=1)
    verifier: VerifierKind
    answer: str | None = None
    """Reference answer for math tasks (a number or a sympy-parsable expression)."""
    tests: list[str] | None = None
    """Python test code for code tasks; each entry is run after the completion's code."""
    entry_point: str | None = None
    """Function name a code task must define (informational; tests call it)."""
    difficulty: float | None = None
    """Offline solve rate in [0, 1] if the set was difficulty-filtered, else None."""
    source: str = "unknown"

    @model_validator(mode="after")
    def _check_kind(self) -> Task:
        if self.verifier is VerifierKind.MATH and not self.answer:
            raise ValueError(f"math task {self.id!r} has no answer")
        if self.verifier is VerifierKind.CODE and not self.tests:
            raise ValueError(f"code task {self.id!r} has no tests")
        return self


class TaskSet:
    """An ordered, id-unique collection of tasks with a content hash.

    The order is the file's order; sampling indexes into it, so the same file gives the same
    problems for the same seed on every machine.
    """

    def __init__(self, tasks: Iterable[Task], name: str = "taskset") -> None:
        self.tasks: list[Task] = list(tasks)
        self.name = name
        if not self.tasks:
            raise TaskSetError(f"task set {name!r} is empty")
        self._by_id: dict[str, Task] = {}
        for task in self.tasks:
            if task.id in self._by_id:
                raise TaskSetError(f"task set {name!r} has duplicate task id {task.id!r}")
            self._by_id[task.id] = task

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __getitem__(self, task_id: str) -> Task:
        try:
            return self._by_id[task_id]
        except KeyError:
            raise KeyError(f"task {task_id!r} is not in task set {self.name!r}") from None

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._by_id

    def to_jsonl_bytes(self) -> bytes:
        """Canonical JSONL encoding: a header line, then one task per line, sorted keys."""
        lines = [json.dumps({"schema": TASKSET_SCHEMA, "name": self.name}, sort_keys=True)]
        lines += [
            json.dumps(t.model_dump(mode="json", exclude_none=True), sort_keys=True) for t in self.tasks
        ]
        return ("\n".join(lines) + "\n").encode()

    def digest(self) -> str:
        """sha256 of the canonical JSONL encoding (hex)."""
        return hashlib.sha256(self.to_jsonl_bytes()).hexdigest()

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        if path.suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            rows = [t.model_dump(mode="json") for t in self.tasks]
            table = pa.Table.from_pylist(rows)
            table = table.replace_schema_metadata({"schema": TASKSET_SCHEMA, "name": self.name})
            pq.write_table(table, path)
        else:
            path.write_bytes(self.to_jsonl_bytes())
        return path

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "taskset") -> TaskSet:
        """Parse the JSONL encoding (header line first); `TaskSetError` naming `name` (the CID or path)
        on anything malformed, whatever the JSON or pydantic layer raised underneath."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TaskSetError(f"task set {name!r}: expected bytes, got {type(data).__name__}")
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TaskSetError(f"task set {name!r} is not UTF-8: {exc}") from exc
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines:
            raise TaskSetError(f"task set {name!r} is empty")
        try:
            header = json.loads(lines[0])
        except (ValueError, RecursionError) as exc:  # bad JSON, an int over 4300 digits, deep nesting
            raise TaskSetError(f"task set {name!r}: header line is not JSON: {exc}") from exc
        if not isinstance(header, dict) or "schema" not in header:
            raise TaskSetError(f"task set {name!r}: first line must be a header with a 'schema' field")
        if header["schema"] != TASKSET_SCHEMA:
            raise TaskSetError(
                f"task set {name!r}: unknown schema {_short(header['schema'])} (this reader knows {TASKSET_SCHEMA})"
            )
        set_name = header.get("name", name)
        if not isinstance(set_name, str):
            raise TaskSetError(f"task set {name!r}: header 'name' must be a string, got {type(set_name).__name__}")
        tasks = []
        for lineno, line in enumerate(lines[1:], start=2):
            try:
                tasks.append(Task.model_validate_json(line))
            except ValidationError as exc:
                raise TaskSetError(f"task set {name!r} line {lineno}: {exc}") from exc
        try:
            return cls(tasks, name=set_name)
        except TaskSetError as exc:  # empty, duplicate ids: name where it came from, not only its header name
            raise TaskSetError(f"task set {name!r}: {exc}") from exc

    @classmethod
    def load(cls, path: str | Path) -> TaskSet:
        path = Path(path)
        if not path.is_file():
            raise TaskSetError(f"task set file {path} does not exist")
        if path.suffix == ".parquet":
            return cls._load_parquet(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise TaskSetError(f"task set {path} cannot be read: {exc}") from exc
        return cls.from_bytes(data, name=path.stem)

    @classmethod
    def _load_parquet(cls, path: Path) -> TaskSet:
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
            # decoded here, not on first use: names, metadata and cells that are not UTF-8 raise now
            names = [f.name for f in table.schema]
            raw_meta = table.schema.metadata or {}
            rows = table.to_pylist()
        except Exception as exc:  # pyarrow raises several types (ArrowInvalid, OSError, UnicodeDecodeError)
            raise TaskSetError(f"task set {path}: not a readable Parquet file: {exc}") from exc
        try:
            meta = {k.decode(): v.decode() for k, v in raw_meta.items()}
        except UnicodeDecodeError as exc:
            raise TaskSetError(f"task set {path}: Parquet metadata is not UTF-8: {exc}") from exc
        if meta.get("schema") != TASKSET_SCHEMA:
            raise TaskSetError(
                f"task set {path}: unknown schema {_short(meta.get('schema'))} (this reader knows {TASKSET_SCHEMA})"
            )
        columns = ", ".join(names[:20])
        tasks = []
        for i, row in enumerate(rows):
            row = {k: v for k, v in row.items() if v is not None}
            try:
                tasks.append(Task.model_validate(row))
            except ValidationError as exc:
                raise TaskSetError(f"task set {path} row {i} (columns {columns}): {exc}") from exc
        return cls(tasks, name=meta.get("name", path.stem))


def _short(value: object, limit: int = 80) -> str:
    """repr of a value from a file, cut to `limit` characters (a header may hold anything)."""
    try:
        text = repr(value)
    except RecursionError:
        text = f"<deeply nested {type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


# ---------------------------------------------------------------------------------------------
# Seeded sampling

SAMPLING_DOMAIN = b"intellect.sample/v1"


class Assignment(BaseModel):
    """One problem a claim must solve, with the thinking budget its prompt states."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    target_len: int
    index: int
    """Position of the task in the task set (the file's order)."""


def _uniform(word: bytes, n: int) -> int | None:
    """Unbiased draw in [0, n) from 8 bytes, or None (rejected: try the next counter)."""
    u = int.from_bytes(word, "big")
    limit = 2**64 - (2**64 % n)
    return u % n if u < limit else None


def _check_seed(seed: bytes) -> bytes:
    if isinstance(seed, str):
        raise TaskSetError("seed must be 32 bytes, not str (decode hex first)")
    seed = bytes(seed)
    if len(seed) != 32:
        raise TaskSetError(f"seed must be 32 bytes, got {len(seed)}")
    return seed


def _check_lengths(target_lengths: Sequence[int]) -> list[int]:
    lengths = [int(t) for t in target_lengths]
    if not lengths or any(t <= 0 for t in lengths):
        raise TaskSetError(f"target_lengths must be a non-empty list of positive ints, got {lengths}")
    return lengths


def sample_problems(
    task_set: TaskSet, seed: bytes, n: int, target_lengths: Sequence[int]
) -> list[Assignment]:
    """The `n` distinct problems and target lengths a claim with chain seed `seed` must solve.

    Algorithm (reimplementable anywhere): for counter = 0, 1, 2, ... compute
    h = sha256(b"intellect.sample/v1" || seed || u64be(counter)); i = u64be(h[0:8]) and
    j = u64be(h[8:16]); reject the counter if i >= 2**64 - 2**64 % N or j >= 2**64 - 2**64 % L
    (N tasks, L target lengths; this removes modulo bias), or if task i % N was already drawn;
    otherwise assign task (i % N) with target length target_lengths[j % L]. Stop after n.
    Deterministic in (task-set order, seed, n, target_lengths); no global random state.
    """
    seed = _check_seed(seed)
    if n < 0 or n > len(task_set):
        raise TaskSetError(
            f"cannot draw {n} distinct problems from task set {task_set.name!r} of {len(task_set)}"
        )
    lengths = _check_lengths(target_lengths)
    out: list[Assignment] = []
    drawn: set[int] = set()
    counter = 0
    while len(out) < n:
        h = hashlib.sha256(SAMPLING_DOMAIN + seed + counter.to_bytes(8, "big")).digest()
        counter += 1
        i, j = _uniform(h[0:8], len(task_set)), _uniform(h[8:16], len(lengths))
        if i is None or j is None or i in drawn:
            continue
        drawn.add(i)
        out.append(Assignment(task_id=task_set.tasks[i].id, target_len=lengths[j], index=i))
    return out


EPOCH_DOMAIN = b"intellect.sample-epochs/v1"
LENGTH_DOMAIN = b"intellect.sample-lengths/v1"


@functools.lru_cache(maxsize=4)
def epoch_permutation(n_tasks: int, epoch: int) -> tuple[int, ...]:
    """Pass `epoch`'s order of a task set of `n_tasks` rows: a seeded Fisher-Yates shuffle.

    Algorithm (reimplementable anywhere): start from [0, 1, ..., N-1]; for i = N-1 down to 1 draw
    j uniform in [0, i] and swap positions i and j. The draws are the 8-byte words of
    sha256(b"intellect.sample-epochs/v1" || u64be(epoch) || u64be(counter)), counter = 0, 1, 2, ..., four
    words per hash, each rejected as in `sample_problems` (w >= 2**64 - 2**64 % (i + 1)) to remove modulo bias.
    Depends on nothing but (N, epoch): every node derives the same order, and anyone can read it ahead.
    """
    if n_tasks <= 0 or epoch < 0:
        raise TaskSetError(f"epoch_permutation needs n_tasks > 0 and epoch >= 0 (got {n_tasks}, {epoch})")
    order = list(range(n_tasks))
    prefix = EPOCH_DOMAIN + epoch.to_bytes(8, "big")
    words: list[bytes] = []
    counter = 0
    i = n_tasks - 1
    while i > 0:
        if not words:
            h = hashlib.sha256(prefix + counter.to_bytes(8, "big")).digest()
            counter += 1
            words = [h[24:32], h[16:24], h[8:16], h[0:8]]  # popped from the end: h[0:8] first
        j = _uniform(words.pop(), i + 1)
        if j is None:
            continue
        order[i], order[j] = order[j], order[i]
        i -= 1
    return tuple(order)


def epoch_problems(
    task_set: TaskSet, task_id: int, seed: bytes, n: int, target_lengths: Sequence[int]
) -> list[Assignment]:
    """The `n` problems of ledger task `task_id` in a pool that walks its task set in seeded passes.

    Every pass (epoch) serves each problem at most once and all but the N mod n it cannot fit: with N
    problems, T = N // n claims make a pass; task id t belongs to pass e = t // T, slot s = t % T, and gets
    problems epoch_permutation(N, e)[s·n : s·n + n] (distinct by construction; the left-over N mod n
    differ from pass to pass). The ledger's task ids are consecutive claims across all of its pools, so a
    pool that shares the ledger with others serves the slots of its own ids only: still no problem twice
    in a pass. Target lengths are drawn from the claim's chain seed — unknowable before the claim — as the
    8-byte words h[0:8] of sha256(b"intellect.sample-lengths/v1" || seed || u64be(counter)), one accepted word
    per problem in order (rejection as in `sample_problems`).
    """
    seed = _check_seed(seed)
    if isinstance(task_id, bool) or not isinstance(task_id, int) or task_id < 0:
        raise TaskSetError(f"task_id must be a non-negative ledger task id, got {task_id!r}")
    if n <= 0 or n > len(task_set):
        raise TaskSetError(
            f"cannot take {n} distinct problems per claim from task set {task_set.name!r} of {len(task_set)}"
        )
    lengths = _check_lengths(target_lengths)
    per_pass = len(task_set) // n
    epoch, slot = divmod(task_id, per_pass)
    order = epoch_permutation(len(task_set), epoch)
    return _with_lengths(task_set, order[slot * n: slot * n + n], seed, lengths)


def _with_lengths(task_set: TaskSet, picked: Sequence[int], seed: bytes, lengths: Sequence[int]) -> list[Assignment]:
    """The problems at positions `picked`, in that order, each with a target length drawn from the claim's seed: one
    accepted word h[0:8] of sha256(LENGTH_DOMAIN || seed || u64be(counter)) per problem (`epoch_problems`,
    `adaptive_problems`)."""
    out: list[Assignment] = []
    counter = 0
    for i in picked:
        while True:
            h = hashlib.sha256(LENGTH_DOMAIN + seed + counter.to_bytes(8, "big")).digest()
            counter += 1
            j = _uniform(h[0:8], len(lengths))
            if j is not None:
                break
        out.append(Assignment(task_id=task_set.tasks[i].id, target_len=lengths[j], index=i))
    return out


ADAPTIVE_DOMAIN = b"intellect.sample-adaptive/v1"
MAX_ADAPTIVE_DRAWS = 4096
"""Draws `adaptive_problems` makes before it fills what is left in task-set order: a bound on the work of a claim,
the same on every node, reached only by claims of most of a large set (collecting all N problems takes ~N·ln N
words)."""


def adaptive_problems(
    task_set: TaskSet, table: DifficultyTable, seed: bytes, n: int, target_lengths: Sequence[int]
) -> list[Assignment]:
    """The `n` distinct problems of a claim with chain seed `seed` in a pool with online difficulty filtering
    (`problem_order: adaptive`), drawn with the weights of `table` (`intellect.verifier.difficulty.weights`).

    Algorithm (reimplementable anywhere): W = the weights in task-set order, C their running sums, T = C[-1].
    The draws are the 8-byte words of sha256(b"intellect.sample-adaptive/v1" || seed || u64be(counter)),
    counter = 0, 1, 2, ..., four words per hash taken h[0:8] first, each rejected as in `sample_problems`
    (w >= 2**64 - 2**64 % T); a word u picks the first problem i with C[i] > u mod T, and a problem already
    drawn is drawn again. After `MAX_ADAPTIVE_DRAWS` words the rest are the first problems not drawn, in
    task-set order. Target lengths as in `epoch_problems` (LENGTH_DOMAIN words), in the order drawn.
    """
    seed = _check_seed(seed)
    if n <= 0 or n > len(task_set):
        raise TaskSetError(
            f"cannot take {n} distinct problems per claim from task set {task_set.name!r} of {len(task_set)}"
        )
    lengths = _check_lengths(target_lengths)
    cum = list(itertools.accumulate(cached_weights(table, task_set)))
    total = cum[-1]
    picked: list[int] = []
    drawn: set[int] = set()
    words: list[bytes] = []
    counter = draws = 0
    while len(picked) < n and draws < MAX_ADAPTIVE_DRAWS:
        if not words:
            h = hashlib.sha256(ADAPTIVE_DOMAIN + seed + counter.to_bytes(8, "big")).digest()
            counter += 1
            words = [h[24:32], h[16:24], h[8:16], h[0:8]]  # popped from the end: h[0:8] first
        draws += 1
        u = _uniform(words.pop(), total)
        if u is None:
            continue
        i = bisect.bisect_right(cum, u)
        if i not in drawn:
            drawn.add(i)
            picked.append(i)
    picked += [i for i in range(len(task_set)) if i not in drawn][: n - len(picked)]
    return _with_lengths(task_set, picked, seed, lengths)


def assign_problems(
    task_set: TaskSet, order: ProblemOrder, *, seed: bytes, task_id: int, n: int, target_lengths: Sequence[int],
    difficulty: DifficultyTable | None = None,
) -> list[Assignment]:
    """The problems and target lengths of claim `task_id` (chain seed `seed`) under the pool's problem order:
    `random` (`sample_problems`: drawn from the claim's seed, the rule of pools made before the field),
    `epochs` (`epoch_problems`: the claim's slot in seeded shuffled passes over the set) or `adaptive`
    (`adaptive_problems`: drawn from the claim's seed with the weights of `difficulty`, the table published with
    the checkpoint of the submission's policy step; required for that order)."""
    if order == "random":
        return sample_problems(task_set, seed, n, target_lengths)
    if order == "epochs":
        return epoch_problems(task_set, task_id, seed, n, target_lengths)
    if order == "adaptive":
        if difficulty is None:
            raise TaskSetError("problem order `adaptive` needs the difficulty table of the submission's checkpoint")
        return adaptive_problems(task_set, difficulty, seed, n, target_lengths)
    raise TaskSetError(f"unknown problem order {order!r} (known: {', '.join(PROBLEM_ORDERS)})")
