"""Positional file writes that bypass the page cache where they can (O_DIRECT).

Shard bytes arrive in a reused receive buffer, are hashed there, and must end up on disk. A
buffered `pwrite` copies them into freshly allocated page-cache pages, which on the benchmark VM
costs 0.5-3 CPU s per GiB (the first touch of guest memory is expensive there); an O_DIRECT write
hands the buffer to the disk with no copy (0.08 CPU s per GiB measured). O_DIRECT needs the file
offset, the length and the buffer address aligned, so `DirectFile.pwrite` sends the 4 KiB-aligned
middle of a write through an O_DIRECT descriptor from a page-aligned bounce buffer (one cheap
copy within the CPU cache, skipped when the caller received the bytes at an aligned address:
see `ShardSink.buffer_phase`) and the unaligned head and tail through the ordinary descriptor. A
page is thus written either only directly (it lies inside one write) or only through the page
cache (a write boundary falls inside it): the two paths never share a page. A file system that
refuses O_DIRECT (tmpfs) falls back to buffered writes, once, with a log line.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["ALIGN", "DirectFile", "preallocate"]

log = logging.getLogger(__name__)

ALIGN = 4096
"""O_DIRECT offset, length and buffer alignment (covers 512 B and 4 KiB sector disks)."""
DIRECT_MIN = 256 * 1024
"""Writes whose aligned middle is shorter than this go through the page cache."""
_BOUNCE = 8 * 1024 * 1024
_local = threading.local()


def _bounce() -> memoryview:
    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = memoryview(mmap.mmap(-1, _BOUNCE))  # anonymous maps are page-aligned
    return buf


def _load_fallocate() -> Callable[[int, int, int, int], int] | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
    fn.restype = ctypes.c_int
    return fn


_fallocate = _load_fallocate()


def preallocate(fd: int, size: int) -> bool:
    """Reserve disk blocks for bytes [0, size) of `fd` (Linux `fallocate`, mode 0: holes become
    unwritten extents, data already there is kept). Aligned O_DIRECT writes into allocated blocks
    are overwrites, which ext4 and xfs run under a shared inode lock: parallel shard writers no
    longer serialise on the file, and a full disk fails here rather than mid-download. False
    where the file system or platform cannot (the writes then allocate as they go)."""
    if _fallocate is None or size <= 0:
        return False
    if _fallocate(fd, 0, 0, size) != 0:
        log.debug("fallocate refused (%s): blocks are allocated as shards arrive", os.strerror(ctypes.get_errno()))
        return False
    return True


def _aligned(view: memoryview) -> bool:
    """Whether `view` starts on an ALIGN boundary in memory (False for read-only buffers)."""
    if view.readonly or not view.c_contiguous:
        return False
    return ctypes.addressof(ctypes.c_char.from_buffer(view)) % ALIGN == 0


def _pwrite_all(fd: int, offset: int, view: memoryview) -> None:
    while view:
        k = os.pwrite(fd, view, offset)
        view, offset = view[k:], offset + k


class DirectFile:
    """One file open for positional writes: `fd` (buffered, also for reads) and, when `direct`
    and supported, a second O_DIRECT descriptor for aligned middles. Thread-safe for writes to
    disjoint ranges."""

    def __init__(self, path: Path, flags: int, *, direct: bool, mode: int = 0o644) -> None:
        self.path = path
        self.fd = os.open(path, flags, mode)
        self.dfd: int | None = None
        if direct and hasattr(os, "O_DIRECT"):
            try:
                self.dfd = os.open(path, os.O_WRONLY | os.O_DIRECT)
            except OSError as e:  # e.g. tmpfs
                log.debug("no O_DIRECT for %s (%s): writing through the page cache", path, e)

    @property
    def direct(self) -> bool:
        return self.dfd is not None

    def pwrite(self, offset: int, view: memoryview) -> None:
        dfd = self.dfd
        if dfd is not None:
            lo = -(-offset // ALIGN) * ALIGN  # first aligned offset at or after `offset`
            hi = (offset + len(view)) // ALIGN * ALIGN
            if hi - lo >= DIRECT_MIN:
                try:
                    self._pwrite_direct(dfd, lo, view[lo - offset : hi - offset])
                except OSError as e:
                    log.info("O_DIRECT write to %s refused (%s): writing through the page cache", self.path, e)
                    self.dfd = None
                    os.close(dfd)
                    _pwrite_all(self.fd, offset, view)
                    return
                _pwrite_all(self.fd, offset, view[: lo - offset])
                _pwrite_all(self.fd, hi, view[hi - offset :])
                return
        _pwrite_all(self.fd, offset, view)

    @staticmethod
    def _pwrite_direct(dfd: int, offset: int, view: memoryview) -> None:
        if _aligned(view):  # the caller received into an aligned spot: no copy at all
            while view:
                k = os.pwrite(dfd, view, offset)
                if k % ALIGN:
                    raise OSError(f"short O_DIRECT write ({k} of {len(view)} bytes)")
                view, offset = view[k:], offset + k
            return
        bounce = _bounce()
        while view:
            n = min(len(view), len(bounce))
            bounce[:n] = view[:n]
            k = os.pwrite(dfd, bounce[:n], offset)
            if k != n:  # a short direct write leaves the offset unaligned: the caller falls back
                raise OSError(f"short O_DIRECT write ({k} of {n} bytes)")
            view, offset = view[n:], offset + n

    def close(self) -> None:
        for fd in (self.fd, self.dfd):
            if fd is not None:
                os.close(fd)
        self.fd, self.dfd = -1, None
