"""Checkpoint deltas (`intellect.ckdelta/v1`): step t's files as changes against step t−1's.

Consecutive policy steps differ in few bits: an AdamW step at a small learning rate moves most
bf16 weights by zero or one unit in the last place. A delta stores, per file of the target
checkpoint, one of

- `same`:  the base file of the same path, unchanged;
- `raw`:   the file itself, zstd-compressed (a new file, or one whose size changed);
- `diff`:  the base file of the same path and size, transformed back by *segments*: byte ranges
  that tile the file, each read as little-endian unsigned integers of `width` bytes (1, 2 or 4)
  and combined with the base's by `transform`:
    `xor`  value = base ^ d
    `sub`  value = base + unzigzag(d)  (mod 2^(8·width)): the integer difference of the raw bit
           patterns, which for two floats of the same sign is their distance in units in the last
           place; zigzag folds small negatives next to small positives.
  The d values of all segments with the same (width, transform) form one group. A group where
  most d are zero (a small step) is stored *sparse*: `gaps` (one byte per nonzero value: the
  zeros before it; 255 = 255 zeros and no value yet) and the nonzero values minus 1; else
  *dense*: every value. Values are split into `width` byte planes (plane k holds byte k of every
  value), each one zstd stream: the high bytes of small differences are almost all zero and
  compress to nearly nothing. Randomly placed changes make the gap bytes near-random symbols of
  a few bits' entropy, which zstd's Huffman stage codes close to that entropy, where dense planes
  leave it short zero runs to code as sequences (SmolLM2, lr 1e-6, first step: 1.92 % of the
  checkpoint at zstd 3 vs 3.84 % for the XOR's byte planes at zstd 9; docs/benchmarks-shardcast.md).
  The encoder reads a safetensors header to cut segments at tensor bounds with the tensor's
  element width; the decoder needs no knowledge of the file format.

Layout of a delta payload::

    8 bytes   b"ICKDELTA"
    4 bytes   N, the header's length (unsigned little-endian), N <= MAX_HEADER_BYTES
    N bytes   header: JSON `DeltaHeader` (schema, base manifest id, files with their streams)
    ...       the streams' zstd frames, in header order, back to back, nothing after them
              (the header gives each frame's length and decompressed size)

A reader refuses (`DeltaError`; `UnknownDeltaVersionError` for a schema it does not know) before
it decompresses anything: a header whose files are not exactly the expected ones, segments that
do not tile a file, stream sizes that do not follow from the segments, frames that do not add
up to the payload. Every frame is decompressed into a buffer of exactly the size the header
implies, which the file sizes of the (chain-anchored) manifest bound: a frame that would
decompress to more is an error, not an allocation (`_zstd`). What the decoder rebuilds is then
checked against the manifest's per-file sha256.
"""

from __future__ import annotations

import hashlib
import json
import logging
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._errors import SchemaVersionError
from . import _zstd
from ._errors import ShardcastError
from ._manifest import safe_relpath

if TYPE_CHECKING:  # numpy is imported where a delta is coded: `import intellect.sdk.shardcast` stays light
    import numpy as np

__all__ = [
    "DELTA_SCHEMA",
    "DeltaError",
    "DeltaHeader",
    "DeltaStats",
    "UnknownDeltaVersionError",
    "decode_delta",
    "decode_to_memory",
    "encode_delta",
]

log = logging.getLogger(__name__)

DELTA_SCHEMA = "intellect.ckdelta/v1"
MAGIC = b"ICKDELTA"
MAX_HEADER_BYTES = 16 * 1024 * 1024
"""Largest delta header a reader parses (a 70B checkpoint's ~1,000 tensors need ~100 KB)."""
MAX_SEGMENTS = 1_000_000
MAX_FILES = 10_000
DEFAULT_LEVEL = 3

_WIDTH_DTYPE = {1: "<u1", 2: "<u2", 4: "<u4"}
_SIGNED = {1: "<i1", 2: "<i2", 4: "<i4"}
# safetensors dtype -> element width for the segments (the rest: bytes, xor)
_ST_WIDTH = {"BF16": 2, "F16": 2, "I16": 2, "U16": 2, "F32": 4, "I32": 4, "U32": 4}
_FLOAT = {"BF16", "F16", "F32"}


class DeltaError(ShardcastError):
    """A delta was refused: malformed, for another base, over a bound, or rebuilding wrong bytes."""


class UnknownDeltaVersionError(DeltaError, SchemaVersionError):
    """The delta declares an encoding this reader does not know."""

    def __init__(self, found: object, expected: str, what: str = "checkpoint delta") -> None:
        SchemaVersionError.__init__(self, what, found, expected)


# -- header ----------------------------------------------------------------------------------------


class Segment(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    start: int = Field(ge=0)
    end: int = Field(ge=0)
    width: Literal[1, 2, 4]
    transform: Literal["xor", "sub"]


class Stream(BaseModel):
    """One zstd frame of a (width, transform) group of a file's segments: its `gaps` (sparse
    layout), or byte plane `plane` of its values (all of them, or the nonzero ones minus 1)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    width: Literal[1, 2, 4]
    transform: Literal["xor", "sub"]
    kind: Literal["plane", "gaps"] = "plane"
    plane: int = Field(default=0, ge=0, le=3)
    size: int = Field(ge=0, description="bytes the frame decompresses to")
    length: int = Field(ge=0, description="bytes of the zstd frame")


class DeltaFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    path: str
    size: int = Field(ge=0)
    op: Literal["same", "raw", "diff"]
    segments: list[Segment] = Field(default_factory=list)
    streams: list[Stream] = Field(default_factory=list)


class DeltaHeader(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    schema_: Literal["intellect.ckdelta/v1"] = Field(default=DELTA_SCHEMA, alias="schema")
    base_manifest_id: str = Field(pattern=r"^[0-9a-f]{64}$")
    files: list[DeltaFile] = Field(max_length=MAX_FILES)

    def to_bytes(self) -> bytes:
        return json.dumps(self.model_dump(mode="json", by_alias=True), sort_keys=True,
                          separators=(",", ":")).encode()


@dataclass
class DeltaStats:
    """What an encode or decode did: bytes per (width, transform, plane) and the seconds it took."""

    payload_bytes: int = 0
    target_bytes: int = 0
    seconds: float = 0.0
    per_stream: dict[str, int] | None = None
    encoding: str = DELTA_SCHEMA
    """The payload's encoding, as a manifest names it (`DeltaInfo.encoding`)."""


# -- value transforms ------------------------------------------------------------------------------


def _forward(base: np.ndarray, target: np.ndarray, width: int, transform: str) -> np.ndarray:
    """d such that _inverse(base, d) == target (unsigned little-endian arrays of `width`)."""
    import numpy as np

    if transform == "xor":
        return np.bitwise_xor(base, target)
    s = (target - base).view(_SIGNED[width])  # wraps: mod 2^(8·width)
    bits = 8 * width - 1
    return ((s << 1) ^ (s >> bits)).view(_WIDTH_DTYPE[width])


def _inverse(base: np.ndarray, d: np.ndarray, width: int, transform: str) -> np.ndarray:
    import numpy as np

    if transform == "xor":
        return np.bitwise_xor(base, d)
    s = (d >> 1).view(_SIGNED[width]) ^ -(d & 1).view(_SIGNED[width])
    return base + s.view(_WIDTH_DTYPE[width])


def _planes(values: np.ndarray, width: int) -> list[np.ndarray]:
    import numpy as np

    b = values.view(np.uint8).reshape(-1, width)
    return [np.ascontiguousarray(b[:, k]) for k in range(width)]


# -- encoder ---------------------------------------------------------------------------------------


def _safetensors_segments(data: memoryview) -> list[tuple[int, int, int, str]] | None:
    """(start, end, width, transform) tiling a safetensors file, or None if it is not one."""
    size = len(data)
    if size < 8:
        return None
    (n,) = struct.unpack("<Q", data[:8])
    if n > min(size - 8, MAX_HEADER_BYTES * 4):
        return None
    try:
        header = json.loads(bytes(data[8 : 8 + n]))
    except ValueError:
        return None
    if not isinstance(header, dict):
        return None
    body = 8 + n
    spans: list[tuple[int, int, int, str]] = []
    for name, t in header.items():
        if name == "__metadata__" or not isinstance(t, dict):
            continue
        try:
            lo, hi = (int(x) + body for x in t["data_offsets"])
            dtype = str(t["dtype"])
        except (KeyError, TypeError, ValueError):
            return None
        w = _ST_WIDTH.get(dtype, 1)
        if not body <= lo <= hi <= size or (hi - lo) % w:
            w = 1
        spans.append((lo, hi, w, "sub" if dtype in _FLOAT else "xor"))
    spans.sort()
    out: list[tuple[int, int, int, str]] = []
    pos = 0
    for lo, hi, w, tr in spans:
        if lo < pos:
            return None  # overlapping tensors: not a file we understand
        if lo > pos:
            out.append((pos, lo, 1, "xor"))  # the header, padding between tensors
        if hi > lo:
            out.append((lo, hi, w, tr))
        pos = hi
    if pos < size:
        out.append((pos, size, 1, "xor"))
    return out


SPARSE_BELOW = 0.5
"""A group whose share of nonzero values is below this is stored sparse (gaps + nonzero values)."""


def _group_streams(values: np.ndarray, width: int, transform: str) -> list[tuple[Stream, np.ndarray]]:
    """The streams of one (width, transform) group of values.

    Dense: the values' `width` byte planes. Sparse (most values zero, as in a small step): `gaps`,
    one byte per nonzero value giving the zeros before it (255: 255 zeros and no value yet, so
    long runs cost a byte per 255), then the byte planes of the nonzero values minus 1. The gap
    bytes of randomly placed changes are close to incompressible noise of a few bits each, which
    zstd's Huffman stage codes near their entropy, where the dense planes leave it sequences of
    short zero runs to code."""
    import numpy as np

    nz = np.flatnonzero(values)
    if len(nz) >= SPARSE_BELOW * len(values):
        return [(Stream(width=width, transform=transform, plane=k, size=len(values), length=0), p)
                for k, p in enumerate(_planes(values, width))]
    gaps = np.diff(nz, prepend=-1) - 1
    runs = gaps // 255
    ends = np.cumsum(runs + 1) - 1
    g = np.full(int(ends[-1]) + 1 if len(ends) else 0, 255, dtype=np.uint8)
    g[ends] = (gaps % 255).astype(np.uint8)
    nonzero = values[nz] - 1
    out = [(Stream(width=width, transform=transform, kind="gaps", size=len(g), length=0), g)]
    out += [(Stream(width=width, transform=transform, plane=k, size=len(nz), length=0), p)
            for k, p in enumerate(_planes(nonzero, width))]
    return out


def _diff_segments(path: str, data: memoryview) -> list[tuple[int, int, int, str]]:
    if path.endswith(".safetensors"):
        segs = _safetensors_segments(data)
        if segs is not None:
            return segs
    return [(0, len(data), 1, "xor")] if len(data) else []


def encode_delta(
    base: Mapping[str, bytes | memoryview],
    target: Sequence[tuple[str, bytes | memoryview]],
    *,
    base_manifest_id: str,
    level: int = DEFAULT_LEVEL,
    threads: int = 2,
) -> tuple[bytes, DeltaStats]:
    """The `intellect.ckdelta/v1` payload that rebuilds `target` (path, bytes; in manifest order)
    from `base` (path -> bytes of the previous step's published files)."""
    import numpy as np

    t0 = time.perf_counter()
    files: list[DeltaFile] = []
    jobs: list[tuple[int, Stream, np.ndarray | memoryview]] = []  # (file index, stream, raw bytes)
    for path, data in target:
        tv = memoryview(data).cast("B")
        bv = base.get(path)
        bview = memoryview(bv).cast("B") if bv is not None else None
        if bview is not None and len(bview) == len(tv) and bview == tv:
            files.append(DeltaFile(path=path, size=len(tv), op="same"))
            continue
        if bview is None or len(bview) != len(tv):
            jobs.append((len(files), Stream(width=1, transform="xor", size=len(tv), length=0), tv))
            files.append(DeltaFile(path=path, size=len(tv), op="raw"))
            continue
        segs = _diff_segments(path, tv)
        groups: dict[tuple[int, str], list[np.ndarray]] = {}
        for lo, hi, w, tr in segs:
            dt = _WIDTH_DTYPE[w]
            b = np.frombuffer(bview[lo:hi], dtype=dt)
            t = np.frombuffer(tv[lo:hi], dtype=dt)
            groups.setdefault((w, tr), []).append(_forward(b, t, w, tr))
        streams = []
        for (w, tr), parts in sorted(groups.items()):
            values = np.concatenate(parts) if len(parts) > 1 else parts[0]
            for s, raw in _group_streams(values, w, tr):
                streams.append(s)
                jobs.append((len(files), s, raw))
        files.append(DeltaFile(path=path, size=len(tv), op="diff",
                               segments=[Segment(start=lo, end=hi, width=w, transform=tr) for lo, hi, w, tr in segs],
                               streams=streams))

    def run(job: tuple[int, Stream, np.ndarray | memoryview]) -> bytes:
        raw = job[2]
        return _zstd.compress(raw if isinstance(raw, memoryview) else memoryview(raw), level)

    # Largest first: the pool's threads finish together.
    order = sorted(range(len(jobs)), key=lambda i: -memoryview(jobs[i][2]).nbytes)
    with ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="ckdelta-zstd") as ex:
        done = dict(zip(order, ex.map(lambda i: run(jobs[i]), order), strict=True))
    frames: list[bytes] = []
    per_stream: dict[str, int] = {}
    # Put the frame lengths into the header, file by file, stream by stream (job order).
    by_file: dict[int, list[Stream]] = {}
    for i, (fi, s, _) in enumerate(jobs):
        frame = done[i]
        frames.append(frame)
        by_file.setdefault(fi, []).append(s.model_copy(update={"length": len(frame)}))
        key = "raw" if files[fi].op == "raw" else (f"{s.transform}{8 * s.width}." +
                                                    ("gaps" if s.kind == "gaps" else f"p{s.plane}"))
        per_stream[key] = per_stream.get(key, 0) + len(frame)
    files = [f.model_copy(update={"streams": by_file.get(i, [])}) for i, f in enumerate(files)]
    header = DeltaHeader(base_manifest_id=base_manifest_id, files=files).to_bytes()
    payload = b"".join([MAGIC, struct.pack("<I", len(header)), header, *frames])
    stats = DeltaStats(payload_bytes=len(payload), target_bytes=sum(len(memoryview(d).cast("B")) for _, d in target),
                       seconds=time.perf_counter() - t0, per_stream=per_stream)
    return payload, stats


# -- decoder ---------------------------------------------------------------------------------------


def parse_header(payload: memoryview, expected: Sequence[tuple[str, int]], base_manifest_id: str) -> tuple[DeltaHeader, int]:
    """Validate the payload's framing and header against the files it must rebuild (path, size in
    manifest order) and the base this client holds; returns (header, offset of the first frame)."""
    if len(payload) < 12 or bytes(payload[:8]) != MAGIC:
        raise DeltaError("not a checkpoint delta (bad magic)")
    (n,) = struct.unpack("<I", payload[8:12])
    if n > MAX_HEADER_BYTES or 12 + n > len(payload):
        raise DeltaError(f"delta header length {n} exceeds the payload ({len(payload)} bytes) or the "
                         f"{MAX_HEADER_BYTES}-byte limit")
    try:
        raw = json.loads(bytes(payload[12 : 12 + n]))
    except (ValueError, RecursionError) as e:
        raise DeltaError(f"delta header is not valid JSON: {e}") from e
    if not isinstance(raw, dict):
        raise DeltaError("delta header must be a JSON object")
    if raw.get("schema") != DELTA_SCHEMA:
        found = raw.get("schema")
        raise UnknownDeltaVersionError(found if isinstance(found, str) and len(found) <= 100 else repr(found)[:100],
                                       DELTA_SCHEMA)
    try:
        header = DeltaHeader.model_validate(raw)
    except (ValidationError, RecursionError, ValueError, TypeError) as e:
        raise DeltaError(f"invalid delta header: {e}") from e
    if header.base_manifest_id != base_manifest_id:
        raise DeltaError(f"delta is against base {header.base_manifest_id[:12]}, this client holds {base_manifest_id[:12]}")
    got = [(f.path, f.size) for f in header.files]
    if got != list(expected):
        raise DeltaError("delta's files (paths, sizes) are not the checkpoint's")
    body = 12 + n
    total = 0
    nseg = 0
    for f in header.files:
        safe_relpath(f.path)
        total += sum(s.length for s in f.streams)
        if f.op == "same":
            if f.streams or f.segments:
                raise DeltaError(f"{f.path}: a 'same' file carries no data")
            continue
        if f.op == "raw":
            if len(f.streams) != 1 or f.segments or f.streams[0] != Stream(width=1, transform="xor", size=f.size,
                                                                            length=f.streams[0].length):
                raise DeltaError(f"{f.path}: a 'raw' file is one byte stream of its size")
            continue
        nseg += len(f.segments)
        if nseg > MAX_SEGMENTS:
            raise DeltaError(f"delta has more than {MAX_SEGMENTS} segments")
        pos = 0
        for s in f.segments:
            if s.start != pos or s.end <= s.start or (s.end - s.start) % s.width:
                raise DeltaError(f"{f.path}: segments do not tile the file at byte {pos}")
            pos = s.end
        if pos != f.size:
            raise DeltaError(f"{f.path}: segments end at {pos}, the file has {f.size} bytes")
        _check_streams(f)
    if body + total != len(payload):
        raise DeltaError(f"delta frames add up to {total} bytes, the payload holds {len(payload) - body} after "
                         f"its header (truncated or padded)")
    return header, body


def _group_counts(f: DeltaFile) -> dict[tuple[int, str], int]:
    counts: dict[tuple[int, str], int] = {}
    for s in f.segments:
        counts[(s.width, s.transform)] = counts.get((s.width, s.transform), 0) + (s.end - s.start) // s.width
    return counts


def _check_streams(f: DeltaFile) -> None:
    """Each (width, transform) group of a `diff` file has, in order, either its `width` dense planes of
    one value per element, or `gaps` (at most one byte per element plus one per 255) and `width`
    planes of as many nonzero values as the gaps end: every size follows from the segments."""
    counts = _group_counts(f)
    streams = list(f.streams)
    for (w, tr), n in sorted(counts.items()):
        sparse = bool(streams) and streams[0].kind == "gaps"
        group, streams = streams[: w + sparse], streams[w + sparse :]
        if len(group) != w + sparse or any((s.width, s.transform) != (w, tr) for s in group):
            raise DeltaError(f"{f.path}: streams do not match the segments' (width, transform) groups")
        planes = group[1:] if sparse else group
        if [(s.kind, s.plane) for s in planes] != [("plane", k) for k in range(w)]:
            raise DeltaError(f"{f.path}: group ({w}, {tr}) lacks its byte planes 0..{w - 1}")
        k = planes[0].size
        if any(s.size != k for s in planes) or k > n or (not sparse and k != n):
            raise DeltaError(f"{f.path}: group ({w}, {tr}) planes of {k} values for {n} elements")
        if sparse and not k <= group[0].size <= k + n // 255 + 1:
            raise DeltaError(f"{f.path}: group ({w}, {tr}) has {group[0].size} gap bytes for {k} values")
    if streams:
        raise DeltaError(f"{f.path}: {len(streams)} streams beyond the segments' groups")


def decode_delta(
    payload: bytes | memoryview,
    expected: Sequence[tuple[str, int, str]],
    *,
    base_manifest_id: str,
    prepare: Callable[[str, int, bool], memoryview],
    done: Callable[[str], None] | None = None,
    threads: int = 2,
) -> DeltaStats:
    """Rebuild the target files from `payload`, in place.

    expected: (path, size, sha256) of every target file, in manifest order (the manifest's word).
    prepare(path, size, from_base): a writable buffer of `size` bytes for that file, holding the
    base's file of the same path when `from_base` (raise `DeltaError` if the base has none of
    that size), anything otherwise. The decoder writes only what changed (a sparse group touches
    only its changed values), then checks the buffer against the file's sha256 and calls
    `done(path)`. A client prepares a copy of its base file made by the kernel (`copy_file_range`)
    and mapped, so unchanged bytes never pass through Python."""
    t0 = time.perf_counter()
    mv = memoryview(payload).cast("B")
    header, pos = parse_header(mv, [(p, s) for p, s, _ in expected], base_manifest_id)
    sha = {p: h for p, _, h in expected}
    with ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="ckdelta-unzstd") as ex:
        for f in header.files:
            frames = []
            for s in f.streams:
                frames.append((s, mv[pos : pos + s.length]))
                pos += s.length
            out = prepare(f.path, f.size, f.op != "raw")
            if len(out) != f.size:
                raise DeltaError(f"{f.path}: prepared buffer of {len(out)} bytes, expected {f.size}")
            if f.op == "raw":
                _unzstd(frames[0][1], f.size, f.path, out)
            elif f.op == "diff":
                _apply_diff(f, out, frames, ex)
            digest = hashlib.sha256(out).hexdigest()
            out.release()  # the caller may now unmap it
            if digest != sha[f.path]:
                raise DeltaError(f"{f.path}: rebuilt file has sha256 {digest}, the manifest says {sha[f.path]} "
                                 f"(a delta against other bytes, or a corrupt one)")
            if done is not None:
                done(f.path)
    return DeltaStats(payload_bytes=len(mv), target_bytes=sum(s for _, s, _ in expected),
                      seconds=time.perf_counter() - t0)


def decode_to_memory(payload: bytes | memoryview, base: Mapping[str, bytes | bytearray | memoryview],
                     expected: Sequence[tuple[str, int, str]], *, base_manifest_id: str,
                     threads: int = 2) -> dict[str, bytes]:
    """`decode_delta` with the base and the result in memory ({path: bytes})."""
    bufs: dict[str, bytearray] = {}

    def prepare(path: str, size: int, from_base: bool) -> memoryview:
        b = base.get(path) if from_base else None
        if from_base and (b is None or len(memoryview(b).cast("B")) != size):
            raise DeltaError(f"{path}: the base has no file of {size} bytes at this path")
        bufs[path] = bytearray(b) if b is not None else bytearray(size)
        return memoryview(bufs[path])

    decode_delta(payload, expected, base_manifest_id=base_manifest_id, prepare=prepare, threads=threads)
    return {p: bytes(b) for p, b in bufs.items()}


def _unzstd(frame: memoryview, size: int, what: str, into: memoryview | None = None) -> memoryview:
    try:
        return _zstd.decompress(frame, size, into)
    except _zstd.ZstdError as e:
        raise DeltaError(f"{what}: {e}") from e


def _apply_diff(f: DeltaFile, buf: memoryview, frames: list[tuple[Stream, memoryview]],
                ex: ThreadPoolExecutor) -> None:
    """Turn `buf` (the base file's bytes) into the target file's, in place."""
    import numpy as np

    counts = _group_counts(f)

    def unzstd(item: tuple[Stream, memoryview]) -> memoryview:
        s, frame = item
        return _unzstd(frame, s.size, f.path)

    raws = list(ex.map(unzstd, frames))  # every frame into a buffer of exactly its declared size
    dst = np.frombuffer(buf, dtype=np.uint8)  # unchanged bytes stay: sparse groups touch only what changed
    dense: dict[tuple[int, str], np.ndarray] = {}
    i = 0
    for (w, tr), n in sorted(counts.items()):
        dt = _WIDTH_DTYPE[w]
        sparse = frames[i][0].kind == "gaps"
        gaps = np.frombuffer(raws[i], dtype=np.uint8) if sparse else None
        i += sparse
        k = frames[i][0].size
        cols = np.empty((k, w), dtype=np.uint8)
        for j in range(w):
            cols[:, j] = np.frombuffer(raws[i + j], dtype=np.uint8)
        i += w
        vals = cols.reshape(-1).view(dt)
        if gaps is None:
            dense[(w, tr)] = vals
            continue
        ends = gaps != 255
        if int(np.count_nonzero(ends)) != k:
            raise DeltaError(f"{f.path}: group ({w}, {tr}) gaps end {np.count_nonzero(ends)} times for {k} values")
        pos = np.cumsum(gaps, dtype=np.int64)[ends] + np.arange(k, dtype=np.int64)
        if k and pos[-1] >= n:
            raise DeltaError(f"{f.path}: group ({w}, {tr}) gaps run past its {n} elements")
        # element index in the group -> byte offset in the file, through the group's segments
        segs = [s for s in f.segments if (s.width, s.transform) == (w, tr)]
        first = np.cumsum([0] + [(s.end - s.start) // w for s in segs], dtype=np.int64)
        which = np.searchsorted(first, pos, side="right") - 1
        at = np.array([s.start for s in segs], dtype=np.int64)[which] + (pos - first[which]) * w
        old = np.zeros(k, dtype=dt)
        for j in range(w):
            old |= dst[at + j].astype(dt) << np.array(8 * j, dtype=dt)
        new = _inverse(old, vals + np.array(1, dtype=dt), w, tr).view(np.uint8).reshape(k, w)
        for j in range(w):
            dst[at + j] = new[:, j]
    used = dict.fromkeys(dense, 0)
    for s in f.segments:
        key = (s.width, s.transform)
        if key not in dense:
            continue
        n = (s.end - s.start) // s.width
        d = dense[key][used[key] : used[key] + n]
        used[key] += n
        b = dst[s.start : s.end].view(_WIDTH_DTYPE[s.width])
        dst[s.start : s.end] = _inverse(b, d, s.width, s.transform).view(np.uint8)
