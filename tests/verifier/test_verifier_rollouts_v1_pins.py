"""verifier/_rollouts_v1.py's rules, called in this process (issue 39).

A node runs the v1 (Parquet) reader only in a child process (`intellect.verifier.isolation`), where mutmut cannot
see which tests reach it; the inputs here are our own files (and small, crafted ones that pyarrow reads without
aborting), so the reader's functions are called directly: each cap at its bound, each refusal's exact message, the
page-header reader's Thrift decoding.
"""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from intellect.verifier import _rollouts_v1 as v1
from intellect.verifier._rollouts_v1 import (
    ARROW_SCHEMA,
    _check_caps,
    _check_columns,
    _check_metadata,
    _Thrift,
    from_rows,
    from_table,
    isolated_v1_to_v2,
    read_v1,
    table_of,
    v1_bytes,
)
from intellect.verifier.rollouts import (
    MAX_META_BYTES,
    ROLLOUTS_SCHEMA_V1,
    RolloutFile,
    RolloutFileError,
    RolloutLimits,
    RolloutMeta,
    RolloutRow,
)

WORKER = "0x" + "ab" * 20


def _good(rows_per_group: int = 2, tokens: int = 40) -> RolloutFile:
    rows = [RolloutRow(problem_id=f"p{p}", prompt_ids=[1, 2, 3], completion_ids=list(range(4, 4 + tokens)),
                       reward=0.9, task_reward=1.0, length_penalty=0.1, target_length=64, advantage=0.0,
                       policy_step=7, proofs=[bytes(258)] * ((tokens + 31) // 32), worker=WORKER)
            for p in range(2) for _ in range(rows_per_group)]
    meta = RolloutMeta(task_id="4", seed="0xbeef", model="m", worker=WORKER, policy_step=7, group_size=rows_per_group)
    return RolloutFile(meta, rows, name="good")


def _refused(data: bytes, limits: RolloutLimits | None = None, name: str = "f") -> str:
    with pytest.raises(RolloutFileError) as exc:
        read_v1(data, name, limits or RolloutLimits())
    return str(exc.value)


# ---------------------------------------------------------------------------------------------
# writing: table_of, v1_bytes


def test_table_of_has_the_v1_schema_and_the_meta_as_json():
    rf = _good()
    table = table_of(rf)
    assert table.schema.remove_metadata() == ARROW_SCHEMA
    assert table.schema.metadata == {b"schema": ROLLOUTS_SCHEMA_V1.encode(), b"meta": rf.meta.model_dump_json().encode()}
    assert table.num_rows == 4
    assert table.column("problem_id").to_pylist() == ["p0", "p0", "p1", "p1"]
    assert table.column("completion_ids").to_pylist()[0] == list(range(4, 44))


def test_v1_bytes_is_zstd_parquet_that_reads_back_the_same_rows():
    rf = _good()
    data = v1_bytes(rf)
    md = pq.ParquetFile(pa.BufferReader(data)).metadata
    assert {md.row_group(0).column(c).compression for c in range(md.num_columns)} == {"ZSTD"}
    back = read_v1(data, "back", RolloutLimits())
    assert back.rows == rf.rows and back.meta == rf.meta and back.name == "back"


def test_isolated_v1_to_v2_hands_back_the_rows_as_v2_bytes_under_the_given_name_and_limits():
    rf = _good()
    out = isolated_v1_to_v2(v1_bytes(rf), {})
    assert out == rf.to_bytes()  # v2
    assert RolloutFile.from_bytes(out).rows == rf.rows
    with pytest.raises(RolloutFileError, match=r"^rollout file cid-1: 4 rows, over the cap of 3$"):
        isolated_v1_to_v2(v1_bytes(rf), {"name": "cid-1", "limits": {"max_rows": 3}})
    with pytest.raises(RolloutFileError, match=r"^rollout file rollouts: not a readable Parquet file: "):
        isolated_v1_to_v2(b"not parquet", {})
    with pytest.raises(RolloutFileError, match=r"^rollout file 7: not a readable Parquet file: "):
        isolated_v1_to_v2(b"not parquet", {"name": 7})


# ---------------------------------------------------------------------------------------------
# read_v1: each stage's refusal


def test_read_v1_refuses_bytes_that_are_not_parquet_naming_the_file():
    assert _refused(b"PAR1 garbage", name="cid-x").startswith("rollout file cid-x: not a readable Parquet file: ")


def test_read_v1_refuses_a_column_name_that_is_not_utf8_naming_the_file():
    data = v1_bytes(_good())
    size = int.from_bytes(data[-8:-4], "little")
    footer = data[-8 - size:-8]
    bad = data[:-8 - size] + footer.replace(b"advantage", b"\xfcdvantage") + data[-8:]
    msg = _refused(bad, name="cid-bad")
    assert msg.startswith("rollout file cid-bad: not a readable Parquet file: ") and "'utf-8' codec can't decode" in msg


def _write(table: pa.Table, **kw) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", **kw)
    return buf.getvalue()


def test_read_v1_validates_string_cells_in_full():
    table = table_of(_good())
    import numpy as np

    raw = pa.Array.from_buffers(pa.string(), 4, [None, pa.py_buffer(np.array([0, 2, 4, 6, 8], np.int32).tobytes()),
                                                 pa.py_buffer(b"p0p0\xff\xfep1p1")])
    bad = table.set_column(table.schema.get_field_index("worker"), ARROW_SCHEMA.field("worker"), raw)
    msg = _refused(_write(bad), name="cells")
    assert msg.startswith("rollout file cells: not a readable Parquet file: "), msg


def test_read_v1_refuses_null_cells_in_a_non_nullable_column_by_name():
    table = table_of(_good())
    schema = pa.schema([f.with_nullable(True) for f in ARROW_SCHEMA]).with_metadata(table.schema.metadata)
    cols = table.to_pydict()
    cols["reward"][2] = None
    nulled = pa.Table.from_pydict(cols, schema=schema)
    assert _refused(_write(nulled), name="n") == "rollout file n: column 'reward' has null cells"


def test_read_v1_rows_cap_at_its_bound():
    data = v1_bytes(_good())
    assert len(read_v1(data, "f", RolloutLimits(max_rows=4)).rows) == 4
    assert _refused(data, RolloutLimits(max_rows=3)) == "rollout file f: 4 rows, over the cap of 3"


def test_read_v1_row_groups_cap_counts_empty_groups():
    table = table_of(_good())
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, table.schema) as writer:
        for _ in range(5):
            writer.write_table(table.slice(0, 0))
        writer.write_table(table)
    data = buf.getvalue()
    assert pq.ParquetFile(pa.BufferReader(data)).metadata.num_row_groups == 6
    assert _refused(data, RolloutLimits(max_rows=5)) == "rollout file f: 6 row groups, over the cap of 5"


def test_read_v1_tokens_per_row_cap_at_its_bound():
    data = v1_bytes(_good())  # 3 prompt + 40 completion tokens a row
    assert len(read_v1(data, "f", RolloutLimits(max_tokens_per_row=43)).rows) == 4
    assert _refused(data, RolloutLimits(max_tokens_per_row=42)) == "rollout file f: a row holds 43 tokens, over the cap of 42"


def test_read_v1_total_tokens_cap_from_the_rows_and_from_the_pages_with_a_slot_per_list():
    data = v1_bytes(_good())  # 4 rows of 43 tokens: 172
    assert len(read_v1(data, "f", RolloutLimits(max_total_tokens=172)).rows) == 4
    assert _refused(data, RolloutLimits(max_total_tokens=171)) == "rollout file f: 172 tokens, over the cap of 171"
    # the page headers' count may exceed the tokens by one slot per list (2 a row): 172 <= 164 + 8
    assert _refused(data, RolloutLimits(max_total_tokens=164)) == "rollout file f: 172 tokens, over the cap of 164"
    assert _refused(data, RolloutLimits(max_total_tokens=163)) == "rollout file f: pages hold 172 tokens, over the cap of 163"


def _decoded_bound(data: bytes) -> int:
    """The smallest max_decoded_bytes that admits `data`."""
    lo, hi = 1, 1 << 24
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            read_v1(data, "f", RolloutLimits(max_decoded_bytes=mid))
            hi = mid
        except RolloutFileError:
            lo = mid + 1
    return lo


def test_read_v1_decoded_bytes_cap_at_its_bound():
    data = v1_bytes(_good())
    bound = _decoded_bound(data)
    md = pq.ParquetFile(pa.BufferReader(data)).metadata
    # the page headers' sizes plus 12 bytes per value, summed over every page: the first cap reached
    pages = 0
    for c in range(md.num_columns):
        col = md.row_group(0).column(c)
        pages += col.total_uncompressed_size
    assert bound > 12 * 172  # at least the token values
    assert len(read_v1(data, "f", RolloutLimits(max_decoded_bytes=bound)).rows) == 4
    assert _refused(data, RolloutLimits(max_decoded_bytes=bound - 1)) == (
        f"rollout file f: decodes to more than {bound - 1} bytes (cap)")


def test_read_v1_dictionary_columns_are_measured_decoded():
    """Long strings repeated in every row are one dictionary entry each in the file and a copy a row decoded: the
    cap counts the copies (past what the page headers say)."""
    rf = _good(rows_per_group=50, tokens=1)
    rows = [r.model_copy(update={"problem_id": "q" * 255 + r.problem_id[-1]}) for r in rf.rows]
    data = v1_bytes(RolloutFile(rf.meta, rows, name="d"))
    bound = _decoded_bound(data)
    assert bound == 100 * (256 + 258 + 42)  # every row's problem id, proof and worker, decoded
    msg = _refused(data, RolloutLimits(max_decoded_bytes=bound - 1))
    assert msg == f"rollout file f: column 'worker' decodes to more than {bound - 1} bytes (cap)"
    msg = _refused(data, RolloutLimits(max_decoded_bytes=100 * 256 + 100))
    assert msg == f"rollout file f: column 'proofs' decodes to more than {100 * 256 + 100} bytes (cap)"


# ---------------------------------------------------------------------------------------------
# _check_caps on a file's own footer


def test_check_caps_refuses_pages_outside_the_bytes():
    data = v1_bytes(_good())
    md = pq.ParquetFile(pa.BufferReader(data)).metadata
    with pytest.raises(RolloutFileError, match=r"^rollout file f: column 'problem_id' pages lie outside the file$"):
        _check_caps(memoryview(data[:8]), md, "f", RolloutLimits())
    _check_caps(memoryview(data), md, "f", RolloutLimits())  # the whole file: fine


def test_check_caps_refuses_a_malformed_page_header():
    data = v1_bytes(_good())
    md = pq.ParquetFile(pa.BufferReader(data)).metadata
    col = md.row_group(0).column(0)
    start = col.dictionary_page_offset if col.has_dictionary_page and col.dictionary_page_offset else col.data_page_offset
    bad = bytearray(data)
    bad[start] = 0x1D  # field delta 1, thrift type 13: no such type
    with pytest.raises(RolloutFileError, match=r"^rollout file f: malformed page header or column metadata: "
                       r"unknown thrift type 13 in a page header$"):
        _check_caps(memoryview(bytes(bad)), md, "f", RolloutLimits())


def test_check_caps_refuses_over_max_pages(monkeypatch):
    data = v1_bytes(_good())
    md = pq.ParquetFile(pa.BufferReader(data)).metadata
    pages = sum(1 for _ in range(md.num_columns))  # at least one page a column
    monkeypatch.setattr(v1, "MAX_PAGES", 1)
    with pytest.raises(RolloutFileError, match=r"^rollout file f: more than 1 pages$"):
        _check_caps(memoryview(data), md, "f", RolloutLimits())
    assert pages == 11


# ---------------------------------------------------------------------------------------------
# metadata and columns


def _raw(meta: dict[str, str]) -> dict[bytes, bytes]:
    return {k.encode(): v.encode() for k, v in meta.items()}


def test_check_metadata_reads_the_meta_json():
    rf = _good()
    assert _check_metadata(_raw({"schema": ROLLOUTS_SCHEMA_V1, "meta": rf.meta.model_dump_json()}), "f") == rf.meta


def test_check_metadata_refuses_bytes_that_are_not_utf8():
    with pytest.raises(RolloutFileError, match=r"^rollout file f: metadata is not UTF-8: "):
        _check_metadata({b"schema": b"\xff"}, "f")
    with pytest.raises(RolloutFileError, match=r"^rollout file f: metadata is not UTF-8: "):
        _check_metadata({b"\xff": b"x"}, "f")


def test_check_metadata_names_an_unknown_schema_cut_at_80_characters():
    known = f"(this reader knows {ROLLOUTS_SCHEMA_V1})"
    with pytest.raises(RolloutFileError) as exc:
        _check_metadata(_raw({"meta": "{}"}), "f")
    assert str(exc.value) == f"rollout file f: unknown schema None {known}"
    with pytest.raises(RolloutFileError) as exc:
        _check_metadata(_raw({"schema": "intellect.rollouts/v9"}), "f")
    assert str(exc.value) == f"rollout file f: unknown schema 'intellect.rollouts/v9' {known}"
    with pytest.raises(RolloutFileError) as exc:
        _check_metadata(_raw({"schema": "s" * 80}), "f")
    assert str(exc.value) == f"rollout file f: unknown schema {'s' * 80!r} {known}"
    with pytest.raises(RolloutFileError) as exc:
        _check_metadata(_raw({"schema": "s" * 81}), "f")
    assert str(exc.value) == f"rollout file f: unknown schema {'s' * 80 + '...'!r} {known}"


def test_check_metadata_caps_the_meta_json_at_64_kib():
    over = " " * (MAX_META_BYTES + 1)
    with pytest.raises(RolloutFileError) as exc:
        _check_metadata(_raw({"schema": ROLLOUTS_SCHEMA_V1, "meta": over}), "f")
    assert str(exc.value) == f"rollout file f: metadata is {MAX_META_BYTES + 1} bytes, over {MAX_META_BYTES}"
    meta = _good().meta.model_dump_json()
    at = meta + " " * (MAX_META_BYTES - len(meta))  # JSON may end in blanks: exactly at the cap, read
    assert _check_metadata(_raw({"schema": ROLLOUTS_SCHEMA_V1, "meta": at}), "f") == _good().meta


def test_check_metadata_refuses_bad_or_missing_meta_json():
    with pytest.raises(RolloutFileError, match=r"^rollout file f: bad metadata: "):
        _check_metadata(_raw({"schema": ROLLOUTS_SCHEMA_V1, "meta": json.dumps({"task_id": "1"})}), "f")
    with pytest.raises(RolloutFileError, match=r"^rollout file f: bad metadata: "):
        _check_metadata(_raw({"schema": ROLLOUTS_SCHEMA_V1}), "f")


def test_check_columns_names_the_missing_and_the_first_20_unexpected():
    want = {f.name: f.type for f in ARROW_SCHEMA}
    _check_columns(dict(want), "f")
    got = {k: v for k, v in want.items() if k != "advantage"} | {"zz": pa.int8(), "aa": pa.int8()}
    with pytest.raises(RolloutFileError) as exc:
        _check_columns(got, "f")
    assert str(exc.value) == "rollout file f: columns missing ['advantage'], unexpected ['aa', 'zz']"
    extra = {f"x{i:02d}": pa.int8() for i in range(25)}
    with pytest.raises(RolloutFileError) as exc:
        _check_columns(want | extra, "f")
    assert str(exc.value) == f"rollout file f: columns missing [], unexpected {sorted(extra)[:20]}"


def test_check_columns_names_a_column_of_the_wrong_type():
    want = {f.name: f.type for f in ARROW_SCHEMA}
    with pytest.raises(RolloutFileError) as exc:
        _check_columns(want | {"reward": pa.float32()}, "f")
    assert str(exc.value) == "rollout file f: column 'reward' is float, expected double"
    with pytest.raises(RolloutFileError) as exc:
        _check_columns(want | {"policy_step": pa.int32(), "worker": pa.binary()}, "f")
    assert str(exc.value) == "rollout file f: column 'policy_step' is int32, expected int64"


def test_from_table_checks_the_schema_and_names_a_bad_row():
    rf = _good()
    table = table_of(rf)
    assert from_table(table, "t").rows == rf.rows
    assert from_table(table, "t").name == "t"
    cols = table.to_pydict()
    cols["worker"][1] = "not an address"
    bad = pa.Table.from_pydict(cols, schema=table.schema)
    with pytest.raises(RolloutFileError) as exc:
        from_table(bad, "t")
    assert str(exc.value).startswith("rollout file t row 1: ")
    with pytest.raises(RolloutFileError, match=r"^rollout file t: unknown schema None"):
        from_table(table.replace_schema_metadata({}), "t")


def test_from_rows_refuses_unreadable_cells():
    import numpy as np

    table = table_of(_good())
    raw = pa.Array.from_buffers(pa.string(), 4, [None, pa.py_buffer(np.array([0, 2, 4, 6, 8], np.int32).tobytes()),
                                                 pa.py_buffer(b"p0p0\xff\xfep1p1")])
    bad = table.set_column(table.schema.get_field_index("problem_id"), ARROW_SCHEMA.field("problem_id"), raw)
    with pytest.raises(RolloutFileError, match=r"^rollout file c: unreadable cells: "):
        from_rows(bad, _good().meta, "c")


# ---------------------------------------------------------------------------------------------
# _Thrift: the compact protocol, bounds-checked


def _t(data: bytes, end: int | None = None) -> _Thrift:
    return _Thrift(memoryview(data), 0, len(data) if end is None else end)


def test_thrift_byte_stops_at_the_end_given_not_the_buffers():
    t = _t(b"\x07\x08", end=1)
    assert t.byte() == 7 and t.pos == 1
    with pytest.raises(ValueError, match=r"^truncated page header$"):
        t.byte()


def test_thrift_varint_reads_up_to_64_bits():
    assert _t(b"\x96\x01").varint() == 150
    assert _t(b"\x00").varint() == 0
    assert _t(b"\x7f").varint() == 127
    assert _t(b"\xff" * 9 + b"\x01").varint() == 2**64 - 1
    with pytest.raises(ValueError, match=r"^varint longer than 64 bits in a page header$"):
        _t(b"\x80" * 10 + b"\x00").varint()
    with pytest.raises(ValueError, match=r"^truncated page header$"):
        _t(b"\x80").varint()


def test_thrift_zigzag_alternates_signs():
    assert [_t(bytes([n])).zigzag() for n in range(6)] == [0, -1, 1, -2, 2, -3]


def test_thrift_skip_bytes_bounds():
    t = _t(b"abcd")
    t.skip_bytes(4)
    assert t.pos == 4
    t.skip_bytes(0)
    with pytest.raises(ValueError, match=r"^truncated page header$"):
        t.skip_bytes(1)
    with pytest.raises(ValueError, match=r"^truncated page header$"):
        _t(b"abcd").skip_bytes(-1)
    t = _t(b"abcd")
    t.skip_bytes(1)
    t.skip_bytes(3)
    assert t.pos == 4


def test_thrift_values_of_each_type():
    assert _t(b"").value(1, 0) is True
    assert _t(b"").value(2, 0) is False
    assert _t(b"\xfe").value(3, 0) == 0xFE
    for ttype in (4, 5, 6):
        assert _t(b"\x03").value(ttype, 0) == -2
    t = _t(b"12345678x")
    assert t.value(7, 0) is None and t.pos == 8  # a double: 8 bytes skipped
    t = _t(b"\x03abcx")
    assert t.value(8, 0) is None and t.pos == 4  # binary: a length, then its bytes
    with pytest.raises(ValueError, match=r"^unknown thrift type 13 in a page header$"):
        _t(b"").value(13, 0)
    with pytest.raises(ValueError, match=r"^unknown thrift type 0 in a page header$"):
        _t(b"").value(0, 0)


def test_thrift_lists_sets_and_maps_are_skipped_element_by_element():
    t = _t(b"\x35\x02\x04\x06x")  # list of 3 i32 (type 5): zigzag varints
    assert t.value(9, 0) is None and t.pos == 4
    t = _t(b"\x21\x01\x02x")  # set of 2 bools (type 1): a byte each
    assert t.value(10, 0) is None and t.pos == 3
    t = _t(b"\xf5\x10" + b"\x02" * 16 + b"x")  # size 15: the size follows as a varint (16)
    assert t.value(9, 0) is None and t.pos == 18
    t = _t(b"\x02\x55\x02\x04\x06\x08x")  # map of 2 i32 -> i32
    assert t.value(11, 0) is None and t.pos == 6
    t = _t(b"\x00x")  # an empty map: no key/value type byte
    assert t.value(11, 0) is None and t.pos == 1
    t = _t(b"\x1c\x15\x04\x00x")  # a list of 1 struct {1: i32 2}
    assert t.value(9, 0) is None and t.pos == 4
    with pytest.raises(ValueError, match=r"^truncated page header$"):
        _t(b"\x35\x02").value(9, 0)


def test_thrift_struct_reads_fields_by_delta_and_by_explicit_id():
    # {1: i32 -1, 3: i32 2, 2: struct {1: i32 1}, 40: i32 3 (explicit id: delta 0, zigzag 80)}
    data = b"\x15\x01" + b"\x25\x04" + b"\x0c\x04" + b"\x15\x02\x00" + b"\x05\x50\x06" + b"\x00"
    t = _t(data)
    assert t.struct() == {1: -1, 3: 2, 2: {1: 1}, 40: 3}
    assert t.pos == len(data)
    assert _t(b"\x00").struct() == {}
    with pytest.raises(ValueError, match=r"^truncated page header$"):
        _t(b"\x15\x01").struct()


def test_thrift_struct_nesting_stops_past_16():
    def nested(k: int) -> bytes:
        return b"\x1c" * k + b"\x00" * (k + 1)

    assert _t(nested(16)).struct() is not None
    with pytest.raises(ValueError, match=r"^page header nested too deeply$"):
        _t(nested(17)).struct()
    with pytest.raises(ValueError, match=r"^page header nested too deeply$"):
        _t(b"\x00").struct(17)
    assert _t(b"\x00").struct(16) == {}


def test_thrift_list_of_false_bools_takes_a_byte_each():
    t = _t(b"\x22\x02\x02x")  # a list of 2 bools written with the false type (2): still a byte each
    assert t.value(9, 0) is None and t.pos == 3
    t = _t(b"\x23\x07\x08x")  # a list of 2 bytes (type 3)
    assert t.value(9, 0) is None and t.pos == 3


def _chain(level: bytes, close: bytes, k: int) -> bytes:
    """A struct holding a container holding a struct ... k levels deep (the innermost struct at depth 2k)."""
    return b"\x00" if k == 0 else level + _chain(level, close, k - 1) + close


@pytest.mark.parametrize(("level", "close"), [
    (b"\x19\x1c", b"\x00"),  # field 1: a list of 1 struct
    (b"\x1b\x01\x5c\x02", b"\x00"),  # field 1: a map of 1 entry, i32 key -> struct value
    (b"\x1b\x01\xc5", b"\x02\x00"),  # field 1: a map of 1 entry, struct key -> i32 value
], ids=["list", "map-value", "map-key"])
def test_thrift_depth_grows_by_one_per_container_and_one_per_struct(level, close):
    t = _t(_chain(level, close, 8))
    assert t.struct() is not None and t.pos == len(_chain(level, close, 8))  # innermost struct at depth 16
    with pytest.raises(ValueError, match=r"^page header nested too deeply$"):
        _t(_chain(level, close, 9)).struct()  # depth 18


def test_check_schema_refuses_a_schema_it_cannot_walk_naming_the_file():
    class Unwalkable:
        def __iter__(self):
            raise UnicodeDecodeError("utf-8", b"\xfc", 0, 1, "invalid start byte")

    with pytest.raises(RolloutFileError) as exc:
        v1._check_schema(Unwalkable(), "s")
    assert str(exc.value) == ("rollout file s: unreadable schema: 'utf-8' codec can't decode byte 0xfc in position 0: "
                              "invalid start byte")


def test_read_v1_names_the_file_in_schema_and_column_refusals():
    table = table_of(_good())
    unknown = table.replace_schema_metadata({b"schema": b"intellect.rollouts/v0", b"meta": b"{}"})
    assert _refused(_write(unknown), name="cid-s") == (
        f"rollout file cid-s: unknown schema 'intellect.rollouts/v0' (this reader knows {ROLLOUTS_SCHEMA_V1})")
    extra = table.append_column("x", pa.array([1, 2, 3, 4], pa.int8())).replace_schema_metadata(table.schema.metadata)
    assert _refused(_write(extra), name="cid-c") == "rollout file cid-c: columns missing [], unexpected ['x']"


def test_check_metadata_without_meta_json_reads_the_empty_string():
    with pytest.raises(RolloutFileError) as exc:
        _check_metadata(_raw({"schema": ROLLOUTS_SCHEMA_V1}), "f")
    assert "input_value=''" in str(exc.value)


# ---------------------------------------------------------------------------------------------
# _check_caps from the page headers: the file's own, and crafted ones in place of a column's pages

DATA = v1_bytes(_good())
MD = pq.ParquetFile(pa.BufferReader(DATA)).metadata


def _caps(data: bytes, md=MD, **limits) -> None:
    _check_caps(memoryview(data), md, "f", RolloutLimits(**limits))


def _caps_bound(data: bytes, md=MD) -> int:
    lo, hi = 1, 1 << 24
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            _caps(data, md, max_decoded_bytes=mid)
            hi = mid
        except RolloutFileError:
            lo = mid + 1
    return lo


def test_check_caps_decoded_bound_is_the_page_sizes_plus_12_bytes_a_value():
    """Pinned for this file (pyarrow as locked): every page's uncompressed size plus 12 bytes per value, the
    dictionary pages' values included."""
    assert _caps_bound(DATA) == 3925
    _caps(DATA, max_decoded_bytes=3925)
    with pytest.raises(RolloutFileError, match=r"^rollout file f: decodes to more than 3924 bytes \(cap\)$"):
        _caps(DATA, max_decoded_bytes=3924)
    v2 = _write(table_of(_good()), data_page_version="2.0")  # data page v2 headers: field 8
    assert _caps_bound(v2, pq.ParquetFile(pa.BufferReader(v2)).metadata) == 3897


def test_check_caps_counts_every_page_up_to_max_pages(monkeypatch):
    monkeypatch.setattr(v1, "MAX_PAGES", 22)  # this file's pages: a dictionary page and a data page a column
    _caps(DATA)
    monkeypatch.setattr(v1, "MAX_PAGES", 21)
    with pytest.raises(RolloutFileError, match=r"^rollout file f: more than 21 pages$"):
        _caps(DATA)


def test_check_caps_sums_the_values_of_every_data_page_of_a_column():
    many = _write(table_of(_good()), data_page_size=64)  # several data pages a column
    md = pq.ParquetFile(pa.BufferReader(many)).metadata
    assert md.row_group(0).column(2).total_compressed_size > 3 * 64 // 2
    _caps(many, md, max_total_tokens=164)  # 172 tokens <= 164 + 2 a row
    with pytest.raises(RolloutFileError, match=r"^rollout file f: pages hold 172 tokens, over the cap of 163$"):
        _caps(many, md, max_total_tokens=163)


def test_check_caps_admits_as_many_row_groups_as_the_cap():
    one_a_group = _write(table_of(_good()), row_group_size=1)
    md = pq.ParquetFile(pa.BufferReader(one_a_group)).metadata
    assert md.num_row_groups == 4
    _caps(one_a_group, md, max_rows=4)


def test_check_caps_admits_pages_that_end_at_the_last_byte():
    end = max(MD.row_group(0).column(c).dictionary_page_offset + MD.row_group(0).column(c).total_compressed_size
              for c in range(MD.num_columns))
    _caps(DATA[:end])
    with pytest.raises(RolloutFileError, match=r"^rollout file f: column 'worker' pages lie outside the file$"):
        _caps(DATA[:end - 1])


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def _header(fields: list[tuple[int, str, object]]) -> bytes:
    """A Thrift compact struct: (field id, 'i' i32 | 'b' binary of that many bytes | 's' struct of i32 fields)."""
    out, last = bytearray(), 0
    for fid, kind, val in fields:
        out.append(((fid - last) << 4) | {"i": 5, "b": 8, "s": 12}[kind])
        last = fid
        if kind == "i":
            out += _varint((val << 1) ^ (val >> 63))
        elif kind == "b":
            out += _varint(val) + b"\x00" * val
        else:
            out += _header([(k, "i", x) for k, x in val])
    out.append(0)
    return bytes(out)


def _crafted(col: int, ptype: int = 0, size: int = 10, n: int | None = 4, sub: int | None = 5, pad: bool = False,
             drop: tuple[int, ...] = ()) -> bytes:
    """The file with column `col`'s pages replaced by one crafted page header whose compressed size reaches the
    column's end (`pad`: the header itself fills the column, compressed size 0)."""
    c = MD.row_group(0).column(col)
    start, length = c.dictionary_page_offset, c.total_compressed_size

    def build(csize: int, padlen: int) -> bytes:
        f = [(1, "i", ptype), (2, "i", size), (3, "i", csize)]
        if pad:
            f.append((4, "b", padlen))
        if sub:
            f.append((sub, "s", [] if n is None else [(1, n)]))
        return _header([x for x in f if x[0] not in drop])

    if pad:
        padlen = length - len(build(0, 0))
        while len(build(0, padlen)) != length:
            padlen -= len(build(0, padlen)) - length
        h = build(0, padlen)
    else:
        h = build(length - len(build(0, 0)), 0)
    assert len(h) <= length and (pad or len(h) == len(build(length - len(h), 0)))
    return DATA[:start] + h + DATA[start + len(h):]


@pytest.mark.parametrize("kw", [dict(size=-1), dict(drop=(2,)), dict(n=-1)], ids=["negative-size", "no-size",
                                                                                   "negative-values"])
def test_check_caps_refuses_a_malformed_page_header_naming_column_and_byte(kw):
    with pytest.raises(RolloutFileError, match=r"^rollout file f: column 'problem_id': malformed page header at byte 4$"):
        _caps(_crafted(0, **kw))


@pytest.mark.parametrize(("kw", "bound"), [
    (dict(size=0), 3886), (dict(pad=True), 3896), (dict(sub=None), 3848), (dict(n=None), 3848), (dict(n=0), 3848),
    (dict(n=5), 3908), (dict(ptype=2), 3896),
], ids=["size-0", "compressed-0", "no-page-struct", "no-value-count", "0-values", "5-values", "dictionary-page"])
def test_check_caps_admits_page_headers_of_zero_sizes_and_counts_what_they_say(kw, bound):
    crafted = _crafted(0, **kw)
    _caps(crafted)
    assert _caps_bound(crafted) == bound


def test_check_caps_counts_rows_from_the_pages_not_the_footer():
    with pytest.raises(RolloutFileError, match=r"^rollout file f: pages hold 5 rows, over the cap of 4$"):
        _caps(_crafted(0, n=5), max_rows=4)
    _caps(_crafted(0, n=4), max_rows=4)


def test_check_caps_counts_no_tokens_of_a_list_column_holding_only_a_dictionary_page():
    prompt_dict = _crafted(1, ptype=2)  # prompt_ids: no data page, so none of its 12 tokens counted
    _caps(prompt_dict, max_total_tokens=152)  # 160 completion tokens <= 152 + 2 a row
    with pytest.raises(RolloutFileError, match=r"^rollout file f: pages hold 160 tokens, over the cap of 151$"):
        _caps(prompt_dict, max_total_tokens=151)
    completion_dict = _crafted(2, ptype=2)
    _caps(completion_dict, max_total_tokens=4)
    with pytest.raises(RolloutFileError, match=r"^rollout file f: pages hold 12 tokens, over the cap of 3$"):
        _caps(completion_dict, max_total_tokens=3)


# ---------------------------------------------------------------------------------------------
# _decoded on tables read as read_v1 reads them


def _dict_table(data: bytes) -> pa.Table:
    return pq.ParquetFile(pa.BufferReader(data), read_dictionary=v1._DICT_COLUMNS).read()


def test_decoded_refuses_more_rows_than_the_cap():
    with pytest.raises(RolloutFileError, match=r"^rollout file d: 4 rows, over the cap of 3$"):
        v1._decoded(_dict_table(DATA), "d", RolloutLimits(max_rows=3))


def test_decoded_expands_the_dictionary_columns_and_keeps_the_metadata():
    table = _dict_table(DATA)
    out = v1._decoded(table, "d", RolloutLimits())
    assert out.schema.remove_metadata() == ARROW_SCHEMA
    assert out.schema.metadata == table.schema.metadata
    assert out.column("problem_id").to_pylist() == ["p0", "p0", "p1", "p1"]


def test_decoded_of_an_empty_table_counts_nothing():
    empty = _dict_table(_write(table_of(_good()).slice(0, 0)))
    assert v1._decoded(empty, "d", RolloutLimits(max_tokens_per_row=0, max_total_tokens=0,
                                                 max_decoded_bytes=0)).num_rows == 0
    no_chunks = pa.Table.from_batches([], schema=_dict_table(DATA).schema)
    out = v1._decoded(no_chunks, "d", RolloutLimits())
    assert out.num_rows == 0 and out.schema.remove_metadata() == ARROW_SCHEMA


def test_decoded_refuses_columns_it_cannot_read_naming_the_file():
    with pytest.raises(RolloutFileError, match=r"^rollout file d: unreadable columns: "):
        v1._decoded(table_of(_good()), "d", RolloutLimits())  # plain strings where dictionaries are expected


# crafted footers: _check_caps reads only these fields of pyarrow's FileMetaData, so a stand-in footer is a footer
# that says what a crafted file's footer would say


class _Column:
    def __init__(self, real, **say):
        self.path_in_schema = real.path_in_schema
        self.data_page_offset = real.data_page_offset
        self.has_dictionary_page = real.has_dictionary_page
        self.dictionary_page_offset = real.dictionary_page_offset
        self.total_compressed_size = real.total_compressed_size
        self.__dict__.update(say)


class _Footer:
    def __init__(self, columns: list[_Column], num_rows: int = 4):
        self.num_rows, self.num_row_groups = num_rows, 1 if columns else 0
        self.num_columns, self._columns = len(columns), columns

    def row_group(self, g):
        return self

    def column(self, c):
        return self._columns[c]


def _footer(**say) -> _Footer:
    """The file's own footer, column 0 (problem_id) saying `say`."""
    real = MD.row_group(0)
    return _Footer([_Column(real.column(0), **say)] + [_Column(real.column(c)) for c in range(1, MD.num_columns)])


def test_check_caps_the_file_footer_stand_in_is_faithful():
    assert _caps_bound(DATA, _footer()) == 3925


def test_check_caps_refuses_a_negative_page_offset_or_size():
    no_dict = dict(has_dictionary_page=False, dictionary_page_offset=None)
    with pytest.raises(RolloutFileError, match=r"^rollout file f: column 'problem_id' pages lie outside the file$"):
        _caps(DATA, _footer(**no_dict, data_page_offset=-1, total_compressed_size=10))
    with pytest.raises(RolloutFileError, match=r"^rollout file f: column 'problem_id' pages lie outside the file$"):
        _caps(DATA, _footer(total_compressed_size=-1))


def test_check_caps_walks_a_column_from_offset_zero_and_admits_an_empty_one():
    no_dict = dict(has_dictionary_page=False, dictionary_page_offset=None)
    with pytest.raises(RolloutFileError, match=r"^rollout file f: malformed page header or column metadata: "
                       r"unknown thrift type 0 in a page header$"):
        _caps(DATA, _footer(**no_dict, data_page_offset=0, total_compressed_size=10))  # "PAR1" is no page header
    _caps(DATA, _footer(total_compressed_size=0))  # no pages at all


def test_check_caps_starts_at_the_dictionary_page_only_when_it_comes_first():
    # the footer swaps the two offsets: the "dictionary" offset is past the data page's, so the walk starts at the
    # data page offset (here the real dictionary page) and reads the column's own pages
    assert _caps_bound(DATA, _footer(data_page_offset=4, dictionary_page_offset=39)) == 3925
    # a dictionary page offset of 0 is none
    _caps(DATA, _footer(data_page_offset=4, dictionary_page_offset=0))
    # a dictionary page offset of 1 (inside the magic bytes) is taken, and its garbage refused
    with pytest.raises(RolloutFileError, match=r"^rollout file f: column 'problem_id': malformed page header at byte 1$"):
        _caps(DATA, _footer(dictionary_page_offset=1, total_compressed_size=78 + 3))


def test_check_caps_of_a_footer_without_row_groups_counts_zero_rows():
    # no row group and no row pass caps of zero (nothing walked, nothing counted) ...
    assert _caps(DATA, _Footer([], num_rows=0), max_rows=0, max_total_tokens=0) is None
    # ... and one row said in the footer is over them
    with pytest.raises(RolloutFileError, match=r"^rollout file f: 1 rows, over the cap of 0$"):
        _caps(DATA, _Footer([], num_rows=1), max_rows=0, max_total_tokens=0)
