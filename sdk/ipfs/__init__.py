"""IPFS for intellect: one interface (`IpfsClient`), two backends, CIDs identical to Kubo's.

    from intellect.sdk.ipfs import open_ipfs, compute_cid
    ipfs = open_ipfs("embedded:/var/lib/intellect/ipfs")   # or "kubo:http://127.0.0.1:5001"
    cid = ipfs.add(b"...")                                 # CIDv1 base32, = ipfs add --cid-version 1 --raw-leaves
    data = ipfs.cat(cid, max_size=10 << 20)                # every block hash-checked

- `EmbeddedIpfs(data_dir, peers=[...])`: a block store in a directory; blocks missing locally come
  from peer gateways (`IpfsGateway` of other agents), each verified before it is stored.
- `IpfsGateway(store, host, port)`: `GET|HEAD /ipfs/<cid>` (file bytes, or `?format=raw` for a block).
- `KuboIpfs(api_url)`: a real node's RPC API (`/api/v0/add`, `/cat`, `/block/get`, `/pin/add`).
- `IpfsDaemon`: the js-ipfs node of `tools/ipfs` (tests and local demos); `Cid`, the dag-pb/UnixFS codec
  (`encode_node`, `decode_node`, `read_dag`, `DagBuilder`, `chunks_of`) for whoever reads blocks themselves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from .._errors import (
    CidMismatchError,
    ContentNotFoundError,
    ContentTooLargeError,
    InvalidCidError,
    IpfsError,
)
from ._cid import DAG_PB, RAW, Cid
from ._daemon import IpfsDaemon
from ._embedded import DEFAULT_MAX_SIZE, EmbeddedIpfs
from ._gateway import LIMITS as GATEWAY_LIMITS
from ._gateway import IpfsGateway
from ._kubo import KuboIpfs
from ._unixfs import (
    CHUNK_SIZE,
    MAX_LINKS,
    DagBuilder,
    Link,
    UnixfsNode,
    chunks_of,
    compute_cid,
    decode_node,
    encode_node,
    read_dag,
)

__all__ = [
    "CHUNK_SIZE",
    "DAG_PB",
    "DEFAULT_MAX_SIZE",
    "GATEWAY_LIMITS",
    "MAX_LINKS",
    "RAW",
    "Cid",
    "CidMismatchError",
    "ContentNotFoundError",
    "ContentTooLargeError",
    "DagBuilder",
    "EmbeddedIpfs",
    "InvalidCidError",
    "IpfsClient",
    "IpfsDaemon",
    "IpfsError",
    "IpfsGateway",
    "KuboIpfs",
    "Link",
    "UnixfsNode",
    "chunks_of",
    "compute_cid",
    "decode_node",
    "encode_node",
    "open_ipfs",
    "read_dag",
]


@runtime_checkable
class IpfsClient(Protocol):
    """What every backend offers. CIDs are CIDv1 base32 strings."""

    def add(self, data: bytes, *, pin: bool = True) -> str: ...

    def cat(self, cid: str, *, max_size: int = DEFAULT_MAX_SIZE) -> bytes: ...

    def add_file(self, path: Path) -> str: ...

    def has(self, cid: str) -> bool: ...

    def pin(self, cid: str) -> None: ...


def open_ipfs(spec: str, *, peers: list[str] | None = None) -> IpfsClient:
    """Open a backend from a config string.

    `embedded:/path` (or a bare path) → EmbeddedIpfs; `kubo:http://host:5001` or `http(s)://...`
    → KuboIpfs (the node's RPC API, not its gateway). `peers` apply to the embedded store.
    """
    if spec.startswith("embedded:"):
        return EmbeddedIpfs(Path(spec[len("embedded:") :]), peers=peers)
    if spec.startswith("kubo:"):
        return KuboIpfs(spec[len("kubo:") :])
    if spec.startswith(("http://", "https://")):
        return KuboIpfs(spec)
    if spec and "://" not in spec and not spec.startswith(("kubo", "ipfs:")):
        return EmbeddedIpfs(Path(spec), peers=peers)
    raise IpfsError(
        f"cannot open IPFS {spec!r}: use 'embedded:/path/to/store' or 'kubo:http://127.0.0.1:5001'"
    )
