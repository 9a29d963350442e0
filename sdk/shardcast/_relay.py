"""A relay: follows its upstream(s), pulls and verifies shards as they appear, serves them on.

Relays learn of new versions by long-polling `/versions?after=<latest>` on every upstream (an
answer comes the moment the upstream registers a version), fetch the manifest (its sha256 must
equal the version id), register it at once so that downstream requests can wait on shards
still in flight, and pull shards with the same verified, fail-over download engine clients use.
Upstreams may be an origin or other relays: any depth of tree works.

With `ram_bytes`, the relay keeps a RAM arena (`_arena`): shards land in memory, are served
from there, and are written to disk behind, once the relay has been idle for `persist_idle`
seconds (no shard served, none being pulled), so that the distribution window does not share
the disk with the relay's own copy. Shards that do not fit go to disk as without an arena.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from .._http import ServerLimits
from ._arena import Arena, Slot
from ._directio import ALIGN, DirectFile, preallocate
from ._download import SourcePool, SourceReputation, download_shards, http_get
from ._errors import ManifestError, ShardcastError, UnknownSchemaVersionError, UpstreamError
from ._manifest import Manifest, ShardEntry
from ._server import ShardServer
from ._store import ShardStore, VersionState
from ._wire import VERSIONS_SCHEMA

__all__ = ["Relay"]

log = logging.getLogger(__name__)


class _RelaySink:
    """Receives a shard into the relay's RAM arena when it has one with room, else into
    `<i>.part` on disk, renamed into place once verified.

    Disk bytes go with O_DIRECT where possible (`_directio`: no page-cache copy on the receive
    path); once verified, the shard is read back into the page cache asynchronously
    (`POSIX_FADV_WILLNEED`: disk DMA, no CPU copy) so that the clients' requests, served with
    `sendfile`, find it there. Arena shards are hashed where they landed and served from there;
    the relay writes them behind to disk when idle.
    """

    def __init__(self, store: ShardStore, state: VersionState, *, direct: bool = True) -> None:
        self.store = store
        self.state = state
        self.direct = direct
        self._files: dict[int, DirectFile] = {}
        self._slots: dict[int, Slot] = {}
        self._lock = threading.Lock()

    def _part(self, shard: ShardEntry) -> Path:
        return self.state.directory / "shards" / f"{shard.index}.part"

    def buffer_phase(self, shard: ShardEntry, pos: int) -> int:
        return pos % ALIGN

    def begin(self, shard: ShardEntry) -> None:
        arena = self.store.arena
        if arena is not None:
            slot = arena.alloc(shard.size)
            if slot is None:
                # room made by dropping older, persisted shards, here or by a concurrent begin: allocate again
                # whatever this reclaim dropped
                self.store.reclaim(exclude=self.state.manifest.id)
                slot = arena.alloc(shard.size)
            if slot is not None:
                with self._lock:
                    self._slots[shard.index] = slot
                return
        f = DirectFile(self._part(shard), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, direct=self.direct)
        with self._lock:
            self._files[shard.index] = f

    def target(self, shard: ShardEntry) -> memoryview | None:
        slot = self._slots.get(shard.index)
        return self.store.arena.view(slot) if slot is not None and self.store.arena is not None else None

    def write(self, shard: ShardEntry, pos: int, data: memoryview) -> None:
        self._files[shard.index].pwrite(pos, data)

    def _close(self, shard: ShardEntry, *, prefetch: bool = False) -> None:
        with self._lock:
            f = self._files.pop(shard.index, None)
        if f is not None:
            if prefetch and hasattr(os, "posix_fadvise"):
                os.posix_fadvise(f.fd, 0, shard.size, os.POSIX_FADV_WILLNEED)
            f.close()

    def commit(self, shard: ShardEntry) -> None:
        with self._lock:
            slot = self._slots.pop(shard.index, None)
        if slot is not None:
            self.store.mark_present(self.state.manifest.id, shard.index, slot=slot)
            return
        self._close(shard, prefetch=True)  # the read-ahead survives the rename: same inode
        os.replace(self._part(shard), self.state.shard_path(shard.index))
        self.store.mark_present(self.state.manifest.id, shard.index)

    def abort(self, shard: ShardEntry) -> None:
        with self._lock:
            slot = self._slots.pop(shard.index, None)
        if slot is not None and self.store.arena is not None:
            self.store.arena.release(slot)
            return
        self._close(shard)
        self._part(shard).unlink(missing_ok=True)


def _pull_order(manifest: Manifest, present: set[int]) -> list[int]:
    """Shards still to pull: the delta's first (small, and what every client holding the previous
    step asks for), then the checkpoint's."""
    delta = [s.index for s in manifest.delta.shards] if manifest.delta is not None else []
    return [i for i in [*delta, *(s.index for s in manifest.shards)] if i not in present]


class Relay:
    """Relay node: `Relay(upstreams=[url], data_dir=..., keep=3, port=8601).start()`."""

    def __init__(
        self,
        upstreams: Sequence[str],
        data_dir: Path | str,
        *,
        keep: int = 3,
        host: str = "127.0.0.1",
        port: int = 0,
        workers: int = 4,
        poll_wait: float = 25.0,
        max_rate: int | None = None,
        limits: ServerLimits | None = None,
        ram_bytes: int = 0,
        persist_idle: float = 1.0,
    ) -> None:
        """ram_bytes: size of the RAM arena (0: none; every shard goes through the disk). It is
        allocated and touched now, so start-up takes ~1-3 s per GiB on a VM. persist_idle: idle
        seconds before arena shards are written behind to disk."""
        if not upstreams:
            raise ValueError("a relay needs at least one upstream URL")
        if ram_bytes < 0:
            raise ValueError(f"ram_bytes must be >= 0, got {ram_bytes}")
        self.upstreams = [u.rstrip("/") for u in upstreams]
        self.arena = Arena(ram_bytes) if ram_bytes else None
        self.store = ShardStore(data_dir, keep=keep, arena=self.arena)
        self.persist_idle = persist_idle
        self._pulling = 0  # shard downloads in progress (the write-behind waits for none)
        self._writer: threading.Thread | None = None
        self.server = ShardServer(self.store, host=host, port=port, role="relay", max_rate=max_rate, limits=limits)
        self.workers = workers
        self.poll_wait = poll_wait
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._syncing: set[str] = set()
        self.reputation = SourceReputation()  # upstreams that served corrupt shards, across versions
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> Relay:
        self.server.start()
        # Finish versions a previous run left incomplete.
        for st in self.store.versions():
            if not st.complete:
                self._spawn_sync(st.manifest)
        for up in self.upstreams:
            t = threading.Thread(target=self._watch, args=(up,), name=f"shardcast-watch-{up}", daemon=True)
            t.start()
            self._threads.append(t)
        if self.arena is not None:
            self._writer = threading.Thread(target=self._write_behind, name="shardcast-write-behind", daemon=True)
            self._writer.start()
        return self

    def stop(self) -> None:
        """Stop serving and following. Shards held only in RAM are not flushed: a restarted relay
        pulls them again."""
        self._stop.set()
        self.server.stop()
        if self.arena is not None:
            if self._writer is not None:
                self._writer.join(timeout=30)
            self.arena.close()  # gives the memory back

    def __enter__(self) -> Relay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def serve_forever(self) -> None:
        """Block until interrupted (the CLI's main loop)."""
        try:
            while not self._stop.wait(1.0):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    # -- following upstreams ---------------------------------------------------------------------

    def _watch(self, upstream: str) -> None:
        after: str | None = None
        backoff = 0.5
        while not self._stop.is_set():
            q = f"/versions?wait={self.poll_wait:g}" + (f"&after={after}" if after else "")
            try:
                doc = json.loads(http_get(upstream, q, timeout=self.poll_wait + 30))
                if not isinstance(doc, dict) or doc.get("schema") != VERSIONS_SCHEMA:
                    raise UnknownSchemaVersionError(doc.get("schema") if isinstance(doc, dict) else None,
                                                    VERSIONS_SCHEMA)
                versions = doc["versions"]
                if not isinstance(versions, list) or not all(
                        isinstance(v, dict) and isinstance(v.get("id"), str) for v in versions):
                    raise ValueError("'versions' is not a list of objects with a string 'id'")
                backoff = 0.5
            except (UpstreamError, ValueError, KeyError, TypeError, RecursionError, ShardcastError) as e:
                log.warning("upstream %s: %s (retrying in %.1f s)", upstream, e, backoff)
                self._stop.wait(backoff)
                backoff = min(10.0, backoff * 2)
                continue
            if not versions:
                after = None
                self._stop.wait(0.2)  # an empty upstream answers at once: do not spin
                continue
            after = versions[-1]["id"]
            # Only the newest `keep` matter; older ones would be pruned right away.
            for v in versions[-(self.store.keep or len(versions)):]:
                vid = v.get("id")
                if isinstance(vid, str) and self.store.get(vid) is None:
                    self._learn(upstream, vid)

    def _learn(self, upstream: str, vid: str) -> None:
        with self._lock:
            if vid in self._syncing or self.store.get(vid) is not None:
                return
            self._syncing.add(vid)
        try:
            data = http_get(upstream, f"/versions/{vid}/manifest", timeout=30)
            manifest = Manifest.from_bytes(data, source=f"{vid[:12]} from {upstream}")
            if manifest.id != vid:
                raise ManifestError(f"manifest served as {vid[:12]} hashes to {manifest.id[:12]}")
        except (UpstreamError, ManifestError) as e:
            log.warning("upstream %s: version %s refused: %s", upstream, vid[:12], e)
            with self._lock:
                self._syncing.discard(vid)
            return
        self.store.add_version(manifest)
        with self._lock:
            self._syncing.discard(vid)
        self._spawn_sync(manifest)

    def _spawn_sync(self, manifest: Manifest) -> None:
        t = threading.Thread(target=self._sync, args=(manifest,), name=f"shardcast-sync-{manifest.id[:8]}",
                             daemon=True)
        t.start()
        self._threads = [x for x in self._threads if x.is_alive()]
        self._threads.append(t)

    def _sync(self, manifest: Manifest) -> None:
        st = self.store.get(manifest.id)
        if st is None:
            return
        t0 = time.monotonic()
        missing = _pull_order(manifest, st.present)
        while missing and not self._stop.is_set() and not st.removed:
            with self._lock:
                self._pulling += 1
            try:
                pool = SourcePool(self.upstreams, reputation=self.reputation)
                stats = download_shards(manifest, missing, pool, _RelaySink(self.store, st),
                                        workers=self.workers, wait=10.0,
                                        cancelled=lambda: self._stop.is_set() or st.removed)
                log.info("relay has version %s (step %d): %d shards, %.1f MB in %.2f s, %d corrupt dropped",
                         manifest.id[:12], manifest.step, stats.shards, stats.bytes / 1e6,
                         time.monotonic() - t0, stats.corrupt)
            except ShardcastError as e:
                log.warning("sync of %s stalled: %s; retrying", manifest.id[:12], e)
                self._stop.wait(2.0)
            finally:
                with self._lock:
                    self._pulling -= 1
            missing = _pull_order(manifest, st.present)

    # -- RAM arena write-behind --------------------------------------------------------------------

    def _idle(self) -> bool:
        with self._lock:
            pulling = self._pulling
        return not pulling and self.server.idle_for() >= self.persist_idle

    def _write_behind(self) -> None:
        """Copy arena-only shards to disk, one at a time, while the relay is idle."""
        arena = self.arena
        assert arena is not None
        while not self._stop.wait(0.1):
            if not self._idle():
                continue
            for st, index, slot in self.store.unpersisted():
                if self._stop.is_set() or not self._idle():
                    break
                if not arena.pin(slot):  # dropped meanwhile (version pruned)
                    continue
                persisted = False
                try:
                    persisted = self._persist(st, index, slot)
                except OSError as e:
                    if not st.removed:
                        log.warning("writing shard %d of %s to disk failed: %s (kept in RAM)",
                                    index, st.manifest.id[:12], e)
                        self._stop.wait(5.0)
                finally:
                    arena.unpin(slot)
                if persisted:  # only once unpinned: a persisted slot can be reclaimed at once
                    self.store.mark_persisted(st.manifest.id, index)

    def _persist(self, st: VersionState, index: int, slot: Slot) -> bool:
        """Write the slot's shard to its file; False if the version went away meanwhile."""
        assert self.arena is not None
        part = st.directory / "shards" / f"{index}.part"
        f = DirectFile(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, direct=True)
        try:
            preallocate(f.fd, slot.size)
            f.pwrite(0, self.arena.view(slot))  # page-aligned: O_DIRECT from the arena, no copy
        finally:
            f.close()
        if st.removed:
            part.unlink(missing_ok=True)
            return False
        os.replace(part, st.shard_path(index))
        return True
