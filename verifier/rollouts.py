"""Rollout files: what a worker submits and a validator / trainer reads (Parquet, versioned).

One row per completion (`RolloutRow`); submission-level facts (`RolloutMeta`) live in the
Parquet file's key-value metadata next to the schema id `intellect.rollouts/v1`:

    schema         "intellect.rollouts/v1"
    meta           JSON of RolloutMeta (task id, seed hex, model / checkpoint id, worker, ...)

Readers check, in order: Parquet readable → schema id known → exact column names and Arrow
types → size caps (`RolloutLimits`: rows, tokens per row and in all, decoded bytes) from the
footer and page headers, before any column is decoded → every row valid (pydantic) → cross-row
rules (one worker, proofs count matching the completion length, group sizes). Anything wrong
raises `RolloutFileError` naming the file and what was wrong, whatever pyarrow raised
underneath; nothing is half-read and nothing fails later on first use.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from intellect.sdk import IntellectError

__all__ = [
    "ARROW_SCHEMA",
    "MAX_DECODED_BYTES",
    "MAX_ROWS",
    "MAX_TOKENS_PER_ROW",
    "MAX_TOTAL_TOKENS",
    "ROLLOUTS_SCHEMA",
    "RolloutFile",
    "RolloutFileError",
    "RolloutLimits",
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


# Caps on what one rollout file may decode to, checked before anything is materialised (a few KB of
# Parquet can RLE-encode tens of millions of tokens). They must stay above what the pool's rules let
# an honest worker submit, or honest work is refused (and challenged): INTELLECT-2's largest shape,
# 8 problems x 16 completions x 32k tokens, is 4.2 M tokens, half of MAX_TOTAL_TOKENS.
MAX_ROWS = 4096
"""completions per file"""
MAX_TOKENS_PER_ROW = 131_072
"""prompt + completion tokens of one row"""
MAX_TOTAL_TOKENS = 8 * 1024 * 1024
"""prompt + completion tokens of the whole file (as Python ints: ~300 MB at the cap)"""
MAX_DECODED_BYTES = 512 * 1024 * 1024
"""Arrow memory the columns may decode to (pages, values, levels, expanded strings and proofs); the
agents' default `max_fetch_bytes` is the same 512 MiB"""
MAX_PAGES = 65_536
"""Parquet pages in the whole file (each costs a header walk before anything is decoded)"""
MAX_META_BYTES = 64 * 1024
"""the JSON of RolloutMeta in the file's key-value metadata"""

# String and binary columns are read still dictionary-encoded, so that a small dictionary referenced
# many times is measured before it is expanded.
_DICT_COLUMNS = ["problem_id", "proofs.list.element", "worker"]
_NON_NULL = [f.name for f in ARROW_SCHEMA if not f.nullable]


@dataclass(frozen=True)
class RolloutLimits:
    """Caps a reader applies to a rollout file from another machine (defaults: the module constants)."""

    max_rows: int = MAX_ROWS
    max_tokens_per_row: int = MAX_TOKENS_PER_ROW
    max_total_tokens: int = MAX_TOTAL_TOKENS
    max_decoded_bytes: int = MAX_DECODED_BYTES


class RolloutFileError(IntellectError, ValueError):
    """A rollout file is unreadable, of an unknown schema, over a size cap, or inconsistent."""


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
    def from_bytes(cls, data: bytes, name: str = "rollouts", limits: RolloutLimits | None = None) -> RolloutFile:
        """Parse and validate a rollout file from another machine; `RolloutFileError` on anything wrong.

        Order: footer and schema (every name and type decoded here, not later on first use) → size
        caps from the page headers (nothing decoded yet) → the columns, with strings and proofs
        still dictionary-encoded → per-row token caps and decoded sizes → rows (pydantic).
        """
        limits = limits or RolloutLimits()
        if not isinstance(data, bytes | bytearray | memoryview):
            raise RolloutFileError(f"rollout file {name}: expected bytes, got {type(data).__name__}")
        try:
            pf = pq.ParquetFile(pa.BufferReader(data))
            md = pf.metadata
        except Exception as exc:  # pyarrow raises several error types (ArrowInvalid, OSError, ...) on corrupt input
            raise RolloutFileError(f"rollout file {name}: not a readable Parquet file: {exc}") from exc
        try:
            schema = pf.schema_arrow
        except Exception as exc:  # UnicodeDecodeError (a column name that is not UTF-8), ArrowInvalid, ...
            raise RolloutFileError(f"rollout file {name}: unreadable schema: {exc}") from exc
        meta = _check_schema(schema, name)
        _check_caps(memoryview(data), md, name, limits)
        try:  # the footer parsed above is reused: only the columns are read now
            table = pq.ParquetFile(pa.BufferReader(data), metadata=md, read_dictionary=_DICT_COLUMNS).read()
            table.validate(full=True)  # UTF-8 of strings, offsets inside their buffers
        except Exception as exc:  # pyarrow raises several error types on corrupt pages
            raise RolloutFileError(f"rollout file {name}: not a readable Parquet file: {exc}") from exc
        return cls._from_rows(_decoded(table, name, limits), meta, name)

    @classmethod
    def read(cls, path: str | Path, limits: RolloutLimits | None = None) -> RolloutFile:
        path = Path(path)
        if not path.is_file():
            raise RolloutFileError(f"rollout file {path} does not exist")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise RolloutFileError(f"rollout file {path} cannot be read: {exc}") from exc
        return cls.from_bytes(data, name=str(path), limits=limits)

    @classmethod
    def from_table(cls, table: pa.Table, name: str = "rollouts") -> RolloutFile:
        return cls._from_rows(table, _check_schema(table.schema, name), name)

    @classmethod
    def _from_rows(cls, table: pa.Table, meta: RolloutMeta, name: str) -> RolloutFile:
        """The rows of a table whose schema `_check_schema` accepted (as `meta`)."""
        try:
            records = table.to_pylist()
        except Exception as exc:  # invalid UTF-8 in a string cell, a corrupt buffer
            raise RolloutFileError(f"rollout file {name}: unreadable cells: {exc}") from exc
        rows = []
        for i, rec in enumerate(records):
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


# ---------------------------------------------------------------------------------------------
# Reading bytes from another machine: schema, caps, decoding


def _check_schema(schema: pa.Schema, name: str) -> RolloutMeta:
    """Schema id, metadata and the exact column names/types, all decoded now (names may not be UTF-8)."""
    try:
        got = {f.name: f.type for f in schema}
        raw_meta = schema.metadata or {}
    except Exception as exc:  # UnicodeDecodeError (a column name that is not UTF-8), ArrowInvalid, ...
        raise RolloutFileError(f"rollout file {name}: unreadable schema: {exc}") from exc
    meta = _check_metadata(raw_meta, name)
    _check_columns(got, name)
    return meta


def _check_metadata(raw: dict[bytes, bytes], name: str) -> RolloutMeta:
    try:
        meta = {k.decode(): v.decode() for k, v in raw.items()}
    except UnicodeDecodeError as exc:
        raise RolloutFileError(f"rollout file {name}: metadata is not UTF-8: {exc}") from exc
    schema = meta.get("schema")
    if schema != ROLLOUTS_SCHEMA:
        shown = schema if schema is None or len(schema) <= 80 else schema[:80] + "..."
        raise RolloutFileError(f"rollout file {name}: unknown schema {shown!r} (this reader knows {ROLLOUTS_SCHEMA})")
    text = meta.get("meta", "")
    if len(text) > MAX_META_BYTES:
        raise RolloutFileError(f"rollout file {name}: metadata is {len(text)} bytes, over {MAX_META_BYTES}")
    try:
        return RolloutMeta.model_validate_json(text)
    except ValidationError as exc:
        raise RolloutFileError(f"rollout file {name}: bad metadata: {exc}") from exc


def _check_columns(got: dict[str, pa.DataType], name: str) -> None:
    want = {f.name: f.type for f in ARROW_SCHEMA}
    if set(got) != set(want):
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        raise RolloutFileError(f"rollout file {name}: columns missing {missing}, unexpected {extra[:20]}")
    for col, typ in want.items():
        if got[col] != typ:
            raise RolloutFileError(f"rollout file {name}: column {col!r} is {got[col]}, expected {typ}")


class _Thrift:
    """Just enough of Thrift's compact protocol to read a Parquet `PageHeader` (parquet.thrift).

    Structs come back as {field id: value} with integers and nested structs kept and every other
    value skipped. Anything malformed raises ValueError; every read is bounds-checked.
    """

    def __init__(self, buf: memoryview, pos: int, end: int) -> None:
        self.buf, self.pos, self.end = buf, pos, end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise ValueError("truncated page header")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        out = shift = 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 63:
                raise ValueError("varint longer than 64 bits in a page header")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def skip_bytes(self, n: int) -> None:
        if n < 0 or self.pos + n > self.end:
            raise ValueError("truncated page header")
        self.pos += n

    def value(self, ttype: int, depth: int) -> Any:
        if ttype in (1, 2):  # bool inside a struct: the value is the type nibble
            return ttype == 1
        if ttype == 3:
            return self.byte()
        if ttype in (4, 5, 6):
            return self.zigzag()
        if ttype == 7:
            self.skip_bytes(8)
        elif ttype == 8:
            self.skip_bytes(self.varint())
        elif ttype in (9, 10):
            head = self.byte()
            size, etype = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            for _ in range(size):  # every element takes >= 1 byte: bounded by the buffer
                if etype in (1, 2):
                    self.byte()
                else:
                    self.value(etype, depth + 1)
        elif ttype == 11:
            size = self.varint()
            if size:
                kv = self.byte()
                for _ in range(size):
                    self.value(kv >> 4, depth + 1)
                    self.value(kv & 0x0F, depth + 1)
        elif ttype == 12:
            return self.struct(depth + 1)
        else:
            raise ValueError(f"unknown thrift type {ttype} in a page header")
        return None

    def struct(self, depth: int = 0) -> dict[int, Any]:
        if depth > 16:
            raise ValueError("page header nested too deeply")
        out: dict[int, Any] = {}
        fid = 0
        while True:
            head = self.byte()
            if head == 0:
                return out
            delta, ttype = head >> 4, head & 0x0F
            fid = fid + delta if delta else self.zigzag()
            out[fid] = self.value(ttype, depth)


_PAGE_DICTIONARY = 2


def _check_caps(data: memoryview, md: pq.FileMetaData, name: str, limits: RolloutLimits) -> None:
    """Refuse a file whose decoded size is over the caps, from its footer and page headers only.

    The footer's own counts (num_rows, num_values, total_uncompressed_size) are what an honest
    writer says; a crafted file can lie in them (pyarrow decodes what the pages hold), so the
    counts that bound memory are read from every page header, the ones the decoder obeys.
    """
    fail = lambda what: RolloutFileError(f"rollout file {name}: {what}")  # noqa: E731
    if md.num_rows > limits.max_rows:
        raise fail(f"{md.num_rows} rows, over the cap of {limits.max_rows}")
    if md.num_row_groups > limits.max_rows:  # empty row groups cost a walk each and hold nothing
        raise fail(f"{md.num_row_groups} row groups, over the cap of {limits.max_rows}")
    values: dict[str, int] = {}
    decoded = pages = 0
    try:
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            for c in range(rg.num_columns):
                col = rg.column(c)
                path = col.path_in_schema.split(".")[0]
                start = col.data_page_offset
                if col.has_dictionary_page and col.dictionary_page_offset and 0 < col.dictionary_page_offset < start:
                    start = col.dictionary_page_offset
                end = start + col.total_compressed_size
                if start < 0 or col.total_compressed_size < 0 or end > len(data):
                    raise fail(f"column {path!r} pages lie outside the file")
                pos = start
                while pos < end:
                    pages += 1
                    if pages > MAX_PAGES:  # an honest writer makes ~1 page per MiB of a column
                        raise fail(f"more than {MAX_PAGES} pages")
                    reader = _Thrift(data, pos, end)
                    header = reader.struct()
                    ptype, size, csize = header.get(1), header.get(2), header.get(3)
                    if not isinstance(size, int) or not isinstance(csize, int) or size < 0 or csize < 0:
                        raise fail(f"column {path!r}: malformed page header at byte {pos}")
                    n = 0
                    for sub in (5, 7, 8):  # data page, dictionary page, data page v2: field 1 is num_values
                        if isinstance(header.get(sub), dict):
                            n = header[sub].get(1, 0)
                    if not isinstance(n, int) or n < 0:
                        raise fail(f"column {path!r}: malformed page header at byte {pos}")
                    if ptype != _PAGE_DICTIONARY:
                        values[path] = values.get(path, 0) + n
                    # decoded: the page itself plus up to 8 bytes of value and 4 of levels per value
                    decoded += size + 12 * n
                    pos = reader.pos + csize
                    if decoded > limits.max_decoded_bytes:
                        raise fail(f"decodes to more than {limits.max_decoded_bytes} bytes (cap)")
    except RolloutFileError:
        raise
    except (ValueError, TypeError, IndexError, OverflowError, OSError, pa.ArrowException) as exc:
        # _Thrift's ValueError (a truncated or malformed page header), pyarrow's on a corrupt footer entry
        raise fail(f"malformed page header or column metadata: {exc}") from exc
    rows = max((values.get(f.name, 0) for f in ARROW_SCHEMA if not pa.types.is_list(f.type)), default=0)
    if rows > limits.max_rows:
        raise fail(f"pages hold {rows} rows, over the cap of {limits.max_rows}")
    tokens = values.get("prompt_ids", 0) + values.get("completion_ids", 0)
    if tokens > limits.max_total_tokens + 2 * rows:  # an empty list takes one value slot
        raise fail(f"pages hold {tokens} tokens, over the cap of {limits.max_total_tokens}")


def _decoded(table: pa.Table, name: str, limits: RolloutLimits) -> pa.Table:
    """Check the token caps per row and the decoded size of the dictionary columns, then decode them."""
    import pyarrow.compute as pc

    fail = lambda what: RolloutFileError(f"rollout file {name}: {what}")  # noqa: E731
    if table.num_rows > limits.max_rows:
        raise fail(f"{table.num_rows} rows, over the cap of {limits.max_rows}")
    try:
        if any(table.column(c).null_count for c in _NON_NULL):
            bad = next(c for c in _NON_NULL if table.column(c).null_count)
            raise fail(f"column {bad!r} has null cells")
        per_row = pc.add(pc.list_value_length(table.column("prompt_ids")),
                         pc.list_value_length(table.column("completion_ids")))
        worst, total = pc.max(per_row).as_py() or 0, pc.sum(per_row).as_py() or 0
        if worst > limits.max_tokens_per_row:
            raise fail(f"a row holds {worst} tokens, over the cap of {limits.max_tokens_per_row}")
        if total > limits.max_total_tokens:
            raise fail(f"{total} tokens, over the cap of {limits.max_total_tokens}")
        out = table
        expanded = 0
        for col in _DICT_COLUMNS:
            top = col.split(".")[0]
            chunks = []
            for chunk in table.column(top).chunks:
                dict_arr = chunk.values if pa.types.is_list(chunk.type) else chunk
                lengths = pc.binary_length(dict_arr.dictionary)
                expanded += pc.sum(pc.take(lengths, dict_arr.indices)).as_py() or 0
                if expanded > limits.max_decoded_bytes:
                    raise fail(f"column {top!r} decodes to more than {limits.max_decoded_bytes} bytes (cap)")
                plain = dict_arr.dictionary_decode()
                chunks.append(pa.ListArray.from_arrays(chunk.offsets, plain) if pa.types.is_list(chunk.type) else plain)
            typ = ARROW_SCHEMA.field(top).type
            out = out.set_column(out.schema.get_field_index(top), ARROW_SCHEMA.field(top),
                                 pa.chunked_array(chunks, type=typ))
        return out.replace_schema_metadata(table.schema.metadata)
    except RolloutFileError:
        raise
    except Exception as exc:  # pyarrow on corrupt arrays (ArrowInvalid, ArrowIndexError, ...)
        raise fail(f"unreadable columns: {exc}") from exc
