"""Online difficulty filtering (issue 37): the pool learns each problem's solve rate from the groups it trains on
and assigns problems where a group is likely to carry a learning signal.

INTELLECT-2 filtered its task set offline, keeping problems the base model solved neither always nor never: a
group of completions that are all right or all wrong has zero advantage everywhere and teaches nothing, yet
costs its generation. This module does the same online, from evidence the pool already has:

- the trainer keeps a **difficulty table** (`DifficultyTable`, schema `intellect.difficulty/v1`): for every
  problem it has seen, the completions tried and solved (`record_completions`, from every group of every step it
  trained, flat ones included: a flat group is the evidence that a problem is too easy or too hard), older
  evidence fading by 7/8 a step so the table follows the policy;
- it writes the table into each checkpoint it publishes (`DIFFICULTY_FILE`), so the table travels with the
  weights through Shardcast and is covered by the checkpoint's manifest hashes, whose CID is on-chain;
- a pool whose rule `problem_order` is `adaptive` draws each claim's problems from the claim's chain seed with
  the weights of the table in the checkpoint of the submission's policy step
  (`intellect.verifier.tasks.adaptive_problems`): the worker that generates and every validator that re-checks
  derive the same problems from the same bytes.

The weight of a problem is the chance that a group of `group_size` completions has signal, 1 − p^G − (1 − p)^G,
with p its solve rate shrunk towards the pool's (p = (s + 2·p₀) / (n + 2), p₀ = (S + 1) / (N + 2) over the whole
table), so one group moves it only part of the way; a problem never tried has p = 1/2, the largest weight there is
(what is unexplored is explored before a problem is revisited: the pool walks a new task set much as the
offline filter would measure it, then spends its generation where groups had signal). Everything is integer arithmetic
(`weights`): every node computes the same weights, bit for bit. A floor (1/32 of the largest weight) keeps every
problem drawable: a problem solved never (or always) so far is still tried now and then, since the policy moves.

A missing table (a checkpoint before any training, or published by a trainer before this rule) is the empty table:
every problem weighs the same. A table that is unreadable, too large or of another schema version is refused with
`DifficultyError`; `table_file` then reads it as no table (the empty table), logged, so worker and validators still agree
(both read the same bytes) and a bad table costs the filtering, never the pool.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import weakref
from collections.abc import Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from intellect.sdk import IntellectError

__all__ = [
    "COUNT_UNIT",
    "DECAY_SHIFT",
    "DIFFICULTY_FILE",
    "DIFFICULTY_SCHEMA",
    "MAX_CACHED_TABLES",
    "MAX_COUNT",
    "MAX_TABLE_BYTES",
    "SOLVED_AT",
    "WEIGHT_FLOOR",
    "WEIGHT_SCALE",
    "DifficultyError",
    "DifficultyTable",
    "cached_weights",
    "record_completions",
    "table_after",
    "table_file",
    "table_for",
    "table_in",
    "weights",
]

log = logging.getLogger(__name__)

DIFFICULTY_SCHEMA = "intellect.difficulty/v1"
DIFFICULTY_FILE = "difficulty.json"
"""The table's file name inside a published checkpoint directory."""
MAX_TABLE_BYTES = 32 * 1024 * 1024
"""Largest table read: at 28–34 bytes a problem (its id and two counts in `COUNT_UNIT`s: 8.7 KB for the 256 problems
of bench/grpo/mixed_taskset.py, 280 KB for 10,000), about a million problems."""
COUNT_UNIT = 256
"""Counts are kept in units of 1/256 completion, so that old evidence can fade in integer arithmetic."""
DECAY_SHIFT = 3
"""Each training step keeps x − ⌊x / 2³⌋ of every count (7/8 a step: evidence halves in about 5 steps), so the
table follows the policy as it learns instead of weighing a problem by how the first checkpoints did."""
MAX_COUNT = 2**48
"""Largest count (in `COUNT_UNIT`s) a table may hold for one problem."""
SOLVED_AT = 0.5
"""A completion counts as solved when its reward (the pool's task reward and length term) is at least this."""
WEIGHT_SCALE = 2**20
"""A problem's weight is its signal chance in units of 1 / WEIGHT_SCALE."""
WEIGHT_FLOOR = WEIGHT_SCALE // 32
"""The least weight of any problem: none is starved, at most 32× less likely than the likeliest."""
MAX_CACHED_TABLES = 8
"""Tables kept read (`table_file`) and whose weights `cached_weights` keeps per task set (a node judges a few recent checkpoints at a time)."""
PRIOR_STRENGTH = 2
"""How many completions' worth the pool-wide solve rate counts for in a problem's own rate."""


class DifficultyError(IntellectError, ValueError):
    """A difficulty table that is malformed, too large, or of another schema version."""


class DifficultyTable(BaseModel):
    """Per-problem evidence: `counts[task_id] = [completions tried, completions solved]` in units of
    1/`COUNT_UNIT` completion, over the groups the pool's trainer trained on up to the checkpoint that carries the
    table, each step's faded by 7/8 per later step (`record_completions`). `group_size`: the pool's, for the
    signal chance of a group (`weights`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_: str = Field(DIFFICULTY_SCHEMA, alias="schema")
    group_size: int = Field(ge=2, le=256)
    counts: dict[str, tuple[int, int]] = Field(default_factory=dict)

    @field_validator("schema_")
    @classmethod
    def _known_schema(cls, v: str) -> str:
        if v != DIFFICULTY_SCHEMA:
            raise ValueError(f"unknown difficulty table schema {v!r} (this node reads {DIFFICULTY_SCHEMA!r})")
        return v

    @field_validator("counts")
    @classmethod
    def _sane_counts(cls, v: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
        for task_id, (tried, solved) in v.items():
            if not 0 <= solved <= tried <= MAX_COUNT:
                raise ValueError(f"problem {task_id!r}: counts [{tried}, {solved}] are not 0 ≤ solved ≤ tried ≤ "
                                 f"{MAX_COUNT}")
        return v

    @classmethod
    def empty(cls, group_size: int) -> DifficultyTable:
        return cls(group_size=group_size)

    def to_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces): the bytes written into a checkpoint."""
        doc = {"schema": DIFFICULTY_SCHEMA, "group_size": self.group_size,
               "counts": {k: list(v) for k, v in sorted(self.counts.items())}}
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes, *, name: str = "difficulty table") -> DifficultyTable:
        if len(data) > MAX_TABLE_BYTES:
            raise DifficultyError(f"{name}: {len(data)} bytes, more than the {MAX_TABLE_BYTES} a table may have")
        try:
            doc = json.loads(data)
        except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, an integer of over 4,300 digits
            raise DifficultyError(f"{name}: not JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise DifficultyError(f"{name}: a JSON object expected, got {type(doc).__name__}")
        if "schema" not in doc:
            raise DifficultyError(f"{name}: no `schema` field (expected {DIFFICULTY_SCHEMA!r})")
        try:
            return cls.model_validate(doc)
        except ValidationError as exc:
            raise DifficultyError(f"{name}: {exc.errors(include_url=False)[0]['msg']} "
                                  f"(at {'.'.join(map(str, exc.errors()[0]['loc']))})") from None

    @cached_property
    def digest(self) -> str:
        return hashlib.sha256(self.to_bytes()).hexdigest()

    def totals(self) -> tuple[int, int]:
        """(completions tried, solved) over the whole table."""
        return sum(t for t, _ in self.counts.values()), sum(s for _, s in self.counts.values())


def record_completions(table: DifficultyTable, completions: Iterable[tuple[str, float]], *,
                       decay: bool = True) -> DifficultyTable:
    """The table of the next step: every count faded by one step (`DECAY_SHIFT`, unless `decay` is False), then
    the completions added, each (problem id, its reward) one `COUNT_UNIT` tried, and solved when the reward is ≥
    `SOLVED_AT`. Returns a new table (tables are immutable)."""
    counts = {k: (t - (t >> DECAY_SHIFT), s - (s >> DECAY_SHIFT)) for k, (t, s) in table.counts.items()} \
        if decay else dict(table.counts)
    for task_id, reward in completions:
        tried, solved = counts.get(task_id, (0, 0))
        counts[task_id] = (min(tried + COUNT_UNIT, MAX_COUNT),
                           min(solved + COUNT_UNIT * (reward >= SOLVED_AT), MAX_COUNT))
    return DifficultyTable(group_size=table.group_size, counts=counts)


def table_after(checkpoint_dir: str | Path, samples: Iterable[Any], group_size: int) -> DifficultyTable:
    """The table the next checkpoint carries: the one published with `checkpoint_dir` (`table_in`) plus the
    trainer's batch `samples` (`.problem_id`, `.reward`: every group it took, flat ones included)."""
    return record_completions(table_in(checkpoint_dir, group_size), ((s.problem_id, s.reward) for s in samples))


def table_file(checkpoint_dir: str | Path) -> DifficultyTable | None:
    """The table published with the checkpoint in `checkpoint_dir`, or None when it has none or the one it has is
    refused (logged: every node reads the same bytes, so all fall back alike). A file is read once per version
    (path, size, mtime): a worker asks for its checkpoint's table at every claim."""
    path = Path(checkpoint_dir) / DIFFICULTY_FILE
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return _read_table(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=MAX_CACHED_TABLES)
def _read_table(path: str, size: int, mtime_ns: int) -> DifficultyTable | None:
    """`table_file`'s read of one version of a file (`size` and `mtime_ns` are the cache key)."""
    try:
        if size > MAX_TABLE_BYTES:
            raise DifficultyError(f"{path}: {size} bytes, more than the {MAX_TABLE_BYTES} a table may have")
        return DifficultyTable.from_bytes(Path(path).read_bytes(), name=path)
    except DifficultyError as exc:
        log.warning("difficulty table refused, problems drawn with equal weights: %s", exc)
        return None


def table_in(checkpoint_dir: str | Path, group_size: int) -> DifficultyTable:
    """`table_file`, or the empty table (every problem weighs the same) when the checkpoint has none."""
    return table_file(checkpoint_dir) or DifficultyTable.empty(group_size)


def table_for(problem_order: str, checkpoint_dir: str | Path, group_size: int) -> DifficultyTable | None:
    """What `assign_problems` takes for a pool's `problem_order`: the checkpoint's table (`table_in`) in an
    `adaptive` pool, None in any other."""
    return table_in(checkpoint_dir, group_size) if problem_order == "adaptive" else None


_cache: weakref.WeakKeyDictionary[Any, dict[str, tuple[int, ...]]] = weakref.WeakKeyDictionary()


def weights(table: DifficultyTable, task_ids: Sequence[str]) -> tuple[int, ...]:
    """Each problem's integer weight, in `task_ids` order (exact integer arithmetic; see the module docstring):
    max(WEIGHT_FLOOR, ⌊WEIGHT_SCALE · (1 − p^G − (1 − p)^G)⌋) with p = (s + 2·p₀) / (n + 2) and
    p₀ = (S + 1) / (N + 2), counts in completions (the table's / COUNT_UNIT), or p = 1/2 for a problem never tried
    (n = 0)."""
    tried_all, solved_all = table.totals()
    g, u = table.group_size, COUNT_UNIT
    out = []
    for task_id in task_ids:
        tried, solved = table.counts.get(task_id, (0, 0))
        if tried == 0:  # never tried: p = 1/2, the most a problem can weigh (explored before any problem is revisited)
            a, b = 1, 2
        else:  # in COUNT_UNITs u: p = a / b with a = s·(N+2u) + 2u·(S+u) and b = (n+2u)·(N+2u)
            a = solved * (tried_all + 2 * u) + PRIOR_STRENGTH * u * (solved_all + u)
            b = (tried + PRIOR_STRENGTH * u) * (tried_all + 2 * u)
        bg = b**g
        signal = bg - a**g - (b - a) ** g
        out.append(max(WEIGHT_FLOOR, signal * WEIGHT_SCALE // bg))
    return tuple(out)


def cached_weights(table: DifficultyTable, task_set: Any) -> tuple[int, ...]:
    """`weights` over a task set's rows, computed once per (task set, table)."""
    per_set = _cache.setdefault(task_set, {})
    got = per_set.get(table.digest)
    if got is None:
        if len(per_set) >= MAX_CACHED_TABLES:
            per_set.pop(next(iter(per_set)))
        got = per_set[table.digest] = weights(table, [t.id for t in task_set.tasks])
    return got
