"""The dashboard's HTTP server (the SDK's `HttpServer`, a thread per connection).

    GET /                     overview: nodes, checkpoints, submissions, challenges, reward curve
    GET /node/<address>       one node's path registered → task → proof → verdict → reward / slash
    GET /api/snapshot         the Snapshot JSON (schema intellect.dashboard.snapshot/v1)
    GET /api/node/<address>   {node, path} of one node
    GET /healthz              "ok"

Snapshots are cached for `ttl` seconds and built under a lock, so many browsers cost one chain
scan; `/api/snapshot` sends the JSON encoded once per snapshot. A failing RPC answers 503 with the reason; the server keeps running.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .._errors import IntellectError
from .._http import HttpServer, JsonHandler
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
        self._encoded: tuple[Snapshot, bytes] | None = None

    def snapshot(self, *, fresh: bool = False) -> Snapshot:
        with self._lock:
            if not fresh and self._cached is not None and time.monotonic() - self._cached[0] < self.ttl:
                return self._cached[1]
            snap = collect(self.protocol, self.index, self.fetcher)
            self._cached = (time.monotonic(), snap)
            return snap

    def snapshot_json(self) -> bytes:
        """The current Snapshot as JSON, encoded once per Snapshot (not once per request)."""
        snap = self.snapshot()
        with self._lock:
            if self._encoded is None or self._encoded[0] is not snap:
                self._encoded = (snap, snap.model_dump_json(by_alias=True).encode())
            return self._encoded[1]


class _Handler(JsonHandler):
    default_headers = (("Cache-Control", "no-store"),)

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = urlsplit(self.path).path.rstrip("/") or "/"
        owner: DashboardServer = self.server.owner  # type: ignore[attr-defined]
        try:
            if path == "/":
                self.reply(200, overview_page(owner.refresh_ms).encode(), "text/html; charset=utf-8")
            elif path == "/healthz":
                self.reply(200, b"ok\n", "text/plain")
            elif path.startswith("/node/"):
                addr = path[len("/node/"):]
                if not _ADDR.match(addr):
                    self.reply(400, f"not a node address: {addr!r}\n".encode(), "text/plain")
                    return
                self.reply(200, node_page(addr, owner.refresh_ms).encode(), "text/html; charset=utf-8")
            elif path == "/api/snapshot":
                self.reply(200, owner.dashboard.snapshot_json(), "application/json")
            elif path.startswith("/api/node/"):
                addr = path[len("/api/node/"):]
                if not _ADDR.match(addr):
                    self.reply_json(400, {"error": f"not a node address: {addr!r}"})
                    return
                snap = owner.dashboard.snapshot()
                node = snap.node(addr)
                if node is None:
                    self.reply_json(404, {"error": f"node {addr} is not registered on chain {snap.chain_id}"})
                    return
                self.reply_json(200, {"node": node.model_dump(), "path": [
                    e.model_dump() for e in snap.paths.get(node.address, [])]})
            else:
                self.reply_json(404, {"error": f"no page {path}"})
        except IntellectError as exc:  # RPC down, a revert in a view: say so, keep serving
            log.warning("dashboard: %s", exc)
            self.reply_json(503, {"error": str(exc)})
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:
            log.exception("dashboard: %s failed", path)
            self.reply_json(500, {"error": f"{type(exc).__name__}: {exc}"})


class DashboardServer(HttpServer):
    """Serves a Dashboard on host:port (port 0 picks a free one); `start()` runs it in a thread."""

    def __init__(self, dashboard: Dashboard, host: str = "127.0.0.1", port: int = 0, *,
                 refresh_ms: int = 3000) -> None:
        self.dashboard = dashboard
        self.refresh_ms = refresh_ms
        super().__init__(_Handler, host, port, name="dashboard-http")
