"""The one HTTP server of the namespace, bounded against strangers, and the reply helpers its handlers share.

    HttpServer     a server bound on construction and run from a background thread: `url`,
                   `start()`/`stop()` (both idempotent), `serve_forever()` (blocks until Ctrl-C), a
                   context manager, `stats()` (what it refused and closed)
    ServerLimits   its bounds (deadlines, connection caps, sizes, workers, file descriptors)
    JsonHandler    a `BaseHTTPRequestHandler` speaking HTTP/1.1 with `reply(status, body, type)` and
                   `reply_json(status, value)`; it logs requests at debug level, never to stderr

The IPFS gateway, Shardcast's origins and relays, the dashboard, every agent's status server, the
test kit's servers and the tests' own servers are this class with their own handler. A handler
reaches the object that serves it as `self.server.owner` (the `HttpServer` itself, or the `owner=`
given).

How a connection is served (so that no stranger can hold the server, issue 32):

- one I/O thread owns every connection that is not being answered: it accepts, reads request heads
  and bodies (Content-Length up to `max_body`, all bodies together up to `max_buffered`; chunked
  bodies are refused with 411) into memory without blocking, and closes what misses its deadline
  (head: `head_timeout` from the connection's accept or its next request's first byte; an idle
  keep-alive connection: `idle_timeout`; a body: `body_timeout` + its length at `body_min_rate`);
- a complete request goes to a bounded pool of `workers` threads (at most `max_busy_per_address` of
  them for one address at a time; its further requests wait their turn) that run the handler class
  unchanged (its own `__init__` and `setup`, then `handle_one_request` once): `rfile` holds the
  request's bytes, `wfile` is the socket with a write deadline (`write_timeout` + the write's size at
  `write_min_rate`; the socket keeps `write_timeout` for `sendfile`, which Shardcast calls itself);
  a keep-alive connection then goes back to the I/O thread;
- at most `max_connections` connections are held, `max_per_address` from one address (an IPv6
  address counts by its /64); a connection over the per-address cap is accepted and closed at once
  (the kernel's backlog never fills with them); over the total cap, the connection that has waited
  longest for a request is closed to make room, or, if every one is being answered, the new one;
- below `fd_reserve` free file descriptors (RLIMIT_NOFILE minus /proc/self/fd) a new connection
  takes the place of the one that has waited longest for a request (or is closed at once), so the
  node keeps descriptors for its own files and requests; a spare descriptor held open lets the
  server accept (and so make room or refuse) even when the process has none left.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import io
import ipaddress
import json
import logging
import os
import queue
import resource
import selectors
import socket
import struct
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar, Self
from urllib.parse import urlsplit

__all__ = ["HttpServer", "JsonHandler", "ServerLimits"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerLimits:
    """Bounds of one `HttpServer` (seconds, bytes, bytes per second, counts)."""

    max_connections: int = 256
    """Connections held at once (waiting for a request, or being answered)."""
    max_per_address: int = 32
    """Connections held at once from one source address (an IPv6 /64)."""
    workers: int = 32
    """Threads answering complete requests (each handler call holds one)."""
    max_busy_per_address: int = 8
    """Requests from one source address answered at once; its further complete requests wait their turn."""
    head_timeout: float = 10.0
    """Deadline for a request line and its headers, from the connection's accept or its request's first byte."""
    max_head_bytes: int = 64 * 1024
    """Largest request line + headers (431 beyond)."""
    idle_timeout: float = 5.0
    """An idle keep-alive connection is closed after this."""
    body_timeout: float = 10.0
    """Deadline for a body: this plus its Content-Length at `body_min_rate`."""
    body_min_rate: int = 32 * 1024
    max_body: int = 4 * 1024 * 1024
    """Largest Content-Length accepted (413 beyond)."""
    max_buffered: int = 64 * 1024 * 1024
    """Bytes of request bodies held in memory at once, all connections together (503 beyond)."""
    write_timeout: float = 20.0
    """A response write (and each `sendfile` wait) must progress within this plus its size at `write_min_rate`."""
    write_min_rate: int = 32 * 1024
    fd_reserve: int = 64
    """Free file descriptors kept for the rest of the process: below this a new connection evicts the
    oldest waiting one, or is closed."""

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "fd_reserve":
                if v < 0:
                    raise ValueError(f"ServerLimits.{f.name} must be >= 0, got {v!r}")
            elif not v > 0:
                raise ValueError(f"ServerLimits.{f.name} must be > 0, got {v!r}")

    def with_(self, **changes: Any) -> ServerLimits:
        """These limits with `changes` (keys that are None are left as they are)."""
        d = asdict(self)
        d.update({k: v for k, v in changes.items() if v is not None})
        return ServerLimits(**d)


_GROUPS: dict[str, str] = {}


def _group(host: str) -> str:
    """The key a source address is counted under: the IPv4 address, or the /64 of an IPv6 one."""
    key = _GROUPS.get(host)
    if key is None:
        if len(_GROUPS) > 65536:  # a cache of recent addresses, never larger than this
            _GROUPS.clear()
        key = _GROUPS[host] = _group_of(host)
    return key


def _group_of(host: str) -> str:
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


_HEAD, _BODY, _BUSY = 0, 1, 2
_LINGER0 = struct.pack("ii", 1, 0)


class _Conn:
    __slots__ = ("addr", "body_end", "buf", "deadline", "fd", "group", "head_end", "idle", "reserved", "scan",
                 "since", "sock", "state")

    def __init__(self, sock: socket.socket, addr: Any, group: str, now: float, deadline: float) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.addr = addr
        self.group = group
        self.buf = bytearray()
        self.state = _HEAD
        self.since = now  # when the current wait (for a head, a body) began: eviction takes the oldest
        self.deadline = deadline
        self.idle = False  # a keep-alive connection with no byte of its next request yet
        self.scan = 0  # where the search for the head's end resumes
        self.head_end = 0
        self.body_end = 0  # head + Content-Length
        self.reserved = 0  # bytes of `max_buffered` this connection's body holds


def _parse_head(head: bytes) -> tuple[int | None, bool, bool] | str:
    """(Content-Length or None, chunked, expects 100-continue) of a request head, or why it is refused."""
    length: int | None = None
    chunked = expect = False
    for line in head.split(b"\n")[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        name = name.strip().lower()
        value = value.strip()
        if name == b"content-length":
            try:
                n = int(value)
            except ValueError:
                return "bad Content-Length"
            if n < 0 or (length is not None and n != length):
                return "bad Content-Length"
            length = n
        elif name == b"transfer-encoding":
            chunked = chunked or b"chunked" in value.lower()
        elif name == b"expect":
            expect = value.lower() == b"100-continue"
    return length, chunked, expect


class _Writer(io.BufferedIOBase):
    """A request's `wfile`: each write must finish within `write_timeout` + its size at `write_min_rate`."""

    def __init__(self, sock: socket.socket, limits: ServerLimits) -> None:
        super().__init__()
        self._sock = sock
        self._limits = limits

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        n = memoryview(b).nbytes
        self._sock.settimeout(self._limits.write_timeout + n / self._limits.write_min_rate)
        self._sock.sendall(b)
        self._sock.settimeout(self._limits.write_timeout)
        return n


class _Pool:
    """At most `n` daemon threads running `fn(item)`; started on demand, never more than `n`."""

    def __init__(self, n: int, name: str, fn: Any) -> None:
        self._n = n
        self._name = name
        self._fn = fn
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0

    def submit(self, item: Any) -> None:
        with self._lock:
            if self._idle > 0:
                self._idle -= 1  # this item is an idle thread's (the next submit starts one if none is left)
            elif self._threads < self._n:
                self._threads += 1
                threading.Thread(target=self._run, name=f"{self._name}-{self._threads}", daemon=True).start()
        self._q.put(item)

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            try:
                self._fn(item)
            except Exception:  # the worker survives a bug: _fn logs its own errors
                log.exception("http worker failed")
            with self._lock:
                self._idle += 1

    def stop(self) -> None:
        with self._lock:
            n = self._threads
        for _ in range(n):
            self._q.put(None)


class _Core:
    """What a handler sees as `self.server`: `owner`, `server_address`, `limits`."""

    def __init__(self, owner: Any, server_address: Any, limits: ServerLimits) -> None:
        self.owner = owner
        self.server_address = server_address
        self.server_name = str(server_address[0])
        self.server_port = server_address[1]
        self.limits = limits


def _shed(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER0)  # a reset: nothing lingers here
    sock.close()


class _Descriptors:
    """This process's file descriptors as a server sees them: a spare one held for the moment none is left (given
    up to accept one more connection and make room for it), and the free count, read from /proc at most 4×/s."""

    def __init__(self) -> None:
        self.spare: int | None = os.open(os.devnull, os.O_RDONLY)
        self._at: tuple[float, int, int] | None = None  # (when, free fds then, connections then)

    def free(self, conns: int) -> int | None:
        """Free descriptors now, `conns` connections being open (None: unknown or unlimited)."""
        now = time.monotonic()
        if self._at is None or now - self._at[0] > 0.25:
            soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            try:
                used = len(os.listdir("/proc/self/fd"))
            except OSError:
                return None
            if soft == resource.RLIM_INFINITY:
                return None
            self._at = (now, soft - used, conns)
        _, free, at = self._at
        return free - (conns - at)

    def give_up_spare(self) -> None:
        if self.spare is not None:
            os.close(self.spare)
            self.spare = None

    def retake_spare(self) -> None:
        with contextlib.suppress(OSError):
            self.spare = os.open(os.devnull, os.O_RDONLY)


def _bind(host: str, port: int, backlog: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class HttpServer:
    """An HTTP server on (host, port); `port=0` picks a free port, `.url` is the base URL.

    `backlog`: the listen queue (accepted promptly by the I/O thread); `poll_interval`: the longest
    the I/O thread sleeps between looks for deadlines; `limits`: its bounds (`default_limits` of the
    class when None).
    """

    default_limits: ClassVar[ServerLimits] = ServerLimits()

    def __init__(self, handler: type[BaseHTTPRequestHandler], host: str = "127.0.0.1", port: int = 0, *,
                 owner: Any = None, name: str = "http", backlog: int = 4096, poll_interval: float = 0.5,
                 limits: ServerLimits | None = None) -> None:
        self.name = name
        self.handler = handler
        self.limits = limits if limits is not None else self.default_limits
        self._lsock = _bind(host, port, backlog)
        self._core = _Core(self if owner is None else owner, self._lsock.getsockname(), self.limits)
        lim = self.limits
        self._tick = max(0.01, min(poll_interval, lim.head_timeout / 4, lim.idle_timeout / 4, lim.body_timeout / 4))
        self._conns: dict[int, _Conn] = {}  # by fd; only the I/O thread touches it
        self._per: dict[str, int] = {}
        #: connections waiting for a request head or body, the longest-waiting first (eviction order)
        self._order: collections.OrderedDict[int, _Conn] = collections.OrderedDict()
        self._buffered = 0  # body bytes reserved by connections (I/O thread only)
        self._busy: dict[str, int] = {}  # requests being answered, by address
        self._waiting: dict[str, collections.deque[_Conn]] = {}  # complete requests over max_busy_per_address
        self._returns: queue.SimpleQueue[tuple[_Conn, bool]] = queue.SimpleQueue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._pool = _Pool(lim.workers, f"{name}-worker", self._serve)
        self._fds = _Descriptors()
        self._counts = {"accepted": 0, "shed_per_address": 0, "shed_total": 0, "shed_fd": 0, "evicted": 0,
                        "head_timeouts": 0, "idle_closed": 0, "body_timeouts": 0, "too_large": 0, "bad_head": 0,
                        "shed_buffer": 0, "fd_low": 0}
        self._count_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._closed = False

    @property
    def url(self) -> str:
        host, port = self._core.server_address[:2]  # known after stop() too
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    @property
    def server_address(self) -> tuple[Any, ...]:
        return tuple(self._core.server_address)

    def stats(self) -> dict[str, int]:
        """Connections accepted, and those refused or closed by each bound, since start."""
        with self._count_lock:
            out = dict(self._counts)
        out["open"] = len(self._conns)
        return out

    def _count(self, key: str) -> None:
        with self._count_lock:
            self._counts[key] += 1

    def start(self) -> Self:
        """Serve from a daemon thread (once; a second call does nothing)."""
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()
            log.info("%s serving at %s", self.name, self.url)
        return self

    def stop(self) -> None:
        """Stop serving, close every socket and join the I/O thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._stopping = True
        if self._thread is not None:
            self._wake()
            self._thread.join(timeout=5)
        else:
            self._teardown()
        self._pool.stop()

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

    # -- the I/O thread ----------------------------------------------------------------------------

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"\0")

    def _loop(self) -> None:
        sel = self._sel
        try:
            sel.register(self._lsock, selectors.EVENT_READ, "listen")
            sel.register(self._wake_r, selectors.EVENT_READ, "wake")
            next_sweep = time.monotonic() + self._tick
            while not self._stopping:
                for key, _ in sel.select(max(0.0, next_sweep - time.monotonic())):
                    if key.data == "listen":
                        self._accept()
                    elif key.data == "wake":
                        with contextlib.suppress(OSError):
                            while self._wake_r.recv(4096):
                                pass
                    else:
                        self._on_readable(key.data)
                self._take_returns()
                now = time.monotonic()
                if now >= next_sweep:
                    self._sweep(now)
                    next_sweep = now + self._tick
        except Exception:
            log.exception("%s: I/O loop failed", self.name)
        finally:
            self._teardown()

    def _close_returned(self) -> None:
        while True:
            try:
                conn, _ = self._returns.get_nowait()
            except queue.Empty:
                return
            with contextlib.suppress(OSError):
                conn.sock.close()

    def _teardown(self) -> None:
        waiting = {id(c) for q in self._waiting.values() for c in q}
        for conn in list(self._conns.values()):
            if conn.state != _BUSY or id(conn) in waiting:
                conn.state = _HEAD
                self._close(conn)
        self._waiting.clear()
        self._close_returned()
        with contextlib.suppress(Exception):
            self._sel.close()
        for s in (self._lsock, self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                s.close()
        self._fds.give_up_spare()

    def _accept(self) -> None:
        for _ in range(64):
            try:
                sock, addr = self._lsock.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    self._shed_with_spare()
                    return
                if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.ENOBUFS, errno.ENOMEM):
                    continue
                log.warning("%s: accept failed: %s", self.name, exc)
                return
            self._admit(sock, addr)

    def _shed_with_spare(self) -> None:
        """No descriptor left: give up the spare one to accept the next connection, then make room for
        it by closing the connection that has waited longest for a request (or close it)."""
        self._count("fd_low")
        self._fds.give_up_spare()
        try:
            sock, addr = self._lsock.accept()
        except OSError:
            sock = None
        evicted = sock is not None and self._evict_one()
        self._fds.retake_spare()
        if sock is None:
            return
        if evicted and self._fds.spare is not None:
            self._admit(sock, addr)
        else:
            self._count("shed_fd")
            _shed(sock)

    def _admit(self, sock: socket.socket, addr: Any) -> None:
        lim = self.limits
        group = _group(str(addr[0]))
        if self._per.get(group, 0) >= lim.max_per_address:
            self._count("shed_per_address")
            _shed(sock)
            return
        free = self._fds.free(len(self._conns))
        if free is not None and free < lim.fd_reserve:  # keep the reserve: make room, or refuse
            self._count("fd_low")
            if not self._evict_one():
                self._count("shed_fd")
                _shed(sock)
                return
        if len(self._conns) >= lim.max_connections and not self._evict_one():
            self._count("shed_total")
            _shed(sock)
            return
        now = time.monotonic()
        sock.setblocking(False)
        conn = _Conn(sock, addr, group, now, now + lim.head_timeout)
        self._conns[sock.fileno()] = conn
        self._order[conn.fd] = conn
        self._per[group] = self._per.get(group, 0) + 1
        self._count("accepted")
        self._sel.register(sock, selectors.EVENT_READ, conn)

    def _evict_one(self) -> bool:
        """Close the connection that has waited longest for its request (False: all are being answered)."""
        if not self._order:
            return False
        _, oldest = self._order.popitem(last=False)
        self._count("evicted")
        self._close(oldest, reset=True)
        return True

    def _close(self, conn: _Conn, *, reset: bool = False) -> None:
        self._release(conn)
        fd = conn.fd
        if self._order.get(fd) is conn:
            del self._order[fd]
        if conn.state != _BUSY:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._sel.unregister(conn.sock)
        if self._conns.get(fd) is conn:
            del self._conns[fd]
            left = self._per.get(conn.group, 1) - 1
            if left > 0:
                self._per[conn.group] = left
            else:
                self._per.pop(conn.group, None)
        if reset:
            _shed(conn.sock)
        else:
            conn.sock.close()

    def _release(self, conn: _Conn) -> None:
        self._buffered -= conn.reserved
        conn.reserved = 0

    def _refuse(self, conn: _Conn, status: int, reason: str, counter: str) -> None:
        """Answer `status` if the socket takes it now (never waits), then close."""
        self._count(counter)
        with contextlib.suppress(OSError):
            conn.sock.send(f"HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
        self._close(conn)

    def _on_readable(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            self._close(conn)
            return
        if conn.idle:  # the first byte of a keep-alive connection's next request: its head's clock starts
            conn.idle = False
            self._wait_from(conn, time.monotonic())
            conn.deadline = conn.since + self.limits.head_timeout
        conn.buf += data
        self._advance(conn)

    def _advance(self, conn: _Conn) -> None:
        lim = self.limits
        if conn.state == _HEAD:
            i = conn.buf.find(b"\n\r\n", conn.scan)
            j = conn.buf.find(b"\n\n", conn.scan)
            ends = [k for k in ((i + 3) if i >= 0 else -1, (j + 2) if j >= 0 else -1) if k >= 0]
            if not ends:
                if len(conn.buf) > lim.max_head_bytes:
                    self._refuse(conn, 431, "Request Header Fields Too Large", "too_large")
                    return
                conn.scan = max(0, len(conn.buf) - 2)
                return
            end = min(ends)
            if end > lim.max_head_bytes:
                self._refuse(conn, 431, "Request Header Fields Too Large", "too_large")
                return
            parsed = _parse_head(bytes(conn.buf[:end]))
            if isinstance(parsed, str):
                self._refuse(conn, 400, "Bad Request", "bad_head")
                return
            length, chunked, expect = parsed
            if chunked:  # no handler here reads a chunked body: a length bounds what is buffered
                self._refuse(conn, 411, "Length Required", "bad_head")
                return
            if length is not None and length > lim.max_body:
                self._refuse(conn, 413, "Content Too Large", "too_large")
                return
            if length and self._buffered + length > lim.max_buffered:
                self._refuse(conn, 503, "Service Unavailable", "shed_buffer")
                return
            if expect:  # answer the 100 here (the body is read before a handler runs) and drop the header
                head = b"".join(line for line in bytes(conn.buf[:end]).splitlines(keepends=True)
                                if not line.lower().startswith(b"expect:"))
                conn.buf[:end] = head
                end = len(head)
                if length:
                    with contextlib.suppress(OSError):
                        conn.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
            conn.head_end = end
            conn.body_end = end + (length or 0)
            now = time.monotonic()
            if not length:
                self._dispatch(conn)
                return
            conn.reserved = length
            self._buffered += length
            conn.state = _BODY
            self._wait_from(conn, now)
            conn.deadline = now + lim.body_timeout + length / lim.body_min_rate
        if conn.state == _BODY and len(conn.buf) >= conn.body_end:
            self._dispatch(conn)

    def _wait_from(self, conn: _Conn, now: float) -> None:
        """`conn` starts waiting (for a head, a body) at `now`: it is the newest in eviction order."""
        conn.since = now
        self._order[conn.fd] = conn
        self._order.move_to_end(conn.fd)

    def _dispatch(self, conn: _Conn) -> None:
        """A complete request: to a worker, or, with `max_busy_per_address` of its address's being answered,
        behind them."""
        self._order.pop(conn.fd, None)
        with contextlib.suppress(KeyError, ValueError):
            self._sel.unregister(conn.sock)
        conn.state = _BUSY
        if self._busy.get(conn.group, 0) >= self.limits.max_busy_per_address:
            self._waiting.setdefault(conn.group, collections.deque()).append(conn)
            return
        self._submit(conn)

    def _submit(self, conn: _Conn) -> None:
        self._busy[conn.group] = self._busy.get(conn.group, 0) + 1
        self._pool.submit(conn)

    def _done(self, group: str) -> None:
        left = self._busy.get(group, 1) - 1
        if left > 0:
            self._busy[group] = left
        else:
            self._busy.pop(group, None)
        waiting = self._waiting.get(group)
        if waiting:
            self._submit(waiting.popleft())
            if not waiting:
                del self._waiting[group]

    def _take_returns(self) -> None:
        while True:
            try:
                conn, keep = self._returns.get_nowait()
            except queue.Empty:
                return
            conn.state = _HEAD
            self._release(conn)
            if not self._stopping:
                self._done(conn.group)
            if not keep or self._stopping:
                self._close(conn)
                continue
            now = time.monotonic()
            conn.scan = 0
            self._wait_from(conn, now)
            try:
                conn.sock.setblocking(False)
                self._sel.register(conn.sock, selectors.EVENT_READ, conn)
            except (OSError, ValueError):
                self._close(conn)
                continue
            if conn.buf:  # a pipelined request already here
                conn.idle = False
                conn.deadline = now + self.limits.head_timeout
                self._advance(conn)
            else:
                conn.idle = True
                conn.deadline = now + self.limits.idle_timeout

    def _sweep(self, now: float) -> None:
        for conn in [c for c in self._conns.values() if c.state != _BUSY and c.deadline <= now]:
            if conn.state == _BODY:
                self._refuse(conn, 408, "Request Timeout", "body_timeouts")
            elif conn.idle:
                self._count("idle_closed")
                self._close(conn)
            elif conn.buf:
                self._refuse(conn, 408, "Request Timeout", "head_timeouts")
            else:  # connected and never said a word
                self._count("head_timeouts")
                self._close(conn)

    # -- the workers -------------------------------------------------------------------------------

    def _serve(self, conn: _Conn) -> None:
        keep = False
        try:
            keep = _run_handler(self, conn)
        except (ConnectionError, TimeoutError) as exc:  # a client hanging up or too slow is not an error here
            log.debug("%s: connection from %s ended: %s", self.name, conn.addr, exc)
        except Exception:
            log.warning("%s: error serving %s", self.name, conn.addr, exc_info=True)
        if not keep:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_WR)
        self._returns.put((conn, keep))
        self._wake()
        if self._closed and self._thread is not None and not self._thread.is_alive():
            self._close_returned()  # the I/O thread is gone: nobody else will close it


def _run_handler(server: HttpServer, conn: _Conn) -> bool:
    """Run `server`'s handler class on the one request buffered in `conn`; True: keep the connection.

    The class is instantiated as `socketserver` does (its own `__init__` and `setup` run), with
    `handle` answering this one request and the files replaced: `rfile` holds exactly the request's
    bytes (a read past its body is EOF), `wfile` writes under the write deadline."""
    sock = conn.sock
    sock.setblocking(True)
    cls = server.handler
    rfile = io.BytesIO(bytes(conn.buf[:conn.body_end]))
    conn.buf = conn.buf[conn.body_end:]  # a pipelined request, for the I/O thread
    wfile = _Writer(sock, server.limits)
    h = cls.__new__(cls)

    def setup() -> None:
        cls.setup(h)  # the class's own (Shardcast sets TCP_NODELAY); its socket files are released
        for f in (h.rfile, h.wfile):
            with contextlib.suppress(Exception):
                f.close()
        h.rfile, h.wfile = rfile, wfile
        sock.settimeout(server.limits.write_timeout)

    def handle() -> None:
        h.close_connection = True
        h.handle_one_request()

    def finish() -> None:
        with contextlib.suppress(OSError):
            wfile.flush()

    h.setup, h.handle, h.finish = setup, handle, finish  # type: ignore[method-assign]
    h.__init__(sock, conn.addr, server._core)  # type: ignore[misc]
    return not h.close_connection and not server._stopping


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler with the reply helpers every server here uses."""

    protocol_version = "HTTP/1.1"
    #: headers sent with every `reply` (the dashboard's `Cache-Control: no-store`)
    default_headers: ClassVar[tuple[tuple[str, str], ...]] = ()

    def parse_request(self) -> bool:
        """The stdlib's request parsing, and a request target that `urlsplit` reads (a target such as `//z]`
        made every handler here raise `ValueError: Invalid IPv6 URL`: found by the gateway's fuzzer)."""
        if not super().parse_request():
            return False
        try:
            urlsplit(self.path)
        except ValueError as exc:
            self.send_error(400, f"bad request target: {exc}")
            return False
        return True

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
