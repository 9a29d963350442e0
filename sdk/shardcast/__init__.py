"""Shardcast: checkpoint distribution through a relay tree, anchored by IPFS manifests.

    origin = Origin(data_dir, ipfs=ipfs).start()
    manifest, cid = origin.publish(checkpoint_dir, step, model_name)     # trainer
    relay = Relay(upstreams=[origin.url], data_dir=relay_dir, keep=3).start()
    path = Client(relays=[relay.url], ipfs=ipfs).fetch(cid, out_dir)      # worker

Every shard is sha256-checked by every relay and client; the manifest's id (sha256 of its
canonical bytes) names the version on the wire, its IPFS CID names it on-chain.
"""

from ._arena import ALIGN as ARENA_ALIGN
from ._arena import Arena
from ._client import Client, FetchResult, Staging
from ._delta import (
    DELTA_SCHEMA,
    DeltaError,
    DeltaHeader,
    DeltaStats,
    UnknownDeltaVersionError,
    decode_to_memory,
    encode_delta,
)
from ._delta import MAGIC as DELTA_MAGIC
from ._download import SourcePool, SourceReputation, http_get
from ._errors import (
    FetchError,
    InconsistentManifestError,
    ManifestError,
    OutputExistsError,
    ShardcastError,
    ShardVerificationError,
    UnknownSchemaVersionError,
    UnsafePathError,
    UpstreamError,
)
from ._manifest import MANIFEST_SCHEMA, DeltaInfo, FileDigest, FileEntry, Manifest, ShardEntry
from ._origin import DEFAULT_SHARD_SIZE, IpfsLike, Origin, build_shards
from ._relay import Relay
from ._server import LIMITS as SERVER_LIMITS
from ._server import ShardServer
from ._store import ShardStore
from ._wire import API_PREFIX, VERSIONS_SCHEMA
from ._zstd import available as zstd_available
from ._zstd import compress as zstd_compress
from ._zstd import version as zstd_version

__all__ = [
    "API_PREFIX",
    "ARENA_ALIGN",
    "DEFAULT_SHARD_SIZE",
    "DELTA_MAGIC",
    "DELTA_SCHEMA",
    "MANIFEST_SCHEMA",
    "SERVER_LIMITS",
    "VERSIONS_SCHEMA",
    "Arena",
    "Client",
    "DeltaError",
    "DeltaHeader",
    "DeltaInfo",
    "DeltaStats",
    "FetchError",
    "FetchResult",
    "FileDigest",
    "FileEntry",
    "InconsistentManifestError",
    "IpfsLike",
    "Manifest",
    "ManifestError",
    "Origin",
    "OutputExistsError",
    "Relay",
    "ShardEntry",
    "ShardServer",
    "ShardStore",
    "ShardVerificationError",
    "ShardcastError",
    "SourcePool",
    "SourceReputation",
    "Staging",
    "UnknownDeltaVersionError",
    "UnknownSchemaVersionError",
    "UnsafePathError",
    "UpstreamError",
    "build_shards",
    "decode_to_memory",
    "encode_delta",
    "http_get",
    "zstd_available",
    "zstd_compress",
    "zstd_version",
]
