"""Shardcast's exception tree (part of the SDK's, under `IntellectError`).

    IntellectError
    └── ShardcastError
    ├── ManifestError                 a manifest that cannot be accepted
    │   ├── UnknownSchemaVersionError   schema string this reader does not know
    │   ├── InconsistentManifestError   sizes/offsets/indices that do not add up
    │   └── UnsafePathError             a file path that would escape the output directory
    ├── ShardVerificationError        bytes whose sha256 differs from the manifest's
    ├── UpstreamError                 a relay/origin answered badly or not at all
    ├── FetchError                    a client could not complete a checkpoint
    └── OutputExistsError             the output directory holds a different checkpoint
"""

from __future__ import annotations

from .._errors import IntellectError, SchemaVersionError


class ShardcastError(IntellectError):
    """Base class of every error raised by `intellect.sdk.shardcast`."""


class ManifestError(ShardcastError):
    """A manifest was refused; the message says which field and why."""


class UnknownSchemaVersionError(ManifestError, SchemaVersionError):
    """The manifest (or wire document) declares a schema this code does not read."""

    def __init__(self, found: object, expected: str, what: str = "shardcast document") -> None:
        SchemaVersionError.__init__(self, what, found, expected)


class InconsistentManifestError(ManifestError):
    """Sizes, offsets or indices in the manifest contradict each other."""


class UnsafePathError(ManifestError):
    """A file path in the manifest is absolute, has `..`, or is otherwise unsafe."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"unsafe path {path!r} in manifest: {reason}")
        self.path = path


class ShardVerificationError(ShardcastError):
    """Downloaded bytes did not hash to what the manifest says."""

    def __init__(self, index: int, expected: str, actual: str, source: str | None = None) -> None:
        where = f" from {source}" if source else ""
        super().__init__(f"shard {index}{where}: sha256 {actual} != manifest {expected}")
        self.index = index
        self.expected = expected
        self.actual = actual
        self.source = source


class UpstreamError(ShardcastError):
    """An upstream (origin or relay) failed: connection refused, bad status, short body."""

    def __init__(self, url: str, reason: str, *, status: int | None = None) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason
        self.status = status


class FetchError(ShardcastError):
    """A client gave up on a checkpoint (every source failed for some shard)."""


class OutputExistsError(ShardcastError):
    """The output directory already exists and does not hold this checkpoint."""
