"""Run a parser of ours on a stranger's bytes in a child process whose death cannot reach the node.

Some parsers are C++ that can abort the whole process on crafted input (pyarrow's Parquet reader throws a
`parquet::ParquetException` through a `noexcept` frame: `std::terminate`, exit 134, no Python `except`
sees it). Such a parser runs here, in a fresh interpreter (`sys.executable -m intellect.verifier.isolation`,
never a fork of the caller, which may hold CUDA and threads), under RLIMIT_AS, RLIMIT_CPU, RLIMIT_CORE=0
and a wall-clock deadline. The bytes go in on stdin; the result comes back on stdout as bytes that the
caller parses with a reader that cannot abort (never a pickle from the child).

How the child ends is the outcome:

    finished, the target returned        → its bytes (`run_isolated` returns them)
    finished, the target raised           → `ParseRefused(message)`: a clean error, a verdict on the bytes
    died by a signal (SIGABRT, SIGSEGV,   → `ParseCrashed(signal)`: the parser cannot read these bytes, and
      SIGBUS, SIGILL, SIGFPE, ...), hit       any other node reproduces that from the same bytes and limits
      RLIMIT_CPU (SIGXCPU) or ran out of
      its RLIMIT_AS (MemoryError)
    killed by our wall-clock deadline, by → `ParseUnavailable`: the node cannot judge now (its own trouble:
      SIGKILL (the OOM killer) or another     load, memory beside a model); try again later, never reject
      outside signal, or failed to start

A target is `"package.module:function"`, a function `(data: bytes, args: dict) -> bytes` of ours; `args`
(JSON) travel on the command line.

    out = run_isolated("intellect.verifier._rollouts_v1:isolated_v1_to_v2", data, {"name": cid})
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import resource
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from intellect.sdk import IntellectError

__all__ = [
    "ChildLimits",
    "IsolationError",
    "ParseCrashed",
    "ParseRefused",
    "ParseUnavailable",
    "run_isolated",
]

log = logging.getLogger(__name__)

_READY = b"READY\n"
_OK = b"OK\n"
_REFUSED = b"REFUSED\n"
_EXIT_MEMORY = 3  # the target raised MemoryError under the child's RLIMIT_AS
_EXIT_SETUP = 4  # the child could not set its limits or import the target: the node's trouble

# signals that end the child from outside, or for the node's own reasons: no verdict on the bytes
_OUTSIDE_SIGNALS = {signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE}


@dataclass(frozen=True)
class ChildLimits:
    """What one isolated parse may use. The memory and CPU limits make a verdict (the same on every node
    with the same limits); the wall-clock deadline does not (a node under load is slower, not the bytes)."""

    memory_bytes: int = 3 << 30
    """RLIMIT_AS of the child (virtual memory: the interpreter and its imports take ~1 GiB of it)"""
    cpu_seconds: int = 30
    """RLIMIT_CPU of the child (all its threads together); SIGXCPU past it"""
    wall_seconds: float = 120.0
    """killed past it, and the parse is `ParseUnavailable`: keep it well above `cpu_seconds`"""


class IsolationError(IntellectError):
    """An isolated parse did not return a result."""


class ParseRefused(IsolationError):
    """The target raised: a clean error, its message says what was wrong with the bytes."""


class ParseCrashed(IsolationError):
    """The parser died on these bytes (a signal, its CPU-time limit or its memory limit): a reproducible
    verdict that the bytes cannot be read. `signal` is the signal number, or None for the memory limit."""

    def __init__(self, message: str, signal: int | None = None) -> None:
        super().__init__(message)
        self.signal = signal


class ParseUnavailable(IsolationError):
    """The node could not judge the bytes now (deadline, killed from outside, could not start): retry later."""


def run_isolated(target: str, data: bytes, args: dict[str, Any] | None = None,
                 limits: ChildLimits | None = None) -> bytes:
    """Run `target(data, args)` in a fresh child under `limits`; its returned bytes, or the outcome raised
    (`ParseRefused`, `ParseCrashed`, `ParseUnavailable`; see the module docstring)."""
    limits = limits or ChildLimits()
    spec = json.dumps({"target": target, "args": args or {}, "memory_bytes": limits.memory_bytes,
                       "cpu_seconds": limits.cpu_seconds})
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        proc = subprocess.Popen([sys.executable, "-m", "intellect.verifier.isolation", spec],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, start_new_session=True, close_fds=True)
    except OSError as exc:  # no memory or processes left to fork: the node's trouble
        raise ParseUnavailable(f"isolated parser could not start: {exc}") from exc
    try:
        out, err = proc.communicate(bytes(data), timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise ParseUnavailable(f"isolated parser passed its {limits.wall_seconds:g} s deadline") from None
    return _outcome(proc.returncode, out, err, limits)


def _outcome(rc: int, out: bytes, err: bytes, limits: ChildLimits) -> bytes:
    tail = err[-300:].decode("utf-8", "replace").strip()
    if not out.startswith(_READY):  # it never read the bytes
        raise ParseUnavailable(f"isolated parser could not start (exit status {rc}): {tail}")
    body = out[len(_READY):]
    if rc == 0 and body.startswith(_OK):
        return body[len(_OK):]
    if rc == 0 and body.startswith(_REFUSED):
        raise ParseRefused(body[len(_REFUSED):].decode("utf-8", "replace"))
    if rc == _EXIT_MEMORY:
        raise ParseCrashed(f"ran out of its {limits.memory_bytes >> 20} MiB memory limit")
    if rc < 0:
        sig = -rc
        name = _signal_name(sig)
        if sig in _OUTSIDE_SIGNALS:
            raise ParseUnavailable(f"isolated parser was killed by {name} (signal {sig}), not by the bytes")
        if sig == signal.SIGXCPU:
            raise ParseCrashed(f"passed its {limits.cpu_seconds} s CPU-time limit (signal {sig})", sig)
        log.info("isolated parser died by %s: %s", name, tail)
        raise ParseCrashed(f"aborted on this file (signal {sig}, {name})", sig)
    # an exit status of its own after reading the bytes (a library calling exit()): the bytes did it
    raise ParseCrashed(f"exited with status {rc} on this file")


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


# ---------------------------------------------------------------------------------------------------------
# The child


def _limit_self(memory_bytes: int, cpu_seconds: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    # SIGXCPU at the soft limit (its default action ends the process); SIGKILL a second later
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))  # a parser writes no files (pipes are not counted)
    try:  # no core dump even where core_pattern pipes to a handler (which ignores RLIMIT_CORE)
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def _child(spec_text: str) -> int:
    out = sys.stdout.buffer
    try:
        spec = json.loads(spec_text)
        _limit_self(int(spec["memory_bytes"]), int(spec["cpu_seconds"]))
        module, _, func = spec["target"].partition(":")
        fn = getattr(importlib.import_module(module), func)
    except BaseException as exc:
        sys.stderr.write(f"isolated parser setup failed: {exc!r}\n")
        return _EXIT_SETUP
    out.write(_READY)
    out.flush()
    data = sys.stdin.buffer.read()
    try:
        result = fn(data, spec["args"])
    except MemoryError:
        return _EXIT_MEMORY
    except Exception as exc:
        if isinstance(exc.__cause__, MemoryError):
            return _EXIT_MEMORY
        out.write(_REFUSED + str(exc).encode("utf-8", "replace"))
        out.flush()
        return 0
    out.write(_OK)
    out.write(result)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
