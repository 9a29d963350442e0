"""HTTP/1.1 server for a `ShardStore`: keep-alive, range requests, `sendfile`, long-polls.

Routes (all under `/shardcast/v1`)::

    GET /health                                     {"schema", "role", "versions", "bytes_served"}, and for a relay
                                                    with a RAM arena "unpersisted_bytes",
                                                    "ram_free_bytes"
    GET /versions?after=<id>&wait=<s>               versions document; long-polls while the
                                                    latest version is still `after`
    GET /versions/<id>/manifest?wait=<s>            canonical manifest bytes
    GET /versions/<id>/shards/<i>?wait=<s>          shard bytes (Range supported); waits up to
                                                    `wait` s for a shard still on its way; indices
                                                    past the checkpoint's are its delta's

The SDK's `HttpServer` (an I/O thread holds idle connections; a bounded pool answers requests):
the work is `sendfile` in the kernel and blocking waits (long-polls), both of which release the GIL.
`LIMITS`: more workers and connections than an agent's server (long-polls hold a worker each;
clients open 4 keep-alive connections per source), GET only (no body).
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .._http import HttpServer, JsonHandler, ServerLimits
from ._store import ShardStore
from ._wire import API_PREFIX, VERSIONS_SCHEMA

__all__ = ["API_PREFIX", "LIMITS", "VERSIONS_SCHEMA", "ShardServer"]

log = logging.getLogger(__name__)

MAX_WAIT_S = 60.0
_SHARD = re.compile(r"^/versions/([0-9a-f]{64})/shards/(\d{1,9})$")
_MANIFEST = re.compile(r"^/versions/([0-9a-f]{64})/manifest$")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
LIMITS = ServerLimits(max_connections=512, max_per_address=64, workers=256, max_busy_per_address=32,
                      idle_timeout=30.0, max_body=64 * 1024)
"""A Shardcast server's bounds (`sdk/_http.py`): idle keep-alive connections are closed after 30 s."""


class _Handler(JsonHandler):
    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    # -- helpers ---------------------------------------------------------------------------------

    def _error(self, status: int, message: str, *, retry_after: float | None = None) -> None:
        self.reply_json(status, {"error": message},
                        None if retry_after is None else {"Retry-After": str(max(1, round(retry_after)))})

    def _wait_param(self, q: dict[str, list[str]]) -> float:
        try:
            return min(self.owner.max_wait, max(0.0, float(q.get("wait", ["0"])[0])))
        except ValueError:
            return 0.0

    @property
    def owner(self) -> ShardServer:
        return self.server.owner  # type: ignore[attr-defined, no-any-return]

    # -- routes ----------------------------------------------------------------------------------

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        try:
            self._route()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True
        except Exception:  # a bad request must never take the server down
            log.exception("error serving %s", self.path)
            self.close_connection = True

    def _route(self) -> None:
        url = urlsplit(self.path)
        if not url.path.startswith(API_PREFIX):
            return self._error(HTTPStatus.NOT_FOUND, f"unknown path {url.path!r}")
        path = url.path[len(API_PREFIX) :]
        q = parse_qs(url.query)
        store = self.owner.store
        if path == "/health":
            doc: dict[str, Any] = {"schema": VERSIONS_SCHEMA, "role": self.owner.role,
                                   "versions": len(store.versions()), "bytes_served": self.owner.bytes_served}
            if store.arena is not None:  # a relay with a RAM arena: what it still owes the disk
                doc["unpersisted_bytes"] = sum(slot.size for _, _, slot in store.unpersisted())
                doc["ram_free_bytes"] = store.arena.free_bytes()
            return self.reply_json(200, doc)
        if path == "/versions":
            after = q.get("after", [None])[0] or None
            states = store.wait_for_change(after, self._wait_param(q))
            return self.reply_json(200, {
                "schema": VERSIONS_SCHEMA,
                "versions": [{"id": s.manifest.id, "step": s.manifest.step, "model_name": s.manifest.model_name,
                              "complete": s.complete} for s in states],
            })
        if m := _MANIFEST.match(path):
            st = store.wait_for_version(m.group(1), self._wait_param(q))
            if st is None:
                return self._error(HTTPStatus.NOT_FOUND, f"unknown version {m.group(1)}")
            return self.reply(200, st.manifest.to_bytes(), "application/json")
        if m := _SHARD.match(path):
            return self._shard(m.group(1), int(m.group(2)), self._wait_param(q))
        return self._error(HTTPStatus.NOT_FOUND, f"unknown path {url.path!r}")

    def _shard(self, vid: str, index: int, wait: float) -> None:
        store = self.owner.store
        t0 = time.monotonic()
        st = store.wait_for_version(vid, wait)
        if st is None:
            return self._error(HTTPStatus.NOT_FOUND, f"unknown version {vid}")
        if index >= st.manifest.shard_count:  # the checkpoint's shards, then its delta's
            return self._error(HTTPStatus.NOT_FOUND, f"version {vid} has {st.manifest.shard_count} shards")
        shard = st.manifest.shard(index)
        path = store.wait_for_shard(vid, index, max(0.0, wait - (time.monotonic() - t0)))
        if path is None:
            return self._error(HTTPStatus.SERVICE_UNAVAILABLE, f"shard {index} of {vid} not here yet",
                               retry_after=1)
        slot = st.ram.get(index)
        arena = store.arena
        if slot is not None and arena is not None and arena.pin(slot):
            try:  # held in the relay's RAM arena: sendfile from the shared-memory pages
                self._send_shard(shard.size, shard.sha256, arena.file, slot.offset)
            finally:
                arena.unpin(slot)
            return None
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed below; sendfile needs the raw file
        except FileNotFoundError:  # pruned between the wait and the open
            return self._error(HTTPStatus.NOT_FOUND, f"version {vid} was dropped")
        with f:
            self._send_shard(shard.size, shard.sha256, f, 0)
        return None

    def _send_shard(self, size: int, sha256: str, f: Any, base: int) -> None:
        """Answer with bytes [0, size) of a shard stored at `base` in `f` (honouring Range)."""
        start, end = 0, size
        status = 200
        rng = self.headers.get("Range")
        if rng:
            m = _RANGE.match(rng.strip())
            if not m or (not m.group(1) and not m.group(2)):
                return self._error(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE, f"bad range {rng!r}")
            if m.group(1):
                start = int(m.group(1))
                end = min(size, int(m.group(2)) + 1) if m.group(2) else size
            else:  # suffix range: the last N bytes
                start = max(0, size - int(m.group(2)))
            if start >= end:
                self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            status = 206
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("X-Shard-Sha256", sha256)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        if self.command == "HEAD":
            return None
        owner = self.owner
        owner.activity(+1)
        try:
            self._send_range(f, base + start, end - start)
            owner.served(end - start)
        finally:
            owner.activity(-1)
        return None

    def _send_range(self, f: Any, offset: int, count: int) -> None:
        rate = self.owner.max_rate
        if not rate:
            self.connection.sendfile(f, offset, count)
            return
        # Bandwidth cap (per response): send in slices and sleep to keep to `rate` bytes/s.
        t0 = time.monotonic()
        sent = 0
        piece = max(16384, rate // 20)
        while sent < count:
            n = min(piece, count - sent)
            self.connection.sendfile(f, offset + sent, n)
            sent += n
            ahead = sent / rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)


class ShardServer(HttpServer):
    """Serves a `ShardStore` on (host, port) from a background thread."""

    def __init__(self, store: ShardStore, *, host: str = "127.0.0.1", port: int = 0, role: str = "relay",
                 max_rate: int | None = None, limits: ServerLimits | None = None,
                 max_wait: float = MAX_WAIT_S) -> None:
        """`max_wait`: the longest long poll (`?wait=`) a request may ask, seconds."""
        self.store = store
        self.max_wait = max_wait
        self.role = role
        self.max_rate = max_rate
        self._active = 0  # shard responses being sent
        self.bytes_served = 0  # shard bytes sent (checkpoint and delta shards), for /health and tests
        self._idle_since = time.monotonic()
        self._activity_lock = threading.Lock()
        # many clients connect at once: the default backlog (4096) spares them SYN-retry stalls
        super().__init__(_Handler, host, port, name=f"shardcast-{role}-http", poll_interval=0.2,
                         limits=limits or LIMITS)

    def activity(self, delta: int) -> None:
        """Count a shard response in (+1) or out (-1): `idle_for` measures from the last one out."""
        with self._activity_lock:
            self._active += delta
            self._idle_since = time.monotonic()

    def served(self, n: int) -> None:
        with self._activity_lock:
            self.bytes_served += n

    def idle_for(self) -> float:
        """Seconds since the last shard response ended; 0.0 while one is being sent."""
        with self._activity_lock:
            return 0.0 if self._active else time.monotonic() - self._idle_since
