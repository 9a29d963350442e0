"""The rollout-file reader's rules at their exact limits, and its refusals' exact texts (issue 39).

`test_verifier_rollouts_v2.py` shows that each malformation is refused; this module pins where each bound sits
(the cap accepted, one past it refused), what each refusal says (the numbers in it are the file's), and the v2
wire format itself (a fixed file's bytes, aligned arrays, compact header), so that a reader or writer that drifts
by one fails here. Written after mutmut 3.8 on `verifier/rollouts.py` (docs/benchmarks-security.md).
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

import numpy as np
import pytest
from test_verifier_rollouts_v2 import WORKER, _array, _edit, _file, _join, _split  # type: ignore[import-not-found]

from intellect.verifier import rollouts
from intellect.verifier.rollouts import (
    MAX_HEADER_BYTES,
    MAX_META_BYTES,
    RolloutFile,
    RolloutFileError,
    RolloutLimits,
    RolloutMeta,
    RolloutRow,
)

STRING_CAP = rollouts._MAX_STRING_BYTES
PINNED_SHA256 = "cb143e310866924b0593050c4209f89810750a4ac32489c1c7c7c0f1283f6e9f"
"""sha256 of `_file().to_bytes()`: change it only with the format's version (a reader refuses what it cannot read)"""


def _refused(data: bytes, name: str = "cid", limits: RolloutLimits | None = None) -> str:
    with pytest.raises(RolloutFileError) as exc:
        RolloutFile.from_bytes(data, name=name, limits=limits)
    return str(exc.value)


def _meta(**over) -> RolloutMeta:
    return RolloutMeta(**{"task_id": "1", "seed": "01", "model": "m", "worker": WORKER, "policy_step": 0,
                          "group_size": 1, **over})


def _row(**over) -> RolloutRow:
    return RolloutRow(**{"problem_id": "p", "prompt_ids": [5], "completion_ids": [6, 7], "reward": 0.0,
                         "task_reward": 0.0, "length_penalty": 0.0, "advantage": 0.0, "policy_step": 0,
                         "worker": WORKER, **over})


# ------------------------------------------------------------------------------------------ the wire format


def test_v2_bytes_of_a_fixed_file_are_pinned() -> None:
    """The writer's output is a versioned wire format: a fixed file's bytes do not move (header JSON without
    spaces, arrays widest-dtype first, the header padded so that every array is aligned to its item size)."""
    data = _file().to_bytes()
    assert hashlib.sha256(data).hexdigest() == PINNED_SHA256
    hlen = struct.unpack("<Q", data[:8])[0]
    text = data[8:8 + hlen]
    assert (8 + hlen) % 8 == 0 and text.rstrip(b" ") == json.dumps(json.loads(text), separators=(",", ":")).encode()
    assert len(text) - len(text.rstrip(b" ")) < 8  # padded with fewer than 8 spaces
    header, _body = _split(data)
    del header["__metadata__"]
    spans = sorted((e["data_offsets"][0], k) for k, e in header.items())
    sizes = {k: {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "U8": 1}[e["dtype"]] for k, e in header.items()}
    assert [sizes[k] for _b, k in spans] == sorted((sizes[k] for _b, k in spans), reverse=True)  # widest first
    assert all(b % sizes[k] == 0 for b, k in spans)
    assert [k for _b, k in spans if sizes[k] == 8] == sorted(k for k in header if sizes[k] == 8)  # then by name


def test_v2_array_dtypes_are_the_declared_ones() -> None:
    header, body = _split(_file().to_bytes())
    assert {k: e["dtype"] for k, e in header.items() if k != "__metadata__"} == {
        k: d for k, (d, _kind) in rollouts._ARRAYS.items()}
    assert _array(header, bytearray(body), "policy_step").tolist() == [7] * 6
    assert _array(header, bytearray(body), "target_length").tolist() == [-1, 64, 64, -1, 64, 64]


# ------------------------------------------------------------------------------------------ the header


def test_eight_bytes_are_a_header_length_not_a_truncation() -> None:
    assert _refused(bytes(7)) == "rollout file cid: truncated: 7 bytes, not even the 8-byte header length"
    assert "header is not UTF-8 JSON" in _refused(bytes(8))  # a 0-byte header: read, and not JSON


def test_header_length_at_the_cap_is_read_one_past_is_refused_unread() -> None:
    at = struct.pack("<Q", MAX_HEADER_BYTES) + b" " * 10
    assert _refused(at) == (f"rollout file cid: truncated: the header is {MAX_HEADER_BYTES} bytes, the file holds "
                            "10 after its length")
    past = struct.pack("<Q", MAX_HEADER_BYTES + 1)
    assert _refused(past) == (f"rollout file cid: header of {MAX_HEADER_BYTES + 1} bytes, over the cap of "
                              f"{MAX_HEADER_BYTES} (not a rollout file?)")


def test_header_json_error_is_quoted() -> None:
    msg = _refused(struct.pack("<Q", 3) + b"{x}")
    assert msg.startswith("rollout file cid: header is not UTF-8 JSON: Expecting property name enclosed in double")


def test_unknown_schema_is_shown_up_to_80_characters() -> None:
    def header(schema: object) -> bytes:
        text = json.dumps({"__metadata__": {"schema": schema}}).encode()
        return struct.pack("<Q", len(text)) + text

    tail = "(this reader knows intellect.rollouts/v2, and intellect.rollouts/v1 as Parquet)"
    assert _refused(header("s" * 80)) == f"rollout file cid: unknown schema {'s' * 80!r} {tail}"
    assert _refused(header("s" * 81)) == f"rollout file cid: unknown schema {'s' * 80 + '...'!r} {tail}"
    assert _refused(header(["x"])) == f"rollout file cid: unknown schema ['x'] {tail}"


def test_metadata_refusals_name_the_fault() -> None:
    def header(md: dict) -> bytes:
        text = json.dumps({"__metadata__": {"schema": "intellect.rollouts/v2", **md}}).encode()
        return struct.pack("<Q", len(text)) + text

    keys = {f"k{i:02d}": 1 for i in range(12)}
    assert _refused(header({"meta": "{}", **keys})) == (
        f"rollout file cid: unexpected metadata keys {sorted(keys)[:10]}")
    assert _refused(header({"meta": 5})) == "rollout file cid: metadata 'meta' is not a string"


def test_metadata_at_its_cap_is_parsed_one_past_is_refused() -> None:
    good = _file().meta.model_dump_json()
    at = _edit(lambda h, _b: h["__metadata__"].__setitem__("meta", good + " " * (MAX_META_BYTES - len(good))))
    assert RolloutFile.from_bytes(at).meta == _file().meta  # trailing spaces are JSON whitespace
    past = _edit(lambda h, _b: h["__metadata__"].__setitem__("meta", good + " " * (MAX_META_BYTES + 1 - len(good))))
    assert _refused(past) == f"rollout file cid: metadata is {MAX_META_BYTES + 1} bytes, over {MAX_META_BYTES}"


def test_array_name_and_dtype_refusals_are_trimmed() -> None:
    long = "x" * 50

    def extra(h, _b):
        for i in range(12):
            h[f"{long}{i:02d}"] = {}

    msg = _refused(_edit(extra))
    shown = [f"{long}{i:02d}"[:40] for i in range(12)][:10]
    assert msg == f"rollout file cid: arrays missing [], unexpected {shown}"
    dtype = _edit(lambda h, _b: h["reward"].__setitem__("dtype", "D" * 30))
    assert _refused(dtype) == f"rollout file cid: array 'reward' is {'D' * 20!r}, expected F64"


def test_data_offsets_take_counts_below_2_to_the_62() -> None:
    for bound in (2**62, 2**62 + 1):
        bad = _edit(lambda h, _b, b=bound: h["reward"].__setitem__("data_offsets", [0, b]))
        assert _refused(bad) == ("rollout file cid: array 'reward': data_offsets must be [begin, end] with "
                                 "0 <= begin <= end")
    below = _edit(lambda h, _b: h["reward"].__setitem__("data_offsets", [0, 2**62 - 1]))
    assert _refused(below).startswith("rollout file cid: array 'reward' spans 4611686018427387903 bytes, its shape")


# ------------------------------------------------------------------------------------------ the caps at the limit


def test_rows_at_the_cap_accepted_one_past_refused() -> None:
    data = _file().to_bytes()  # 6 rows, 258 tokens, 40 + 3 tokens a row
    assert len(RolloutFile.from_bytes(data, limits=RolloutLimits(max_rows=6))) == 6
    assert _refused(data, limits=RolloutLimits(max_rows=5)) == "rollout file cid: 6 rows, over the cap of 5"


def test_tokens_at_the_cap_accepted_one_past_refused() -> None:
    data = _file().to_bytes()
    assert RolloutFile.from_bytes(data, limits=RolloutLimits(max_total_tokens=258))
    assert _refused(data, limits=RolloutLimits(max_total_tokens=257)) == (
        "rollout file cid: 258 tokens, over the cap of 257")
    assert RolloutFile.from_bytes(data, limits=RolloutLimits(max_tokens_per_row=43))
    assert _refused(data, limits=RolloutLimits(max_tokens_per_row=42)) == (
        "rollout file cid: a row holds 43 tokens, over the cap of 42")


def test_decoded_bytes_at_the_cap_accepted_one_past_refused() -> None:
    data = _file().to_bytes()
    decoded = len(_split(data)[1])  # the arrays tile the body: their sizes add up to it
    assert RolloutFile.from_bytes(data, limits=RolloutLimits(max_decoded_bytes=decoded))
    assert _refused(data, limits=RolloutLimits(max_decoded_bytes=decoded - 1)) == (
        f"rollout file cid: decodes to more than {decoded - 1} bytes (cap)")


def test_strings_at_their_cap_accepted_one_past_refused() -> None:
    def one(pid: str) -> bytes:
        return RolloutFile(_meta(), [_row(problem_id=pid)], name="s").to_bytes()

    # a problem id is at most 256 characters (RolloutRow); 256 four-byte characters are the 1,024-byte cap
    assert RolloutFile.from_bytes(one("\U0001f600" * 256)).rows[0].problem_id == "\U0001f600" * 256

    header, body = _split(one("p"))  # the problem_id array says its 1 row holds 1,025 bytes: refused by count,
    header["problem_id"]["shape"] = [STRING_CAP + 1]  # before any byte is read
    assert _refused(_join(header, body)) == (f"rollout file cid: array 'problem_id' holds {STRING_CAP + 1} bytes, over "
                                     f"{STRING_CAP} per row")


def test_a_rows_string_over_the_cap_is_named() -> None:
    """Two rows whose problem ids hold 1,025 and 1 bytes: the array (1,026 ≤ 2 × 1,024 bytes) passes its count
    check, the first row does not."""
    header, body = _split(RolloutFile(_meta(), [_row(problem_id="a"), _row(problem_id="b")], name="s").to_bytes())
    new = {"problem_id": b"a" * (STRING_CAP + 1) + b"b",
           "problem_id_offsets": np.array([0, STRING_CAP + 1, STRING_CAP + 2], "<i8").tobytes()}
    parts, pos = [], 0
    for k in sorted((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0]):
        b0, b1 = header[k]["data_offsets"]
        chunk = new.get(k, body[b0:b1])
        header[k]["data_offsets"] = [pos, pos + len(chunk)]
        parts.append(chunk)
        pos += len(chunk)
    header["problem_id"]["shape"] = [STRING_CAP + 2]
    assert _refused(_join(header, b"".join(parts))) == f"rollout file cid: a row's problem_id is over {STRING_CAP} bytes"


def test_proof_counts_refusals() -> None:
    def poke(v):
        return _edit(lambda h, b: _array(h, b, "proof_counts").__setitem__(0, v))

    for v in (-1, 13):  # negative; more than the 12 proofs (the sum is then off too, but each is named first)
        assert _refused(poke(v)) == "rollout file cid: proof_counts do not add up to the 12 proofs"

    def swap(h, b):  # -2 and +2 keep the sum: only the sign check refuses
        c = _array(h, b, "proof_counts")
        c[0], c[1] = c[0] - 4, c[1] + 4
    assert _refused(_edit(swap)) == "rollout file cid: proof_counts do not add up to the 12 proofs"

    def over(h, b):  # one row claims 14 of 12 and another -2: the sum holds, the bound refuses
        c = _array(h, b, "proof_counts")
        c[0], c[1] = 14, -2
    assert _refused(_edit(over)) == "rollout file cid: proof_counts do not add up to the 12 proofs"


def test_proofs_per_row_are_one_per_chunk_rounded_up() -> None:
    """A completion of chunk + 1 tokens has 2 proof chunks; one of exactly a chunk, 1; a row without proofs is
    allowed (proofs are checked where there are some)."""
    chunk = _meta().proof_chunk_size
    proof = bytes(2 + 2 * _meta().proof_topk)
    rows = [_row(problem_id="a", completion_ids=list(range(chunk + 1)), proofs=[proof] * 2),
            _row(problem_id="b", completion_ids=list(range(chunk)), proofs=[proof]),
            _row(problem_id="c", completion_ids=list(range(3)), proofs=[])]
    f = RolloutFile(_meta(group_size=1), rows, name="p")
    back = RolloutFile.from_bytes(f.to_bytes())
    assert [len(r.proofs) for r in back.rows] == [2, 1, 0]
    with pytest.raises(RolloutFileError, match=r"row 0: 1 proofs for 129 tokens|proof"):
        RolloutFile(_meta(group_size=1), [_row(completion_ids=list(range(chunk + 1)), proofs=[proof])])


def test_offsets_refusal_and_the_end_of_the_data() -> None:
    data = _file().to_bytes()
    assert _refused(data + b"\0") == "rollout file cid: 1 bytes after the last array"
    header, body = _split(data)
    msg = _refused(_join(header, body[:-1]))
    assert msg == f"rollout file cid: truncated: the arrays need {len(body)} bytes of data, the file holds {len(body) - 1}"


def test_a_gap_or_an_overlap_between_arrays_is_named() -> None:
    header, body = _split(_file().to_bytes())
    first = min((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0])
    second = min((k for k in header if k not in ("__metadata__", first)), key=lambda k: header[k]["data_offsets"][0])
    h = json.loads(json.dumps(header))
    h[second]["data_offsets"] = [o + 8 for o in h[second]["data_offsets"]]
    start = h[second]["data_offsets"][0]
    assert _refused(_join(h, body)).startswith(
        f"rollout file cid: array {second!r} starts at byte {start} of the data and leaves 8 bytes unused before it")
    h = json.loads(json.dumps(header))
    h[second]["data_offsets"] = [o - 8 for o in h[second]["data_offsets"]]
    start = h[second]["data_offsets"][0]
    assert _refused(_join(h, body)) == (f"rollout file cid: array {second!r} starts at byte {start} of the data and "
                                        "overlaps the array before it")


def test_a_span_that_does_not_fit_its_shape_is_named() -> None:
    def grow(h, _b):
        h["reward"]["data_offsets"] = [h["reward"]["data_offsets"][0], h["reward"]["data_offsets"][1] + 8]
    msg = _refused(_edit(grow))
    assert msg == "rollout file cid: array 'reward' spans 56 bytes, its shape and dtype need 48"


# ------------------------------------------------------------------------------------------ the file's own checks


def test_a_file_without_rows_is_refused_naming_it() -> None:
    with pytest.raises(RolloutFileError) as exc:
        RolloutFile(_meta(), [])
    assert str(exc.value) == "rollout file rollouts: has no rows"  # the default name


def test_reward_is_task_reward_less_the_penalty_within_a_millionth() -> None:
    ok = _row(reward=0.5 + 0.9e-6, task_reward=0.75, length_penalty=0.25)
    assert RolloutFile(_meta(), [ok]).rows[0] is ok
    with pytest.raises(RolloutFileError, match=r"row 0: reward"):
        RolloutFile(_meta(), [_row(reward=0.5 + 1.1e-6, task_reward=0.75, length_penalty=0.25)])


def test_from_bytes_names_the_file_by_default_and_by_path(tmp_path: Path) -> None:
    assert _refused(b"\0" * 3, name="rollouts").startswith("rollout file rollouts: truncated")
    with pytest.raises(RolloutFileError) as exc:
        RolloutFile.from_bytes(b"\0" * 3)
    assert str(exc.value).startswith("rollout file rollouts: truncated")
    path = tmp_path / "r.rollouts"
    with pytest.raises(RolloutFileError) as exc:
        RolloutFile.read(path)
    assert str(exc.value) == f"rollout file {path} does not exist"
    path.write_bytes(b"\0" * 3)
    with pytest.raises(RolloutFileError) as exc:
        RolloutFile.read(path)
    assert str(exc.value) == f"rollout file {path}: truncated: 3 bytes, not even the 8-byte header length"
    _file().write(path)
    with pytest.raises(RolloutFileError) as exc:  # the caller's limits reach the reader
        RolloutFile.read(path, limits=RolloutLimits(max_rows=1))
    assert str(exc.value) == f"rollout file {path}: 6 rows, over the cap of 1"


def test_write_is_atomic_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "d"
    target.mkdir()  # os.replace onto a directory fails: nothing is left behind, the error is the OS's
    with pytest.raises(OSError):
        _file().write(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
    out = _file().write(tmp_path / "f.rollouts")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "f.rollouts"]
    assert RolloutFile.read(out).rows == _file().rows


def test_summary_counts_rows_problems_rewards_and_tokens() -> None:
    s = _file().summary()
    assert (s["rows"], s["problems"], s["completion_tokens"]) == (6, 2, 240)
    assert s["mean_reward"] == pytest.approx(0.9) and s["meta"]["task_id"] == "42"


def test_module_attributes_arrow_schema_lazily_and_names_a_missing_one() -> None:
    import pyarrow as pa

    assert isinstance(rollouts.ARROW_SCHEMA, pa.Schema)
    with pytest.raises(AttributeError) as exc:
        rollouts.NOPE  # noqa: B018
    assert str(exc.value) == "module 'intellect.verifier.rollouts' has no attribute 'NOPE'"


def test_write_stages_beside_the_target_so_the_rename_is_atomic(tmp_path: Path, monkeypatch) -> None:
    """The temporary file is made in the target's directory (an os.replace across filesystems is not atomic, and
    fails) under a hidden name of the target's."""
    import tempfile

    made: list[Path] = []
    real = tempfile.mkstemp

    def spy(*args, **kwargs):
        fd, name = real(*args, **kwargs)
        made.append(Path(name))
        return fd, name

    monkeypatch.setattr(rollouts.tempfile, "mkstemp", spy)
    _file().write(tmp_path / "f.rollouts")
    (tmp,) = made
    assert tmp.parent == tmp_path and tmp.name.startswith(".f.rollouts.") and not tmp.exists()


def test_iterating_a_file_gives_its_rows_and_a_table_round_trips_with_the_default_name() -> None:
    f = _file()
    assert list(iter(f)) == f.rows and len(f) == 6
    back = RolloutFile.from_table(f.to_table())
    assert back.rows == f.rows and back.meta == f.meta and back.name == "rollouts"
    assert RolloutFile.from_table(f.to_table(), name="t").name == "t"


def test_reward_exactly_a_millionth_off_is_still_accepted() -> None:
    row = _row(reward=1e-6, task_reward=0.0, length_penalty=0.0)  # |1e-6 − 0| is the tolerance itself
    assert RolloutFile(_meta(), [row]).rows == [row]


def test_a_file_of_no_rows_is_refused_as_such_not_by_a_crash() -> None:
    """Every array empty (the offsets [0]): the decoder's per-row maxima must not run on nothing."""
    f = RolloutFile.__new__(RolloutFile)  # the writer's check refuses no rows: bypassed to make the bytes
    f.meta, f.rows, f.name = _meta(), [], "z"
    data = f.to_bytes()
    assert _refused(data, limits=RolloutLimits(max_tokens_per_row=0)) == "rollout file cid: has no rows"


def test_proof_counts_that_wrap_int64_to_the_right_sum_are_refused() -> None:
    """Four counts of 2^62 add up to 2^64 ≡ 0 in int64: with 6 + 6 the sum is the 12 proofs; only the
    per-count bound refuses it."""
    def wrap(h, b):
        _array(h, b, "proof_counts")[:] = [2**62] * 4 + [6, 6]
    assert _refused(_edit(wrap)) == "rollout file cid: proof_counts do not add up to the 12 proofs"


def test_proofs_per_row_are_checked_before_any_row_is_built() -> None:
    """Row 0 has a proof too few and a NaN reward: the proof check (on the arrays, before any proof becomes a
    Python object) speaks first."""
    def both(h, b):
        c = _array(h, b, "proof_counts")
        c[0], c[1] = 1, 3
        _array(h, b, "reward")[0] = float("nan")
    assert _refused(_edit(both)) == "rollout file cid: row 0: 1 proofs for 40 tokens (expected 2)"


def test_a_v1_file_that_kills_its_reader_is_rejected_and_a_bad_child_result_is_the_nodes_problem(monkeypatch):
    """The child's outcomes as `from_bytes` reports them: a crash is a verdict on the bytes (rejected, said so); a
    child whose v2 answer does not parse is this node's fault (ParseUnavailable: retry, nothing said of the
    sender)."""
    from intellect.verifier.isolation import ParseCrashed, ParseUnavailable

    def crashed(*_a, **_k):
        raise ParseCrashed("was killed by signal 9")

    monkeypatch.setattr(rollouts, "run_isolated", crashed)
    assert _refused(b"PAR1" + bytes(8)) == ("rollout file cid: the Parquet reader was killed by signal 9 (a v1 file "
                                           "this node cannot read safely; rejected)")
    monkeypatch.setattr(rollouts, "run_isolated", lambda *_a, **_k: b"\0" * 3)
    with pytest.raises(ParseUnavailable) as exc:
        RolloutFile.from_bytes(b"PAR1" + bytes(8), name="cid")
    assert str(exc.value) == ("rollout file cid: the v1 reader's result did not parse: rollout file cid: truncated: "
                              "3 bytes, not even the 8-byte header length")
