"""Run untrusted Python (a model's completion) against a task's tests, in a sandbox.

Layers, each of which alone stops the common failure (a hang, a bomb, a reward hack by exit):
- a fresh temp dir as cwd, removed afterwards; `python -I -B` (isolated: no user site,
  no PYTHONPATH, no bytecode writes);
- resource limits set in the child before exec: RLIMIT_CPU (CPU seconds), RLIMIT_AS (memory),
  RLIMIT_NPROC (processes: fork bombs), RLIMIT_FSIZE (file size: stdout/stderr go to files, so
  this is also the output cap), RLIMIT_NOFILE, no core dumps;
- a wall-clock timeout that SIGKILLs the whole process group (a sleeping process uses no CPU);
- when running as root with util-linux `unshare`: a new, empty network namespace (`unshare -n`)
  and the child drops to uid/gid 65534 (nobody), so RLIMIT_NPROC applies and nothing of ours
  is writable;
- inside the interpreter, a PEP 578 audit hook installed before the completion runs (audit
  hooks cannot be removed): refuses sockets, subprocesses, fork/exec, ctypes, `sys._getframe`,
  gc object walks, and file writes/renames/removals outside the temp dir.
The completion passes only if the test code runs to its end and the runner prints a nonce that
it read from stdin before handing over control: exiting early with status 0 (`os._exit(0)`,
`sys.exit(0)`) is a failure. Known limit: code that deliberately walks traceback frames
(`tb_frame.f_back`) can read the nonce and forge a pass; the OS-level limits (CPU, memory,
processes, network, files) hold regardless. Likewise an object whose `__eq__` always returns
True can satisfy `assert f(x) == y`: tests should compare with `type(...) is` when that matters.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

logger = logging.getLogger(__name__)

__all__ = ["SandboxLimits", "SandboxReason", "SandboxResult", "run_python"]

NOBODY = 65534


class SandboxLimits(BaseModel):
    """Resource limits of one sandboxed run."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cpu_seconds: int = Field(default=5, ge=1)
    """RLIMIT_CPU: CPU time of the process (SIGXCPU, then SIGKILL)."""
    wall_seconds: float = Field(default=10.0, gt=0)
    """Wall-clock limit; the process group is killed after it."""
    memory_bytes: int = Field(default=512 * 2**20, ge=64 * 2**20)
    """RLIMIT_AS: address space (a memory bomb gets MemoryError)."""
    max_processes: int = Field(default=16, ge=1)
    """RLIMIT_NPROC (enforced when the child runs as an unprivileged user)."""
    max_output_bytes: int = Field(default=1 * 2**20, ge=1024)
    """RLIMIT_FSIZE: cap on stdout, stderr and any file the code writes."""
    network: bool = False
    """Allow network access (never for rewards)."""


class SandboxReason(StrEnum):
    PASSED = "passed"
    FAILED = "failed"  # a test raised (AssertionError, wrong output, ...)
    SYNTAX_ERROR = "syntax_error"
    TIMEOUT = "timeout"  # wall clock
    CPU_LIMIT = "cpu_limit"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    FORBIDDEN = "forbidden"  # the audit hook refused an operation (network, subprocess, write outside)
    EARLY_EXIT = "early_exit"  # the process ended without finishing the tests
    NO_CODE = "no_code"
    ERROR = "error"  # the sandbox itself could not run


class SandboxResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    passed: bool
    reason: SandboxReason
    returncode: int | None = None
    wall_seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""


# The runner reads the nonce from stdin, installs the audit hook, then executes the completion
# and the tests in one namespace. Errors are reported as a tagged last line on stderr.
_RUNNER = r"""
import sys, os
def _run():
    _nonce = sys.stdin.readline().strip()
    _root = os.path.realpath(os.getcwd())
    _allow_net = os.environ.get("SANDBOX_NET") == "1"
    _BLOCK = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
              "os.forkpty", "os.kill", "os.killpg", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata",
              "ctypes.call_function", "sys._current_frames", "gc.get_referrers",
              "gc.get_objects", "os.chroot", "os.setuid", "sys.settrace", "sys.setprofile",
              "code.__new__", "os.putenv", "os.unsetenv", "sys.addaudithook", "cpython.remove_audit_hook"}
    _NET = {"socket.__new__", "socket.connect", "socket.bind", "socket.getaddrinfo", "socket.sendto",
            "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo"}
    _PATHS = {"os.remove": 0, "os.rmdir": 0, "os.rename": (0, 1), "os.mkdir": 0, "os.chmod": 0,
              "os.chown": 0, "os.symlink": (0, 1), "os.link": (0, 1), "os.truncate": 0,
              "os.utime": 0, "shutil.rmtree": 0, "shutil.move": (0, 1), "shutil.copyfile": 1}
    _W = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
    _rp, _fs = os.path.realpath, os.fspath
    class SandboxViolation(BaseException):
        pass
    class FrameAccessRefused(ValueError):
        # a ValueError: stdlib callers of sys._getframe (namedtuple, typing) fall back gracefully
        pass
    def _inside(p):
        if isinstance(p, int):
            return True
        p = _rp(_fs(p))
        return p == _root or p.startswith(_root + os.sep)
    def _hook(event, args):
        if event in _BLOCK or (event in _NET and not _allow_net):
            raise SandboxViolation(event)
        if event == "import" and args[0] in ("ctypes", "_ctypes", "_posixsubprocess", "pty"):
            raise SandboxViolation("import " + args[0])
        if event == "sys._getframe" or (event == "object.__getattr__" and args[1] in ("gi_frame", "cr_frame", "ag_frame")):
            raise FrameAccessRefused("frame access is disabled in the sandbox")
        if event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (isinstance(flags, int) and flags & _W)
            if writing and path is not None and not _inside(path):
                raise SandboxViolation("write outside sandbox: " + str(path))
        elif event in _PATHS:
            pos = _PATHS[event]
            for i in (pos if isinstance(pos, tuple) else (pos,)):
                if i < len(args) and args[i] is not None and not _inside(args[i]):
                    raise SandboxViolation(event + " outside sandbox")
    _src = open("solution.py").read()
    _tests = [open(n).read() for n in sorted(os.listdir(".")) if n.startswith("test_") and n.endswith(".py")]
    sys.addaudithook(_hook)
    _g = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(_src, "solution.py", "exec"), _g)
        for _i, _t in enumerate(_tests):
            exec(compile(_t, "test_%d.py" % _i, "exec"), _g)
    except SandboxViolation as _e:
        sys.stderr.write("\n@@SANDBOX forbidden %s\n" % _e); sys.stderr.flush(); os._exit(3)
    except SyntaxError as _e:
        sys.stderr.write("\n@@SANDBOX syntax_error %s\n" % _e); sys.stderr.flush(); os._exit(4)
    except MemoryError:
        sys.stderr.write("\n@@SANDBOX memory_limit\n"); sys.stderr.flush(); os._exit(5)
    except BaseException as _e:
        sys.stderr.write("\n@@SANDBOX failed %s: %s\n" % (type(_e).__name__, _e)); sys.stderr.flush(); os._exit(1)
    sys.stdout.write("\n@@SANDBOX-OK " + _nonce + "\n"); sys.stdout.flush()
    os._exit(0)
_run()
"""


def _unshare() -> str | None:
    if os.geteuid() != 0:
        return None
    return shutil.which("unshare")


@functools.lru_cache(maxsize=4)
def _interpreter_for_nobody(candidate: str) -> bool:
    """Can uid 65534 execute `candidate` inside an empty network namespace? (probed once)."""
    unshare = _unshare()
    if unshare is None:
        return False
    try:
        proc = subprocess.run(
            [unshare, "-n", "-S", str(NOBODY), "-G", str(NOBODY), "--", candidate, "-I", "-c", "pass"],
            capture_output=True,
            timeout=20,
            cwd="/",
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def _pick_command(limits: SandboxLimits) -> tuple[list[str], bool]:
    """(command prefix incl. interpreter, dropped-privileges?)."""
    candidates = [sys.executable]
    for extra in (shutil.which("python3"), "/usr/bin/python3"):
        if extra:
            real = os.path.realpath(extra)
            if real not in candidates and os.path.exists(real):
                candidates.append(real)
    unshare = _unshare()
    if unshare is not None:
        for cand in candidates:
            if _interpreter_for_nobody(cand):
                net = [] if limits.network else ["-n"]
                return [unshare, *net, "-S", str(NOBODY), "-G", str(NOBODY), "--", cand], True
        if not limits.network:
            return [unshare, "-n", "--", sys.executable], False
    return [sys.executable], False


def _set_limits(limits: SandboxLimits, dropped: bool):
    def preexec() -> None:  # runs in the child between fork and exec
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_output_bytes, limits.max_output_bytes))
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if dropped:
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))

    return preexec


def run_python(code: str, tests: list[str], limits: SandboxLimits | None = None) -> SandboxResult:
    """Execute `code`, then each test snippet, in one namespace in a sandboxed subprocess.

    Never raises for anything the code does; a sandbox that cannot start gives reason ERROR.
    """
    limits = limits or SandboxLimits()
    if not code or not code.strip():
        return SandboxResult(passed=False, reason=SandboxReason.NO_CODE)
    start = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="intellect-sbx-") as work,
        tempfile.TemporaryDirectory(prefix="intellect-sbx-out-") as outdir,
    ):
        workdir = Path(work) / "run"
        workdir.mkdir()
        (workdir / "solution.py").write_text(code, encoding="utf-8", errors="replace")
        for i, t in enumerate(tests):
            (workdir / f"test_{i:04d}.py").write_text(t, encoding="utf-8", errors="replace")
        prefix, dropped = _pick_command(limits)
        if dropped:
            os.chmod(work, 0o755)
            os.chown(workdir, NOBODY, NOBODY)
            for f in workdir.iterdir():
                os.chown(f, NOBODY, NOBODY)
        nonce = secrets.token_hex(16)
        out_path, err_path = Path(outdir) / "stdout", Path(outdir) / "stderr"
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
        if limits.network:
            env["SANDBOX_NET"] = "1"
        try:
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                proc = subprocess.Popen(
                    [*prefix, "-I", "-B", "-c", _RUNNER],
                    cwd=workdir,
                    stdin=subprocess.PIPE,
                    stdout=out,
                    stderr=err,
                    env=env,
                    start_new_session=True,
                    preexec_fn=_set_limits(limits, dropped),
                )
                timed_out = False
                try:
                    assert proc.stdin is not None
                    proc.stdin.write((nonce + "\n").encode())
                    proc.stdin.close()
                except BrokenPipeError:
                    pass
                try:
                    proc.wait(timeout=limits.wall_seconds)
                except subprocess.TimeoutExpired:
                    timed_out = True
                finally:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)  # also any stray children
                    proc.wait()
        except OSError as exc:
            logger.error("sandbox could not start: %s", exc)
            return SandboxResult(passed=False, reason=SandboxReason.ERROR, stderr=str(exc))
        wall = time.monotonic() - start
        stdout = out_path.read_bytes()[-65536:].decode("utf-8", "replace")
        stderr = err_path.read_bytes()[-65536:].decode("utf-8", "replace")
    rc = proc.returncode
    reason = _classify(rc, timed_out, stdout, stderr, nonce, limits)
    return SandboxResult(
        passed=reason is SandboxReason.PASSED,
        reason=reason,
        returncode=rc,
        wall_seconds=wall,
        stdout=stdout[-4096:],
        stderr=stderr[-4096:],
    )


def _classify(
    rc: int | None, timed_out: bool, stdout: str, stderr: str, nonce: str, limits: SandboxLimits
) -> SandboxReason:
    if timed_out:
        return SandboxReason.TIMEOUT
    if rc == 0:
        lines = stdout.rstrip("\n").splitlines()
        if lines and lines[-1] == f"@@SANDBOX-OK {nonce}":
            return SandboxReason.PASSED
        return SandboxReason.EARLY_EXIT
    if rc in (-signal.SIGXCPU, -signal.SIGKILL) and "@@SANDBOX" not in stderr:
        return SandboxReason.CPU_LIMIT
    if rc == -signal.SIGXFSZ:
        return SandboxReason.OUTPUT_LIMIT
    tail = [line for line in stderr.splitlines() if line.startswith("@@SANDBOX ")]
    if tail:
        kind = tail[-1].split()[1]
        for reason in SandboxReason:
            if reason.value == kind:
                if reason is SandboxReason.FAILED and "File too large" in tail[-1]:
                    return SandboxReason.OUTPUT_LIMIT
                return reason
    if "MemoryError" in stderr:
        return SandboxReason.MEMORY_LIMIT
    return SandboxReason.EARLY_EXIT if rc == 0 else SandboxReason.FAILED
