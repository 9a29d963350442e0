"""Rollout files: what a worker submits and a validator / trainer reads (versioned).

`intellect.rollouts/v2` (written by `to_bytes`, `write`): a safetensors-layout file that a pure
Python + numpy reader parses, so no byte of it reaches C++ that could abort the node's process:

    8 bytes        N, the header's length (unsigned little-endian), N <= MAX_HEADER_BYTES
    N bytes        JSON header (UTF-8, space-padded to 8 bytes): for each array its "dtype", "shape" and
                   "data_offsets" [begin, end) in the data section, plus "__metadata__":
                   {"schema": "intellect.rollouts/v2", "meta": JSON of RolloutMeta}
    data section   the arrays, raw little-endian, contiguous, in offset order, nothing between or after

    one value per row [n]:   reward, task_reward, length_penalty F64; advantage F32; policy_step I64;
                             target_length I64 (-1: None); proof_counts I64 (proofs of the row)
    row offsets [n + 1] I64: prompt_offsets, completion_offsets (into the token arrays below),
                             problem_id_offsets, worker_offsets (into the UTF-8 string arrays below)
    flat:                    prompt_ids, completion_ids I32 [tokens]; problem_id, worker U8 [bytes];
                             proofs U8 [n_proofs, 2 + 2 * meta.proof_topk] (row after row)

The file is also a valid safetensors file (`safetensors.numpy.load` reads it, handy for tooling; the
node never uses that library for strangers' bytes). The reader checks, before it makes a Python
object of any cell: the header's size against its cap, then its JSON, the schema id, every array's
name, dtype and rank, every count against `RolloutLimits` (rows, tokens, decoded bytes), that the
arrays' byte ranges are exactly their shapes' sizes, contiguous and covering the data section, then
the row offsets (from 0, non-decreasing, ending at the array's length), per-row token caps; then
each row (pydantic) and the cross-row rules (one worker, proofs count matching the completion
length, group sizes). Anything wrong raises `RolloutFileError` naming the file and what was wrong.

`intellect.rollouts/v1` (Parquet, `_rollouts_v1`) is still read, but never in the node's process:
pyarrow's C++ reader can abort the process on crafted input, so it is not safe for strangers. Bytes
starting with Parquet's magic `PAR1` are read in a child (`intellect.verifier.isolation`) that hands
the rows back as v2 bytes. A child that dies on the file (a signal, its CPU or memory limit) is a
verdict: `RolloutFileError("... the Parquet reader aborted on this file (signal 6, SIGABRT)")`; a child
the node could not run to the end (its deadline, the OOM killer) raises `ParseUnavailable`: try later.

    data = RolloutFile(meta, rows).to_bytes()       # a worker adds these bytes to IPFS
    rf = RolloutFile.from_bytes(data, name=cid)     # a validator / trainer reads them back
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from intellect.sdk import IntellectError
from intellect.verifier.isolation import (
    ChildLimits,
    ParseCrashed,
    ParseRefused,
    ParseUnavailable,
    run_isolated,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "MAX_DECODED_BYTES",
    "MAX_HEADER_BYTES",
    "MAX_ROWS",
    "MAX_TOKENS_PER_ROW",
    "MAX_TOTAL_TOKENS",
    "ROLLOUTS_SCHEMA",
    "ROLLOUTS_SCHEMA_V1",
    "V1_CHILD_LIMITS",
    "ParseUnavailable",
    "RolloutFile",
    "RolloutFileError",
    "RolloutLimits",
    "RolloutMeta",
    "RolloutRow",
]

ROLLOUTS_SCHEMA = "intellect.rollouts/v2"
ROLLOUTS_SCHEMA_V1 = "intellect.rollouts/v1"

_HEX_ADDRESS = r"^0x[0-9a-fA-F]{40}$"

# Caps on what one rollout file may decode to, checked before anything is materialised. They must stay
# above what the pool's rules let an honest worker submit, or honest work is refused (and challenged):
# INTELLECT-2's largest shape, 8 problems x 16 completions x 32k tokens, is 4.2 M tokens, half of
# MAX_TOTAL_TOKENS.
MAX_ROWS = 4096
"""completions per file"""
MAX_TOKENS_PER_ROW = 131_072
"""prompt + completion tokens of one row"""
MAX_TOTAL_TOKENS = 8 * 1024 * 1024
"""prompt + completion tokens of the whole file (as Python ints: ~300 MB at the cap)"""
MAX_DECODED_BYTES = 512 * 1024 * 1024
"""bytes the arrays may hold (v2: the data section; v1: Arrow memory of pages, values, levels, expanded
strings and proofs); the agents' default `max_fetch_bytes` is the same 512 MiB"""
MAX_META_BYTES = 64 * 1024
"""the JSON of RolloutMeta in the file's metadata"""
MAX_HEADER_BYTES = 256 * 1024
"""a v2 file's JSON header: ~1.5 KB of array entries plus the metadata (JSON in JSON: escaped, < 2x)"""
_MAX_STRING_BYTES = 1024
"""one problem id or worker in UTF-8 (a problem id is at most 256 characters)"""


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

    def to_bytes(self, version: int = 2) -> bytes:
        """The file's bytes: `intellect.rollouts/v2` (default), or v1 (Parquet) for an old reader."""
        if version == 1:
            return _v1().v1_bytes(self)
        if version != 2:
            raise ValueError(f"rollout file format version {version} is not one this writer knows (1, 2)")
        return _encode_v2(self)

    def to_table(self) -> pa.Table:
        """The rows as an Arrow table (the v1 columns and metadata)."""
        return _v1().table_of(self)

    def write(self, path: str | Path) -> Path:
        """Write atomically (temp file + rename), as v2."""
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

        v2 bytes are parsed here (nothing of them reaches code that can abort the process). v1 (Parquet,
        recognised by its magic `PAR1`) is parsed in a child process; `ParseUnavailable` when the node
        could not run that child to its end (retry later: it says nothing about the bytes)."""
        limits = limits or RolloutLimits()
        if not isinstance(data, bytes | bytearray | memoryview):
            raise RolloutFileError(f"rollout file {name}: expected bytes, got {type(data).__name__}")
        data = bytes(data)
        if data[:4] == b"PAR1":
            return _read_v1_isolated(data, name, limits)
        return _decode_v2(data, name, limits)

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
        """The rows of an Arrow table already in memory (the v1 columns and metadata)."""
        return _v1().from_table(table, name)

    def summary(self) -> dict[str, Any]:
        rewards = [r.reward for r in self.rows]
        return {
            "rows": len(self.rows),
            "problems": len({r.problem_id for r in self.rows}),
            "mean_reward": sum(rewards) / len(rewards),
            "completion_tokens": sum(len(r.completion_ids) for r in self.rows),
            "meta": json.loads(self.meta.model_dump_json()),
        }


def _v1() -> ModuleType:
    """The Parquet `v1` codec, loaded on first use: it imports pyarrow, which a v2 reader never needs."""
    import intellect.verifier._rollouts_v1 as v1  # deferred: pyarrow, for v1 files only

    return v1


def __getattr__(attr: str) -> Any:  # ARROW_SCHEMA without importing pyarrow for a v2 reader
    if attr == "ARROW_SCHEMA":
        return _v1().ARROW_SCHEMA
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


# ---------------------------------------------------------------------------------------------
# v2: the arrays

_I64, _I32, _F64, _F32, _U8 = "I64", "I32", "F64", "F32", "U8"
_NUMPY = {_I64: np.dtype("<i8"), _I32: np.dtype("<i4"), _F64: np.dtype("<f8"), _F32: np.dtype("<f4"),
          _U8: np.dtype("u1")}
# name -> (dtype, shape kind): "n" one per row, "n+1" row offsets, "flat" any length, "proofs" [count, length]
_ARRAYS: dict[str, tuple[str, str]] = {
    "reward": (_F64, "n"),
    "task_reward": (_F64, "n"),
    "length_penalty": (_F64, "n"),
    "advantage": (_F32, "n"),
    "policy_step": (_I64, "n"),
    "target_length": (_I64, "n"),
    "proof_counts": (_I64, "n"),
    "prompt_offsets": (_I64, "n+1"),
    "completion_offsets": (_I64, "n+1"),
    "problem_id_offsets": (_I64, "n+1"),
    "worker_offsets": (_I64, "n+1"),
    "prompt_ids": (_I32, "flat"),
    "completion_ids": (_I32, "flat"),
    "problem_id": (_U8, "flat"),
    "worker": (_U8, "flat"),
    "proofs": (_U8, "proofs"),
}
_NO_TARGET = -1
"""target_length of a row without one (a real target is >= 1)"""


def _offsets(lengths: list[int]) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, dtype=_NUMPY[_I64])
    np.cumsum(lengths, out=out[1:])
    return out


def _encode_v2(rf: RolloutFile) -> bytes:
    rows = rf.rows
    proof_len = 2 + 2 * rf.meta.proof_topk
    pids = [r.problem_id.encode() for r in rows]
    workers = [r.worker.encode() for r in rows]
    proofs = [p for r in rows for p in r.proofs]
    arrays: dict[str, np.ndarray] = {
        "reward": np.array([r.reward for r in rows], _NUMPY[_F64]),
        "task_reward": np.array([r.task_reward for r in rows], _NUMPY[_F64]),
        "length_penalty": np.array([r.length_penalty for r in rows], _NUMPY[_F64]),
        "advantage": np.array([r.advantage for r in rows], _NUMPY[_F32]),
        "policy_step": np.array([r.policy_step for r in rows], _NUMPY[_I64]),
        "target_length": np.array([_NO_TARGET if r.target_length is None else r.target_length for r in rows],
                                  _NUMPY[_I64]),
        "proof_counts": np.array([len(r.proofs) for r in rows], _NUMPY[_I64]),
        "prompt_offsets": _offsets([len(r.prompt_ids) for r in rows]),
        "completion_offsets": _offsets([len(r.completion_ids) for r in rows]),
        "problem_id_offsets": _offsets([len(p) for p in pids]),
        "worker_offsets": _offsets([len(w) for w in workers]),
        "prompt_ids": np.fromiter((t for r in rows for t in r.prompt_ids), _NUMPY[_I32]),
        "completion_ids": np.fromiter((t for r in rows for t in r.completion_ids), _NUMPY[_I32]),
        "problem_id": np.frombuffer(b"".join(pids), _NUMPY[_U8]),
        "worker": np.frombuffer(b"".join(workers), _NUMPY[_U8]),
        "proofs": np.frombuffer(b"".join(proofs), _NUMPY[_U8]).reshape(len(proofs), proof_len),
    }
    # widest dtypes first: with the header padded to 8 bytes every array is aligned
    order = sorted(arrays, key=lambda k: (-arrays[k].dtype.itemsize, k))
    header: dict[str, Any] = {"__metadata__": {"schema": ROLLOUTS_SCHEMA, "meta": rf.meta.model_dump_json()}}
    pos = 0
    for k in order:
        header[k] = {"dtype": _ARRAYS[k][0], "shape": list(arrays[k].shape), "data_offsets": [pos, pos + arrays[k].nbytes]}
        pos += arrays[k].nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    return len(text).to_bytes(8, "little") + text + b"".join(arrays[k].tobytes() for k in order)


def _decode_v2(data: bytes, name: str, limits: RolloutLimits) -> RolloutFile:
    def fail(what: str) -> RolloutFileError:
        return RolloutFileError(f"rollout file {name}: {what}")

    # -- the header: its size before its JSON, its JSON before anything it names
    if len(data) < 8:
        raise fail(f"truncated: {len(data)} bytes, not even the 8-byte header length")
    hlen = int.from_bytes(data[:8], "little")
    if hlen > MAX_HEADER_BYTES:
        raise fail(f"header of {hlen} bytes, over the cap of {MAX_HEADER_BYTES} (not a rollout file?)")
    if 8 + hlen > len(data):
        raise fail(f"truncated: the header is {hlen} bytes, the file holds {len(data) - 8} after its length")
    try:
        header = json.loads(data[8:8 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise fail(f"header is not UTF-8 JSON: {str(exc)[:200]}") from None
    if not isinstance(header, dict):
        raise fail(f"header is a JSON {type(header).__name__}, not an object")
    md = header.pop("__metadata__", None)
    if not isinstance(md, dict):
        raise fail("header has no __metadata__ object")
    schema = md.get("schema")
    if schema != ROLLOUTS_SCHEMA:
        shown = schema if not isinstance(schema, str) or len(schema) <= 80 else schema[:80] + "..."
        raise fail(f"unknown schema {shown!r} (this reader knows {ROLLOUTS_SCHEMA}, and {ROLLOUTS_SCHEMA_V1} "
                   "as Parquet)")
    if set(md) != {"schema", "meta"}:
        raise fail(f"unexpected metadata keys {sorted(set(md) - {'schema', 'meta'})[:10]}")
    text = md["meta"]
    if not isinstance(text, str):
        raise fail("metadata 'meta' is not a string")
    if len(text) > MAX_META_BYTES:
        raise fail(f"metadata is {len(text)} bytes, over {MAX_META_BYTES}")
    try:
        meta = RolloutMeta.model_validate_json(text)
    except ValidationError as exc:
        raise fail(f"bad metadata: {exc}") from None

    # -- the arrays' names, dtypes and shapes, and every count against the caps: nothing is read yet
    if set(header) != set(_ARRAYS):
        missing, extra = sorted(set(_ARRAYS) - set(header)), sorted(set(header) - set(_ARRAYS))
        raise fail(f"arrays missing {missing}, unexpected {[e[:40] for e in extra[:10]]}")
    shapes: dict[str, list[int]] = {}
    spans: list[tuple[int, int, str]] = []
    for key, (dtype, _kind) in _ARRAYS.items():
        entry = header[key]
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise fail(f"array {key!r}: entry must have exactly dtype, shape and data_offsets")
        if entry["dtype"] != dtype:
            shown = str(entry["dtype"])[:20]
            raise fail(f"array {key!r} is {shown!r}, expected {dtype}")
        shape, span = entry["shape"], entry["data_offsets"]
        rank = 2 if key == "proofs" else 1
        if not (isinstance(shape, list) and len(shape) == rank and all(_is_count(d) for d in shape)):
            raise fail(f"array {key!r}: shape must be {rank} non-negative integers")
        if not (isinstance(span, list) and len(span) == 2 and all(_is_count(d) for d in span) and span[0] <= span[1]):
            raise fail(f"array {key!r}: data_offsets must be [begin, end] with 0 <= begin <= end")
        shapes[key] = shape
        spans.append((span[0], span[1], key))
    n = shapes["reward"][0]
    if n > limits.max_rows:
        raise fail(f"{n} rows, over the cap of {limits.max_rows}")
    for key, (_dtype, kind) in _ARRAYS.items():
        want = {"n": n, "n+1": n + 1}.get(kind)
        if want is not None and shapes[key][0] != want:
            raise fail(f"array {key!r} has {shapes[key][0]} values for {n} rows (expected {want})")
    proof_len = 2 + 2 * meta.proof_topk
    if shapes["proofs"][1] != proof_len:
        raise fail(f"proofs are {shapes['proofs'][1]} bytes each, expected {proof_len} (proof_topk "
                   f"{meta.proof_topk})")
    tokens = shapes["prompt_ids"][0] + shapes["completion_ids"][0]
    if tokens > limits.max_total_tokens:
        raise fail(f"{tokens} tokens, over the cap of {limits.max_total_tokens}")
    for key in ("problem_id", "worker"):
        if shapes[key][0] > n * _MAX_STRING_BYTES:
            raise fail(f"array {key!r} holds {shapes[key][0]} bytes, over {_MAX_STRING_BYTES} per row")
    total = 0
    for begin, end, key in spans:
        size = math.prod(shapes[key]) * _NUMPY[_ARRAYS[key][0]].itemsize
        if end - begin != size:
            raise fail(f"array {key!r} spans {end - begin} bytes, its shape and dtype need {size}")
        total += size
        if total > limits.max_decoded_bytes:
            raise fail(f"decodes to more than {limits.max_decoded_bytes} bytes (cap)")
    body = len(data) - 8 - hlen
    pos = 0
    for begin, end, key in sorted(spans):
        if begin != pos:
            what = "overlaps the array before it" if begin < pos else f"leaves {begin - pos} bytes unused before it"
            raise fail(f"array {key!r} starts at byte {begin} of the data and {what}")
        pos = end
    if pos != body:
        raise fail(f"truncated: the arrays need {pos} bytes of data, the file holds {body}" if pos > body else
                   f"{body - pos} bytes after the last array")

    # -- views over the validated ranges (no copy), then the offsets inside them
    base = 8 + hlen
    arr: dict[str, np.ndarray] = {}
    for begin, _end, key in spans:
        dt = _NUMPY[_ARRAYS[key][0]]
        arr[key] = np.frombuffer(data, dtype=dt, count=math.prod(shapes[key]), offset=base + begin)
    arr["proofs"] = arr["proofs"].reshape(shapes["proofs"])
    for off, flat in (("prompt_offsets", "prompt_ids"), ("completion_offsets", "completion_ids"),
                      ("problem_id_offsets", "problem_id"), ("worker_offsets", "worker")):
        o = arr[off]
        if o[0] != 0 or o[-1] != len(arr[flat]) or bool(np.any(o[1:] < o[:-1])):
            raise fail(f"array {off!r} is not row offsets into {flat!r} (from 0, non-decreasing, to "
                       f"{len(arr[flat])})")
    per_row = np.diff(arr["prompt_offsets"]) + np.diff(arr["completion_offsets"])
    worst = int(per_row.max()) if n else 0
    if worst > limits.max_tokens_per_row:
        raise fail(f"a row holds {worst} tokens, over the cap of {limits.max_tokens_per_row}")
    for off in ("problem_id_offsets", "worker_offsets"):
        if n and int(np.diff(arr[off]).max()) > _MAX_STRING_BYTES:
            raise fail(f"a row's {off[:-8]} is over {_MAX_STRING_BYTES} bytes")
    counts, n_proofs = arr["proof_counts"], shapes["proofs"][0]
    if bool(np.any(counts < 0)) or bool(np.any(counts > n_proofs)) or int(counts.sum()) != n_proofs:
        raise fail(f"proof_counts do not add up to the {n_proofs} proofs")
    # a row has no proofs or one per proof chunk of its completion: checked here, before a proof becomes a
    # Python object (bounds them by the token cap, not by the bytes cap)
    lengths = np.diff(arr["completion_offsets"])
    want = (lengths + meta.proof_chunk_size - 1) // meta.proof_chunk_size
    bad = np.flatnonzero((counts != 0) & (counts != want))
    if len(bad):
        i = int(bad[0])
        raise fail(f"row {i}: {int(counts[i])} proofs for {int(lengths[i])} tokens (expected {int(want[i])})")

    # -- the rows
    po, co = arr["prompt_offsets"].tolist(), arr["completion_offsets"].tolist()
    so, wo = arr["problem_id_offsets"].tolist(), arr["worker_offsets"].tolist()
    reward, task, pen = arr["reward"].tolist(), arr["task_reward"].tolist(), arr["length_penalty"].tolist()
    adv, step, target = arr["advantage"].tolist(), arr["policy_step"].tolist(), arr["target_length"].tolist()
    pstart = _offsets(counts.tolist()).tolist()
    rows = []
    for i in range(n):
        try:
            rec = {
                "problem_id": arr["problem_id"][so[i]:so[i + 1]].tobytes().decode("utf-8"),
                "prompt_ids": arr["prompt_ids"][po[i]:po[i + 1]].tolist(),
                "completion_ids": arr["completion_ids"][co[i]:co[i + 1]].tolist(),
                "reward": reward[i], "task_reward": task[i], "length_penalty": pen[i],
                "target_length": None if target[i] == _NO_TARGET else target[i],
                "advantage": adv[i], "policy_step": step[i],
                "proofs": [arr["proofs"][j].tobytes() for j in range(pstart[i], pstart[i + 1])],
                "worker": arr["worker"][wo[i]:wo[i + 1]].tobytes().decode("utf-8"),
            }
            rows.append(RolloutRow.model_validate(rec))
        except UnicodeDecodeError as exc:
            raise fail(f"row {i}: a string is not UTF-8: {exc}") from None
        except ValidationError as exc:
            raise RolloutFileError(f"rollout file {name} row {i}: {exc}") from None
    return RolloutFile(meta, rows, name=name)


def _is_count(v: Any) -> bool:
    return type(v) is int and 0 <= v < 2**62


# ---------------------------------------------------------------------------------------------
# v1: Parquet, read in a child


V1_CHILD_LIMITS = ChildLimits()
"""the limits of the child that reads a v1 file (its memory and CPU limits make the verdict)"""


def _read_v1_isolated(data: bytes, name: str, limits: RolloutLimits) -> RolloutFile:
    try:
        v2 = run_isolated("intellect.verifier._rollouts_v1:isolated_v1_to_v2", data,
                          {"name": name, "limits": asdict(limits)}, V1_CHILD_LIMITS)
    except ParseRefused as exc:
        raise RolloutFileError(str(exc)) from None
    except ParseCrashed as exc:
        raise RolloutFileError(f"rollout file {name}: the Parquet reader {exc} (a v1 file this node "
                               "cannot read safely; rejected)") from None
    try:
        return _decode_v2(v2, name, limits)
    except RolloutFileError as exc:  # our own child's bytes: a bug, not the sender's
        raise ParseUnavailable(f"rollout file {name}: the v1 reader's result did not parse: {exc}") from exc
