"""The embedded IPFS backend: a content-addressed block store in a directory, with HTTP peers.

Layout under `data_dir` (version marker in `data_dir/VERSION`):

    blocks/<last 2 chars>/<cidv1>   one file per block (raw leaf or dag-pb node), written atomically
    pins/<cidv1>                    an empty file per pinned root

Blocks missing locally are fetched from `peers` (gateway base URLs: other agents' `IpfsGateway`,
or any trustless gateway) one block at a time with `?format=raw`; every block is hashed and
checked against its CID before it is stored or used, so a lying peer is refused, never cached.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from .._errors import CidMismatchError, ContentNotFoundError, IpfsError, SchemaVersionError
from .._fetch import PeerHttpError, fetch
from ._cid import DAG_PB, RAW, Cid
from ._unixfs import CHUNK_SIZE, DagBuilder, chunks_of, decode_node, read_dag

__all__ = ["DEFAULT_MAX_SIZE", "MAX_BLOCK_SIZE", "EmbeddedIpfs"]

log = logging.getLogger(__name__)

DEFAULT_MAX_SIZE = 1 << 30  # 1 GiB: callers fetching checkpoints or big rollout files pass their own
MAX_BLOCK_SIZE = 2 << 20  # bitswap's block limit; anything bigger from a peer is refused unread
STORE_VERSION = "intellect.ipfs-store/v1"


def read_verified_block(pieces: Iterable[bytes], cid: Cid, source: str) -> bytes:
    """One block from `pieces` (refused past MAX_BLOCK_SIZE), hash-checked against `cid`."""
    buf = bytearray()
    for piece in pieces:
        buf += piece
        if len(buf) > MAX_BLOCK_SIZE:
            raise IpfsError(f"block {cid} from {source} is over {MAX_BLOCK_SIZE} bytes: refused")
    block = bytes(buf)
    if not cid.matches(block):
        raise CidMismatchError(str(cid), str(Cid.of(block, cid.codec)), source)
    return block


class EmbeddedIpfs:
    """A local IPFS block store. Same CIDs as `ipfs add --cid-version 1 --raw-leaves`."""

    def __init__(self, data_dir: Path | str, *, peers: list[str] | None = None, timeout: float = 30.0) -> None:
        self.data_dir = Path(data_dir)
        self.peers = [p.rstrip("/") for p in (peers or [])]
        self.timeout = timeout
        self._blocks = self.data_dir / "blocks"
        self._pins = self.data_dir / "pins"
        self._blocks.mkdir(parents=True, exist_ok=True)
        self._pins.mkdir(parents=True, exist_ok=True)
        marker = self.data_dir / "VERSION"
        if marker.exists():
            found = marker.read_text().strip()
            if found != STORE_VERSION:
                raise SchemaVersionError(f"IPFS store {self.data_dir}", found, STORE_VERSION)
        else:
            marker.write_text(STORE_VERSION + "\n")

    def __repr__(self) -> str:
        return f"EmbeddedIpfs({str(self.data_dir)!r}, peers={self.peers!r})"

    # -- blocks -------------------------------------------------------------------------------
    def _block_path(self, cid: Cid) -> Path:
        key = str(cid.to_v1())
        return self._blocks / key[-2:] / key

    def has_block(self, cid: str | Cid) -> bool:
        return self._block_path(Cid.parse(cid)).exists()

    def put_block(self, cid: str | Cid, block: bytes) -> None:
        """Store a block under its CID (checked); no-op when present."""
        cid = Cid.parse(cid)
        if not cid.matches(block):
            raise CidMismatchError(str(cid), str(Cid.of(block, cid.codec)), "put_block")
        path = self._block_path(cid)
        if path.exists():
            return
        path.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(block)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def get_local_block(self, cid: str | Cid) -> bytes:
        """A block from the local store only (what the gateway serves); ContentNotFoundError if absent."""
        c = Cid.parse(cid)
        try:
            return self._block_path(c).read_bytes()
        except FileNotFoundError:
            raise ContentNotFoundError(f"block {c} is not in {self.data_dir}") from None

    def get_block(self, cid: str | Cid) -> bytes:
        """A verified block: local store first, then each peer in order (stored once verified)."""
        c = Cid.parse(cid)
        path = self._block_path(c)
        if path.exists():
            return path.read_bytes()
        mismatch: CidMismatchError | None = None
        for peer in self.peers:
            try:
                block = self._fetch_from_peer(peer, c)
            except CidMismatchError as exc:
                log.warning("peer %s served a wrong block for %s: refused", peer, c)
                mismatch = exc
                continue
            except IpfsError as exc:
                log.debug("peer %s has no %s: %s", peer, c, exc)
                continue
            self.put_block(c, block)
            return block
        if mismatch is not None:
            raise mismatch
        where = f" nor at any of {len(self.peers)} peer(s)" if self.peers else " (no peers configured)"
        raise ContentNotFoundError(f"{c} is not in {self.data_dir}{where}; add it or configure a peer that has it")

    def _fetch_from_peer(self, peer: str, cid: Cid) -> bytes:
        """One block from a peer's gateway: the whole exchange within `timeout` seconds (a total deadline:
        a peer dripping its answer is cut off), at most one byte past MAX_BLOCK_SIZE read."""
        url = f"{peer}/ipfs/{cid}?format=raw"
        try:
            resp = fetch("GET", url, headers={"Accept": "application/vnd.ipld.raw"}, deadline=self.timeout,
                         max_bytes=MAX_BLOCK_SIZE)
        except PeerHttpError as exc:
            raise IpfsError(f"{url}: {exc}") from exc
        if resp.status != 200:
            raise IpfsError(f"{url}: HTTP {resp.status}")
        return read_verified_block([resp.body], cid, peer)

    # -- files --------------------------------------------------------------------------------
    def add(self, data: bytes, *, pin: bool = True) -> str:
        """Store `data` as a UnixFS file; returns its CIDv1 (same as `ipfs add --cid-version 1 --raw-leaves`)."""
        builder = DagBuilder(self.put_block)
        for chunk in chunks_of(data):
            builder.add_chunk(chunk)
        cid = builder.finish().cid
        if pin:
            self._pin_local(cid)
        return str(cid)

    def add_file(self, path: Path | str, *, pin: bool = True) -> str:
        """Like `add`, streaming the file in 256 KiB chunks (memory bounded by one chunk)."""
        builder = DagBuilder(self.put_block)
        with open(path, "rb") as fh:
            while chunk := fh.read(CHUNK_SIZE):
                builder.add_chunk(chunk)
        cid = builder.finish().cid
        if pin:
            self._pin_local(cid)
        return str(cid)

    def cat_iter(self, cid: str, *, max_size: int = DEFAULT_MAX_SIZE) -> Iterator[bytes]:
        """Stream the verified bytes of `cid` (blocks fetched from peers on a local miss)."""
        return read_dag(cid, self.get_block, max_size=max_size, source="embedded store")

    def cat(self, cid: str, *, max_size: int = DEFAULT_MAX_SIZE) -> bytes:
        """The verified bytes of `cid`; CidMismatchError if any block does not match its CID."""
        return b"".join(self.cat_iter(cid, max_size=max_size))

    def get_to(self, cid: str, dest: Path | str, *, max_size: int = DEFAULT_MAX_SIZE) -> int:
        """Write the verified bytes of `cid` to `dest` (atomically); returns the byte count."""
        dest = Path(dest)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".tmp-")
        n = 0
        try:
            with os.fdopen(fd, "wb") as fh:
                for piece in self.cat_iter(cid, max_size=max_size):
                    fh.write(piece)
                    n += len(piece)
            os.replace(tmp, dest)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return n

    def has(self, cid: str) -> bool:
        """True when every block of `cid`'s DAG is in the local store (nothing is fetched)."""
        stack = [Cid.parse(cid)]
        while stack:
            c = stack.pop()
            path = self._block_path(c)
            if not path.exists():
                return False
            if c.codec == DAG_PB:
                stack.extend(decode_node(path.read_bytes()).links)
        return True

    def pin(self, cid: str) -> None:
        """Fetch every missing block of `cid` (from peers) and keep the DAG."""
        c = Cid.parse(cid)
        stack = [c]
        while stack:
            cur = stack.pop()
            block = self.get_block(cur)
            if cur.codec == DAG_PB:
                stack.extend(decode_node(block).links)
            elif cur.codec != RAW:  # pragma: no cover - Cid.parse only admits raw and dag-pb
                raise IpfsError(f"cannot pin codec {cur.codec_name}")
        self._pin_local(c)

    def _pin_local(self, cid: Cid) -> None:
        (self._pins / str(cid.to_v1())).touch()

    def pins(self) -> list[str]:
        return sorted(p.name for p in self._pins.iterdir() if not p.name.startswith("."))

    def unpin(self, cid: str) -> None:
        (self._pins / str(Cid.parse(cid).to_v1())).unlink(missing_ok=True)

    def _pinned_blocks(self) -> set[str]:
        """The CIDs (v1 text) of every block a pin reaches."""
        keep: set[str] = set()
        stack = [Cid.parse(p) for p in self.pins()]
        while stack:
            c = stack.pop()
            key = str(c.to_v1())
            if key in keep:
                continue
            keep.add(key)
            path = self._block_path(c)
            if c.codec == DAG_PB and path.exists():
                stack.extend(decode_node(path.read_bytes()).links)
        return keep

    def drop(self, cid: str) -> int:
        """Delete the blocks of `cid`'s DAG that no pin reaches (after `unpin`: what `gc` would delete of it,
        without walking the whole store); returns how many were removed."""
        keep = self._pinned_blocks()
        removed = 0
        stack = [Cid.parse(cid)]
        while stack:
            c = stack.pop()
            if str(c.to_v1()) in keep:
                continue
            path = self._block_path(c)
            if not path.exists():
                continue
            if c.codec == DAG_PB:
                stack.extend(decode_node(path.read_bytes()).links)
            path.unlink(missing_ok=True)
            removed += 1
        return removed

    def gc(self) -> int:
        """Delete blocks not reachable from a pin; returns how many were removed."""
        keep = self._pinned_blocks()
        removed = 0
        for path in self._blocks.glob("*/*"):
            if not path.name.startswith(".") and path.name not in keep:
                path.unlink(missing_ok=True)
                removed += 1
        return removed
