"""A read-only HTTP gateway over an `EmbeddedIpfs` store: `GET|HEAD /ipfs/<cid>`.

- `GET /ipfs/<cid>` streams the file bytes (UnixFS DAG walked and verified block by block);
- `GET /ipfs/<cid>?format=raw` (or `Accept: application/vnd.ipld.raw`) returns the single block,
  as the IPFS trustless-gateway spec does, which is what `EmbeddedIpfs(peers=[...])` fetches.

Only the local store is served (a gateway never fetches from its own peers: no amplification).
Bounds: `LIMITS` (the SDK's `HttpServer` defaults, GET/HEAD only: no body beyond 1 KiB).
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qs, urlsplit

from .._errors import ContentNotFoundError, IpfsError
from .._http import HttpServer, JsonHandler, ServerLimits
from ._cid import RAW, Cid
from ._embedded import DEFAULT_MAX_SIZE, EmbeddedIpfs
from ._unixfs import decode_node, read_dag

__all__ = ["LIMITS", "IpfsGateway"]

log = logging.getLogger(__name__)

LIMITS = ServerLimits(max_body=1024)


class _Handler(JsonHandler):
    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    def _error(self, code: int, msg: str) -> None:
        self.reply(code, (msg + "\n").encode(), "text/plain; charset=utf-8")

    def _serve(self, *, head: bool) -> None:
        store: EmbeddedIpfs = self.server.owner.store  # type: ignore[attr-defined]
        parts = urlsplit(self.path)
        if not parts.path.startswith("/ipfs/"):
            self._error(404, "only /ipfs/<cid> is served")
            return
        text = parts.path[len("/ipfs/") :].strip("/")
        try:
            cid = Cid.parse(text)
        except IpfsError as exc:
            self._error(400, str(exc))
            return
        fmt = parse_qs(parts.query).get("format", [""])[0]
        raw = fmt == "raw" or "application/vnd.ipld.raw" in self.headers.get("Accept", "")
        try:
            root = store.get_local_block(cid)
        except ContentNotFoundError as exc:
            self._error(404, str(exc))
            return
        if not cid.matches(root):
            log.error("local block %s is corrupt: not served", cid)
            self._error(500, f"local block {cid} is corrupt")
            return
        if raw:
            self.reply(200, root, "application/vnd.ipld.raw", _immutable(cid))
            return
        try:
            size = len(root) if cid.codec == RAW else decode_node(root).filesize
        except IpfsError as exc:
            self._error(422, str(exc))
            return
        if size is None:
            self._error(422, f"{cid} has no file size (not a UnixFS file)")
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size))
        for k, v in _immutable(cid).items():
            self.send_header(k, v)
        self.end_headers()
        if head:
            return
        try:
            for piece in read_dag(cid, store.get_local_block, max_size=max(size, DEFAULT_MAX_SIZE)):
                self.wfile.write(piece)
        except (IpfsError, OSError) as exc:
            # headers are out: the only honest signal left is a short body and a closed connection
            log.warning("gateway: %s cut short: %s", cid, exc)
            self.close_connection = True



def _immutable(cid: Cid) -> dict[str, str]:
    """The headers of a response that names content by its CID (cacheable forever)."""
    return {"Etag": f'"{cid}"', "X-Ipfs-Path": f"/ipfs/{cid}", "Cache-Control": "public, max-age=29030400, immutable"}


class IpfsGateway(HttpServer):
    """Serve an `EmbeddedIpfs` over HTTP. `port=0` picks a free port; `.url` is the base URL.

    Usable as a context manager: `with IpfsGateway(store) as gw: ... gw.url ...`.
    """

    def __init__(self, store: EmbeddedIpfs, host: str = "127.0.0.1", port: int = 0, *,
                 limits: ServerLimits | None = None) -> None:
        self.store = store
        super().__init__(_Handler, host, port, name="ipfs-gateway", limits=limits or LIMITS)
