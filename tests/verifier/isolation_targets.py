"""Test-only targets for `intellect.verifier.isolation` (imported by the child from this directory)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from typing import Any


def echo(data: bytes, args: dict[str, Any]) -> bytes:
    return bytes(reversed(data)) + str(args.get("tag", "")).encode()


def refuse(data: bytes, _args: dict[str, Any]) -> bytes:
    raise ValueError(f"bad bytes: {len(data)} of them")


def abort(_data: bytes, _args: dict[str, Any]) -> bytes:
    os.abort()  # what a C++ exception escaping a noexcept frame does


def segfault(_data: bytes, _args: dict[str, Any]) -> bytes:
    ctypes.string_at(0)  # a read of address 0: SIGSEGV
    return b""


def spin(_data: bytes, _args: dict[str, Any]) -> bytes:
    while True:  # CPU-bound: RLIMIT_CPU ends it (SIGXCPU)
        pass


def sleep(_data: bytes, _args: dict[str, Any]) -> bytes:
    time.sleep(60)  # no CPU used: only the wall-clock deadline ends it
    return b""


def hog(_data: bytes, _args: dict[str, Any]) -> bytes:
    return bytes(64 << 30)  # 64 GiB: MemoryError under RLIMIT_AS


def killed(_data: bytes, _args: dict[str, Any]) -> bytes:
    os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer would
    return b""


def exits(_data: bytes, _args: dict[str, Any]) -> bytes:
    sys.stdout.flush()
    os._exit(7)


def core_limit(_data: bytes, _args: dict[str, Any]) -> bytes:
    import json
    import resource

    return json.dumps([resource.getrlimit(r) for r in (resource.RLIMIT_CORE, resource.RLIMIT_AS,
                                                        resource.RLIMIT_CPU)]).encode()


def environment(_data: bytes, _args: dict[str, Any]) -> bytes:
    """What the child was started with: its thread and bytecode settings, whether it leads its own session,
    and the descriptors it holds open."""
    import json

    fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
    dumpable = ctypes.CDLL(None, use_errno=True).prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
    return json.dumps({"omp": os.environ.get("OMP_NUM_THREADS"), "nobytecode": os.environ.get("PYTHONDONTWRITEBYTECODE"),
                       "session_leader": os.getsid(0) == os.getpid(), "fds": fds, "dumpable": dumpable}).encode()


def writes(_data: bytes, args: dict[str, Any]) -> bytes:
    """A parser that writes a file (RLIMIT_FSIZE 0: Python ignores SIGXFSZ, so the write fails with EFBIG)."""
    with open(args["path"], "wb") as f:
        f.write(b"x" * 4096)
        f.flush()
    return b"written"


def wrapped_memory(_data: bytes, _args: dict[str, Any]) -> bytes:
    """A library that turns a MemoryError into its own error (as pyarrow does)."""
    try:
        raise MemoryError("out of memory in a library")
    except MemoryError as exc:
        raise ValueError("the library could not allocate") from exc
