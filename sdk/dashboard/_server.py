"""The dashboard's HTTP server (stdlib ThreadingHTTPServer, a thread per connection).

    GET /                     overview: nodes, checkpoints, submissions, challenges, reward curve
    GET /node/<address>       one node's path registered → task → proof → verdict → reward / slash
    GET /api/snapshot         the Snapshot JSON (schema intellect.dashboard.snapshot/v1)
    GET /api/node/<address>   {node, path} of one node
    GET /healthz              "ok"

Snapshots are cached for `ttl` seconds and built under a lock, so many browsers cost one chain
scan. A failing RPC answers 503 with the reason; the server keeps running.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .._errors import IntellectError
from ._collect import ChainIndex, StatusFetcher, collect
from ._models import Snapshot
from ._pages import node_page, overview_page

if TYPE_CHECKING:
    from .._client import Protocol

__all__ = ["Dashboard", "DashboardServer"]

log = logging.getLogger(__name__)
_ADDR = re.compile(r"^0x[0-9a-fA-F]{40}$")


class Dashboard:
    """Builds (and caches) Snapshots of one deployment."""

    def __init__(self, protocol: Protocol, *, ttl: float = 2.0, status_timeout: float = 1.5,
                 fetch_status: bool = True) -> None:
        self.protocol = protocol
        self.index = ChainIndex(protocol)
        self.fetcher = StatusFetcher(timeout=status_timeout) if fetch_status else None
        self.ttl = ttl
        self._lock = threading.Lock()
        self._cached: tuple[float, Snapshot] | None = None

    def snapshot(self, *, fresh: bool = False) -> Snapshot:
        with self._lock:
            if not fresh and self._cached is not None and time.monotonic() - self._cached[0] < self.ttl:
                return self._cached[1]
            snap = collect(self.protocol, self.index, self.fetcher)
            self._cached = (time.monotonic(), snap)
            return snap


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        log.debug("dashboard http %s: " + format, self.client_address[0], *args)

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, value: Any) -> None:
        self._send(status, json.dumps(value, default=str).encode(), "application/json")

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = urlsplit(self.path).path.rstrip("/") or "/"
        owner = self.server.owner
        try:
            if path == "/":
                self._send(200, overview_page(owner.refresh_ms).encode(), "text/html; charset=utf-8")
            elif path == "/healthz":
                self._send(200, b"ok\n", "text/plain")
            elif path.startswith("/node/"):
                addr = path[len("/node/"):]
                if not _ADDR.match(addr):
                    self._send(400, f"not a node address: {addr!r}\n".encode(), "text/plain")
                    return
                self._send(200, node_page(addr, owner.refresh_ms).encode(), "text/html; charset=utf-8")
            elif path == "/api/snapshot":
                self._send(200, owner.dashboard.snapshot().model_dump_json(by_alias=True).encode(),
                           "application/json")
            elif path.startswith("/api/node/"):
                addr = path[len("/api/node/"):]
                if not _ADDR.match(addr):
                    self._json(400, {"error": f"not a node address: {addr!r}"})
                    return
                snap = owner.dashboard.snapshot()
                node = snap.node(addr)
                if node is None:
                    self._json(404, {"error": f"node {addr} is not registered on chain {snap.chain_id}"})
                    return
                self._json(200, {"node": node.model_dump(), "path": [
                    e.model_dump() for e in snap.paths.get(node.address, [])]})
            else:
                self._json(404, {"error": f"no page {path}"})
        except IntellectError as exc:  # RPC down, a revert in a view: say so, keep serving
            log.warning("dashboard: %s", exc)
            self._json(503, {"error": str(exc)})
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:
            log.exception("dashboard: %s failed", path)
            self._json(500, {"error": f"{type(exc).__name__}: {exc}"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: DashboardServer


class DashboardServer:
    """Serves a Dashboard on host:port (port 0 picks a free one); `start()` runs it in a thread."""

    def __init__(self, dashboard: Dashboard, host: str = "127.0.0.1", port: int = 0, *,
                 refresh_ms: int = 3000) -> None:
        self.dashboard = dashboard
        self.refresh_ms = refresh_ms
        self._httpd = _Server((host, port), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> DashboardServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="dashboard-http", daemon=True)
        self._thread.start()
        log.info("dashboard at %s", self.url)
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> DashboardServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
