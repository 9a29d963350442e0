"""Rollout files from strangers: decompression bombs and bytes pyarrow reads but cannot name (v1, Parquet).

A few KB of Parquet can RLE-encode tens of millions of tokens (issue 22: 4.5 KB → 20 M tokens,
3 s and 563 MiB before any check). `RolloutFile.from_bytes` must refuse such a file from its
footer and page headers, before a column is decoded; memory is measured in a fresh process
(pyarrow's pool peak, tracemalloc's peak, the process's max RSS), never time. A node reads v1 files only in a
child process (`intellect.verifier.isolation`), which runs `read_v1`: the memory tests measure that function in
a fresh process, the others go through `RolloutFile.from_bytes` (and so through the child).
"""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from intellect.verifier.rollouts import (
    ARROW_SCHEMA,
    MAX_TOKENS_PER_ROW,
    MAX_TOTAL_TOKENS,
    ROLLOUTS_SCHEMA_V1,
    RolloutFile,
    RolloutFileError,
    RolloutLimits,
    RolloutMeta,
    RolloutRow,
)

WORKER = "0x" + "ab" * 20
BOMB_TOKENS = 20_000_000


def _meta(group: int = 1) -> str:
    return RolloutMeta(task_id="1", seed="0x01", model="m", worker=WORKER, policy_step=0,
                       group_size=group).model_dump_json()


def _write(table: pa.Table, **kw) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", **kw)
    return buf.getvalue()


def _write_without_arrow_schema(table: pa.Table) -> bytes:
    """Parquet whose Arrow types are inferred from the Parquet schema (dictionary columns read back plain)."""
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, table.schema, store_schema=False, compression="zstd") as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({k.decode(): v.decode() for k, v in table.schema.metadata.items()})
    return buf.getvalue()


def _columns(rows: int, completion: pa.Array, proofs: pa.Array) -> pa.Table:
    return pa.table({
        "problem_id": pa.array(["p"] * rows), "prompt_ids": pa.array([[1]] * rows, pa.list_(pa.int32())),
        "completion_ids": completion, "reward": pa.array([0.0] * rows), "task_reward": pa.array([0.0] * rows),
        "length_penalty": pa.array([0.0] * rows), "target_length": pa.array([None] * rows, pa.int32()),
        "advantage": pa.array([0.0] * rows, pa.float32()), "policy_step": pa.array([0] * rows, pa.int64()),
        "proofs": proofs, "worker": pa.array([WORKER] * rows),
    }).replace_schema_metadata({"schema": ROLLOUTS_SCHEMA_V1, "meta": _meta(rows)})


def _token_bomb(n: int = BOMB_TOKENS) -> bytes:
    """One row whose completion is `n` copies of one token: a few KB after RLE + zstd."""
    completion = pa.ListArray.from_arrays(pa.array([0, n], pa.int32()), pa.array(np.full(n, 5, dtype=np.int32)))
    table = _columns(1, completion, pa.array([[]], pa.list_(pa.binary()))).cast(
        ARROW_SCHEMA.with_metadata({"schema": ROLLOUTS_SCHEMA_V1, "meta": _meta()}))
    return _write(table, compression_level=19)


def _footer_lies(data: bytes, true_count: int, claimed: int) -> bytes:
    """The file with every footer varint `zigzag(true_count)` replaced by a padded varint of `claimed`
    (same length): the footer's num_values now lie; the page headers still tell the truth."""
    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            b, n = n & 0x7F, n >> 7
            out.append(b | 0x80 if n else b)
            if not n:
                return bytes(out)
    size = struct.unpack("<I", data[-8:-4])[0]
    footer = data[-8 - size:-8]
    old, new = varint(2 * true_count), bytearray(varint(2 * claimed))
    assert len(new) <= len(old) and footer.count(old) >= 1
    while len(new) < len(old):  # pad: 0x80-continued groups of zero bits
        new[-1] |= 0x80
        new.append(0)
    return data[:-8 - size] + footer.replace(old, bytes(new)) + data[-8:]


_MEASURE = r"""
import sys, tracemalloc
import pyarrow as pa
from intellect.verifier._rollouts_v1 import read_v1
from intellect.verifier.rollouts import RolloutFileError, RolloutLimits
data = open(sys.argv[1], "rb").read()
tracemalloc.start()
try:
    read_v1(data, "bomb", RolloutLimits())
    print("ACCEPTED")
except RolloutFileError as exc:
    print("REFUSED", exc)
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print("PEAKS", tracemalloc.get_traced_memory()[1], pa.default_memory_pool().max_memory(), hwm * 1024)
"""


def _read_in_fresh_process(tmp_path: Path, data: bytes) -> tuple[str, int, int, int]:
    path = tmp_path / "bomb.parquet"
    path.write_bytes(data)
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    py_peak, arrow_peak, rss = (int(x) for x in lines[-1].split()[1:])
    return lines[0], py_peak, arrow_peak, rss


def test_rollout_file_token_bomb_refused_before_decoding(tmp_path: Path) -> None:
    data = _token_bomb()
    assert len(data) < 8 * 1024  # the shape: a few KB ...
    assert pq.ParquetFile(pa.BufferReader(data)).metadata.row_group(0).column(2).num_values == BOMB_TOKENS + 0
    verdict, py_peak, arrow_peak, rss = _read_in_fresh_process(tmp_path, data)
    assert verdict.startswith("REFUSED") and f"over the cap of {MAX_TOTAL_TOKENS}" in verdict, verdict
    # ... that decodes to 80 MB of int32 and ~700 MB of Python ints: none of it may be allocated (the
    # process's high-water mark is the imports' ~75 MiB; an unchecked read peaks at ~430 MiB)
    assert py_peak < 4 << 20, py_peak
    assert arrow_peak < 4 << 20, arrow_peak
    assert rss < 200 << 20, rss


def test_rollout_file_token_bomb_with_lying_footer_refused(tmp_path: Path) -> None:
    """pyarrow decodes what the pages hold, whatever the footer's num_values say: the caps read the
    page headers, so a footer claiming one value per column does not get the bomb through."""
    data = _footer_lies(_token_bomb(), BOMB_TOKENS, 1)
    md = pq.ParquetFile(pa.BufferReader(data)).metadata
    assert md.row_group(0).column(2).num_values == 1  # the lie is in place
    verdict, py_peak, arrow_peak, rss = _read_in_fresh_process(tmp_path, data)
    assert verdict.startswith("REFUSED") and "tokens, over the cap" in verdict, verdict
    assert arrow_peak < 4 << 20 and py_peak < 4 << 20 and rss < 200 << 20, (arrow_peak, py_peak, rss)


def test_rollout_file_dictionary_bomb_refused_before_expansion() -> None:
    """64 rows x 64 proofs, every one the same 256 KiB dictionary value: 1 GiB once expanded."""
    rows, per_row, big = 64, 64, bytes(256 * 1024)
    proofs = pa.ListArray.from_arrays(
        pa.array(np.arange(0, rows * per_row + 1, per_row, dtype=np.int32)),
        pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows * per_row, dtype=np.int32)), pa.array([big])))
    completion = pa.array([[5] * 32] * rows, pa.list_(pa.int32()))
    data = _write_without_arrow_schema(_columns(rows, completion, proofs))
    assert len(data) < 64 * 1024
    with pytest.raises(RolloutFileError, match=r"column 'proofs' decodes to more than \d+ bytes"):
        RolloutFile.from_bytes(data, name="dict-bomb")


def _good(rows_per_group: int = 2, tokens: int = 40) -> RolloutFile:
    rows = [RolloutRow(problem_id=f"p{p}", prompt_ids=[1, 2, 3], completion_ids=list(range(4, 4 + tokens)),
                       reward=0.9, task_reward=1.0, length_penalty=0.1, target_length=64, advantage=0.0,
                       policy_step=7, proofs=[bytes(258)] * ((tokens + 31) // 32), worker=WORKER)
            for p in range(2) for _ in range(rows_per_group)]
    meta = RolloutMeta(task_id="4", seed="0xbeef", model="m", worker=WORKER, policy_step=7, group_size=rows_per_group)
    return RolloutFile(meta, rows, name="good")


@pytest.mark.parametrize(("limits", "message"), [
    (RolloutLimits(max_rows=3), r"4 rows, over the cap of 3"),
    (RolloutLimits(max_tokens_per_row=42), r"a row holds 43 tokens, over the cap of 42"),
    (RolloutLimits(max_total_tokens=100), r"tokens, over the cap of 100"),
    (RolloutLimits(max_decoded_bytes=1000), r"decodes to more than 1000 bytes"),
])
@pytest.mark.parametrize("version", [1, 2])
def test_rollout_file_each_cap_refuses(limits: RolloutLimits, message: str, version: int) -> None:
    data = _good().to_bytes(version=version)
    with pytest.raises(RolloutFileError, match=message):
        RolloutFile.from_bytes(data, name="capped", limits=limits)
    assert RolloutFile.from_bytes(data).rows == _good().rows  # the default caps admit it


def test_rollout_file_non_utf8_column_name_refused_in_from_bytes() -> None:
    """Issue 15: pyarrow 26 reads a file whose column name is not UTF-8 and raises UnicodeDecodeError
    only on the schema walk; `from_bytes` must refuse it itself, naming the file."""
    data = _good().to_bytes(version=1)
    size = struct.unpack("<I", data[-8:-4])[0]
    footer = data[-8 - size:-8]
    bad = data[:-8 - size] + footer.replace(b"advantage", b"\xfcdvantage") + data[-8:]
    with pytest.raises(RolloutFileError, match="rollout file cid-bad: .*'utf-8' codec can't decode"):
        RolloutFile.from_bytes(bad, name="cid-bad")


def test_rollout_file_non_utf8_string_cell_refused() -> None:
    table = _good().to_table()
    cells = b"p0p0\xff\xfep1p1"
    raw = pa.Array.from_buffers(pa.string(), 4, [None, pa.py_buffer(np.array([0, 2, 4, 6, 8], np.int32).tobytes()),
                                                 pa.py_buffer(cells)])  # not validated: invalid UTF-8 in row 2
    bad = table.set_column(table.schema.get_field_index("problem_id"), ARROW_SCHEMA.field("problem_id"), raw)
    with pytest.raises(RolloutFileError, match="rollout file cells: "):
        RolloutFile.from_bytes(_write(bad), name="cells")


def test_rollout_file_row_at_the_token_cap_accepted() -> None:
    """The caps refuse only what is over them: one row of exactly MAX_TOKENS_PER_ROW tokens is read back."""
    n = MAX_TOKENS_PER_ROW - 1  # + 1 prompt token
    row = RolloutRow(problem_id="p", prompt_ids=[1], completion_ids=[7] * n, reward=0.0, task_reward=0.0,
                     length_penalty=0.0, advantage=0.0, policy_step=0, proofs=[bytes(258)] * ((n + 31) // 32),
                     worker=WORKER)
    rf = RolloutFile(RolloutMeta.model_validate_json(_meta()), [row], name="big")
    data = rf.to_bytes(version=1)
    assert RolloutFile.from_bytes(data).rows == [row]
    with pytest.raises(RolloutFileError, match=f"a row holds {MAX_TOKENS_PER_ROW} tokens"):
        RolloutFile.from_bytes(data, limits=RolloutLimits(max_tokens_per_row=MAX_TOKENS_PER_ROW - 1))


def test_rollout_file_many_empty_row_groups_refused() -> None:
    """5000 empty row groups plus the real rows: refused from the footer, before a page header is walked."""
    table = _good().to_table()
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, table.schema) as writer:
        for _ in range(5000):
            writer.write_table(table.slice(0, 0))
        writer.write_table(table)
    with pytest.raises(RolloutFileError, match="5001 row groups, over the cap of 4096"):
        RolloutFile.from_bytes(buf.getvalue(), name="groups")
