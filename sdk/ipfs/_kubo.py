"""The Kubo backend: a real IPFS node's HTTP RPC API (`/api/v0/...`), spoken directly.

`add` asks for the same DAG the embedded store builds (`cid-version=1`, `raw-leaves=true`,
`chunker=size-262144`) and refuses an answer whose CID differs from the one computed here, so
both backends always name the same bytes the same way. `cat` never trusts the daemon: the bytes
are re-hashed into a CID; when that differs (a DAG built with other parameters, or a lying
node) the DAG is walked block by block through `/block/get`, checking every block's hash.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

from .._errors import ContentNotFoundError, ContentTooLargeError, IpfsError
from ._cid import Cid
from ._embedded import DEFAULT_MAX_SIZE, read_verified_block
from ._unixfs import CHUNK_SIZE, DagBuilder, compute_cid, read_dag

__all__ = ["KuboIpfs"]

log = logging.getLogger(__name__)

_ADD_PARAMS = {"cid-version": "1", "raw-leaves": "true", "cid-base": "base32",
               "chunker": f"size-{CHUNK_SIZE}", "progress": "false"}


class KuboIpfs:
    """Client of a Kubo-compatible RPC API (Kubo, or js-ipfs in the tests), e.g. http://127.0.0.1:5001."""

    def __init__(self, api_url: str, *, timeout: float = 60.0) -> None:
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout
        self._session = requests.Session()

    def __repr__(self) -> str:
        return f"KuboIpfs({self.api_url!r})"

    def _post(self, cmd: str, params: dict[str, Any], **kw: Any) -> requests.Response:
        url = f"{self.api_url}/api/v0/{cmd}"
        try:
            resp = self._session.post(url, params=params, timeout=kw.pop("timeout", self.timeout), **kw)
        except requests.ConnectionError as exc:
            raise IpfsError(
                f"IPFS RPC API at {self.api_url} is unreachable ({exc.__class__.__name__}); "
                "is the daemon running and is --ipfs the API address (port 5001 by default)?"
            ) from None
        except requests.Timeout:
            raise IpfsError(f"IPFS RPC {cmd} timed out after {self.timeout} s at {self.api_url}") from None
        if resp.status_code != 200:
            try:
                body = resp.content[:64 * 1024]
            except requests.RequestException:
                body = b""
            resp.close()
            msg = _json_object(body).get("Message")
            if not isinstance(msg, str):
                msg = body.decode("utf-8", "replace")
            raise IpfsError(f"IPFS RPC {cmd} failed (HTTP {resp.status_code}): {msg.strip()[:300]}")
        return resp

    def version(self) -> str:
        return str(_json_object(self._read(self._post("version", {}), "version")).get("Version", ""))

    def _read(self, resp: requests.Response, cmd: str) -> bytes:
        try:
            return resp.content
        except requests.RequestException as exc:  # the daemon cut the answer short
            raise IpfsError(f"IPFS RPC {cmd} at {self.api_url}: answer cut short ({exc.__class__.__name__})") from None

    def _last_hash(self, resp: requests.Response) -> str:
        """The CID in the last `{"Hash": ...}` line of an `add` answer (one JSON object per line)."""
        text = self._read(resp, "add").decode("utf-8", "replace")
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
        resp = self._post("add", params, files={"file": ("blob", data, "application/octet-stream")})
        return self._check_added(self._last_hash(resp), expected)

    def add_file(self, path: Path | str, *, pin: bool = True) -> str:
        """Stream a file to the node (chunked multipart: memory bounded), CID checked locally as it goes."""
        path = Path(path)
        builder = DagBuilder()
        boundary = secrets.token_hex(16)

        def body() -> Iterator[bytes]:
            yield (
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{path.name}\"\r\n"
                "Content-Type: application/octet-stream\r\n\r\n"
            ).encode()
            with open(path, "rb") as fh:
                while chunk := fh.read(CHUNK_SIZE):
                    builder.add_chunk(chunk)
                    yield chunk
            yield f"\r\n--{boundary}--\r\n".encode()

        params = {**_ADD_PARAMS, "pin": str(pin).lower()}
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
        resp = self._post("add", params, data=body(), headers=headers)
        got = self._last_hash(resp)
        return self._check_added(got, str(builder.finish().cid))

    def get_block(self, cid: str | Cid) -> bytes:
        """One block through `/block/get`, hash-checked."""
        c = Cid.parse(cid)
        with self._post("block/get", {"arg": str(c)}, stream=True) as resp:
            try:
                return read_verified_block(resp.iter_content(65536), c, self.api_url)
            except requests.RequestException as exc:  # the daemon cut the block short
                raise IpfsError(f"IPFS RPC block/get {c} at {self.api_url}: {exc.__class__.__name__}") from None

    def cat_iter(self, cid: str, *, max_size: int = DEFAULT_MAX_SIZE) -> Iterator[bytes]:
        """Verified bytes, block by block through `/block/get` (streams; for big files)."""
        return read_dag(cid, self.get_block, max_size=max_size, source=self.api_url)

    def cat(self, cid: str, *, max_size: int = DEFAULT_MAX_SIZE) -> bytes:
        """`/cat` the content (at most `max_size` bytes read), then verify it against `cid`."""
        c = Cid.parse(cid)
        buf = bytearray()
        with self._post("cat", {"arg": str(c), "length": str(max_size + 1)}, stream=True) as resp:
            try:
                for piece in resp.iter_content(1 << 20):
                    buf += piece
                    if len(buf) > max_size:
                        raise ContentTooLargeError(str(c), max_size)
            except requests.RequestException as exc:  # the daemon cut the answer short
                raise IpfsError(f"IPFS RPC cat {c} at {self.api_url}: {exc.__class__.__name__}") from None
        data = bytes(buf)
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


def _json_object(body: bytes) -> dict[str, Any]:
    """`body` as a JSON object, or {} when it is not one (an error page, garbage, deep nesting)."""
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}
