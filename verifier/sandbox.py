"""Run untrusted Python (a model's completion) against a task's tests, isolated by the operating system.

Threat model. The completion is hostile: it knows this file, the test formats and the harness, and it
wants a reward of 1.0 without solving the task, or to read or change anything of the machine that scores
it (keys, the agent's data dir, other runs), or to stall the scorer. The task's tests are written by the
pool creator: semi-trusted (they are run confined too, but they are believed about what passes). The
parent (this module, in the worker's or validator's process) is trusted.

What holds, and why:
- **Nothing of the host is reachable.** Every run is two processes, each under bubblewrap
  (new user, pid, network, uts and cgroup namespaces from bwrap, an ipc one of ours), uid/gid 65534 inside,
  a read-only `/usr` and the interpreter's prefix, one private tmpfs on `/tmp` and `/dev/shm` as the only
  writable place, `/proc` of its own pid namespace, a minimal read-only `/dev`, an empty environment, no network but its own
  loopback. The repository, `/root`, home directories and the agent's data dir are not in the sandbox's
  filesystem at all. When the parent runs as root, bwrap itself is started under a throw-away
  unprivileged uid (so no capability of the host's root ever reaches the sandbox, and RLIMIT_NPROC
  applies: root is exempt from it). Resource limits: RLIMIT_CPU, RLIMIT_AS (memory), RLIMIT_FSIZE
  (output), RLIMIT_NOFILE, no core dumps, RLIMIT_NPROC counted inside the sandbox's own user
  namespace (fork bombs), a tmpfs of `tmp_bytes` and `tmp_inodes` (pages RLIMIT_AS does not count),
  no SysV IPC, POSIX message queue, memfd, socket buffer beyond the default or nested user namespace
  (`_enter_private_fs`, `_seccomp_program`: each could hold memory outside both bounds), and a wall-clock deadline after which
  both sandboxes are SIGKILLed
  (bwrap's `--die-with-parent` tears down the pid namespace with everything in it). None of these can
  be undone from inside: they are kernel state, not interpreter state, so patching the interpreter,
  walking frames or clearing an audit hook gains nothing.
- **The untrusted process never decides pass or fail.** The completion runs alone in the *candidate*
  sandbox. The tests run in a second, separate *test* sandbox that never executes completion code:
  every name a test uses that the test does not define (the function under test, `candidate`) is a
  proxy that asks the parent to call it in the candidate sandbox. The candidate returns the call's
  result as typed JSON (None, bool, int, float incl. nan/inf, complex, str, bytes, list, tuple, dict,
  set, frozenset, by exact type; no pickle); the parent decodes it strictly and hands the plain value
  to the test (arguments go by value: the completion cannot change the tests' own data), whose `assert`s compare it with values the candidate never sees. An object that does not
  serialise exactly (a custom `__eq__`, a subclass of int, ...) fails the call. Patching `exec`,
  `compile`, `os._exit`, `sys.exit`, `print`, `__import__`, `AssertionError` or the harness itself
  changes only what the candidate's own calls return: it can at best choose return values, which is
  what an honest function does. The expected values are never in the candidate sandbox (not in argv,
  the environment, a file, or its memory), and the candidate cannot see or signal the test sandbox
  (separate pid namespace and filesystem). Each sandbox starts with a fresh, empty kernel session
  keyring (the caller's would otherwise be inherited, keys and all).
- **A run that checks nothing passes nothing.** A run passes only when the test process ran every
  test to its end and at least one call reached the completion. Tests that cannot be run this way
  (not Python, or passing values that do not serialise, such as a lambda, to the completion) are
  refused (`reason=refused`, reward 0), never run in the completion's process.
- **Helpers of the task come from the task.** Function bodies (and literal constants) the task's own
  prompt defines (HumanEval's `poly`, `encode_cyclic`, ...) are run in the test sandbox from the prompt's text (`prelude`), so a
  completion cannot redefine the helper a test uses to judge it.
- **No sandbox, no run.** Where bubblewrap is missing or cannot create namespaces, `run_python` raises
  `SandboxUnavailableError`; code tasks are refused, never run unconfined.

Residual risks, none of them a way to a reward: a kernel bug reachable from an unprivileged user
namespace (shared with every container runtime; keep the kernel patched), host facts any process may
read (`/proc/cpuinfo`, the kernel version), and load bounded by the limits above. Without a cgroup (none
here: no cgroup v2 memory controller) a sandbox's memory is bounded by `max_processes` × `memory_bytes` +
`tmp_bytes` + inodes and the buffers its descriptors can hold, for `wall_seconds` (docs/verifier.md). What a test checks is
the task's business: a run must call the completion at least once, but a test that accepts a wrong
answer is a weak task, not a hole in the sandbox.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import json
import logging
import os
import platform
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from enum import StrEnum
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from intellect.sdk import IntellectError

logger = logging.getLogger(__name__)

__all__ = [
    "SandboxLimits",
    "SandboxReason",
    "SandboxResult",
    "SandboxUnavailableError",
    "TestsRefusedError",
    "check_tests",
    "run_python",
    "sandbox_available",
]

NOBODY = 65534
MAX_MESSAGE_BYTES = 16 * 2**20
"""Largest message (one call's result) that crosses from a sandbox to the parent."""


class SandboxUnavailableError(IntellectError, RuntimeError):
    """bubblewrap is missing or cannot create namespaces here: code tasks are refused, not run unconfined."""


class TestsRefusedError(IntellectError, ValueError):
    """A task's tests cannot be run with the completion kept out of the verdict (see the module doc)."""

    __test__ = False  # not a pytest class


class SandboxLimits(BaseModel):
    """Resource limits of one sandboxed run (each of the two sandboxes gets them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cpu_seconds: int = Field(default=5, ge=1)
    """RLIMIT_CPU: CPU time of each process (SIGXCPU, then SIGKILL)."""
    wall_seconds: float = Field(default=10.0, gt=0)
    """Wall-clock limit of the whole run; both sandboxes are killed after it."""
    memory_bytes: int = Field(default=512 * 2**20, ge=64 * 2**20)
    """RLIMIT_AS: address space (a memory bomb gets MemoryError)."""
    max_processes: int = Field(default=16, ge=1)
    """RLIMIT_NPROC, counted inside the sandbox's own user namespace."""
    max_output_bytes: int = Field(default=1 * 2**20, ge=1024)
    """RLIMIT_FSIZE: cap on stdout+stderr (one file) and on any file the code writes."""
    tmp_bytes: int = Field(default=64 * 2**20, ge=2**20, le=16 * 2**30)
    """Size of the sandbox's only writable filesystem: one tmpfs, mounted at /tmp with /dev/shm on it, so
    files, `multiprocessing.shared_memory` and mmaps of a file there share it. tmpfs pages are not counted by
    RLIMIT_AS: this is their bound. A full one gives ENOSPC (or SIGBUS through an mmap): `tmp_limit`."""
    tmp_inodes: int = Field(default=4096, ge=64, le=2**20)
    """nr_inodes of that tmpfs: files, directories and symlinks together (each costs kernel memory that
    neither RLIMIT_AS nor `tmp_bytes` counts)."""
    network: bool = False
    """Kept for compatibility; must stay False (the sandbox has no network at all)."""


class SandboxReason(StrEnum):
    PASSED = "passed"
    FAILED = "failed"  # a test failed (AssertionError, wrong value, the completion raised, ...)
    SYNTAX_ERROR = "syntax_error"
    TIMEOUT = "timeout"  # wall clock
    CPU_LIMIT = "cpu_limit"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    TMP_LIMIT = "tmp_limit"  # the sandbox's tmpfs (/tmp, /dev/shm) is full: bytes or inodes
    FORBIDDEN = "forbidden"  # a result that does not serialise exactly (custom objects)
    EARLY_EXIT = "early_exit"  # the completion's process ended while a test still needed it
    NO_CODE = "no_code"
    NO_CALLS = "no_calls"  # the tests finished without calling the completion once
    REFUSED = "refused"  # the tests cannot be run safely (TestsRefusedError)
    ERROR = "error"  # the test process itself failed (a broken test)


class SandboxResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    passed: bool
    reason: SandboxReason
    returncode: int | None = None
    wall_seconds: float = 0.0
    calls: int = 0
    """Calls the tests made into the completion."""
    stdout: str = ""
    """What the completion printed (stdout and stderr, in one capped stream)."""
    stderr: str = ""
    """Why it failed, in a line."""


# ---------------------------------------------------------------------------------------------
# The typed codec: the same source runs in the parent and in both sandboxes.

_CODEC = r'''
class _Unserialisable(Exception):
    pass

def _enc(x, depth=0):
    if depth > 64:
        raise _Unserialisable("nested deeper than 64")
    t = type(x)
    if x is None or t is bool or t is str:
        return x
    if t is int:
        return {"i": hex(x)}
    if t is float:
        return {"f": x.hex()}
    if t is complex:
        return {"c": [x.real.hex(), x.imag.hex()]}
    if t is bytes:
        return {"b": x.hex()}
    if t is list or t is tuple or t is set or t is frozenset:
        tag = {list: "l", tuple: "t", set: "s", frozenset: "fs"}[t]
        return {tag: [_enc(v, depth + 1) for v in x]}
    if t is dict:
        return {"d": [[_enc(k, depth + 1), _enc(v, depth + 1)] for k, v in x.items()]}
    raise _Unserialisable("a value of type %s" % t.__name__)

def _dec(x, depth=0):
    if depth > 64:
        raise ValueError("nested deeper than 64")
    t = type(x)
    if x is None or t is bool or t is str:
        return x
    if t is not dict or len(x) != 1:
        raise ValueError("not a typed value")
    (tag, v), = x.items()
    if tag == "i" and type(v) is str:
        return int(v, 16)
    if tag == "f" and type(v) is str:
        return float.fromhex(v)
    if tag == "c" and type(v) is list and len(v) == 2 and all(type(p) is str for p in v):
        return complex(float.fromhex(v[0]), float.fromhex(v[1]))
    if tag == "b" and type(v) is str:
        return bytes.fromhex(v)
    if type(v) is not list:
        raise ValueError("not a typed value")
    if tag == "l":
        return [_dec(e, depth + 1) for e in v]
    if tag == "t":
        return tuple(_dec(e, depth + 1) for e in v)
    if tag == "s":
        return set(_dec(e, depth + 1) for e in v)
    if tag == "fs":
        return frozenset(_dec(e, depth + 1) for e in v)
    if tag == "d":
        out = {}
        for kv in v:
            if type(kv) is not list or len(kv) != 2:
                raise ValueError("bad dict item")
            out[_dec(kv[0], depth + 1)] = _dec(kv[1], depth + 1)
        return out
    raise ValueError("unknown tag %r" % (tag,))
'''
_codec_ns: dict[str, Any] = {}
exec(compile(_CODEC, "<sandbox codec>", "exec"), _codec_ns)  # our own constant source
_enc = _codec_ns["_enc"]
_dec = _codec_ns["_dec"]
_Unserialisable = _codec_ns["_Unserialisable"]


# ---------------------------------------------------------------------------------------------
# The two runners. Each reads its orders as JSON lines on fd 0 and answers on fd 1; both fds are
# moved out of the way first, so prints go to the capped stderr file.

_PROLOGUE = r'''
import os, sys, json, resource
_rfd, _wfd = os.dup(0), os.dup(1)
_null = os.open("/dev/null", os.O_RDONLY)
os.dup2(_null, 0)
os.close(_null)
os.dup2(2, 1)
_rf, _wf = os.fdopen(_rfd, "rb"), os.fdopen(_wfd, "wb")
def _send(obj):
    for _s in (sys.stdout, sys.stderr):  # what was printed before a reply is in the output file when it arrives
        try:
            _s.flush()
        except BaseException:
            pass
    _wf.write(json.dumps(obj).encode() + b"\n")
    _wf.flush()
def _recv():
    line = _rf.readline()
    if not line:
        raise SystemExit(0)
    return json.loads(line)
_orders = _recv()
resource.setrlimit(resource.RLIMIT_NPROC, (_orders["nproc"], _orders["nproc"]))
'''

# The candidate: load the completion, then answer calls until the parent closes the pipe. Nothing here
# is trusted by anyone: the completion can rewrite all of it and only chooses its own return values.
_CANDIDATE = _PROLOGUE + _CODEC + r'''
def _describe(e):
    try:
        return ("%s: %s" % (type(e).__name__, e))[:300]
    except BaseException:
        return type(e).__name__
def _main():
    g = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        code = compile(_orders["code"], "solution.py", "exec")
    except (SyntaxError, ValueError) as e:
        _send({"load": "syntax_error", "detail": _describe(e)})
        return
    try:
        exec(code, g)
    except MemoryError:
        _send({"load": "memory_limit", "detail": "MemoryError"})
        return
    except BaseException as e:
        errno = e.errno if isinstance(e, OSError) else None
        _send({"load": {27: "output_limit", 28: "tmp_limit"}.get(errno, "failed"), "detail": _describe(e)})
        return
    _send({"load": "ok"})
    while True:
        req = _recv()
        fn = g.get(req["name"])
        try:
            args, kwargs = _dec(req["args"]), _dec(req["kwargs"])
            if fn is None:
                raise NameError("name %r is not defined" % req["name"])
            result = fn(*args, **kwargs)
        except MemoryError:
            _send({"raise": "MemoryError", "msg": ""})
            continue
        except BaseException as e:
            _send({"raise": type(e).__name__, "msg": _describe(e)})
            continue
        try:
            _send({"ok": _enc(result)})
        except BaseException as e:
            _send({"error": "unserialisable result: " + _describe(e)})
_main()
'''

# The test process: runs the task's tests; every free name is a proxy to the candidate.
_TESTER = _PROLOGUE + _CODEC + r'''
import builtins
class _CandidateFailure(BaseException):
    pass
class _Refused(BaseException):
    pass
_BUILTIN_EXC = {n: c for n, c in vars(builtins).items()
                if isinstance(c, type) and issubclass(c, Exception)}
def _proxy(name):
    def call(*args, **kwargs):
        try:
            payload = {"op": "call", "name": name, "args": _enc(list(args)), "kwargs": _enc(dict(kwargs))}
        except _Unserialisable as e:
            raise _Refused("the test passes %s to %s()" % (e, name))
        _send(payload)
        rep = _recv()
        if "ok" in rep:  # by value: the completion cannot change the tests' own data
            return _dec(rep["ok"])
        if "raise" in rep:
            exc = _BUILTIN_EXC.get(rep["raise"])
            if exc is None or exc is AssertionError:
                raise _CandidateFailure("%s() raised %s" % (name, rep["msg"]))
            raise exc(rep["msg"])
        raise _CandidateFailure("%s(): %s" % (name, rep.get("error")))
    call.__name__ = call.__qualname__ = name
    return call
class _Globals(dict):
    def __missing__(self, name):
        if name.startswith("__") or hasattr(builtins, name):
            raise KeyError(name)
        p = _proxy(name)
        self[name] = p
        return p
def _main():
    g = _Globals(__name__="__main__", __builtins__=builtins)
    try:
        if _orders["prelude"]:
            exec(compile(_orders["prelude"], "prompt.py", "exec"), g)
        for i, src in enumerate(_orders["tests"]):
            exec(compile(src, "test_%d.py" % i, "exec"), g)
    except _Refused as e:
        _send({"op": "done", "status": "refused", "detail": str(e)[:300]})
    except _CandidateFailure as e:
        _send({"op": "done", "status": "failed", "detail": str(e)[:300]})
    except BaseException as e:
        _send({"op": "done", "status": "failed", "detail": ("%s: %s" % (type(e).__name__, e))[:300]})
    else:
        _send({"op": "done", "status": "passed"})
_main()
'''


# ---------------------------------------------------------------------------------------------
# Tests and prompts, checked in the parent


def check_tests(tests: list[str]) -> None:
    """Refuse tests that cannot run in the test sandbox (raises `TestsRefusedError`)."""
    if not tests:
        raise TestsRefusedError("a code task needs at least one test")
    for i, src in enumerate(tests):
        try:
            ast.parse(src)
        except (SyntaxError, ValueError) as exc:
            raise TestsRefusedError(f"test {i} is not Python: {exc}") from exc


def _is_stub(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function left for the completion: nothing but a docstring, imports, `pass` or `...`."""
    return all(isinstance(s, (ast.Pass, ast.Import, ast.ImportFrom))
               or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) for s in fn.body)


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def prompt_prelude(prompt: str | None) -> str | None:
    """The part of a Python prompt the tests may rely on: its imports and the functions it defines with a
    body (HumanEval's helpers); the stub to complete is left out. None when the prompt is not Python."""
    if not prompt:
        return None
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError):
        return None
    keep = [s for s in tree.body
            if isinstance(s, (ast.Import, ast.ImportFrom))
            or (isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_stub(s))
            or (isinstance(s, ast.Assign) and _is_literal(s.value))]
    if not any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) for s in keep):
        return None
    return ast.unparse(ast.Module(body=keep, type_ignores=[]))


# ---------------------------------------------------------------------------------------------
# bubblewrap


def _sandbox_uid() -> int | None:
    """The uid bwrap is started under: None (our own) unless we are root, then a throw-away high uid."""
    if os.geteuid() != 0:
        return None
    return 0x7FF00000 + secrets.randbelow(0x10000)


def _interpreters() -> list[tuple[str, str]]:
    """(interpreter, prefix to bind) candidates: our own base interpreter, then the system's."""
    out: list[tuple[str, str]] = []
    own = os.path.realpath(sys.executable)
    if os.path.exists(own):
        out.append((own, os.path.realpath(sys.base_prefix)))
    for extra in ("/usr/bin/python3", shutil.which("python3")):
        if extra and os.path.exists(extra):
            real = os.path.realpath(extra)
            if real not in [o for o, _ in out]:
                out.append((real, "/usr"))
    return out


class _Runtime(NamedTuple):
    """How sandboxes start here, found once by `_probe`."""

    bwrap: str
    python: str
    prefix: str
    own_fs: bool
    """True: `_enter_private_fs` mounts the sandbox's tmpfs (sized, inode-bounded) in a mount namespace of our
    own and bounds SysV IPC and nested user namespaces there; False: bwrap's `--size --tmpfs` (no inode bound),
    where an unprivileged process may not create a user namespace but bwrap may (AppArmor's userns rule)."""


def _bwrap_argv(rt: _Runtime, fs_dir: str | None, limits: SandboxLimits, seccomp_fd: int | None) -> list[str]:
    """The bwrap command line up to the runner's source; `fs_dir` is the mount point `_enter_private_fs`
    fills (own_fs mode), `seccomp_fd` a `_seccomp_fd()` passed to bwrap."""
    argv = [rt.bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr"]
    if not rt.own_fs:  # a fresh IPC namespace of bwrap's (own_fs: the bounded one `_enter_private_fs` made)
        argv += ["--unshare-ipc", "--disable-userns"]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    for link in ("bin", "lib", "lib64", "sbin"):
        p = Path("/") / link
        if p.is_symlink():
            argv += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            argv += ["--ro-bind", str(p), str(p)]
    if not (rt.prefix == "/usr" or rt.prefix.startswith("/usr/")):
        argv += ["--ro-bind", rt.prefix, rt.prefix]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    if rt.own_fs:
        assert fs_dir is not None
        argv += ["--bind", f"{fs_dir}/tmp", "/tmp", "--bind", f"{fs_dir}/shm", "/dev/shm"]
    else:
        size = str(limits.tmp_bytes)
        argv += ["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/dev/shm"]
    argv += ["--remount-ro", "/dev",  # bwrap's /dev is an unsized tmpfs the sandbox could otherwise write
             "--chdir", "/tmp",
             "--uid", str(NOBODY), "--gid", str(NOBODY), "--hostname", "sandbox", "--clearenv",
             "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8",
             "--setenv", "PYTHONHASHSEED", "0", "--setenv", "HOME", "/tmp",
             "--", rt.python, "-I", "-S", "-B", "-c"]
    return argv


# (AUDIT_ARCH_*, memfd_create, setsockopt) by machine. Two ways to hold memory that neither RLIMIT_AS nor the
# tmpfs counts: a memfd (shmem; each capped only by RLIMIT_FSIZE, their number by the descriptors) and a unix
# socket's queue raised with SO_SNDBUF/SO_RCVBUF (up to 2 × net.core.wmem_max each: 219 MiB queued by one
# process in 28 socketpairs at 4 MiB wmem_max). bwrap installs a seccomp filter that refuses both (EPERM);
# a socket keeps the default buffer (net.core.wmem_default). Where the numbers are not known here there is no
# filter, and docs/verifier.md gives the bound that holds then.
_SECCOMP_NRS = {"x86_64": (0xC000003E, 319, 54), "amd64": (0xC000003E, 319, 54),
                "aarch64": (0xC00000B7, 279, 208), "arm64": (0xC00000B7, 279, 208)}
_SOL_SOCKET, _SO_BUFFER_OPTS = 1, (7, 8, 32, 33)  # SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE


@functools.lru_cache(maxsize=1)
def _seccomp_program() -> bytes | None:
    """Classic BPF for bwrap's `--seccomp`: memfd_create and setsockopt(SOL_SOCKET, SO_{SND,RCV}BUF[FORCE])
    fail with EPERM, a syscall of another ABI (i386's int 0x80, x32) kills the process or fails, everything
    else is allowed. seccomp_data: nr at 0, arch at 4, args[i] at 16 + 8i (their low 32 bits first here:
    both machines are little-endian; the kernel reads `level` and `optname` as int, the low 32 bits)."""
    import struct

    known = _SECCOMP_NRS.get(platform.machine().lower())
    if known is None:
        return None
    arch, memfd, setsockopt = known
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    kill, err, allow = 0x80000000, 0x00050000 | 1, 0x7FFF0000
    prog = [
        (ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, kill),  # 0-2: another ABI: kill
        (ld, 0, 0, 0),  # 3: the syscall number
        (jge, 9, 0, 0x40000000),  # 4: x32 → ERR (14)
        (jeq, 8, 0, memfd),  # 5 → ERR
        (jeq, 0, 8, setsockopt),  # 6: else → ALLOW (15)
        (ld, 0, 0, 24), (jeq, 0, 6, _SOL_SOCKET),  # 7-8: level (args[1]); else → ALLOW
        (ld, 0, 0, 32),  # 9: optname (args[2])
        *((jeq, 3 - i, 0, opt) for i, opt in enumerate(_SO_BUFFER_OPTS[:3])),  # 10-12 → ERR
        (jeq, 0, 1, _SO_BUFFER_OPTS[3]),  # 13: → ERR, else → ALLOW
        (ret, 0, 0, err), (ret, 0, 0, allow)]  # 14, 15
    return b"".join(struct.pack("=HBBI", *i) for i in prog)


def _seccomp_fd() -> int | None:
    """A pipe's read end holding `_seccomp_program()` (bwrap reads it to EOF), or None where none is known."""
    prog = _seccomp_program()
    if prog is None:
        return None
    r, w = os.pipe()
    os.write(w, prog)
    os.close(w)
    return r

_SYS_KEYCTL = {"x86_64": 250, "amd64": 250, "aarch64": 219, "arm64": 219, "riscv64": 219, "i686": 288,
               "i386": 288, "armv7l": 311, "ppc64le": 311, "s390x": 280}
_KEYCTL_JOIN_SESSION_KEYRING = 1


@functools.lru_cache(maxsize=1)
def _keyctl() -> Any:
    """libc's syscall(2) bound to keyctl(2), or None where this architecture's number is not known.

    The kernel's session keyring is inherited across fork, exec and bubblewrap's namespaces: a sandbox
    that kept the caller's could read the keys in it. Every sandbox joins a fresh, empty one first."""
    import ctypes
    import platform

    nr = _SYS_KEYCTL.get(platform.machine().lower())
    if nr is None:
        return None
    syscall = ctypes.CDLL(None, use_errno=True).syscall
    return functools.partial(syscall, nr, _KEYCTL_JOIN_SESSION_KEYRING, None)


_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x4000, 1 << 18
_PR_SET_DUMPABLE = 4
# SysV IPC in the sandbox's IPC namespace: none. A segment (or queue, or semaphore set) outlives the
# mapping that filled it and is not counted by RLIMIT_AS: attach, fill, detach, repeat would hold memory
# without bound. `max_user_namespaces` = 2 leaves the two bwrap makes under ours (one as uid 0 to mount devpts
# for `--dev`, one mapping uid 65534) and no further one
# (where the sandbox could mount a tmpfs of its own, unsized): `test_no_user_namespace_sysv_ipc_memfd_socket_buffer_or_dev_file`.
_NS_SYSCTLS = (("kernel/shmmax", "0"), ("kernel/shmall", "0"), ("kernel/shmmni", "0"), ("kernel/msgmni", "0"),
               ("kernel/sem", "0 0 0 0"), ("user/max_user_namespaces", "2"))


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _enter_private_fs(fs_dir: str, limits: SandboxLimits) -> None:
    """In the child, before bwrap: a user namespace (uid 0 in it = our uid), a mount namespace with the
    sandbox's tmpfs (`size=tmp_bytes,nr_inodes=tmp_inodes`) on `fs_dir`, and an IPC namespace without SysV
    IPC. bwrap binds the tmpfs's `tmp` and `shm` onto /tmp and /dev/shm. Everything here dies with the last
    process in these namespaces: the tmpfs is freed when the sandbox ends."""
    import ctypes

    libc = _libc()

    def ok(r: int, what: str) -> None:
        if r != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"{what}: {os.strerror(e)}")

    def write(path: str, data: str) -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, data.encode())
        finally:
            os.close(fd)

    uid, gid = os.getuid(), os.getgid()
    ok(libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")  # setuid cleared it: /proc/self is ours
    ok(libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWIPC), "unshare(user, mount, ipc)")
    write("/proc/self/setgroups", "deny")
    write("/proc/self/uid_map", f"0 {uid} 1")
    write("/proc/self/gid_map", f"0 {gid} 1")
    ok(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount(/, private)")
    opts = f"size={limits.tmp_bytes},nr_inodes={limits.tmp_inodes},mode=0755".encode()
    ok(libc.mount(b"tmpfs", fs_dir.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts), "mount(tmpfs)")
    for sub in ("tmp", "shm"):
        os.mkdir(f"{fs_dir}/{sub}")
        os.chmod(f"{fs_dir}/{sub}", 0o1777)
    for name, value in _NS_SYSCTLS:
        try:
            write(f"/proc/sys/{name}", value)
        except FileNotFoundError:
            if not name.startswith("kernel/"):
                raise  # a kernel without SysV IPC (no kernel/shm*) has none to bound


def _preexec(limits: SandboxLimits, uid: int | None, fs_dir: str | None):
    join_keyring = _keyctl()
    _libc()  # loaded here, not in the child

    def preexec() -> None:  # runs in the child between fork and exec
        try:
            _preexec_steps()
        except BaseException as exc:  # subprocess reports only "Exception occurred in preexec_fn": say which
            with contextlib.suppress(OSError):
                os.write(2, f"sandbox preexec: {type(exc).__name__}: {exc}\n".encode(errors="replace"))
            raise

    def _preexec_steps() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_output_bytes, limits.max_output_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))  # no POSIX message queue can hold a byte
        if uid is not None:  # root: start bwrap without any of root's privileges
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        # a fresh session keyring (a kernel without keys support has nothing to leak: ENOSYS is fine)
        if join_keyring is not None and join_keyring() < 0:
            import ctypes
            import errno

            if ctypes.get_errno() != errno.ENOSYS:
                raise OSError(ctypes.get_errno(), "keyctl(JOIN_SESSION_KEYRING) failed")
        if fs_dir is not None:
            _enter_private_fs(fs_dir, limits)
        # last: until exec closes them, the child holds every descriptor its parent had open; with the limit set
        # first, a parent using descriptors 0..63 (a busy node, a long test process) made every open above fail
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    return preexec


@contextlib.contextmanager
def _run_dir() -> Any:
    """A directory for one run: its output files (0600) and the mount points of its sandboxes' tmpfs (empty on
    the host; traversable by the unprivileged uid bwrap runs under, which mounts over them in its own namespace)."""
    with tempfile.TemporaryDirectory(prefix="intellect-sbx-") as tmp:
        os.chmod(tmp, 0o711)
        yield Path(tmp)


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[_Runtime | None, str]:
    """(how sandboxes start, '') when a sandbox runs here, else (None, why not). Probed once per process:
    first with the tmpfs and namespaces of our own (`_enter_private_fs`), then with bwrap's `--size`."""
    bwrap = shutil.which("bwrap") or ("/usr/bin/bwrap" if os.path.exists("/usr/bin/bwrap") else None)
    if _keyctl() is None:
        import platform

        return None, (f"the sandbox does not know keyctl(2)'s number on {platform.machine()!r}: it cannot give a "
                      "sandbox an empty session keyring here")
    if bwrap is None:
        return None, "bubblewrap (bwrap) is not installed: run tools/bootstrap.sh as root, or 'apt-get install bubblewrap'"
    why = []
    for own_fs in (True, False):
        for python, prefix in _interpreters():
            rt = _Runtime(bwrap, python, prefix, own_fs)
            limits = SandboxLimits()
            with _run_dir() as tmp:
                os.mkdir(f"{tmp}/fs", 0o755)
                sfd = _seccomp_fd()
                try:
                    proc = subprocess.run(
                        [*_bwrap_argv(rt, f"{tmp}/fs", limits, sfd),
                         "import os, sys; assert os.getuid() == 65534 and sys.version_info >= (3, 10); "
                         "open('/tmp/probe', 'w').close(); open('/dev/shm/probe', 'w').close(); print('ok')"],
                        capture_output=True, timeout=30, cwd="/", pass_fds=() if sfd is None else (sfd,),
                        preexec_fn=_preexec(limits, _sandbox_uid(), f"{tmp}/fs" if own_fs else None),
                    )
                except (OSError, subprocess.SubprocessError) as exc:
                    why.append(f"{python} ({'own tmpfs' if own_fs else 'bwrap --size'}): {exc}")
                    continue
                finally:
                    if sfd is not None:
                        os.close(sfd)
            if proc.returncode == 0 and proc.stdout.strip() == b"ok":
                if not own_fs:
                    logger.warning("sandbox: no user namespace of our own here (%s); /tmp and /dev/shm are bwrap's "
                                   "sized tmpfs without an inode bound, and SysV IPC is not bounded",
                                   "; ".join(why)[:300])
                return rt, ""
            why.append(f"{python} ({'own tmpfs' if own_fs else 'bwrap --size'}): "
                       f"{proc.stderr.decode(errors='replace').strip()[:200] or proc.returncode}")
    return None, "bubblewrap cannot start a sandbox here (" + "; ".join(why) + ")"


def sandbox_available() -> tuple[bool, str]:
    """(True, '') when code can be run here, else (False, the reason)."""
    rt, why = _probe()
    return bool(rt), why


# ---------------------------------------------------------------------------------------------
# One run


class _Proc:
    """One sandbox: a bwrap process, its JSON-lines channel, and its capped output file."""

    def __init__(self, rt: _Runtime, source: str, limits: SandboxLimits, run_dir: Path, name: str) -> None:
        self.out_path = out_path = run_dir / f"{name}.out"
        fs_dir = run_dir / f"{name}.fs"  # this sandbox's own tmpfs mount point (own_fs)
        fs_dir.mkdir(mode=0o755)
        sfd = _seccomp_fd()
        try:
            with open(os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
                self.p = subprocess.Popen(
                    [*_bwrap_argv(rt, str(fs_dir), limits, sfd), source], stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, stderr=out, cwd="/", env={"PATH": "/usr/bin:/bin"},
                    start_new_session=True, pass_fds=() if sfd is None else (sfd,),
                    preexec_fn=_preexec(limits, _sandbox_uid(), str(fs_dir) if rt.own_fs else None),
                )
        finally:
            if sfd is not None:
                os.close(sfd)
        assert self.p.stdin is not None and self.p.stdout is not None
        self.fd = self.p.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.poll = select.poll()
        self.poll.register(self.fd, select.POLLIN)
        self.buf = bytearray()
        self.eof = False

    def send(self, obj: Any) -> bool:
        try:
            assert self.p.stdin is not None
            self.p.stdin.write(json.dumps(obj).encode() + b"\n")
            self.p.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def recv(self, deadline: float) -> Any:
        """The next JSON line; None on EOF, TimeoutError past the deadline, ValueError on garbage."""
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line = bytes(self.buf[:nl])
                del self.buf[: nl + 1]
                try:
                    return json.loads(line)
                except RecursionError:
                    raise ValueError("message nested too deep") from None
            if len(self.buf) > MAX_MESSAGE_BYTES:
                raise ValueError("message too large")
            if self.eof:
                return None
            try:
                chunk = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError from None
                self.poll.poll(left * 1000)
                continue
            if not chunk:
                self.eof = True
            self.buf += chunk

    def kill(self) -> int | None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.p.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            self.p.kill()
        for f in (self.p.stdin, self.p.stdout):
            with contextlib.suppress(OSError, ValueError):
                f.close()  # type: ignore[union-attr]
        try:
            return self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return None

    def output(self) -> str:
        try:
            return self.out_path.read_bytes()[-4096:].decode("utf-8", "replace")
        except OSError:
            return ""


def _start_pair(rt: _Runtime, limits: SandboxLimits, tmp: Path) -> tuple[_Proc, _Proc]:
    """The run's two sandboxes (the completion's, the tests'). A start the kernel refuses between fork and exec
    (seen once in CI, not reproduced: "Exception occurred in preexec_fn") is tried once more; the error names the
    step that failed (the child writes it to its output file)."""
    for attempt in (1, 2):
        started: list[_Proc] = []
        try:
            started.append(_Proc(rt, _CANDIDATE, limits, tmp, f"candidate{attempt}"))
            started.append(_Proc(rt, _TESTER, limits, tmp, f"tests{attempt}"))
            return started[0], started[1]
        except (OSError, subprocess.SubprocessError) as exc:
            for proc in started:
                proc.kill()
            step = "; ".join(line for f in sorted(tmp.glob(f"*{attempt}.out"))
                             for line in f.read_text(errors="replace").splitlines() if "sandbox preexec" in line)
            why = f"bubblewrap could not start: {exc}" + (f" ({step})" if step else "")
            if attempt == 2:
                raise SandboxUnavailableError(why) from exc
            logger.warning("sandbox: %s; trying once more", why)
    raise AssertionError("unreachable")


def _died_reason(rc: int | None, cand: _Proc) -> SandboxReason:
    """Why the completion's process ended with status `rc`: a limit's signal, a MemoryError it printed, or
    an early exit."""
    if rc is not None and rc in (-signal.SIGXCPU, 128 + signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGKILL):
        return SandboxReason.CPU_LIMIT
    if rc is not None and rc in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ):
        return SandboxReason.OUTPUT_LIMIT
    if rc is not None and rc in (-signal.SIGBUS, 128 + signal.SIGBUS):
        return SandboxReason.TMP_LIMIT  # a page of an mmap'd tmpfs file that the full tmpfs could not give
    if "MemoryError" in cand.output():
        return SandboxReason.MEMORY_LIMIT
    return SandboxReason.EARLY_EXIT


_LOAD_FAILURES = frozenset({SandboxReason.SYNTAX_ERROR, SandboxReason.MEMORY_LIMIT, SandboxReason.OUTPUT_LIMIT,
                            SandboxReason.TMP_LIMIT, SandboxReason.FAILED})
"""The verdicts the candidate's runner reports when the completion does not load (`_CANDIDATE`'s `_main`)."""


def _relay(reply: Any) -> dict[str, Any]:
    """The candidate's reply, checked and rebuilt by the parent: only typed values cross."""
    if not isinstance(reply, dict):
        return {"error": "the completion's process sent no valid reply"}
    if "ok" in reply:
        try:
            return {"ok": _enc(_dec(reply["ok"]))}
        except (ValueError, TypeError, OverflowError, RecursionError, _Unserialisable):
            return {"error": "the completion's process sent a malformed value"}
    if "raise" in reply:
        name, msg = reply.get("raise"), reply.get("msg", "")
        if isinstance(name, str) and name.isidentifier() and len(name) <= 100 and isinstance(msg, str):
            return {"raise": name, "msg": msg[:300]}
    if isinstance(reply.get("error"), str):
        return {"error": reply["error"][:300]}
    return {"error": "the completion's process sent no valid reply"}


def run_python(
    code: str, tests: list[str], limits: SandboxLimits | None = None, *, prelude: str | None = None
) -> SandboxResult:
    """Run `code` (untrusted) against `tests` (task code), each in its own bubblewrap sandbox.

    `tests` are Python snippets run in order in one namespace (assert lines, HumanEval's `check`
    module then `check(entry_point)`, MBPP's setup then asserts); names they use but do not define are
    the completion's functions, called across the sandbox boundary. `prelude` is trusted task code run
    before the tests (`prompt_prelude(task.prompt)`). Raises `SandboxUnavailableError` when no sandbox
    can run here; never raises for anything the code or the tests do.
    """
    limits = limits or SandboxLimits()
    if limits.network:
        raise ValueError("the code sandbox has no network; SandboxLimits.network must be False")
    rt, why = _probe()
    if not rt:
        raise SandboxUnavailableError(why)
    if not code or not code.strip():
        return SandboxResult(passed=False, reason=SandboxReason.NO_CODE)
    try:
        if tests:  # no tests at all: the code still runs, and a run that calls nothing never passes
            check_tests(tests)
    except TestsRefusedError as exc:
        return SandboxResult(passed=False, reason=SandboxReason.REFUSED, stderr=str(exc))
    start = time.monotonic()
    deadline = start + limits.wall_seconds
    nproc = limits.max_processes
    with _run_dir() as tmp:
        cand, tester = _start_pair(rt, limits, tmp)
        calls = 0
        reason, detail, rc = SandboxReason.ERROR, "", None
        try:
            cand.send({"nproc": nproc, "code": code})
            tester.send({"nproc": nproc, "prelude": prelude, "tests": list(tests)})
            try:
                loaded = cand.recv(deadline)
            except ValueError:
                loaded = None
            if not isinstance(loaded, dict) or loaded.get("load") != "ok":
                # the completion can write to this channel itself: of what it says about its load, only a failure
                # its runner reports is believed ({"load": "passed"} was a pass with no test run; a list, a crash)
                if isinstance(loaded, dict) and isinstance(loaded.get("load"), str) and loaded["load"] in _LOAD_FAILURES:
                    reason, detail = SandboxReason(loaded["load"]), str(loaded.get("detail", ""))
                else:
                    rc = cand.kill()
                    reason, detail = _died_reason(rc, cand), f"the completion's process ended (status {rc})"
            else:
                while True:
                    try:
                        msg = tester.recv(deadline)
                    except ValueError:
                        msg = None
                    if not isinstance(msg, dict) or msg.get("op") not in ("call", "done"):
                        reason, detail = SandboxReason.ERROR, f"the test process ended: {tester.output()[-300:]}"
                        break
                    if msg["op"] == "done":
                        status = msg.get("status")
                        detail = str(msg.get("detail", ""))
                        if status == "passed":
                            reason = SandboxReason.PASSED if calls else SandboxReason.NO_CALLS
                        elif status == "refused":
                            reason = SandboxReason.REFUSED
                        else:
                            reason = SandboxReason.FAILED
                            if "unserialisable" in detail:
                                reason = SandboxReason.FORBIDDEN
                        break
                    calls += 1
                    if cand.eof or not cand.send({"name": msg.get("name"), "args": msg.get("args"),
                                                 "kwargs": msg.get("kwargs")}):
                        reply: dict[str, Any] = {"error": "the completion's process has exited"}
                    else:
                        try:
                            reply = _relay(cand.recv(deadline))
                        except ValueError:
                            reply = {"error": "the completion's process sent no valid reply"}
                    if reply.get("error") == "the completion's process sent no valid reply" and cand.eof:
                        reply = {"error": "the completion's process has exited"}
                    tester.send(reply)
                if reason is SandboxReason.FAILED and cand.eof:
                    rc = cand.kill()
                    reason = _died_reason(rc, cand)
        except TimeoutError:
            reason, detail = SandboxReason.TIMEOUT, f"past the wall-clock limit of {limits.wall_seconds} s"
        finally:
            crc = cand.kill()
            tester.kill()
            rc = rc if rc is not None else crc
            out = cand.output()
    wall = time.monotonic() - start
    if reason is SandboxReason.FAILED and "File too large" in detail:
        reason = SandboxReason.OUTPUT_LIMIT
    if reason is SandboxReason.FAILED and "No space left on device" in detail:
        reason = SandboxReason.TMP_LIMIT
    return SandboxResult(passed=reason is SandboxReason.PASSED, reason=reason, returncode=rc,
                         wall_seconds=wall, calls=calls, stdout=out, stderr=detail[-4096:])
