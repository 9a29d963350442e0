"""Rollout files, format v2 (`intellect.rollouts/v2`): round trip, and every malformation refused by name.

The v2 reader is pure Python + numpy: whatever the bytes, it returns a file or raises `RolloutFileError`
naming the file and what was wrong; these tests build each class of bad file from a good one.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from intellect.verifier.rollouts import (
    MAX_HEADER_BYTES,
    ROLLOUTS_SCHEMA,
    RolloutFile,
    RolloutFileError,
    RolloutLimits,
    RolloutMeta,
    RolloutRow,
)

WORKER = "0x" + "ab" * 20


def _file(tokens: int = 40, target: int | None = 64) -> RolloutFile:
    rows = [RolloutRow(problem_id=f"p{p}-é", prompt_ids=[1, 2, 3], completion_ids=list(range(4, 4 + tokens)),
                       reward=0.9, task_reward=1.0, length_penalty=0.1, target_length=target if k else None,
                       advantage=0.5 * (k - 1), policy_step=7, proofs=[bytes([p, k]) + bytes(256)] * 2,
                       worker=WORKER)
            for p in range(2) for k in range(3)]
    meta = RolloutMeta(task_id="42", seed="0xdeadbeef", model="step-7", worker=WORKER, policy_step=7, group_size=3)
    return RolloutFile(meta, rows, name="good")


def _split(data: bytes) -> tuple[dict[str, Any], bytes]:
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


def _join(header: dict[str, Any], body: bytes) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + body


def _edit(edit: Callable[[dict[str, Any], bytearray], bytes | None]) -> bytes:
    header, body = _split(_file().to_bytes())
    buf = bytearray(body)
    out = edit(header, buf)
    return out if out is not None else _join(header, bytes(buf))


def _array(header: dict[str, Any], body: bytearray, key: str) -> np.ndarray:
    """A writable view of array `key` inside `body`."""
    e = header[key]
    dt = {"I64": "<i8", "I32": "<i4", "F64": "<f8", "F32": "<f4", "U8": "u1"}[e["dtype"]]
    return np.frombuffer(memoryview(body)[e["data_offsets"][0]:e["data_offsets"][1]], dtype=dt)


def test_rollout_file_v2_round_trip_bytes_and_path(tmp_path: Path) -> None:
    rf = _file()
    data = rf.to_bytes()
    assert _split(data)[0]["__metadata__"]["schema"] == ROLLOUTS_SCHEMA == "intellect.rollouts/v2"
    back = RolloutFile.from_bytes(data, name="cid-1")
    assert back.meta == rf.meta and back.rows == rf.rows and back.name == "cid-1"
    assert back.rows[0].target_length is None and back.rows[1].target_length == 64
    assert RolloutFile.read(rf.write(tmp_path / "r.rollouts")).rows == rf.rows
    assert back.to_bytes() == data  # deterministic


def test_rollout_file_v2_round_trip_empty_lists_and_no_proofs() -> None:
    rows = [RolloutRow(problem_id="p", prompt_ids=[5], completion_ids=[], reward=0.0, task_reward=0.0,
                       length_penalty=0.0, advantage=0.0, policy_step=0, worker=WORKER)]
    meta = RolloutMeta(task_id="1", seed="01", model="m", worker=WORKER, policy_step=0, group_size=1)
    rf = RolloutFile(meta, rows)
    assert RolloutFile.from_bytes(rf.to_bytes()).rows == rows


def test_rollout_file_v2_is_a_safetensors_file() -> None:
    """Tooling can open a v2 file with safetensors (the node itself never does for strangers' bytes)."""
    st = pytest.importorskip("safetensors.numpy")
    rf = _file()
    arrays = st.load(rf.to_bytes())
    assert arrays["completion_ids"].tolist() == [t for r in rf.rows for t in r.completion_ids]
    assert arrays["proofs"].shape == (12, 258)


@pytest.mark.parametrize(("cut", "message"), [
    (3, "truncated: 3 bytes, not even the 8-byte header length"),
    (40, r"truncated: the header is \d+ bytes"),
    (-1, r"truncated: the arrays need \d+ bytes of data, the file holds \d+"),
    (-3000, r"truncated: the arrays need"),
])
def test_rollout_file_v2_truncated_refused(cut: int, message: str) -> None:
    data = _file().to_bytes()
    with pytest.raises(RolloutFileError, match=f"rollout file cid-t: {message}"):
        RolloutFile.from_bytes(data[:cut], name="cid-t")


def test_rollout_file_v2_trailing_bytes_refused() -> None:
    with pytest.raises(RolloutFileError, match="5 bytes after the last array"):
        RolloutFile.from_bytes(_file().to_bytes() + bytes(5))


def test_rollout_file_v2_header_over_cap_refused_before_reading_it() -> None:
    data = struct.pack("<Q", MAX_HEADER_BYTES + 1) + b"{" + bytes(MAX_HEADER_BYTES + 10)
    with pytest.raises(RolloutFileError, match=f"header of {MAX_HEADER_BYTES + 1} bytes, over the cap"):
        RolloutFile.from_bytes(data)
    with pytest.raises(RolloutFileError, match="header of 18446744073709551615 bytes"):
        RolloutFile.from_bytes(b"\xff" * 8 + b"{}")


@pytest.mark.parametrize(("header", "message"), [
    (b"\xff\xfe{}", "header is not UTF-8 JSON"),
    (b"{" * 5000, "header is not UTF-8 JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "header is not UTF-8 JSON"),  # RecursionError, caught
    (b"[1, 2]", "header is a JSON list, not an object"),
    (b"{}", "header has no __metadata__ object"),
    (b'{"__metadata__": {"schema": "intellect.rollouts/v3"}}', r"unknown schema 'intellect\.rollouts/v3'"),
    (b'{"__metadata__": {"schema": "intellect.rollouts/v1"}}', r"unknown schema 'intellect\.rollouts/v1' "
                                                               r"\(this reader knows intellect\.rollouts/v2"),
    (b'{"__metadata__": {"schema": 7}}', "unknown schema 7"),
    (b'{"__metadata__": {"schema": "intellect.rollouts/v2", "meta": "{}"}}', "bad metadata"),
])
def test_rollout_file_v2_bad_header_refused(header: bytes, message: str) -> None:
    with pytest.raises(RolloutFileError, match=f"rollout file h: {message}"):
        RolloutFile.from_bytes(struct.pack("<Q", len(header)) + header, name="h")


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any], bytearray], None]:
    def edit(header: dict[str, Any], _body: bytearray) -> None:
        node = header
        for p in path[:-1]:
            node = node[p]
        node[path[-1]] = value
    return edit


def _shift(key: str, delta: int) -> Callable[[dict[str, Any], bytearray], None]:
    def edit(header: dict[str, Any], _body: bytearray) -> None:
        header[key]["data_offsets"] = [o + delta for o in header[key]["data_offsets"]]
    return edit


def _first_at_zero(header: dict[str, Any]) -> str:
    return next(k for k, e in header.items() if k != "__metadata__" and e["data_offsets"][0] == 0)


def _overlap(header: dict[str, Any], _body: bytearray) -> None:
    first = _first_at_zero(header)
    second = next(k for k, e in header.items() if k != "__metadata__" and e["data_offsets"][0] ==
                  header[first]["data_offsets"][1])
    header[second]["data_offsets"] = [o - 8 for o in header[second]["data_offsets"]]


def _extra_meta(header: dict[str, Any], _body: bytearray) -> None:
    header["__metadata__"]["x"] = "y"


def _out_of_range(header: dict[str, Any], body: bytearray) -> None:
    last = max((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][1])
    header[last]["data_offsets"] = [o + (1 << 40) for o in header[last]["data_offsets"]]


def _poke(key: str, index: int, value: Any) -> Callable[[dict[str, Any], bytearray], None]:
    def edit(header: dict[str, Any], body: bytearray) -> None:
        _array(header, body, key)[index] = value
    return edit


@pytest.mark.parametrize(("edit", "message"), [
    (_set(["reward", "dtype"], "F32"), r"array 'reward' is 'F32', expected F64"),
    (_set(["prompt_ids", "dtype"], "I64"), r"array 'prompt_ids' is 'I64', expected I32"),
    (_set(["proofs", "dtype"], "BOOL"), r"array 'proofs' is 'BOOL', expected U8"),
    (_set(["reward", "shape"], [6, 1]), r"array 'reward': shape must be 1 non-negative integers"),
    (_set(["reward", "shape"], [-6]), r"array 'reward': shape must be 1"),
    (_set(["reward", "shape"], [True]), r"array 'reward': shape must be 1"),
    (_set(["reward", "shape"], [5]), r"array 'task_reward' has 6 values for 5 rows|array 'reward' spans"),
    (_set(["prompt_offsets", "shape"], [6]), r"array 'prompt_offsets' has 6 values for 6 rows \(expected 7\)"),
    (_set(["reward", "data_offsets"], [8, 0]), r"data_offsets must be \[begin, end\] with 0 <= begin <= end"),
    (_set(["reward", "data_offsets"], [0, 2**70]), r"data_offsets must be"),
    (_set(["reward", "data_offsets"], "0-48"), r"data_offsets must be"),
    (_set(["reward", "extra"], 1), r"array 'reward': entry must have exactly dtype, shape and data_offsets"),
    (_set(["reward"], None), r"array 'reward': entry must have exactly"),
    (_set(["proofs", "shape"], [12, 257]), r"proofs are 257 bytes each, expected 258"),
    (_set(["rewards"], {"dtype": "F64", "shape": [0], "data_offsets": [0, 0]}), r"unexpected \['rewards'\]"),
    (lambda h, b: h.pop("advantage") and None, r"arrays missing \['advantage'\]"),
    (_extra_meta, r"unexpected metadata keys \['x'\]"),
    (_set(["__metadata__", "meta"], 5), "metadata 'meta' is not a string"),
    (_set(["__metadata__", "meta"], " " * 70_000), r"metadata is 70000 bytes, over 65536"),
    (_shift("reward", 8), r"array 'reward' starts at byte \d+ of the data and (leaves 8 bytes unused|overlaps)"),
    (_overlap, r"overlaps the array before it"),
    (_out_of_range, r"truncated: the arrays need \d+ bytes|leaves \d+ bytes unused"),
    (_poke("prompt_offsets", 2, 1), r"array 'prompt_offsets' is not row offsets into 'prompt_ids'"),
    (_poke("completion_offsets", 0, -1), r"'completion_offsets' is not row offsets"),
    (_poke("worker_offsets", 6, 10), r"'worker_offsets' is not row offsets into 'worker' \(from 0, non-decreasing"),
    (_poke("proof_counts", 0, 3), r"proof_counts do not add up to the 12 proofs"),
    (_poke("proof_counts", 0, -2), r"proof_counts do not add up"),
    (_poke("problem_id", 2, 0xFF), r"row 0: a string is not UTF-8"),
    (_poke("reward", 1, math.nan), r"row 1: .*must be finite"),
    (_poke("completion_ids", 0, -5), r"row 0: .*token ids must be in \[0, 2\^31\)"),
    (_poke("target_length", 1, 0), r"row 1: .*target_length"),
    (_poke("policy_step", 2, 8), r"row 2 has policy step 8, the file 7"),
    (_poke("worker", 3, ord("z")), r"row 0: .*worker"),
    (_poke("length_penalty", 0, -1.0), r"row 0: .*length_penalty"),
])
def test_rollout_file_v2_malformed_refused_by_name(edit: Any, message: str) -> None:
    with pytest.raises(RolloutFileError, match=f"(?s)rollout file cid-m:? .*{message}"):
        RolloutFile.from_bytes(_edit(edit), name="cid-m")


@pytest.mark.parametrize(("limits", "message"), [
    (RolloutLimits(max_rows=5), r"6 rows, over the cap of 5"),
    (RolloutLimits(max_tokens_per_row=42), r"a row holds 43 tokens, over the cap of 42"),
    (RolloutLimits(max_total_tokens=100), r"258 tokens, over the cap of 100"),
    (RolloutLimits(max_decoded_bytes=1000), r"decodes to more than 1000 bytes \(cap\)"),
])
def test_rollout_file_v2_each_cap_refuses(limits: RolloutLimits, message: str) -> None:
    data = _file().to_bytes()
    with pytest.raises(RolloutFileError, match=message):
        RolloutFile.from_bytes(data, name="capped", limits=limits)


def test_rollout_file_v2_counts_checked_before_reading_arrays() -> None:
    """A header claiming 2^40 tokens (a bomb's shape) is refused from the header alone: no array is read."""
    def bomb(header: dict[str, Any], body: bytearray) -> bytes:
        header["completion_ids"]["shape"] = [2**40]
        return _join(header, bytes(body))
    with pytest.raises(RolloutFileError, match=r"1099511627\d+ tokens, over the cap of 8388608"):
        RolloutFile.from_bytes(_edit(bomb))
    def rows(header: dict[str, Any], body: bytearray) -> bytes:
        for key, e in header.items():
            if key != "__metadata__" and len(e["shape"]) == 1 and e["shape"][0] in (6, 7):
                e["shape"] = [10**9 + e["shape"][0] - 6]
        return _join(header, bytes(body))
    with pytest.raises(RolloutFileError, match=r"1000000000 rows, over the cap of 4096"):
        RolloutFile.from_bytes(_edit(rows))
    def per_string(header: dict[str, Any], body: bytearray) -> bytes:
        header["problem_id"]["shape"] = [6 * 1024 + 1]
        return _join(header, bytes(body))
    with pytest.raises(RolloutFileError, match=r"array 'problem_id' holds 6145 bytes, over 1024 per row"):
        RolloutFile.from_bytes(_edit(per_string))


def test_rollout_file_v2_not_bytes_refused() -> None:
    with pytest.raises(RolloutFileError, match="expected bytes, got str"):
        RolloutFile.from_bytes("not bytes")  # type: ignore[arg-type]


def test_rollout_file_to_bytes_unknown_version_refused() -> None:
    with pytest.raises(ValueError, match="version 3"):
        _file().to_bytes(version=3)
