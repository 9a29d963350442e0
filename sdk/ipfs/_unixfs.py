"""UnixFS files as IPFS stores them: 256 KiB raw leaves under a balanced dag-pb tree.

This reproduces `ipfs add --cid-version 1 --raw-leaves` (Kubo's defaults otherwise: chunker
`size-262144`, balanced layout, at most 174 links per node, sha2-256):

- a file of at most one chunk is the raw leaf itself: CID = CIDv1(raw, sha256(bytes));
- otherwise leaves are grouped 174 to a node, those nodes 174 to a node, and so on until one
  root remains (a partial last group still gets its own node, so every leaf has the same depth).

dag-pb node encoding (protobuf, canonical order as go-codec-dagpb writes it): every link first
(field 2: Hash = binary CID, Name = "" always written, Tsize = cumulative size of the child's
blocks), then Data (field 1) = UnixFS protobuf {Type=File(2), filesize, blocksizes...} with the
repeated field unpacked (proto2). No protobuf dependency: the handful of fields is written here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .._errors import CidMismatchError, ContentTooLargeError, IpfsError
from ._cid import DAG_PB, RAW, Cid, decode_varint, encode_varint

__all__ = [
    "CHUNK_SIZE",
    "MAX_LINKS",
    "DagBuilder",
    "Link",
    "UnixfsNode",
    "compute_cid",
    "decode_node",
    "encode_node",
    "read_dag",
]

CHUNK_SIZE = 262_144  # Kubo's default chunker, size-262144
MAX_LINKS = 174  # Kubo's balanced layout: links per node
_UNIXFS_FILE = 2
_UNIXFS_RAW = 0


@dataclass(frozen=True, slots=True)
class Link:
    """A child of a dag-pb node: its CID, the bytes of its whole subtree, its file bytes."""

    cid: Cid
    tsize: int
    filesize: int


@dataclass(frozen=True, slots=True)
class UnixfsNode:
    """A decoded dag-pb/UnixFS file node."""

    links: list[Cid]
    tsizes: list[int]
    type: int
    data: bytes
    filesize: int | None
    blocksizes: list[int]


def _field(num: int, wire: int) -> bytes:
    return encode_varint((num << 3) | wire)


def _len_field(num: int, payload: bytes) -> bytes:
    return _field(num, 2) + encode_varint(len(payload)) + payload


def encode_node(links: list[Link]) -> bytes:
    """The dag-pb bytes of a UnixFS file node whose children are `links` (raw leaves or nodes)."""
    unixfs = _field(1, 0) + encode_varint(_UNIXFS_FILE)
    unixfs += _field(3, 0) + encode_varint(sum(link.filesize for link in links))
    for link in links:
        unixfs += _field(4, 0) + encode_varint(link.filesize)
    out = bytearray()
    for link in links:
        pblink = _len_field(1, link.cid.to_bytes()) + _len_field(2, b"") + _field(3, 0) + encode_varint(link.tsize)
        out += _len_field(2, pblink)
    out += _len_field(1, unixfs)
    return bytes(out)


def _parse_fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    pos = 0
    while pos < len(buf):
        key, pos = decode_varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            val, pos = decode_varint(buf, pos)
            yield num, wire, val
        elif wire == 2:
            n, pos = decode_varint(buf, pos)
            if pos + n > len(buf):
                raise ValueError("truncated length-delimited field")
            yield num, wire, buf[pos : pos + n]
            pos += n
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def decode_node(block: bytes) -> UnixfsNode:
    """Decode a dag-pb block holding a UnixFS file (or raw) node; IpfsError if it is not one."""
    links: list[Cid] = []
    tsizes: list[int] = []
    unixfs = b""
    try:
        for num, wire, val in _parse_fields(block):
            if num == 2 and wire == 2:
                h, ts = None, 0
                for lnum, lwire, lval in _parse_fields(bytes(val)):  # type: ignore[arg-type]
                    if lnum == 1 and lwire == 2:
                        h = Cid.from_bytes(bytes(lval))  # type: ignore[arg-type]
                    elif lnum == 3 and lwire == 0:
                        ts = int(lval)  # type: ignore[arg-type]
                if h is None:
                    raise ValueError("link without a hash")
                links.append(h)
                tsizes.append(ts)
            elif num == 1 and wire == 2:
                unixfs = bytes(val)  # type: ignore[arg-type]
        ftype, data, filesize, blocksizes = None, b"", None, []
        for num, wire, val in _parse_fields(unixfs):
            if num == 1 and wire == 0:
                ftype = int(val)  # type: ignore[arg-type]
            elif num == 2 and wire == 2:
                data = bytes(val)  # type: ignore[arg-type]
            elif num == 3 and wire == 0:
                filesize = int(val)  # type: ignore[arg-type]
            elif num == 4 and wire == 0:
                blocksizes.append(int(val))  # type: ignore[arg-type]
            elif num == 4 and wire == 2:  # tolerate a packed encoding
                p = 0
                raw = bytes(val)  # type: ignore[arg-type]
                while p < len(raw):
                    v, p = decode_varint(raw, p)
                    blocksizes.append(v)
    except ValueError as exc:
        raise IpfsError(f"malformed dag-pb block: {exc}") from None
    if ftype not in (_UNIXFS_FILE, _UNIXFS_RAW):
        raise IpfsError(f"dag-pb node is UnixFS type {ftype}, not a file (directories are not supported)")
    if len(blocksizes) not in (0, len(links)):
        raise IpfsError("malformed UnixFS node: blocksizes do not match links")
    return UnixfsNode(links, tsizes, ftype, data, filesize, blocksizes)


class DagBuilder:
    """Streaming balanced-DAG builder. Feed leaves in order with `add_chunk`; `finish()` gives the root.

    `put(cid, block)` is called for every block (leaves and nodes) as soon as it exists, so a
    file of any size is stored with memory bounded by one chunk plus one node per tree level.
    """

    def __init__(self, put: Callable[[Cid, bytes], None] | None = None) -> None:
        self._put = put or (lambda _cid, _block: None)
        self._levels: list[list[Link]] = [[]]
        self._chunks = 0

    def add_chunk(self, chunk: bytes) -> None:
        cid = Cid.of(chunk, RAW)
        self._put(cid, chunk)
        self._chunks += 1
        self._push(0, Link(cid, len(chunk), len(chunk)))

    def _push(self, level: int, link: Link) -> None:
        while len(self._levels) <= level:
            self._levels.append([])
        self._levels[level].append(link)
        if len(self._levels[level]) == MAX_LINKS:
            node = self._make_node(self._levels[level])
            self._levels[level] = []
            self._push(level + 1, node)

    def _make_node(self, links: list[Link]) -> Link:
        block = encode_node(links)
        cid = Cid.of(block, DAG_PB)
        self._put(cid, block)
        return Link(cid, len(block) + sum(link.tsize for link in links), sum(link.filesize for link in links))

    def finish(self) -> Link:
        """Close the tree; returns the root (a raw leaf for files of at most one chunk)."""
        if self._chunks == 0:
            self.add_chunk(b"")
        level = 0
        while level < len(self._levels):
            entries = self._levels[level]
            higher = any(self._levels[j] for j in range(level + 1, len(self._levels)))
            if len(entries) == 1 and not higher:
                return entries[0]
            if entries:
                node = self._make_node(entries)
                self._levels[level] = []
                self._push(level + 1, node)
            level += 1
        raise AssertionError("unreachable: a DAG always has a root")  # pragma: no cover


def chunks_of(data: bytes | memoryview) -> Iterator[bytes]:
    view = memoryview(data)
    for off in range(0, len(view), CHUNK_SIZE):
        yield bytes(view[off : off + CHUNK_SIZE])


def compute_cid(data: bytes | memoryview) -> str:
    """The CID `ipfs add --cid-version 1 --raw-leaves` gives `data` (CIDv1 base32)."""
    if len(data) <= CHUNK_SIZE:
        return str(Cid.of(data, RAW))
    builder = DagBuilder()
    for chunk in chunks_of(data):
        builder.add_chunk(chunk)
    return str(builder.finish().cid)


def read_dag(
    root: str | Cid,
    get_block: Callable[[Cid], bytes],
    *,
    max_size: int,
    source: str = "",
) -> Iterator[bytes]:
    """Yield the file bytes under `root`, verifying every block against its CID before use.

    `get_block` returns a block's bytes (from disk, a peer, a daemon); a block whose hash is
    not its CID raises CidMismatchError; more than `max_size` file bytes raises
    ContentTooLargeError before they are yielded (the root's declared size is checked first).
    """
    root_cid = Cid.parse(root)
    total = 0
    # A DAG can link one empty node many times over (a few KB walking forever without yielding a
    # byte): blocks visited are capped like bytes are (honest DAGs have 256 KiB leaves).
    blocks, max_blocks = 0, 64 + max_size // 1024

    def fetch(cid: Cid) -> bytes:
        block = get_block(cid)
        if not cid.matches(block):
            raise CidMismatchError(str(cid), str(Cid.of(block, cid.codec)), source)
        return block

    def walk(cid: Cid, depth: int) -> Iterator[bytes]:
        nonlocal total, blocks
        if depth > 64:
            raise IpfsError(f"{root_cid}: DAG deeper than 64 levels, refused")
        blocks += 1
        if blocks > max_blocks:
            raise IpfsError(f"{root_cid}: DAG of more than {max_blocks} blocks for at most {max_size} bytes, refused")
        block = fetch(cid)
        if cid.codec == RAW:
            total += len(block)
            if total > max_size:
                raise ContentTooLargeError(str(root_cid), max_size)
            yield block
            return
        try:
            node = decode_node(block)
        except IpfsError as exc:
            where = f" from {source}" if source else ""
            raise IpfsError(f"{cid} (in {root_cid}){where}: {exc}") from exc
        if depth == 0 and node.filesize is not None and node.filesize > max_size:
            raise ContentTooLargeError(str(root_cid), max_size, node.filesize)
        if node.data:
            total += len(node.data)
            if total > max_size:
                raise ContentTooLargeError(str(root_cid), max_size)
            yield node.data
        for child in node.links:
            yield from walk(child, depth + 1)

    yield from walk(root_cid, 0)
