"""Outbound HTTP to strangers with a total deadline: bounded work for every byte a peer sends.

`requests` (and `http.client` under it) only bound each socket read: a peer that drips one byte
every second never trips a 3 s read timeout and holds the caller for as long as it likes (headers
included: a header line may be 64 KB long, a response may have 100 of them). `fetch` bounds the
whole exchange instead: connect, request, status line, headers and body all end by `deadline`
seconds after the call, and the body by `max_bytes`. A watchdog shuts the socket down at the
deadline, which makes whatever read is blocked return at once; the call then raises
`PeerDeadlineError`.

    reply = fetch("GET", url + "/status", deadline=3.0, max_bytes=1 << 20)
    doc = reply.json()

It is the product's one HTTP client (the SDK, the verifier and the agents; web3's HTTPProvider keeps
its own `requests` session, and Shardcast's shard downloader its keep-alive connections): JSON
bodies (`json_body`), raw ones (`body`: bytes, or an iterable of bytes sent chunked, e.g. a
streamed multipart upload to Kubo), query strings (`params`). Callers that move big payloads
give a deadline that grows with the size (`KuboIpfs`: its timeout + the size at 1 MiB/s).

No redirects are followed (a peer's URL is what the registry says it is); http and https only.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

from ._errors import IntellectError

__all__ = ["PeerDeadlineError", "PeerHttpError", "Reply", "SocketCut", "fetch"]

DEFAULT_MAX_BYTES = 1 << 20
"""Largest body `fetch` reads unless told otherwise (a peer document is a few KB)."""
_CHUNK = 1 << 16


class PeerHttpError(IntellectError, OSError):
    """An HTTP exchange with another machine failed: refused, reset, malformed, or over a size cap."""

    def __init__(self, url: str, message: str) -> None:
        super().__init__(f"{url}: {message}")
        self.url = url


class PeerDeadlineError(PeerHttpError, TimeoutError):
    """The peer did not finish its answer within the call's total deadline (however fast it dripped)."""


@dataclass(frozen=True)
class Reply:
    """A complete HTTP answer (status, lower-cased headers, body)."""

    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The body as JSON; `PeerHttpError`-free: raises ValueError (or RecursionError) like `json.loads`."""
        return json.loads(self.body)


class SocketCut:
    """Shuts `conn`'s socket down `seconds` from now: whatever read or write is blocked on it returns at
    once (a total deadline; per-read timeouts never fire on a peer that sends one byte at a time).
    `fired` says whether it did; `cancel()` once the exchange is over."""

    def __init__(self, conn: http.client.HTTPConnection, seconds: float) -> None:
        self.conn = conn
        self.fired = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        sock = self.conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


def fetch(method: str, url: str, *, params: Mapping[str, Any] | None = None, json_body: Any = None,
          body: bytes | Iterable[bytes] | None = None, deadline: float = 10.0, timeout: float | None = None,
          max_bytes: int = DEFAULT_MAX_BYTES, headers: Mapping[str, str] | None = None) -> Reply:
    """One HTTP exchange that ends within `deadline` seconds, whatever the peer does.

    The request body is `json_body` (sent as JSON) or `body` (bytes; an iterable of bytes goes out
    chunked; its Content-Type comes from `headers`), not both.
    `timeout` (default: `deadline`) additionally bounds connecting, each read and each write. A body over
    `max_bytes` raises `PeerHttpError` after reading at most `max_bytes + 1` bytes. Raises
    `PeerDeadlineError` when the deadline passes, `PeerHttpError` on any other failure.
    """
    if deadline <= 0:
        raise ValueError(f"deadline must be > 0, got {deadline}")
    if json_body is not None and body is not None:
        raise ValueError("give json_body or body, not both")
    u = urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise PeerHttpError(url, "only http:// and https:// URLs are fetched")
    path = (u.path or "/") + (f"?{u.query}" if u.query else "")
    if params:
        path += ("&" if u.query else "?") + urlencode({k: v for k, v in params.items() if v is not None})
    send_headers = {"Connection": "close", "Accept-Encoding": "identity", **(headers or {})}
    if json_body is not None:
        body = json.dumps(json_body, default=str).encode()
        send_headers["Content-Type"] = "application/json"
    end = time.monotonic() + deadline
    per_op = min(deadline, timeout) if timeout is not None else deadline
    cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    kwargs: dict[str, Any] = {"context": ssl.create_default_context()} if u.scheme == "https" else {}
    conn = cls(u.hostname, u.port, timeout=per_op, **kwargs)
    cut = SocketCut(conn, deadline)
    try:
        conn.request(method, path, body=body, headers=send_headers)
        resp = conn.getresponse()
        data = bytearray()
        while len(data) <= max_bytes:
            if time.monotonic() > end:
                raise TimeoutError
            piece = resp.read1(min(_CHUNK, max_bytes + 1 - len(data)))  # returns what one recv brought
            if not piece:
                break
            data += piece
        if len(data) > max_bytes:
            raise PeerHttpError(url, f"{method} answer larger than {max_bytes} bytes")
        if cut.fired:  # the cut socket read as the end of the body
            raise TimeoutError
        if resp.length:  # Content-Length promised more than came: cut short
            raise PeerHttpError(url, f"{method} answer cut short: {resp.length} of its bytes missing")
        return Reply(resp.status, bytes(data), {k.lower(): v for k, v in resp.getheaders()})
    except PeerHttpError:
        raise
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if cut.fired or time.monotonic() > end:
            raise PeerDeadlineError(url, f"{method} not answered within its {deadline:g} s deadline") from None
        raise PeerHttpError(url, f"{method} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        cut.cancel()
        conn.close()
