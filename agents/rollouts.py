"""Rollout files: what a worker submits and a validator / trainer reads (Parquet, versioned).

One row per completion (`RolloutRow`); submission-level facts (`RolloutMeta`) live in the
Parquet file's key-value metadata next to the schema id `intellect.rollouts/v1`:

    schema         "intellect.rollouts/v1"
    meta           JSON of RolloutMeta (task id, seed hex, model / checkpoint id, worker, ...)

Readers check, in order: Parquet readable → schema id known → exact column names and Arrow
types → every row valid (pydantic) → cross-row rules (one worker, proofs count matching the
completion length, group sizes). Anything wrong raises `RolloutFileError` naming the file and
what was wrong; nothing is half-read.

    data = RolloutFile(meta, rows).to_bytes()       # a worker adds these bytes to IPFS
    rf = RolloutFile.from_bytes(data, name=cid)     # a validator / trainer reads them back
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = [
    "ARROW_SCHEMA",
    "ROLLOUTS_SCHEMA",
    "RolloutFile",
    "RolloutFileError",
    "RolloutMeta",
    "RolloutRow",
]

ROLLOUTS_SCHEMA = "intellect.rollouts/v1"

_HEX_ADDRESS = r"^0x[0-9a-fA-F]{40}$"

ARROW_SCHEMA = pa.schema(
    [
        pa.field("problem_id", pa.string(), nullable=False),
        pa.field("prompt_ids", pa.list_(pa.int32()), nullable=False),
        pa.field("completion_ids", pa.list_(pa.int32()), nullable=False),
        pa.field("reward", pa.float64(), nullable=False),
        pa.field("task_reward", pa.float64(), nullable=False),
        pa.field("length_penalty", pa.float64(), nullable=False),
        pa.field("target_length", pa.int32(), nullable=True),
        pa.field("advantage", pa.float32(), nullable=False),
        pa.field("policy_step", pa.int64(), nullable=False),
        pa.field("proofs", pa.list_(pa.binary()), nullable=False),
        pa.field("worker", pa.string(), nullable=False),
    ]
)


class RolloutFileError(ValueError):
    """A rollout file is unreadable, of an unknown schema, or inconsistent."""


class RolloutRow(BaseModel):
    """One completion of one problem."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    problem_id: str = Field(min_length=1, max_length=256)
    prompt_ids: list[int] = Field(min_length=1)
    completion_ids: list[int]
    reward: float
    """total = task_reward − length_penalty"""
    task_reward: float
    length_penalty: float = Field(ge=0.0)
    target_length: int | None = Field(default=None, ge=1)
    advantage: float
    policy_step: int = Field(ge=0)
    """the checkpoint step that generated this completion"""
    proofs: list[bytes] = Field(default_factory=list)
    """TOPLOC proofs, one per `proof_chunk_size` completion tokens"""
    worker: str = Field(pattern=_HEX_ADDRESS)
    """node id (hex address) of the worker that generated it"""

    @field_validator("reward", "task_reward", "length_penalty", "advantage")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be finite")
        return v

    @field_validator("prompt_ids", "completion_ids")
    @classmethod
    def _token_range(cls, v: list[int]) -> list[int]:
        if any(t < 0 or t >= 2**31 for t in v):
            raise ValueError("token ids must be in [0, 2^31)")
        return v


class RolloutMeta(BaseModel):
    """Submission-level facts, stored once in the file's metadata."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str = Field(min_length=1)
    """the ledger's task (claim) id this file answers"""
    seed: str = Field(pattern=r"^(0x)?[0-9a-fA-F]+$")
    """the chain-drawn seed (hex) that assigned the problems"""
    model: str = Field(min_length=1)
    """model / checkpoint id (e.g. a manifest CID or a checkpoint directory name)"""
    worker: str = Field(pattern=_HEX_ADDRESS)
    policy_step: int = Field(ge=0)
    group_size: int = Field(ge=1)
    """completions per problem"""
    proof_chunk_size: int = Field(32, ge=1)
    proof_topk: int = Field(128, ge=1)
    length_alpha: float = Field(0.0, ge=0.0)


class RolloutFile:
    """A validated set of rollout rows plus their submission metadata."""

    def __init__(self, meta: RolloutMeta, rows: Sequence[RolloutRow], name: str = "rollouts") -> None:
        self.meta = meta
        self.rows: list[RolloutRow] = list(rows)
        self.name = name
        self._check()

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[RolloutRow]:
        return iter(self.rows)

    def _fail(self, what: str) -> RolloutFileError:
        return RolloutFileError(f"rollout file {self.name}: {what}")

    def _check(self) -> None:
        if not self.rows:
            raise self._fail("has no rows")
        groups: dict[str, int] = {}
        chunk = self.meta.proof_chunk_size
        proof_len = 2 + 2 * self.meta.proof_topk
        for i, row in enumerate(self.rows):
            if row.worker.lower() != self.meta.worker.lower():
                raise self._fail(f"row {i} names worker {row.worker}, the file {self.meta.worker}")
            if row.policy_step != self.meta.policy_step:
                raise self._fail(f"row {i} has policy step {row.policy_step}, the file {self.meta.policy_step}")
            if abs(row.reward - (row.task_reward - row.length_penalty)) > 1e-6:
                raise self._fail(
                    f"row {i}: reward {row.reward} != task_reward {row.task_reward} - length_penalty {row.length_penalty}"
                )
            if row.proofs:
                want = (len(row.completion_ids) + chunk - 1) // chunk
                if len(row.proofs) != want:
                    raise self._fail(
                        f"row {i}: {len(row.proofs)} proofs for {len(row.completion_ids)} tokens (expected {want})"
                    )
                bad = [j for j, p in enumerate(row.proofs) if len(p) != proof_len]
                if bad:
                    raise self._fail(f"row {i}: proof {bad[0]} is not {proof_len} bytes")
            groups[row.problem_id] = groups.get(row.problem_id, 0) + 1
        wrong = {p: n for p, n in groups.items() if n != self.meta.group_size}
        if wrong:
            pid, n = next(iter(wrong.items()))
            raise self._fail(f"problem {pid!r} has {n} completions, the group size is {self.meta.group_size}")

    # -- encoding ------------------------------------------------------------------------------

    def to_table(self) -> pa.Table:
        cols: dict[str, list[Any]] = {f.name: [] for f in ARROW_SCHEMA}
        for row in self.rows:
            for key, value in row.model_dump().items():
                cols[key].append(value)
        table = pa.Table.from_pydict(cols, schema=ARROW_SCHEMA)
        return table.replace_schema_metadata(
            {"schema": ROLLOUTS_SCHEMA, "meta": self.meta.model_dump_json()}
        )

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        pq.write_table(self.to_table(), buf, compression="zstd")
        return buf.getvalue()

    def write(self, path: str | Path) -> Path:
        """Write atomically (temp file + rename)."""
        path = Path(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(self.to_bytes())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    # -- decoding ------------------------------------------------------------------------------

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "rollouts") -> RolloutFile:
        try:
            table = pq.read_table(pa.BufferReader(data))
        except Exception as exc:  # pyarrow raises several error types for corrupt input
            raise RolloutFileError(f"rollout file {name}: not a readable Parquet file: {exc}") from None
        return cls.from_table(table, name=name)

    @classmethod
    def read(cls, path: str | Path) -> RolloutFile:
        path = Path(path)
        if not path.is_file():
            raise RolloutFileError(f"rollout file {path} does not exist")
        return cls.from_bytes(path.read_bytes(), name=str(path))

    @classmethod
    def from_table(cls, table: pa.Table, name: str = "rollouts") -> RolloutFile:
        try:
            raw = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        except UnicodeDecodeError as exc:
            raise RolloutFileError(f"rollout file {name}: metadata is not UTF-8: {exc}") from None
        schema = raw.get("schema")
        if schema != ROLLOUTS_SCHEMA:
            raise RolloutFileError(
                f"rollout file {name}: unknown schema {schema!r} (this reader knows {ROLLOUTS_SCHEMA})"
            )
        try:
            meta = RolloutMeta.model_validate_json(raw.get("meta", ""))
        except ValidationError as exc:
            raise RolloutFileError(f"rollout file {name}: bad metadata: {exc}") from None
        got = {f.name: f.type for f in table.schema}
        want = {f.name: f.type for f in ARROW_SCHEMA}
        if set(got) != set(want):
            missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
            raise RolloutFileError(f"rollout file {name}: columns missing {missing}, unexpected {extra}")
        for col, typ in want.items():
            if got[col] != typ:
                raise RolloutFileError(f"rollout file {name}: column {col!r} is {got[col]}, expected {typ}")
        rows = []
        for i, rec in enumerate(table.to_pylist()):
            try:
                rows.append(RolloutRow.model_validate(rec))
            except ValidationError as exc:
                raise RolloutFileError(f"rollout file {name} row {i}: {exc}") from None
        return cls(meta, rows, name=name)

    def summary(self) -> dict[str, Any]:
        rewards = [r.reward for r in self.rows]
        return {
            "rows": len(self.rows),
            "problems": len({r.problem_id for r in self.rows}),
            "mean_reward": sum(rewards) / len(rewards),
            "completion_tokens": sum(len(r.completion_ids) for r in self.rows),
            "meta": json.loads(self.meta.model_dump_json()),
        }
