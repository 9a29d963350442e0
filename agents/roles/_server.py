"""Every agent's HTTP face: `/status` (JSON), `/metrics` (Prometheus text), role routes.

    GET  /status        the agent's status document (`intellect.agent.status/v1`); every list in it
                        holds at most the newest `?limit=` items (default 200, at most 1000)
    GET  /metrics       Prometheus text exposition format 0.0.4
    GET|POST <route>    role-specific routes registered with `AgentServer.route`
                        (the trainer's `POST /attestations`, the validator's `GET /attestations`)

The SDK's `HttpServer` (deadlines, connection caps, a bounded worker pool: `ServerLimits`, set
from the agent's `[server]` config); handlers get the parsed JSON body and return a
JSON-serialisable value, or raise `HttpError` for a clear 4xx.

Reads cost their page, and no client has them all (issue 32): every GET (`/status`, `/metrics`, a role's
listing such as `/attestations`) takes a token from its source address's bucket (`RateLimiter`; IPv6 by /64)
and is answered 429 with `Retry-After` when the bucket is empty; POSTs (attestations, pushed files) are
bounded by their own routes. `/status` documents are built by one thread at a time: concurrent requests
share the next build (`Coalesced`), so many clients cost one build, never one each.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Generic, TypeVar
from urllib.parse import parse_qs, urlsplit

from intellect.sdk import IntellectError
from intellect.sdk.http import HttpServer, JsonHandler, ServerLimits

__all__ = ["MAX_STATUS_LIST", "AgentServer", "Coalesced", "HttpError", "Metrics", "RateLimiter", "bounded_status",
           "content_length", "parse_json_body"]

log = logging.getLogger(__name__)

MAX_BODY = 4 * 1024 * 1024
Handler = Callable[[dict[str, list[str]], Any], Any]
MAX_STATUS_LIST = 200
"""Items of each list a `/status` document carries by default (the newest: lists grow with history)."""
MAX_STATUS_LIST_LIMIT = 1000
"""Largest `?limit=` a `/status` request may ask for."""


def bounded_status(doc: dict[str, Any], limit: int = MAX_STATUS_LIST) -> dict[str, Any]:
    """`doc` with every top-level list cut to its last `limit` items (the newest: the roles list history
    oldest first); `truncated` maps each cut list to its full length."""
    out = dict(doc)
    cut = {k: len(v) for k, v in doc.items() if isinstance(v, list) and len(v) > limit}
    for k in cut:
        out[k] = doc[k][-limit:]
    if cut:
        out["truncated"] = cut
    return out


T = TypeVar("T")


class RateLimiter:
    """A token bucket per client: `rate` requests per second, bursts of `burst`; `rate <= 0` is no limit.

    A client is its source address (an IPv6 one by its /64, what one host is usually given). At most
    `max_clients` buckets are kept, the least recently seen dropped first: a client with many addresses can
    only make the others' buckets start full again, never take their tokens. Thread-safe.
    """

    def __init__(self, rate: float, burst: float, *, max_clients: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate > 0 and burst < 1:
            raise ValueError(f"burst must be at least 1 request, not {burst}")
        self.rate = rate
        self.burst = burst
        self.max_clients = max_clients
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    @staticmethod
    def client(address: str) -> str:
        """The bucket an address draws from (an IPv6 address's /64; an IPv4-mapped one as IPv4)."""
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return address
        if isinstance(ip, ipaddress.IPv6Address):
            if ip.ipv4_mapped is not None:
                return str(ip.ipv4_mapped)
            return str(ipaddress.IPv6Network((ip, 64), strict=False))
        return str(ip)

    def take(self, address: str) -> float:
        """Take a token for `address`: 0.0 when granted, else the seconds until one will be there."""
        if self.rate <= 0:
            return 0.0
        key = self.client(address)
        with self._lock:
            now = self._clock()
            tokens, last = self._buckets.pop(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            wait = 0.0 if tokens >= 1 else (1 - tokens) / self.rate
            self._buckets[key] = (tokens - 1 if wait == 0.0 else tokens, now)
            while len(self._buckets) > self.max_clients:
                self._buckets.popitem(last=False)
            return wait


class Coalesced(Generic[T]):
    """`fn()` computed by one thread at a time, shared by the calls that wait for it.

    A call gets the result of a computation that started after the call did (never an older one), and every
    call that arrives while one runs shares the next: N concurrent callers cost at most two computations,
    not N. An exception is raised to every caller that shared its computation.
    """

    def __init__(self, fn: Callable[[], T]) -> None:
        self.fn = fn
        self._cond = threading.Condition()
        self._started = 0
        self._finished = 0
        self._running = False
        self._result: tuple[bool, Any] = (False, None)
        self.computations = 0

    def __call__(self) -> T:
        with self._cond:
            want = self._started + 1  # the next computation to start is the first that is fresh for us
            while self._finished < want:
                if not self._running:
                    self._running = True
                    self._started += 1
                    number = self._started
                    break
                self._cond.wait()
            else:
                ok, value = self._result
                if ok:
                    return value  # type: ignore[no-any-return]
                raise value
        try:
            result: tuple[bool, Any] = (True, self.fn())
        except Exception as exc:  # handed to every caller of this computation
            result = (False, exc)
        with self._cond:
            self.computations += 1
            self._running = False
            self._finished = number
            self._result = result
            self._cond.notify_all()
        if result[0]:
            return result[1]  # type: ignore[no-any-return]
        raise result[1]


def content_length(value: str | None) -> int:
    """A request's `Content-Length` (0 when absent); `HttpError` 400 unless it is a plain decimal (a negative
    one would read the connection to its end, unbounded), 413 over `MAX_BODY`."""
    value = (value or "0").strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 18:
        raise HttpError(400, f"Content-Length must be a decimal byte count, got {value[:40]!r}")
    length = int(value)
    if length > MAX_BODY:
        raise HttpError(413, f"body of {length} bytes exceeds {MAX_BODY}")
    return length


def parse_json_body(raw: bytes) -> Any:
    """A POST body as JSON (None when empty); `HttpError` 400 for anything else: not UTF-8, not JSON, nested
    past the recursion limit, an integer over 4,300 digits (each was a 500 with a logged traceback)."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise HttpError(400, f"body is not JSON: {type(exc).__name__}: {str(exc)[:200]}") from None


class HttpError(IntellectError):
    """Raised by a route handler to answer with a 4xx/5xx and a one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class Metrics:
    """Counters and gauges with labels, rendered in the Prometheus text format.

    Names are declared once with their help text and type; `inc`/`set` take label values as
    keyword arguments. Thread-safe.
    """

    def __init__(self, prefix: str = "intellect") -> None:
        self.prefix = prefix
        self._lock = threading.Lock()
        self._meta: dict[str, tuple[str, str]] = {}
        self._values: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}

    def declare(self, name: str, kind: str, help_text: str) -> None:
        if kind not in ("counter", "gauge"):
            raise ValueError(f"metric kind must be counter or gauge, not {kind!r}")
        with self._lock:
            self._meta[name] = (kind, help_text)
            self._values.setdefault(name, {})

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted((k, str(v)) for k, v in labels.items()))
        with self._lock:
            if name not in self._meta:
                raise KeyError(f"metric {name!r} was not declared")
            series = self._values[name]
            series[key] = series.get(key, 0.0) + amount

    def set(self, name: str, value: float, **labels: str) -> None:
        key = tuple(sorted((k, str(v)) for k, v in labels.items()))
        with self._lock:
            if name not in self._meta:
                raise KeyError(f"metric {name!r} was not declared")
            self._values[name][key] = float(value)

    def get(self, name: str, **labels: str) -> float:
        key = tuple(sorted((k, str(v)) for k, v in labels.items()))
        with self._lock:
            return self._values.get(name, {}).get(key, 0.0)

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            for name, (kind, help_text) in sorted(self._meta.items()):
                full = f"{self.prefix}_{name}"
                lines.append(f"# HELP {full} {help_text}")
                lines.append(f"# TYPE {full} {kind}")
                for key, value in sorted(self._values[name].items()):
                    labels = ",".join(f'{k}="{_escape(v)}"' for k, v in key)
                    lines.append(f"{full}{{{labels}}} {_number(value)}" if labels else f"{full} {_number(value)}")
        return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(int(value)) if value.is_integer() else repr(value)


class _Handler(JsonHandler):
    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        owner: AgentServer = self.server.owner  # type: ignore[attr-defined]
        try:
            if method == "GET" and (wait := owner.limiter.take(self.client_address[0])) > 0:
                owner.metrics.inc("http_rate_limited_total")
                self.reply_json(429, {"error": f"too many requests from {self.client_address[0]}: "
                                               f"{owner.limiter.rate:g}/s, bursts of {owner.limiter.burst:g}"},
                                {"Retry-After": str(max(1, math.ceil(wait)))})
                return
            if method == "GET" and parts.path == "/status":
                try:
                    limit = int(query.get("limit", [str(MAX_STATUS_LIST)])[0])
                except ValueError:
                    raise HttpError(400, "limit must be an integer") from None
                if not 1 <= limit <= MAX_STATUS_LIST_LIMIT:
                    raise HttpError(400, f"limit must be in [1, {MAX_STATUS_LIST_LIMIT}]")
                self.reply_json(200, bounded_status(owner.status_doc(), limit))
                return
            if method == "GET" and parts.path == "/metrics":
                self.reply(200, owner.metrics.render().encode(), "text/plain; version=0.0.4; charset=utf-8")
                return
            handler = owner.routes.get((method, parts.path))
            if handler is None:
                raise HttpError(404, f"no route {method} {parts.path}")
            body: Any = None
            if method == "POST":
                length = content_length(self.headers.get("Content-Length"))
                body = parse_json_body(self.rfile.read(length) if length else b"")
            self.reply_json(200, handler(query, body))
        except HttpError as exc:
            if method == "POST":  # its body may be unread: never parse it as the next request
                self.close_connection = True
            self.reply_json(exc.status, {"error": exc.message})
        except ConnectionError:  # the client went away (timed out): nothing to answer
            log.debug("client of %s %s disconnected", method, parts.path)
        except Exception as exc:  # a bug in a handler must not kill the server thread
            log.exception("route %s %s failed", method, parts.path)
            self.reply_json(500, {"error": f"{type(exc).__name__}: {exc}"})


class AgentServer(HttpServer):
    """Serves `/status`, `/metrics` and role routes on `host:port` (port 0 picks a free one).

    `read_rate` / `read_burst`: each client's budget of GET requests (per second, burst; `read_rate=0`: none);
    `limits`: the server's bounds (`ServerLimits`; `default_limits` unless given).
    """

    default_limits = ServerLimits(max_body=MAX_BODY)

    def __init__(self, status_fn: Callable[[], dict[str, Any]], metrics: Metrics, host: str = "127.0.0.1",
                 port: int = 0, *, read_rate: float = 0.0, read_burst: float = 1.0,
                 limits: ServerLimits | None = None):
        self.status_fn = status_fn
        self.status_doc = Coalesced(status_fn)
        self.metrics = metrics
        self.limiter = RateLimiter(read_rate, read_burst)
        metrics.declare("http_rate_limited_total", "counter", "GET requests answered 429 (a client past its budget)")
        self.routes: dict[tuple[str, str], Handler] = {}
        super().__init__(_Handler, host, port, name="agent-http", limits=limits)

    def route(self, method: str, path: str, handler: Handler) -> None:
        self.routes[(method.upper(), path)] = handler
