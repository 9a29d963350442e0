"""The Kubo backend: a real IPFS node's HTTP RPC API (`/api/v0/...`), spoken directly.

`add` asks for the same DAG the embedded store builds (`cid-version=1`, `raw-leaves=true`,
`chunker=size-262144`) and refuses an answer whose CID differs from the one computed here, so
both backends always name the same bytes the same way. `cat` never trusts the daemon: the bytes
are re-hashed into a CID; when that differs (a DAG built with other parameters, or a lying
node) the DAG is walked block by block through `/block/get`, checking every block's hash.

Every call goes through the product's HTTP client, `intellect.sdk._fetch.fetch`: `timeout` bounds
connecting and each read or write, and the whole call ends within `timeout` plus its size at
1 MiB/s (an `add_file` of a 10 GB checkpoint may take about three hours; a daemon that drips its
answer cannot hold the caller longer). Uploads are multipart bodies built here; `add_file`
streams the file (chunked, memory bounded).
"""

from __future__ import annotations

import json
import logging
import secrets
import socket
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .._errors import ContentNotFoundError, ContentTooLargeError, IpfsError
from .._fetch import PeerDeadlineError, PeerHttpError, Reply, fetch
from ._cid import Cid
from ._embedded import DEFAULT_MAX_SIZE, MAX_BLOCK_SIZE, read_verified_block
from ._unixfs import CHUNK_SIZE, DagBuilder, compute_cid, read_dag

__all__ = ["KuboIpfs"]

log = logging.getLogger(__name__)

_ADD_PARAMS = {"cid-version": "1", "raw-leaves": "true", "cid-base": "base32",
               "chunker": f"size-{CHUNK_SIZE}", "progress": "false"}
_MIN_RATE = 1 << 20
"""Bytes per second: the slowest transfer a call's total deadline allows for (a local daemon does 100x more)."""
_MAX_ANSWER = 1 << 20
"""Largest answer read from the commands that return a few JSON lines (add, version, pin, block/stat)."""
_MAX_ERROR_TEXT = 64 * 1024


class KuboIpfs:
    """Client of a Kubo-compatible RPC API (Kubo, or js-ipfs in the tests), e.g. http://127.0.0.1:5001."""

    def __init__(self, api_url: str, *, timeout: float = 60.0) -> None:
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"KuboIpfs({self.api_url!r})"

    def _post(self, cmd: str, params: dict[str, Any], *, body: bytes | Iterable[bytes] | None = None,
              headers: dict[str, str] | None = None, timeout: float | None = None, size: int = 0,
              max_bytes: int = _MAX_ANSWER) -> Reply:
        """POST `/api/v0/<cmd>`; the whole answer (at most `max_bytes`), within `timeout` + `size` at _MIN_RATE."""
        url = f"{self.api_url}/api/v0/{cmd}"
        per_op = self.timeout if timeout is None else timeout
        deadline = per_op + size / _MIN_RATE
        try:
            reply = fetch("POST", url, params=params, body=body, headers=headers, deadline=deadline, timeout=per_op,
                          max_bytes=max_bytes)
        except PeerDeadlineError:
            raise IpfsError(f"IPFS RPC {cmd} timed out after {deadline:g} s at {self.api_url}") from None
        except PeerHttpError as exc:
            if isinstance(exc.__cause__, TimeoutError):  # connecting, or one read or write, took over `timeout`
                raise IpfsError(f"IPFS RPC {cmd} timed out after {per_op:g} s at {self.api_url}") from None
            if isinstance(exc.__cause__, ConnectionRefusedError | socket.gaierror):
                raise IpfsError(
                    f"IPFS RPC API at {self.api_url} is unreachable ({exc.__cause__.__class__.__name__}); "
                    "is the daemon running and is --ipfs the API address (port 5001 by default)?"
                ) from None
            raise IpfsError(f"IPFS RPC {cmd} at {self.api_url}: {exc}") from None  # reset, cut short, too big
        if reply.status != 200:
            text = reply.body[:_MAX_ERROR_TEXT]
            msg = _json_object(text).get("Message")
            if not isinstance(msg, str):
                msg = text.decode("utf-8", "replace")
            raise IpfsError(f"IPFS RPC {cmd} failed (HTTP {reply.status}): {msg.strip()[:300]}")
        return reply

    def version(self) -> str:
        return str(_json_object(self._post("version", {}).body).get("Version", ""))

    def _last_hash(self, reply: Reply) -> str:
        """The CID in the last `{"Hash": ...}` line of an `add` answer (one JSON object per line)."""
        text = reply.body.decode("utf-8", "replace")
        last = ""
        for line in text.splitlines():
            got = _json_object(line.encode()).get("Hash")
            if isinstance(got, str):
                last = got
        if not last:
            raise IpfsError(f"IPFS add at {self.api_url} returned no hash: {text[:200]!r}")
        return last

    def _check_added(self, got: str, expected: str) -> str:
        if Cid.parse(got) != Cid.parse(expected):
            raise IpfsError(
                f"the IPFS node stored the content as {got}, expected {expected}: the node ignored "
                "cid-version=1/raw-leaves/size-262144 (check its version and config)"
            )
        return expected

    def add(self, data: bytes, *, pin: bool = True) -> str:
        """`ipfs add --cid-version 1 --raw-leaves`; returns the CID (checked against `compute_cid`)."""
        expected = compute_cid(data)
        params = {**_ADD_PARAMS, "pin": str(pin).lower()}
        boundary = secrets.token_hex(16)
        body = b"".join([_part_head(boundary, "blob"), data, _part_tail(boundary)])
        reply = self._post("add", params, body=body, headers=_multipart(boundary), size=len(body))
        return self._check_added(self._last_hash(reply), expected)

    def add_file(self, path: Path | str, *, pin: bool = True) -> str:
        """Stream a file to the node (chunked multipart: memory bounded), CID checked locally as it goes."""
        path = Path(path)
        builder = DagBuilder()
        boundary = secrets.token_hex(16)

        def body() -> Iterator[bytes]:
            yield _part_head(boundary, path.name)
            with open(path, "rb") as fh:
                while chunk := fh.read(CHUNK_SIZE):
                    builder.add_chunk(chunk)
                    yield chunk
            yield _part_tail(boundary)

        params = {**_ADD_PARAMS, "pin": str(pin).lower()}
        reply = self._post("add", params, body=body(), headers=_multipart(boundary), size=path.stat().st_size)
        return self._check_added(self._last_hash(reply), str(builder.finish().cid))

    def get_block(self, cid: str | Cid) -> bytes:
        """One block through `/block/get`, hash-checked."""
        c = Cid.parse(cid)
        # one byte over the block limit is read, so that read_verified_block refuses an oversized block by name
        reply = self._post("block/get", {"arg": str(c)}, size=MAX_BLOCK_SIZE, max_bytes=MAX_BLOCK_SIZE + 1)
        return read_verified_block([reply.body], c, self.api_url)

    def cat_iter(self, cid: str, *, max_size: int = DEFAULT_MAX_SIZE) -> Iterator[bytes]:
        """Verified bytes, block by block through `/block/get` (streams; for big files)."""
        return read_dag(cid, self.get_block, max_size=max_size, source=self.api_url)

    def cat(self, cid: str, *, max_size: int = DEFAULT_MAX_SIZE) -> bytes:
        """`/cat` the content (at most `max_size` bytes read), then verify it against `cid`."""
        c = Cid.parse(cid)
        # asks for max_size + 1 bytes and reads at most that many: one more than max_size means too large
        reply = self._post("cat", {"arg": str(c), "length": str(max_size + 1)}, size=max_size + 1,
                           max_bytes=max_size + 1)
        data = reply.body
        if len(data) > max_size:
            raise ContentTooLargeError(str(c), max_size)
        got = Cid.parse(compute_cid(data))
        if got.digest == c.digest:
            return data
        log.info("%s: re-hashed /cat output is %s; verifying block by block", c, got)
        return b"".join(self.cat_iter(str(c), max_size=max_size))

    def has(self, cid: str) -> bool:
        """True when the node holds the root block locally (asks with offline=true: no network search)."""
        c = Cid.parse(cid)
        try:
            self._post("block/stat", {"arg": str(c), "offline": "true", "timeout": "2s"}, timeout=10)
        except IpfsError as exc:
            if "unreachable" in str(exc):
                raise
            return False
        return True

    def pin(self, cid: str) -> None:
        """`ipfs pin add` (recursive)."""
        c = Cid.parse(cid)
        try:
            self._post("pin/add", {"arg": str(c), "recursive": "true"})
        except IpfsError as exc:
            if "not found" in str(exc).lower():
                raise ContentNotFoundError(f"{c}: the IPFS node cannot find it to pin: {exc}") from None
            raise

    def unpin(self, cid: str) -> None:
        """`ipfs pin rm` (recursive); a CID that is not pinned is no error. The node's own GC frees the blocks."""
        try:
            self._post("pin/rm", {"arg": str(Cid.parse(cid)), "recursive": "true"})
        except IpfsError as exc:
            if "not pinned" not in str(exc).lower():
                raise

    def is_pinned(self, cid: str) -> bool:
        """`ipfs pin ls <cid>`: whether the node holds a pin of it."""
        try:
            self._post("pin/ls", {"arg": str(Cid.parse(cid))})
        except IpfsError as exc:
            if "not pinned" in str(exc).lower():
                return False
            raise
        return True


def _multipart(boundary: str) -> dict[str, str]:
    return {"Content-Type": f"multipart/form-data; boundary={boundary}"}


def _part_head(boundary: str, filename: str) -> bytes:
    """The opening of the one file part of an `add` upload (Kubo reads the field named "file")."""
    return (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()


def _part_tail(boundary: str) -> bytes:
    return f"\r\n--{boundary}--\r\n".encode()


def _json_object(body: bytes) -> dict[str, Any]:
    """`body` as a JSON object, or {} when it is not one (an error page, garbage, deep nesting)."""
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}
