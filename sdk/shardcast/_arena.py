"""A relay's RAM tier: one pre-faulted shared-memory file (memfd) that holds verified shards.

Why: a relay that writes every shard to disk and reads it back for `sendfile` moves its whole
checkpoint over the disk twice while its clients are writing theirs to the same kind of disk
(the benchmark's 1 GiB tree moved 12.8 GB, 4.2 GB of it the relays'). Received into RAM instead,
a shard is hashed where it landed, served by `sendfile` straight from the shared-memory pages
(zero copy), and written to disk later, when the relay is idle (`Relay` does that), so that the
relay still keeps its last N versions across restarts.

The memory is allocated and touched once, when the relay starts (`posix_fallocate` + a populated
mapping): on a VM that hands free guest memory back to its host, a first touch costs
~2.8 CPU s per GiB (measured on the benchmark VM), which would otherwise fall inside every
checkpoint's distribution window.

Slots are 4 KiB-aligned extents (O_DIRECT-ready). A slot being served is pinned; one released
while pinned, or less than `REUSE_GRACE_S` after its last send, is freed later: `sendfile` on
loopback returns once the bytes are queued, and the queued socket buffers still reference the
slot's pages until the receiver reads them.
"""

from __future__ import annotations

import io
import logging
import mmap
import os
import threading
import time
from dataclasses import dataclass

__all__ = ["ALIGN", "REUSE_GRACE_S", "Arena", "Slot"]

log = logging.getLogger(__name__)

ALIGN = 4096
REUSE_GRACE_S = 5.0


@dataclass(eq=False)
class Slot:
    """An extent of the arena holding one shard (`size` bytes at `offset`)."""

    offset: int
    size: int
    readers: int = 0
    last_read: float = 0.0
    persisted: bool = False  # also on disk: may be dropped from RAM without losing the shard
    released: bool = False  # no longer wanted; freed once no send can still reference it

    @property
    def span(self) -> int:
        return -(-self.size // ALIGN) * ALIGN


class Arena:
    """`Arena(2 * 2**30)`: `alloc(n)` a slot, `view(slot)` to fill it, `pin`/`unpin` around sends
    from `fileno` at `slot.offset`, `release(slot)` when done. Thread-safe. A `Relay` started with
    `ram_bytes` holds one as `relay.arena`; `reuse_grace_s`: how long a released slot's pages stay
    untouched after its last send (`REUSE_GRACE_S`)."""

    def __init__(self, size: int, *, name: str = "shardcast-arena", reuse_grace_s: float = REUSE_GRACE_S) -> None:
        self.reuse_grace_s = reuse_grace_s
        if size < ALIGN:
            raise ValueError(f"arena size {size} is below one page ({ALIGN} bytes)")
        if not hasattr(os, "memfd_create"):
            raise OSError("a RAM arena needs Linux memfd_create")
        size = size // ALIGN * ALIGN
        self.size = size
        t0 = time.monotonic()
        self.fd = os.memfd_create(name, os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, size)
            os.posix_fallocate(self.fd, 0, size)  # the pages exist from now on (fails now if RAM is short)
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            self._map = mmap.mmap(self.fd, size, flags=flags)
        except BaseException:
            os.close(self.fd)
            raise
        self._view = memoryview(self._map)
        self.file = io.FileIO(self.fd, "r", closefd=False)  # for socket.sendfile
        self._free: list[tuple[int, int]] = [(0, size)]  # (offset, length), sorted, coalesced
        self._zombies: list[Slot] = []  # released while possibly still referenced
        self._lock = threading.Lock()
        log.info("RAM arena of %.1f MiB ready in %.2f s", size / 2**20, time.monotonic() - t0)

    # -- allocation ------------------------------------------------------------------------------

    def alloc(self, size: int) -> Slot | None:
        """A slot for `size` bytes, or None when no free extent is large enough."""
        span = -(-max(size, 1) // ALIGN) * ALIGN
        with self._lock:
            self._collect_locked()
            for i, (off, length) in enumerate(self._free):
                if length >= span:
                    if length == span:
                        del self._free[i]
                    else:
                        self._free[i] = (off + span, length - span)
                    return Slot(off, size)
        return None

    def release(self, slot: Slot) -> None:
        """Give `slot` back; freed now, or once its last send has drained (see module doc)."""
        with self._lock:
            if slot.released:
                return
            slot.released = True
            self._zombies.append(slot)
            self._collect_locked()

    def _collect_locked(self) -> None:
        now = time.monotonic()
        keep = []
        for s in self._zombies:
            if s.readers or (s.last_read and now - s.last_read < self.reuse_grace_s):
                keep.append(s)
            else:
                self._free_locked(s.offset, s.span)
        self._zombies = keep

    def _free_locked(self, off: int, span: int) -> None:
        free = self._free
        lo, hi = 0, len(free)
        while lo < hi:
            mid = (lo + hi) // 2
            if free[mid][0] < off:
                lo = mid + 1
            else:
                hi = mid
        free.insert(lo, (off, span))
        if lo + 1 < len(free) and free[lo][0] + free[lo][1] == free[lo + 1][0]:
            free[lo] = (off, span + free[lo + 1][1])
            del free[lo + 1]
        if lo > 0 and free[lo - 1][0] + free[lo - 1][1] == free[lo][0]:
            free[lo - 1] = (free[lo - 1][0], free[lo - 1][1] + free[lo][1])
            del free[lo]

    def free_bytes(self) -> int:
        with self._lock:
            self._collect_locked()
            return sum(n for _, n in self._free)

    # -- access ----------------------------------------------------------------------------------

    def view(self, slot: Slot) -> memoryview:
        """Writable view of the slot's bytes (page-aligned: O_DIRECT can write it as is)."""
        return self._view[slot.offset : slot.offset + slot.size]

    def pin(self, slot: Slot) -> bool:
        """Hold `slot` for a send; False if it was already released (serve it from disk instead)."""
        with self._lock:
            if slot.released:
                return False
            slot.readers += 1
            return True

    def unpin(self, slot: Slot) -> None:
        with self._lock:
            slot.readers -= 1
            slot.last_read = time.monotonic()

    def close(self) -> None:
        self.file.close()
        try:
            self._view.release()
            self._map.close()
        except BufferError:  # a view is still referenced somewhere: the mapping goes with it
            pass
        os.close(self.fd)
