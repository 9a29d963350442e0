"""A read-only HTTP gateway over an `EmbeddedIpfs` store: `GET|HEAD /ipfs/<cid>`.

- `GET /ipfs/<cid>` streams the file bytes (UnixFS DAG walked and verified block by block);
- `GET /ipfs/<cid>?format=raw` (or `Accept: application/vnd.ipld.raw`) returns the single block,
  as the IPFS trustless-gateway spec does, which is what `EmbeddedIpfs(peers=[...])` fetches.

Only the local store is served (a gateway never fetches from its own peers: no amplification).
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from .._errors import ContentNotFoundError, IpfsError
from ._cid import RAW, Cid
from ._embedded import DEFAULT_MAX_SIZE, EmbeddedIpfs
from ._unixfs import decode_node, read_dag

__all__ = ["IpfsGateway"]

log = logging.getLogger(__name__)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        log.debug("gateway %s: " + format, self.client_address[0], *args)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    def _error(self, code: int, msg: str) -> None:
        body = (msg + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _serve(self, *, head: bool) -> None:
        store = self.server.store
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
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.ipld.raw")
            self.send_header("Content-Length", str(len(root)))
            self._common_headers(cid)
            self.end_headers()
            if not head:
                self.wfile.write(root)
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
        self._common_headers(cid)
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

    def _common_headers(self, cid: Cid) -> None:
        self.send_header("Etag", f'"{cid}"')
        self.send_header("X-Ipfs-Path", f"/ipfs/{cid}")
        self.send_header("Cache-Control", "public, max-age=29030400, immutable")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], store: EmbeddedIpfs) -> None:
        super().__init__(addr, _Handler)
        self.store = store


class IpfsGateway:
    """Serve an `EmbeddedIpfs` over HTTP. `port=0` picks a free port; `.url` is the base URL.

    Usable as a context manager: `with IpfsGateway(store) as gw: ... gw.url ...`.
    """

    def __init__(self, store: EmbeddedIpfs, host: str = "127.0.0.1", port: int = 0) -> None:
        self.store = store
        self.host = host
        self.port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise IpfsError("gateway is not started; call start() first")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> IpfsGateway:
        if self._server is not None:
            return self
        self._server = _Server((self.host, self.port), self.store)
        self._thread = threading.Thread(target=self._server.serve_forever, name="ipfs-gateway", daemon=True)
        self._thread.start()
        log.info("IPFS gateway for %s at %s", self.store.data_dir, self.url)
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def serve_forever(self) -> None:
        """Block serving (for a CLI); Ctrl-C stops."""
        self.start()
        assert self._thread is not None
        try:
            while self._thread.is_alive():
                self._thread.join(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def __enter__(self) -> IpfsGateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
