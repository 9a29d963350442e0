"""Servers that cannot be held (issue 32): every kind of inbound server, in a child process limited to
1,024 file descriptors, against 2,000 idle, half-sent and dripping connections from stranger
addresses (1,000 from 127.0.0.2, 1,000 from 127.0.0.3–26); honest requests from 127.0.0.1 still answer (each socket operation under a
1 s timeout), the server's thread count does not grow with the connections, and every stranger's
connection is closed once its head (or body) deadline has passed.

Real sockets on loopback, real servers (`AgentServer`, `IpfsGateway` over an `EmbeddedIpfs`, a
Shardcast `Origin` and a `Relay` that pulled a version from it); deadlines shortened through
`ServerLimits` so that the file runs in seconds. Plus the bounds one at a time on a small server:
head size, body size, chunked bodies, idle keep-alive, pipelining, a client that never reads.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import http.client
import json
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from intellect.sdk.http import HttpServer, JsonHandler, ServerLimits

HERE = Path(__file__).resolve().parent
CHILD_NOFILE = 1024
STRANGERS = [f"127.0.0.{i}" for i in range(2, 27)]  # half the connections from the first, half from the rest
CONNECTIONS = 2000
#: deadlines short enough for a test, everything else the server's own defaults
TEST_LIMITS = {"head_timeout": 2.0, "idle_timeout": 1.0, "body_timeout": 2.0, "workers": 8}
HONEST_TIMEOUT = 1.0


@pytest.fixture(scope="module", autouse=True)
def _enough_descriptors():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = CONNECTIONS + 1000
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"needs {want} file descriptors, the hard limit is {hard}")
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _child_limits() -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_NOFILE, (CHILD_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


class Child:
    def __init__(self, kind: str, work: Path, limits: dict[str, Any] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, str(HERE / "held_server.py"), kind, str(work),
                                      json.dumps(limits or TEST_LIMITS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, preexec_fn=_child_limits)
        assert self.proc.stdout is not None and self.proc.stdin is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(10)
            raise AssertionError(f"{kind} server did not start (exit {self.proc.returncode})")
        self.info: dict[str, Any] = json.loads(line)
        host, port = self.info["url"].removeprefix("http://").rsplit(":", 1)
        self.addr = (host, int(port))
        self.limits = ServerLimits(**self.info["limits"])

    def stats(self) -> dict[str, int]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())  # type: ignore[no-any-return]

    def threads(self) -> int:
        for line in Path(f"/proc/{self.info['pid']}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
        raise AssertionError("no Threads line")

    def descriptor_limit(self) -> int:
        for line in Path(f"/proc/{self.info['pid']}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                return int(line.split()[3])
        raise AssertionError("no Max open files line")

    def close(self) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def honest_fetches(child: Child) -> int:
    """Every path the child named, from 127.0.0.1 on a fresh connection, each socket operation under 1 s."""
    for path, sha in child.info["fetch"].items():
        conn = http.client.HTTPConnection(*child.addr, timeout=HONEST_TIMEOUT, source_address=("127.0.0.1", 0))
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        assert resp.status == 200, (path, resp.status, body[:200])
        assert hashlib.sha256(body).hexdigest() == sha, path
    return len(child.info["fetch"])


HALF = b"GET /status HTTP/1.1\r\nHost: x\r\nX-Pad: "
DRIP = HALF + b"a" * 4000
SLOW_BODY = (b"POST /status HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n", b"b" * 1000)


class Strangers:
    """Non-blocking sockets from stranger addresses: idle, a half-sent head, a head dripped a byte per
    round, a body dripped a byte per round."""

    def __init__(self) -> None:
        self.socks: list[socket.socket] = []
        self.first: list[bytes] = []  # bytes each socket sends at once (as soon as it is connected)
        self.todo: list[bytes] = []  # bytes each socket then drips
        self.failed_connects = 0

    def open(self, addr: tuple[str, int], n: int) -> None:
        for i in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.bind((STRANGERS[0] if i < n // 2 else STRANGERS[1 + i % (len(STRANGERS) - 1)], 0))
                rc = s.connect_ex(addr)
            except OSError:
                s.close()
                self.failed_connects += 1
                continue
            if rc not in (0, errno.EINPROGRESS):
                s.close()
                self.failed_connects += 1
                continue
            self.socks.append(s)
            # idle (says nothing), a head that never ends, a dripped head, a whole head and a dripped body
            first, then = [(b"", b""), (HALF, b""), (b"", DRIP), SLOW_BODY][i % 4]
            self.first.append(first)
            self.todo.append(then)
        self.drip()

    def drip(self) -> None:
        for i, s in enumerate(self.socks):
            try:
                if self.first[i]:
                    self.first[i] = self.first[i][s.send(self.first[i]):]
                elif self.todo[i] and s.send(self.todo[i][:1]) == 1:
                    self.todo[i] = self.todo[i][1:]
            except (BlockingIOError, InterruptedError):
                pass  # still connecting, or the server is not reading
            except OSError:
                self.first[i] = self.todo[i] = b""  # closed by the server

    def held(self) -> int:
        """Sockets the server still holds open (not closed, not reset, not answered-and-closed)."""
        n = 0
        for s in self.socks:
            try:
                if s.recv(1, socket.MSG_PEEK) == b"":
                    continue
            except (BlockingIOError, InterruptedError):
                n += 1
                continue
            except OSError:
                continue
            # bytes from the server: a 408/413, and the close follows it
            try:
                data = s.recv(65536)
                if data and s.recv(1, socket.MSG_PEEK):
                    n += 1
            except (BlockingIOError, InterruptedError):
                n += 1
            except OSError:
                pass
        return n

    def close(self) -> None:
        for s in self.socks:
            s.close()
        self.socks.clear()


def all_taken(child: Child, strangers: Strangers) -> dict[str, int]:
    """The child's stats once it has taken every stranger's connection off its listen queue (bounded wait)."""
    stats = child.stats()
    for _ in range(50):
        if sum(stats[k] for k in ("accepted", "shed_per_address", "shed_total", "shed_fd")) >= len(strangers.socks):
            break
        time.sleep(0.1)
        stats = child.stats()
    return stats


@pytest.mark.parametrize("kind", ["agent", "gateway", "origin", "relay"])
def test_two_thousand_idle_and_dripping_connections_do_not_hold_the_server(kind: str, tmp_path: Path) -> None:
    child = Child(kind, tmp_path)
    strangers = Strangers()
    try:
        assert child.descriptor_limit() == CHILD_NOFILE
        honest_fetches(child)
        threads_before = child.threads()

        strangers.open(child.addr, CONNECTIONS)
        assert len(strangers.socks) >= CONNECTIONS * 0.95, strangers.failed_connects
        answered = 0
        for _ in range(5):  # the strangers drip while honest clients are served
            strangers.drip()
            answered += honest_fetches(child)
            time.sleep(0.05)
        threads_during = child.threads()
        stats = all_taken(child, strangers)
        held = strangers.held()
        assert answered == 5 * len(child.info["fetch"])
        # workers are started on demand, up to `workers`: never a thread per connection
        assert threads_during <= threads_before + child.limits.workers, (threads_before, threads_during)
        assert held <= child.limits.max_connections, held
        assert stats["shed_per_address"] > 0, stats  # 1,000 from one address: over its cap, accepted and closed
        assert stats["evicted"] + stats["shed_total"] > 0, stats  # 1,000 from 24 more: over the total cap

        # past the head (and body) deadline every stranger's connection is closed by the server
        deadline_s = max(child.limits.head_timeout, child.limits.body_timeout) + 1000 / child.limits.body_min_rate
        held_after = held
        for _ in range(int((deadline_s + 3.0) / 0.1)):  # bounded: a few seconds past the deadline
            strangers.drip()
            time.sleep(0.1)
            held_after = strangers.held()
            if held_after == 0:
                break
        assert held_after == 0, f"{held_after} stranger connections still held {deadline_s + 3:.1f} s on"
        stats = child.stats()
        assert stats["head_timeouts"] > 0 and stats["body_timeouts"] > 0, stats
        honest_fetches(child)
        assert child.threads() <= threads_before + child.limits.workers
    finally:
        strangers.close()
        child.close()


def test_descriptor_reserve_keeps_room_for_an_honest_request(tmp_path: Path) -> None:
    # connection caps above what 1,024 descriptors hold: only the descriptor reserve stands before EMFILE
    child = Child("agent", tmp_path, {**TEST_LIMITS, "max_connections": 5000, "max_per_address": 5000})
    strangers = Strangers()
    try:
        strangers.open(child.addr, CONNECTIONS)
        for _ in range(3):
            strangers.drip()
            honest_fetches(child)
        stats = all_taken(child, strangers)
        held = strangers.held()
        assert stats["fd_low"] > 0, stats  # the reserve was reached: each newcomer took the oldest one's place
        assert held <= CHILD_NOFILE - child.limits.fd_reserve, held
        honest_fetches(child)
    finally:
        strangers.close()
        child.close()


# -- the bounds one at a time, on a small in-process server -----------------------------------------


class _Echo(JsonHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/big"):
            self.reply(200, b"z" * (32 << 20))
        else:
            self.reply_json(200, {"path": self.path})

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        self.reply_json(200, {"n": len(self.rfile.read(n))})


def _raw(addr: tuple[str, int], data: bytes, *, timeout: float = 5.0) -> bytes:
    with socket.create_connection(addr, timeout=timeout) as s:
        s.sendall(data)
        out = b""
        with contextlib.suppress(TimeoutError, ConnectionResetError):
            while chunk := s.recv(65536):
                out += chunk
        return out


def _server(**limits: Any) -> HttpServer:
    return HttpServer(_Echo, limits=ServerLimits(**limits)).start()


def test_oversized_head_and_body_and_chunked_bodies_are_refused_before_a_handler_runs() -> None:
    with _server(max_head_bytes=1024, max_body=100) as srv:
        addr = srv.server_address[:2]
        assert _raw(addr, b"GET / HTTP/1.1\r\nX: " + b"a" * 2000).startswith(b"HTTP/1.1 431")
        assert _raw(addr, b"POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n").startswith(b"HTTP/1.1 413")
        assert _raw(addr, b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n").startswith(b"HTTP/1.1 400")
        assert _raw(addr, b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
                    ).startswith(b"HTTP/1.1 411")
        ok = _raw(addr, b"POST / HTTP/1.1\r\nContent-Length: 100\r\nConnection: close\r\n\r\n" + b"x" * 100)
        assert ok.startswith(b"HTTP/1.1 200") and ok.endswith(b'{"n": 100}')
        stats = srv.stats()
        assert stats["too_large"] == 2 and stats["bad_head"] == 2, stats


def test_keep_alive_serves_pipelined_requests_then_closes_when_idle() -> None:
    with _server(idle_timeout=0.3) as srv, socket.create_connection(srv.server_address[:2], timeout=5) as s:
        s.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 3\r\n\r\nxyzGET /c HTTP/1.1\r\n\r\n")
        out = b""
        while not out.endswith(b'{"path": "/c"}'):
            chunk = s.recv(65536)
            assert chunk, out
            out += chunk
        assert b'{"path": "/a"}' in out and b'{"n": 3}' in out and b'{"path": "/c"}' in out
        assert s.recv(10) == b""  # closed by the server once idle (the recv timeout is 5 s)
        assert srv.stats()["idle_closed"] == 1


def test_a_client_that_never_reads_frees_its_worker_at_the_write_deadline() -> None:
    # one worker; a 32 MiB answer to a client that never reads must not keep the next client waiting
    with _server(workers=1, write_timeout=0.5, write_min_rate=1 << 30) as srv:
        addr = srv.server_address[:2]
        with socket.create_connection(addr, timeout=5) as stuck:
            stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stuck.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(0.2)
            out = _raw(addr, b"GET /next HTTP/1.1\r\nConnection: close\r\n\r\n", timeout=5)
            assert out.startswith(b"HTTP/1.1 200") and out.endswith(b'{"path": "/next"}')


class _Holding(JsonHandler):
    release = threading.Event()
    lock = threading.Lock()
    inside = 0
    most = 0

    def do_GET(self) -> None:
        cls = type(self)
        if self.path == "/hold":
            with cls.lock:
                _Holding.inside += 1
                _Holding.most = max(_Holding.most, _Holding.inside)
            _Holding.release.wait(10)
            with cls.lock:
                _Holding.inside -= 1
        self.reply_json(200, {"path": self.path})


def test_one_address_holds_at_most_its_share_of_the_workers() -> None:
    # complete requests whose handler waits (Shardcast's long-polls): 6 from one address, 1 answered at a time
    with HttpServer(_Holding, limits=ServerLimits(workers=4, max_busy_per_address=1)) as srv:
        addr = srv.server_address[:2]
        held = []
        try:
            for _ in range(6):
                s = socket.create_connection(addr, timeout=5, source_address=(STRANGERS[0], 0))
                held.append(s)
                s.sendall(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(0.3)
            out = _raw(addr, b"GET /other HTTP/1.1\r\nConnection: close\r\n\r\n", timeout=5)
            assert out.endswith(b'{"path": "/other"}')
            assert _Holding.inside == 1
            _Holding.release.set()
            for s in held:  # each answered in turn
                assert s.recv(65536).startswith(b"HTTP/1.1 200")
            assert _Holding.most == 1
        finally:
            _Holding.release.set()
            for s in held:
                s.close()


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="max_per_address"):
        ServerLimits(max_per_address=0)
    assert ServerLimits().with_(workers=3, head_timeout=None).workers == 3


def test_agent_config_sets_the_bounds_of_every_server() -> None:
    from intellect.agents.config import ServerSettings
    from intellect.sdk.shardcast import SERVER_LIMITS as LIMITS

    s = ServerSettings(max_per_address=5, head_timeout_s=2.5)
    lim = s.limits(LIMITS)
    assert (lim.max_per_address, lim.head_timeout) == (5, 2.5)
    assert (lim.max_connections, lim.workers) == (LIMITS.max_connections, LIMITS.workers)  # unset: the server's
