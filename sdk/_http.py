"""The one threaded HTTP server of the namespace, and the reply helpers its handlers share.

    HttpServer     a stdlib `ThreadingHTTPServer` bound on construction and run from a background
                   thread: `url`, `start()`/`stop()` (both idempotent), `serve_forever()` (blocks
                   until Ctrl-C), a context manager
    JsonHandler    a `BaseHTTPRequestHandler` speaking HTTP/1.1 with `reply(status, body, type)` and
                   `reply_json(status, value)`; it logs requests at debug level, never to stderr

The IPFS gateway, Shardcast's origins and relays, the dashboard, every agent's status server, the
test kit's servers and the tests' own servers are this class with their own handler. A handler
reaches the object that serves it as `self.server.owner` (the `HttpServer` itself, or the `owner=`
given). A thread per connection; nothing here runs per request beyond `http.server` itself, so
Shardcast's `sendfile` path costs what it cost on the bare stdlib server.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self

__all__ = ["HttpServer", "JsonHandler"]

log = logging.getLogger(__name__)


class _ThreadingServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: Any,
                 backlog: int) -> None:
        self.owner = owner
        self.request_queue_size = backlog  # read by listen() inside super().__init__
        super().__init__(addr, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):  # a client hanging up is not an error here
            log.debug("connection from %s ended abruptly: %s", client_address, exc)
        else:
            log.warning("error serving %s", client_address, exc_info=True)


class HttpServer:
    """A threaded HTTP server on (host, port); `port=0` picks a free port, `.url` is the base URL.

    `backlog`: the listen queue (many clients connecting at once need more than the stdlib's 5, or
    they stall in SYN retries); `poll_interval`: how often the serving loop looks for `stop()`.
    """

    def __init__(self, handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1", port: int = 0, *,
                 owner: Any = None, name: str = "http", backlog: int = 128, poll_interval: float = 0.5) -> None:
        self.name = name
        self._poll_interval = poll_interval
        self._httpd = _ThreadingServer((host, port), handler, self if owner is None else owner, backlog)
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Self:
        """Serve from a daemon thread (once; a second call does nothing)."""
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._httpd.serve_forever,
                                            kwargs={"poll_interval": self._poll_interval}, name=self.name,
                                            daemon=True)
            self._thread.start()
            log.info("%s serving at %s", self.name, self.url)
        return self

    def stop(self) -> None:
        """Stop serving, close the socket and join the thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:  # shutdown() waits for a serving loop: only when one runs
            self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def serve_forever(self) -> None:
        """Block serving (for a CLI) until Ctrl-C, then stop."""
        self.start()
        assert self._thread is not None
        try:
            while self._thread.is_alive():
                self._thread.join(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler with the reply helpers every server here uses."""

    protocol_version = "HTTP/1.1"
    #: headers sent with every `reply` (the dashboard's `Cache-Control: no-store`)
    default_headers: ClassVar[tuple[tuple[str, str], ...]] = ()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s: " + format, getattr(self.server, "owner", None).__class__.__name__,
                  self.client_address[0], *args)

    def reply(self, status: int, body: bytes, content_type: str = "application/octet-stream",
              headers: Mapping[str, str] | None = None) -> None:
        """Answer with `body` (no body on HEAD; the Content-Length still says its size)."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in self.default_headers:
            self.send_header(k, v)
        if headers:
            for k, v in headers.items():
                self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def reply_json(self, status: int, value: Any, headers: Mapping[str, str] | None = None) -> None:
        """Answer with `value` as JSON (what JSON cannot say is written with `str`)."""
        self.reply(status, json.dumps(value, default=str).encode(), "application/json", headers)
