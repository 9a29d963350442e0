"""The shard manifest: what a checkpoint is, byte for byte.

A checkpoint directory is read as one stream: its files (sorted by relative path) are
concatenated, and the stream is cut into shards of `shard_size` bytes (the last one shorter).
The manifest lists each file's offset and size in that stream and each shard's offset, size
and sha256. Two digests cover the whole:

- `total_sha256`: sha256 of the whole stream (what a plain `cat files | sha256sum` gives);
- `root_sha256`: sha256 over the concatenated 32-byte shard digests (a hash list): it binds
  every byte too, and a client that verified each shard checks it for free.

The manifest's identity on the wire is `manifest.id` (sha256 of its canonical JSON bytes);
on IPFS, the CID of the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ._errors import InconsistentManifestError, ManifestError, UnknownSchemaVersionError, UnsafePathError

__all__ = ["MANIFEST_SCHEMA", "DeltaInfo", "FileDigest", "FileEntry", "Manifest", "ShardEntry", "safe_relpath"]

MANIFEST_SCHEMA = "intellect.shardcast.manifest/v1"
#: Largest manifest a reader accepts (a 62 GB checkpoint in 50 MB shards is ~1,300 shards ≈ 200 KB).
MAX_MANIFEST_BYTES = 16 * 1024 * 1024
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def _hex64(v: str) -> str:
    if not _HEX64.match(v):
        raise ValueError("must be 64 lowercase hex characters")
    return v


# a sha256 digest (or a manifest id) as the manifests write it
Hex64 = Annotated[str, AfterValidator(_hex64)]


def safe_relpath(path: str) -> str:
    """Return `path` if it is a safe relative POSIX path inside a directory, else raise.

    Refused: empty, absolute, backslashes, NUL, `.`/`..` components, empty components,
    a drive letter. The checks are purely lexical, so they hold on any platform.
    """
    if not path:
        raise UnsafePathError(path, "empty path")
    if "\\" in path or "\x00" in path:
        raise UnsafePathError(path, "backslash or NUL in path")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        raise UnsafePathError(path, "absolute path")
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise UnsafePathError(path, "empty, '.' or '..' component")
    if posixpath.normpath(path) != path:
        raise UnsafePathError(path, "path is not in normal form")
    return path


class FileEntry(BaseModel):
    """One file of the checkpoint, as a byte range of the concatenated stream."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = Field(description="relative POSIX path inside the checkpoint directory")
    offset: int = Field(ge=0, description="first byte of this file in the stream")
    size: int = Field(ge=0)

    @field_validator("path")
    @classmethod
    def _path_is_safe(cls, v: str) -> str:
        return safe_relpath(v)


class ShardEntry(BaseModel):
    """One shard: a byte range of the stream and its sha256."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int = Field(ge=0)
    offset: int = Field(ge=0)
    size: int = Field(gt=0)
    sha256: Hex64


class FileDigest(BaseModel):
    """A file of a checkpoint with its sha256 (what a client that rebuilt it from a delta checks)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    size: int = Field(ge=0)
    sha256: Hex64

    @field_validator("path")
    @classmethod
    def _path_is_safe(cls, v: str) -> str:
        return safe_relpath(v)


class DeltaInfo(BaseModel):
    """The checkpoint also as a change against the previous published step (docs/shardcast.md, "Deltas").

    The delta is one byte stream of `size` bytes in shards of the manifest's `shard_size`, served
    like the checkpoint's own shards; their indices continue after the checkpoint's (a version has
    `len(shards) + len(delta.shards)` shards on the wire). `encoding` is a free string here, so that
    a manifest whose delta this reader cannot decode is still a manifest: the client refuses the
    delta (`UnknownDeltaVersionError`) and fetches the full checkpoint."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    encoding: str = Field(min_length=1, max_length=100, description="payload format, e.g. intellect.ckdelta/v1")
    base_step: int = Field(ge=0)
    base_manifest_id: Hex64 = Field(description="id of the base version's manifest")
    base_files: list[FileDigest] = Field(description="the base checkpoint's files and sha256s")
    files: list[FileDigest] = Field(description="this checkpoint's files (as `Manifest.files`) and sha256s")
    size: int = Field(gt=0)
    shards: list[ShardEntry]


class Manifest(BaseModel):
    """A versioned description of one checkpoint (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_: Literal["intellect.shardcast.manifest/v1"] = Field(
        default=MANIFEST_SCHEMA, alias="schema", description="schema version of this document"
    )
    model_name: str = Field(min_length=1, max_length=256)
    step: int = Field(ge=0, description="policy step this checkpoint was trained to")
    created_at: datetime
    shard_size: int = Field(gt=0)
    total_size: int = Field(ge=0)
    files: list[FileEntry]
    shards: list[ShardEntry]
    total_sha256: Hex64 = Field(description="sha256 of the whole concatenated stream")
    root_sha256: Hex64 = Field(description="sha256 over the concatenated shard digests (hash list)")
    relay_hints: list[str] = Field(default_factory=list, description="relay base URLs to try")
    delta: DeltaInfo | None = Field(default=None, description="the checkpoint as a change against the previous step")

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        seen: set[str] = set()
        pos = 0
        for f in self.files:
            if f.path in seen:
                raise InconsistentManifestError(f"file {f.path!r} listed twice")
            seen.add(f.path)
            if f.offset != pos:
                raise InconsistentManifestError(f"file {f.path!r} starts at {f.offset}, expected {pos}")
            pos += f.size
        # A file may not also be a directory of another ("a" and "a/b").
        for p in seen:
            parts = p.split("/")
            for i in range(1, len(parts)):
                if "/".join(parts[:i]) in seen:
                    raise UnsafePathError(p, f"{'/'.join(parts[:i])!r} is both a file and a directory")
        if pos != self.total_size:
            raise InconsistentManifestError(f"files add up to {pos} bytes, total_size says {self.total_size}")
        pos = 0
        for i, s in enumerate(self.shards):
            if s.index != i:
                raise InconsistentManifestError(f"shard at position {i} has index {s.index}")
            if s.offset != pos:
                raise InconsistentManifestError(f"shard {i} starts at {s.offset}, expected {pos}")
            last = i == len(self.shards) - 1
            if s.size > self.shard_size or (not last and s.size != self.shard_size):
                raise InconsistentManifestError(
                    f"shard {i} has size {s.size}; shards are {self.shard_size} bytes except a shorter last one"
                )
            pos += s.size
        if pos != self.total_size:
            raise InconsistentManifestError(f"shards add up to {pos} bytes, total_size says {self.total_size}")
        root = hashlib.sha256(b"".join(bytes.fromhex(s.sha256) for s in self.shards)).hexdigest()
        if root != self.root_sha256:
            raise InconsistentManifestError("root_sha256 does not match the shard digests")
        if self.delta is not None:
            self._delta_consistent(self.delta)
        return self

    def _delta_consistent(self, d: DeltaInfo) -> None:
        if [(f.path, f.size) for f in d.files] != [(f.path, f.size) for f in self.files]:
            raise InconsistentManifestError("delta.files do not list the checkpoint's files")
        if d.base_step >= self.step:
            raise InconsistentManifestError(f"delta base step {d.base_step} is not before step {self.step}")
        if len({f.path for f in d.base_files}) != len(d.base_files):
            raise InconsistentManifestError("delta.base_files lists a path twice")
        pos, first = 0, len(self.shards)
        for j, s in enumerate(d.shards):
            if s.index != first + j or s.offset != pos:
                raise InconsistentManifestError(f"delta shard {j} has index {s.index} / offset {s.offset}, expected "
                                                f"{first + j} / {pos}")
            if s.size > self.shard_size or (j < len(d.shards) - 1 and s.size != self.shard_size):
                raise InconsistentManifestError(f"delta shard {j} has size {s.size}")
            pos += s.size
        if pos != d.size:
            raise InconsistentManifestError(f"delta shards add up to {pos} bytes, delta.size says {d.size}")

    @property
    def shard_count(self) -> int:
        """Shards of this version on the wire: the checkpoint's, then its delta's."""
        return len(self.shards) + (len(self.delta.shards) if self.delta is not None else 0)

    def shard(self, index: int) -> ShardEntry:
        """Shard `index` on the wire (a delta shard past the checkpoint's)."""
        n = len(self.shards)
        if index < n:
            return self.shards[index]
        if self.delta is None:
            raise IndexError(index)
        return self.delta.shards[index - n]

    def all_shards(self) -> list[ShardEntry]:
        return [*self.shards, *(self.delta.shards if self.delta is not None else ())]

    # -- identity and (de)serialisation ------------------------------------------------------

    def to_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces): the bytes published to IPFS and served."""
        # A manifest without a delta serialises as it did before deltas existed (same id).
        exclude = {"delta"} if self.delta is None else None
        return json.dumps(self.model_dump(mode="json", by_alias=True, exclude=exclude), sort_keys=True,
                          separators=(",", ":")).encode()

    @property
    def id(self) -> str:
        """sha256 hex of `to_bytes()`: the version's name on the Shardcast wire."""
        return hashlib.sha256(self.to_bytes()).hexdigest()

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "") -> Manifest:
        """Parse and validate; raises a `ManifestError` subclass naming the problem (and `source`: the
        CID, URL or path the bytes came from), whatever the JSON or pydantic layer raised underneath."""
        where = f" {source}" if source else ""
        if not isinstance(data, bytes | bytearray | memoryview | str):
            raise ManifestError(f"manifest{where} must be bytes, got {type(data).__name__}")
        if len(data) > MAX_MANIFEST_BYTES:
            raise ManifestError(f"manifest{where} is {len(data)} bytes, larger than the {MAX_MANIFEST_BYTES} limit")
        try:
            raw = json.loads(bytes(data) if isinstance(data, memoryview) else data)
        except (ValueError, RecursionError) as e:  # bad UTF-8/JSON, an int over 4300 digits, deep nesting
            raise ManifestError(f"manifest{where} is not valid JSON: {e}") from e
        return cls.from_obj(raw, source=source)

    @classmethod
    def from_obj(cls, raw: Any, source: str = "") -> Manifest:
        where = f" {source}" if source else ""
        if not isinstance(raw, dict):
            raise ManifestError(f"manifest{where} must be a JSON object")
        if raw.get("schema") != MANIFEST_SCHEMA:
            found = raw.get("schema")
            if not isinstance(found, str | None) or (isinstance(found, str) and len(found) > 100):
                found = f"<{type(found).__name__}>"  # do not echo a huge or nested value
            raise UnknownSchemaVersionError(found, MANIFEST_SCHEMA, f"shardcast manifest{where}")
        try:
            return cls.model_validate(raw)
        except ManifestError as e:
            raise _naming(e, where) from None
        except ValidationError as e:
            # Our own errors raised inside validators arrive wrapped; surface them as themselves.
            for err in e.errors():
                ctx_err = (err.get("ctx") or {}).get("error")
                if isinstance(ctx_err, ManifestError):
                    raise _naming(ctx_err, where) from e
            raise ManifestError(f"invalid manifest{where}: {e}") from e
        except (RecursionError, OverflowError, TypeError, ValueError) as e:  # a value pydantic's layer chokes on
            raise ManifestError(f"invalid manifest{where}: {type(e).__name__}: {e}") from e

    # -- helpers ---------------------------------------------------------------------------------

    def segments(self, shard: ShardEntry) -> Iterator[tuple[FileEntry, int, int]]:
        """(file, offset within file, length) pieces that make up `shard`, in stream order."""
        start, end = shard.offset, shard.offset + shard.size
        for f in self.files:
            f_end = f.offset + f.size
            if f_end <= start or f.size == 0:
                continue
            if f.offset >= end:
                break
            lo, hi = max(start, f.offset), min(end, f_end)
            yield f, lo - f.offset, hi - lo


def _naming(exc: ManifestError, where: str) -> ManifestError:
    """`exc` (class and attributes kept) with the manifest's source in front of its message."""
    if where:
        exc.args = (f"manifest{where}: {exc}",)
    return exc


def now_utc() -> datetime:
    return datetime.now(UTC)


def checkpoint_files(directory: Path) -> list[tuple[str, Path]]:
    """Regular files under `directory`, as (relative POSIX path, path), sorted by relative path.

    Symlinks are refused rather than followed: a checkpoint is plain files.
    """
    out: list[tuple[str, Path]] = []
    for p in sorted(directory.rglob("*")):
        if p.is_symlink():
            raise ManifestError(f"{p} is a symlink; a checkpoint directory must hold plain files")
        if p.is_file():
            out.append((safe_relpath(p.relative_to(directory).as_posix()), p))
    out.sort(key=lambda t: t[0])
    return out
