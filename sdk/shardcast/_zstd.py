"""zstd through the system's libzstd (ctypes), for checkpoint deltas.

The `zstandard` package is not among the project's dependencies; libzstd.so.1 is part of every
Debian/Ubuntu base system (dpkg depends on it). ctypes releases the GIL during each call, so
several streams compress in parallel on Python threads.

Decompression is bounded by construction: the caller says how many bytes the frame must yield,
the output buffer has exactly that room, and anything else (more, fewer, a bad frame) raises
`ZstdError`: a decompression bomb cannot allocate past what the manifest already admits.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading

from .._errors import IntellectError

__all__ = ["ZstdError", "available", "compress", "decompress", "version"]


class ZstdError(IntellectError, ValueError):
    """libzstd refused the input, or it did not decompress to exactly the expected size."""


_ZSTD_c_compressionLevel = 100
_ZSTD_c_windowLog = 101
_ZSTD_c_enableLongDistanceMatching = 160
_ZSTD_c_nbWorkers = 400
_CONTENTSIZE_UNKNOWN = 2**64 - 1
_CONTENTSIZE_ERROR = 2**64 - 2

_lib: ctypes.CDLL | None = None
_lock = threading.Lock()


def _load() -> ctypes.CDLL:
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        name = ctypes.util.find_library("zstd") or "libzstd.so.1"
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            raise ZstdError(f"libzstd is not available ({name}: {e}); install the system package libzstd1") from e
        sz, vp, cvp = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p
        lib.ZSTD_versionNumber.restype = ctypes.c_uint
        lib.ZSTD_compressBound.argtypes, lib.ZSTD_compressBound.restype = [sz], sz
        lib.ZSTD_isError.argtypes, lib.ZSTD_isError.restype = [sz], ctypes.c_uint
        lib.ZSTD_getErrorName.argtypes, lib.ZSTD_getErrorName.restype = [sz], cvp
        lib.ZSTD_createCCtx.restype = vp
        lib.ZSTD_freeCCtx.argtypes = [vp]
        lib.ZSTD_CCtx_setParameter.argtypes, lib.ZSTD_CCtx_setParameter.restype = [vp, ctypes.c_int, ctypes.c_int], sz
        lib.ZSTD_compress2.argtypes, lib.ZSTD_compress2.restype = [vp, vp, sz, vp, sz], sz
        lib.ZSTD_decompress.argtypes, lib.ZSTD_decompress.restype = [vp, sz, vp, sz], sz
        lib.ZSTD_getFrameContentSize.argtypes = [vp, sz]
        lib.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong
        _lib = lib
        return lib


def available() -> bool:
    try:
        _load()
    except ZstdError:
        return False
    return True


def version() -> str:
    n = _load().ZSTD_versionNumber()
    return f"{n // 10000}.{n // 100 % 100}.{n % 100}"


def _check(lib: ctypes.CDLL, code: int, what: str) -> int:
    if lib.ZSTD_isError(code):
        raise ZstdError(f"{what}: {lib.ZSTD_getErrorName(code).decode()}")
    return code


def _address(data: bytes | bytearray | memoryview) -> tuple[int, object]:
    """(address, keep-alive) of a contiguous buffer, without copying where it can be avoided."""
    if isinstance(data, bytes):
        keep = ctypes.c_char_p(data)
        return ctypes.cast(keep, ctypes.c_void_p).value or 0, keep
    mv = memoryview(data)
    if mv.readonly:
        b = bytes(mv)
        return _address(b)
    c = (ctypes.c_char * mv.nbytes).from_buffer(mv)
    return ctypes.addressof(c), c


def compress(data: bytes | bytearray | memoryview, level: int = 19, *, long_window: int = 0, threads: int = 0) -> bytes:
    """One zstd frame holding `data` (with its content size). long_window: log2 of a long-distance
    matching window (0: off). threads: libzstd worker threads (0: this thread only)."""
    lib = _load()
    n = memoryview(data).nbytes
    src, keep = _address(data)
    cap = lib.ZSTD_compressBound(n)
    dst = ctypes.create_string_buffer(cap)
    cctx = lib.ZSTD_createCCtx()
    if not cctx:
        raise ZstdError("ZSTD_createCCtx failed")
    try:
        _check(lib, lib.ZSTD_CCtx_setParameter(cctx, _ZSTD_c_compressionLevel, level), "compression level")
        if long_window:
            _check(lib, lib.ZSTD_CCtx_setParameter(cctx, _ZSTD_c_enableLongDistanceMatching, 1), "long matching")
            _check(lib, lib.ZSTD_CCtx_setParameter(cctx, _ZSTD_c_windowLog, long_window), "window log")
        if threads:
            # a libzstd built without threads refuses this: compress on this thread then
            lib.ZSTD_CCtx_setParameter(cctx, _ZSTD_c_nbWorkers, threads)
        size = _check(lib, lib.ZSTD_compress2(cctx, dst, cap, src, n), "compress")
    finally:
        lib.ZSTD_freeCCtx(cctx)
    del keep
    return dst.raw[:size]


def decompress(frame: bytes | memoryview, size: int, into: memoryview | None = None) -> memoryview:
    """Decompress `frame`, which must yield exactly `size` bytes, into `into` (writable, `size` bytes)
    or a new buffer. Raises ZstdError for a bad frame, or one that would yield more or fewer bytes."""
    lib = _load()
    fb = bytes(frame) if not isinstance(frame, bytes) else frame
    declared = lib.ZSTD_getFrameContentSize(fb, len(fb))
    if declared == _CONTENTSIZE_ERROR:
        raise ZstdError("not a zstd frame")
    if declared != _CONTENTSIZE_UNKNOWN and declared != size:
        raise ZstdError(f"frame declares {declared} bytes, expected {size}")
    out = into if into is not None else memoryview(bytearray(size))
    if out.nbytes != size or out.readonly:
        raise ValueError("`into` must be a writable buffer of exactly `size` bytes")
    if size == 0:
        if len(fb) and declared != 0:
            raise ZstdError("frame for an empty stream is not empty")
        return out
    dst, keep = _address(out)
    # The output buffer holds exactly `size` bytes: a frame that decodes to more fails with
    # "Destination buffer is too small" instead of allocating.
    got = _check(lib, lib.ZSTD_decompress(dst, size, fb, len(fb)), "decompress")
    del keep
    if got != size:
        raise ZstdError(f"frame decoded to {got} bytes, expected {size}")
    return out
