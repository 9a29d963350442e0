"""The shard download engine shared by clients and relays.

Worker threads take shard indices from a queue, pick a source by measured throughput (and how
many requests it already serves for us), stream the body through sha256 into a sink, and
commit the shard only if the digest matches. A failing source is benched with exponential
backoff; one that served bad bytes is benched for much longer. A source that does not have the
version or shard yet answers 404/503 after a server-side wait: that is "not ready", not a fault.

Shards travel over `http.client` on purpose: one keep-alive connection per source and worker, the
body read straight into a page-aligned receive buffer (`readinto`), no decoding layer in between.
Small documents (`http_get`: versions, manifests, health) go through `intellect.sdk._fetch.fetch`,
whose deadline bounds the whole exchange (a per-read timeout does not stop a source that drips).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import http.client
import logging
import mmap
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit

from .._errors import IntellectError
from .._fetch import PeerHttpError, SocketCut, fetch
from ._errors import FetchError, ShardVerificationError, UpstreamError
from ._manifest import Manifest, ShardEntry
from ._wire import API_PREFIX

__all__ = ["DownloadStats", "ShardSink", "SourcePool", "download_shards", "http_get"]

log = logging.getLogger(__name__)

CHUNK = 4 * 1024 * 1024
BAD_DATA_BENCH_S = 300.0  # a source that served wrong bytes is avoided for this long
PROBATION_AFTER_S = 10.0  # every source benched for longer than this: retry the least-bad one every 10 s


class ShardSink(Protocol):
    """Where verified shard bytes go. `write` may be called before verification; `commit`
    makes the shard count only after its sha256 matched, `abort` discards it. `buffer_phase`
    says where, modulo 4096, the bytes for a position should sit in the receive buffer so that
    an O_DIRECT sink can write them without a bounce copy (0 when it does not matter).
    `target`, called after `begin`, may return a writable view of `shard.size` bytes where the
    shard should land (a relay's RAM arena): the bytes are then received straight into it and
    `write` is not called."""

    def buffer_phase(self, shard: ShardEntry, pos: int) -> int: ...
    def begin(self, shard: ShardEntry) -> None: ...
    def target(self, shard: ShardEntry) -> memoryview | None: ...
    def write(self, shard: ShardEntry, pos: int, data: memoryview) -> None: ...
    def commit(self, shard: ShardEntry) -> None: ...
    def abort(self, shard: ShardEntry) -> None: ...


@dataclass
class _Source:
    url: str
    tput: float | None = None  # EWMA of bytes/s; None = not measured yet
    inflight: int = 0
    failures: int = 0
    down_until: float = 0.0
    ok: int = 0
    bad: int = 0


class SourceReputation:
    """What a long-lived downloader remembers about sources across downloads: which ones served
    bytes that failed their sha256, and until when they are avoided. One offence benches a source
    for `BAD_DATA_BENCH_S`; each further one doubles it (capped at a day). A worker that keeps one
    reputation across checkpoints therefore pays a tampering relay's wasted shards once, not on
    every checkpoint. Thread-safe."""

    MAX_BENCH_S = 86_400.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offences: dict[str, int] = {}
        self._benched_until: dict[str, float] = {}

    def bad_data(self, url: str) -> float:
        """Record a corrupt shard from `url`; returns the monotonic time it is benched until."""
        url = url.rstrip("/")
        with self._lock:
            n = self._offences.get(url, 0) + 1
            self._offences[url] = n
            until = time.monotonic() + min(self.MAX_BENCH_S, BAD_DATA_BENCH_S * 2 ** (n - 1))
            self._benched_until[url] = max(until, self._benched_until.get(url, 0.0))
            return self._benched_until[url]

    def benched_until(self, url: str) -> float:
        """Monotonic time until which `url` is avoided (0.0: never benched or bench over)."""
        with self._lock:
            return self._benched_until.get(url.rstrip("/"), 0.0)

    def offences(self, url: str) -> int:
        with self._lock:
            return self._offences.get(url.rstrip("/"), 0)


class SourcePool:
    """Relays/origins to download from, scored by measured throughput and success.

    `reputation` carries bad-data benches over from earlier downloads (and records new ones);
    without it they last as long as this pool."""

    def __init__(self, urls: Iterable[str], *, reputation: SourceReputation | None = None) -> None:
        urls = [u.rstrip("/") for u in urls]
        if not urls:
            raise ValueError("at least one source URL is needed")
        random.shuffle(urls)  # spread many clients' first picks over the relays
        self._reputation = reputation
        self._sources = {u: _Source(u, down_until=reputation.benched_until(u) if reputation else 0.0)
                         for u in urls}
        self._lock = threading.Lock()
        self._last_probe = -PROBATION_AFTER_S

    def pick(self) -> tuple[str | None, float]:
        """(best available source, 0) or (None, seconds until one comes back)."""
        now = time.monotonic()
        with self._lock:
            up = [s for s in self._sources.values() if s.down_until <= now]
            if not up:
                wait = min(s.down_until for s in self._sources.values()) - now
                if wait <= PROBATION_AFTER_S or now - self._last_probe < PROBATION_AFTER_S:
                    return None, min(wait, PROBATION_AFTER_S)
                # Every source is benched for long (e.g. the only upstream once served a bad shard):
                # rather than stall, give the least-bad one another try now and then. Its bytes are
                # verified like any other's; a source that keeps failing only costs the probe.
                self._last_probe = now
                best = min(self._sources.values(), key=lambda s: (s.bad, s.down_until))
                best.inflight += 1
                return best.url, 0.0
            unmeasured = [s for s in up if s.tput is None]
            if unmeasured:
                best = min(unmeasured, key=lambda s: s.inflight)
            else:
                best = max(up, key=lambda s: (s.tput or 0.0) / (1 + s.inflight))
            best.inflight += 1
            return best.url, 0.0

    def release(self, url: str) -> None:
        with self._lock:
            self._sources[url].inflight -= 1

    def success(self, url: str, nbytes: int, seconds: float) -> None:
        with self._lock:
            s = self._sources[url]
            rate = nbytes / max(seconds, 1e-6)
            s.tput = rate if s.tput is None else 0.7 * s.tput + 0.3 * rate
            s.failures = 0
            s.ok += 1

    def failure(self, url: str, *, bad_data: bool = False, not_ready: bool = False) -> None:
        with self._lock:
            s = self._sources[url]
            now = time.monotonic()
            if bad_data:
                s.bad += 1
                until = self._reputation.bad_data(url) if self._reputation else now + BAD_DATA_BENCH_S
                s.down_until = max(s.down_until, until)
                log.warning("source %s served a corrupt shard: marked down for %.0f s", url, s.down_until - now)
            elif not_ready:
                s.down_until = max(s.down_until, now + 0.2)
            else:
                s.failures += 1
                backoff = min(30.0, 0.5 * 2 ** (s.failures - 1))
                s.down_until = now + backoff
                log.info("source %s failed (%d in a row): retry in %.1f s", url, s.failures, backoff)

    def snapshot(self) -> dict[str, dict[str, float | int | None]]:
        with self._lock:
            return {u: {"tput": s.tput, "ok": s.ok, "bad": s.bad, "failures": s.failures}
                    for u, s in self._sources.items()}


@dataclass
class DownloadStats:
    shards: int = 0
    bytes: int = 0
    corrupt: int = 0
    failures: int = 0
    per_source: dict[str, int] = field(default_factory=dict)


def _connect(url: str, timeout: float) -> http.client.HTTPConnection:
    u = urlsplit(url)
    if u.scheme != "http":
        raise UpstreamError(url, "only http:// sources are supported")
    return http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80, timeout=timeout)


def http_get(url: str, path: str, *, timeout: float = 30.0, max_size: int = 64 * 1024 * 1024) -> bytes:
    """One GET of a small document (`path` under the API prefix); raises UpstreamError.

    `timeout` is a total deadline for the whole exchange (`intellect.sdk._fetch.fetch`), not a
    per-read timeout: a source that drips its answer a byte at a time is cut off when it passes."""
    u = urlsplit(url)
    if u.scheme != "http":
        raise UpstreamError(url, "only http:// sources are supported")
    try:
        reply = fetch("GET", f"http://{u.netloc}{API_PREFIX}{path}", deadline=timeout, max_bytes=max_size)
    except PeerHttpError as e:
        raise UpstreamError(url, f"GET {path}: {e}") from e
    if reply.status != 200:
        raise UpstreamError(url, f"GET {path} -> HTTP {reply.status}: {reply.body[:200]!r}", status=reply.status)
    return reply.body


_HUGE = 2 * 1024 * 1024


def _receive_buffer(size: int) -> memoryview:
    """A page-aligned receive buffer, backed by transparent huge pages where the kernel allows
    them (`MADV_HUGEPAGE`): O_DIRECT writes pin its pages for every request, and the receive
    copy and sha256 walk it, so 2 MiB pages mean far fewer pages to pin and TLB misses."""
    private = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
    m = mmap.mmap(-1, size + _HUGE, flags=private) if private else mmap.mmap(-1, size + _HUGE)  # not shmem
    view = memoryview(m)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    start = -addr % _HUGE
    if hasattr(m, "madvise") and hasattr(mmap, "MADV_HUGEPAGE"):
        with contextlib.suppress(OSError):  # THP disabled: ordinary 4 KiB pages, same behaviour
            m.madvise(mmap.MADV_HUGEPAGE)
    return view[start : start + size]


class _NotReady(IntellectError):
    pass


MIN_SOURCE_RATE = 256 * 1024
"""Bytes per second a source must sustain on a shard: a slower (or dripping) source is cut off and benched."""
SHARD_DEADLINE_SLACK_S = 30.0
"""Seconds added to each shard's deadline on top of the server-side `wait` and size / MIN_SOURCE_RATE."""


def _fetch_one(conn: http.client.HTTPConnection, url: str, vid: str, shard: ShardEntry, sink: ShardSink,
               buf: memoryview, wait: float, on_bytes: Callable[[int], None] | None) -> None:
    conn.request("GET", f"{API_PREFIX}/versions/{vid}/shards/{shard.index}?wait={wait:g}")
    resp = conn.getresponse()
    if resp.status in (404, 503):
        resp.read()
        raise _NotReady(f"HTTP {resp.status}")
    if resp.status != 200:
        body = resp.read(4096)
        raise UpstreamError(url, f"shard {shard.index}: HTTP {resp.status} {body[:200]!r}", status=resp.status)
    length = resp.getheader("Content-Length")
    if length is None or int(length) != shard.size:
        resp.close()
        raise UpstreamError(url, f"shard {shard.index}: Content-Length {length}, manifest says {shard.size}")
    h = hashlib.sha256()
    sink.begin(shard)
    dest = sink.target(shard)
    pos = 0
    while dest is not None and pos < shard.size:  # straight into the sink's memory
        view = dest[pos : pos + min(CHUNK, shard.size - pos)]
        n = resp.readinto(view)
        if not n:
            raise UpstreamError(url, f"shard {shard.index}: connection closed after {pos} of {shard.size} bytes")
        h.update(view[:n])
        pos += n
        if on_bytes is not None:
            on_bytes(n)
    while pos < shard.size:
        phase = sink.buffer_phase(shard, pos) % 4096
        # Receive up to the next 4 KiB boundary of the file (CHUNK is a multiple of 4096): every
        # chunk after a shard's first then starts aligned, so only a shard's two ends are ever
        # unaligned writes (see _directio).
        want = min(CHUNK - phase, shard.size - pos)
        n = resp.readinto(buf[phase : phase + want])
        if not n:
            raise UpstreamError(url, f"shard {shard.index}: connection closed after {pos} of {shard.size} bytes")
        view = buf[phase : phase + n]
        h.update(view)  # releases the GIL for large buffers
        sink.write(shard, pos, view)
        pos += n
        if on_bytes is not None:
            on_bytes(n)
    digest = h.hexdigest()
    if digest != shard.sha256:
        raise ShardVerificationError(shard.index, shard.sha256, digest, url)


def download_shards(
    manifest: Manifest,
    indices: Sequence[int],
    pool: SourcePool,
    sink: ShardSink,
    *,
    workers: int = 4,
    wait: float = 10.0,
    stall_timeout: float = 120.0,
    max_hard_failures: int = 20,
    on_bytes: Callable[[int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
    deadline_slack: float = SHARD_DEADLINE_SLACK_S,
) -> DownloadStats:
    """Download and verify `indices` of `manifest` into `sink`; raises FetchError on give-up.

    stall_timeout: give up when no shard completed for this long (sources all down or not
    ready). max_hard_failures: per shard, how many failed attempts (errors, bad data) are allowed.
    deadline_slack: seconds a shard may take beyond `wait` and its size at `MIN_SOURCE_RATE`.
    """
    dl = _Download(manifest, indices, pool, sink, wait=wait, stall_timeout=stall_timeout,
                   max_hard_failures=max_hard_failures, on_bytes=on_bytes, cancelled=cancelled,
                   deadline_slack=deadline_slack)
    threads = [threading.Thread(target=dl.worker, name=f"shardcast-dl-{i}", daemon=True)
               for i in range(max(1, min(workers, len(indices))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    vid = manifest.id
    if dl.errors:
        e = dl.errors[0]
        if isinstance(e, FetchError):
            raise e
        raise FetchError(f"download of version {vid[:12]} failed: {e!r}") from e
    if dl.pending and not (cancelled is not None and cancelled()):
        raise FetchError(f"download of version {vid[:12]} stopped with {len(dl.pending)} shards missing")
    return dl.stats


class _Download:
    """One `download_shards` call: a queue of shard indices that worker threads take, fetch from the pool's
    sources, verify into the sink and put back on failure, until every shard is in, one has failed too often,
    nothing completed for `stall_timeout`, or the caller cancels."""

    def __init__(self, manifest: Manifest, indices: Sequence[int], pool: SourcePool, sink: ShardSink, *,
                 wait: float, stall_timeout: float, max_hard_failures: int,
                 on_bytes: Callable[[int], None] | None, cancelled: Callable[[], bool] | None,
                 deadline_slack: float = SHARD_DEADLINE_SLACK_S) -> None:
        self.manifest, self.pool, self.sink = manifest, pool, sink
        self.wait, self.stall_timeout, self.max_hard_failures = wait, stall_timeout, max_hard_failures
        self.on_bytes, self.cancelled = on_bytes, cancelled
        self.deadline_slack = deadline_slack
        self.vid = manifest.id
        self.queue: deque[int] = deque(indices)
        self.pending = set(indices)
        self.lock = threading.Lock()
        self.done_cv = threading.Condition(self.lock)
        self.hard: dict[int, int] = {}
        self.stats = DownloadStats()
        self.errors: list[BaseException] = []
        self.last_progress = time.monotonic()

    def finished(self) -> bool:
        return not self.pending or bool(self.errors) or (self.cancelled is not None and self.cancelled())

    def _fail(self, error: BaseException) -> None:
        """Record the error that ends the download (lock held)."""
        self.errors.append(error)
        self.done_cv.notify_all()

    def worker(self) -> None:
        conns: dict[str, http.client.HTTPConnection] = {}
        buf = _receive_buffer(CHUNK + 4096)  # page-aligned, room for any phase
        try:
            while True:
                with self.lock:
                    if self.finished():
                        return
                    if not self.queue:
                        self.done_cv.wait(0.5)  # in-flight shards may fail and come back
                        continue
                    index = self.queue.popleft()
                url, delay = self.pool.pick()
                if url is None:
                    with self.lock:
                        self.queue.appendleft(index)
                        if time.monotonic() - self.last_progress > self.stall_timeout:
                            self._fail(FetchError(
                                f"no shard completed for {self.stall_timeout:.0f} s: every source is down or lacks "
                                f"version {self.vid[:12]} (sources: {self.pool.snapshot()})"))
                            return
                    time.sleep(min(max(delay, 0.05), 1.0))
                    continue
                shard = self.manifest.shard(index)
                outcome = self._attempt(shard, url, conns, buf)
                if not self._record(shard, url, outcome):
                    return
        except BaseException as e:  # a bug in a sink must surface, not hang the others
            with self.lock:
                self._fail(e)
        finally:
            for c in conns.values():
                c.close()

    def _attempt(self, shard: ShardEntry, url: str, conns: dict[str, http.client.HTTPConnection],
                 buf: memoryview) -> str:
        """Fetch `shard` from `url` into the sink: "ok", "not_ready", "bad" (failed verification) or
        "error"; a failed connection is closed and the shard's partial bytes dropped."""
        t0 = time.monotonic()
        outcome = "error"
        try:
            conn = conns.get(url) or _connect(url, timeout=self.wait + 30)
            conns[url] = conn
            cut = SocketCut(conn, self.wait + self.deadline_slack + shard.size / MIN_SOURCE_RATE)
            try:
                _fetch_one(conn, url, self.vid, shard, self.sink, buf, self.wait, self.on_bytes)
            except (OSError, http.client.HTTPException, UpstreamError) as e:
                if cut.fired:
                    raise UpstreamError(url, f"shard {shard.index}: not delivered within its deadline "
                                             f"({shard.size} bytes at {MIN_SOURCE_RATE} B/s + "
                                             f"{self.wait + self.deadline_slack:g} s)") from e
                raise
            finally:
                cut.cancel()
            self.sink.commit(shard)
            outcome = "ok"
            self.pool.success(url, shard.size, time.monotonic() - t0)
        except _NotReady:
            outcome = "not_ready"
            self.pool.failure(url, not_ready=True)
        except ShardVerificationError as e:
            outcome = "bad"
            log.warning("%s", e)
            self.pool.failure(url, bad_data=True)
        except (OSError, http.client.HTTPException, UpstreamError) as e:
            log.info("shard %d from %s failed: %s", shard.index, url, e)
            self.pool.failure(url)
        finally:
            self.pool.release(url)
        if outcome in ("error", "bad"):
            c = conns.pop(url, None)
            if c is not None:
                c.close()
            self.sink.abort(shard)
        return outcome

    def _record(self, shard: ShardEntry, url: str, outcome: str) -> bool:
        """Count an attempt's outcome and requeue the shard unless it is in; False when the download ends."""
        index = shard.index
        with self.lock:
            if outcome == "ok":
                self.pending.discard(index)
                self.stats.shards += 1
                self.stats.bytes += shard.size
                self.stats.per_source[url] = self.stats.per_source.get(url, 0) + 1
                self.last_progress = time.monotonic()
                self.done_cv.notify_all()
                return True
            if outcome == "not_ready" and time.monotonic() - self.last_progress > self.stall_timeout:
                self._fail(FetchError(f"shard {index}: no source had it for {self.stall_timeout:.0f} s"))
                return False
            if outcome in ("error", "bad"):
                self.stats.failures += 1
                self.stats.corrupt += outcome == "bad"
                self.hard[index] = self.hard.get(index, 0) + 1
                if self.hard[index] >= self.max_hard_failures:
                    self._fail(FetchError(f"shard {index}: {self.hard[index]} failed attempts, giving up"))
                    return False
            self.queue.append(index)
            self.done_cv.notify_all()
            return True
