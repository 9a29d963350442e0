"""The rollout file's first format, `intellect.rollouts/v1` (Parquet): kept to read old files, never in a node.

pyarrow's C++ Parquet reader is not safe for strangers' bytes: on crafted input it can throw a C++
exception through a `noexcept` frame and abort the whole process (pyarrow 26.0.1, "Definition level
histogram size mismatch", `tests/verifier/data/rollouts-v1-abort-*.parquet`). So `RolloutFile.from_bytes`
never runs this reader in the node's process: it runs `isolated_v1_to_v2` in a child
(`intellect.verifier.isolation`), which reads the Parquet file here and hands back the same rows as
`intellect.rollouts/v2` bytes, which the node parses with its own reader.

Parquet layout: one row per completion, `RolloutMeta` in the file's key-value metadata:

    schema         "intellect.rollouts/v1"
    meta           JSON of RolloutMeta (task id, seed hex, model / checkpoint id, worker, ...)

Checks, in order: Parquet readable → schema id known → exact column names and Arrow types → size caps
(`RolloutLimits`: rows, tokens per row and in all, decoded bytes) from the footer and page headers, before
any column is decoded → every row valid (pydantic) → cross-row rules (`RolloutFile`).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from intellect.verifier.rollouts import (
    MAX_META_BYTES,
    ROLLOUTS_SCHEMA_V1,
    RolloutFile,
    RolloutFileError,
    RolloutLimits,
    RolloutMeta,
    RolloutRow,
)

if TYPE_CHECKING:
    from intellect.verifier.rollouts import RolloutFile

__all__ = ["ARROW_SCHEMA", "from_table", "isolated_v1_to_v2", "read_v1", "table_of", "v1_bytes"]

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

MAX_PAGES = 65_536
"""Parquet pages in the whole file (each costs a header walk before anything is decoded)"""

# String and binary columns are read still dictionary-encoded, so that a small dictionary referenced
# many times is measured before it is expanded.
_DICT_COLUMNS = ["problem_id", "proofs.list.element", "worker"]
_NON_NULL = [f.name for f in ARROW_SCHEMA if not f.nullable]


def table_of(rf: RolloutFile) -> pa.Table:
    """The rows as an Arrow table with the v1 schema and metadata."""
    cols: dict[str, list[Any]] = {f.name: [] for f in ARROW_SCHEMA}
    for row in rf.rows:
        for key, value in row.model_dump().items():
            cols[key].append(value)
    table = pa.Table.from_pydict(cols, schema=ARROW_SCHEMA)
    return table.replace_schema_metadata({"schema": ROLLOUTS_SCHEMA_V1, "meta": rf.meta.model_dump_json()})


def v1_bytes(rf: RolloutFile) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table_of(rf), buf, compression="zstd")
    return buf.getvalue()


def isolated_v1_to_v2(data: bytes, args: dict[str, Any]) -> bytes:
    """The child's side (`intellect.verifier.isolation`): read a v1 file, hand it back as v2 bytes."""
    limits = RolloutLimits(**args.get("limits", {}))
    return read_v1(data, str(args.get("name", "rollouts")), limits).to_bytes()


def read_v1(data: bytes, name: str, limits: RolloutLimits) -> RolloutFile:
    """Parse and validate a v1 (Parquet) file IN THIS PROCESS: only for a child process, or bytes of our own.

    Order: footer and schema (every name and type decoded here, not later on first use) → size caps
    from the page headers (nothing decoded yet) → the columns, with strings and proofs still
    dictionary-encoded → per-row token caps and decoded sizes → rows (pydantic).
    """
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
    return from_rows(_decoded(table, name, limits), meta, name)


def from_table(table: pa.Table, name: str) -> RolloutFile:
    return from_rows(table, _check_schema(table.schema, name), name)


def from_rows(table: pa.Table, meta: RolloutMeta, name: str) -> RolloutFile:
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
    return RolloutFile(meta, rows, name=name)


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
    if schema != ROLLOUTS_SCHEMA_V1:
        shown = schema if schema is None or len(schema) <= 80 else schema[:80] + "..."
        raise RolloutFileError(f"rollout file {name}: unknown schema {shown!r} (this reader knows {ROLLOUTS_SCHEMA_V1})")
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
