"""The sandbox's rules pinned to exact values (issue 39): each limit as the sandboxed process sees it, each bwrap flag
that isolates, the verdict each way a run can end maps to, the channel's caps, and the parent's helpers (argv,
seccomp program, relay of replies, tests and prompts). Runs in the sandbox are short (~0.2 s each)."""

from __future__ import annotations

import pytest

from intellect.verifier.sandbox import SandboxLimits, SandboxReason, run_python, sandbox_available

needs_sandbox = pytest.mark.skipif(not sandbox_available()[0], reason=f"no sandbox here: {sandbox_available()[1]}")

MIB = 2**20
FAST = SandboxLimits(cpu_seconds=2, wall_seconds=6, memory_bytes=256 * MIB)
# the completion reaching its own runner's channel: `_send` is a global of the runner's __main__

_FORGE = "import sys, os\nsys.modules['__main__']._send({forged!r})\nos._exit(0)\n"


# --------------------------------------------------------------------------------------------------
# what the completion's process says about its own load is believed only when it is a failure


@needs_sandbox
@pytest.mark.parametrize("forged", [{"load": "passed"}, {"load": "no_calls"}, {"load": "error"}, {"load": "timeout"}])
def test_a_load_verdict_forged_by_the_completion_is_never_a_pass(forged):
    """Bug found by this issue's mutation pass: the completion wrote {"load": "passed"} on its runner's channel and
    got passed=True (reward 1.0) with no test run; only the runner's own load failures are believed now."""
    r = run_python(_FORGE.format(forged=forged), ["assert f(1) == 3"], FAST)
    assert (r.passed, r.calls, r.stderr.startswith("the completion's process ended (status ")) == (False, 0, True), r
    assert r.reason is not SandboxReason.PASSED and r.reason.value != forged["load"], r


@needs_sandbox
@pytest.mark.parametrize("forged", [{"load": ["passed"]}, {"load": {"a": 1}}, {"load": 3}])
def test_a_load_verdict_of_another_type_is_a_failure_not_a_crash(forged):
    """Bug found with the one above: {"load": [...]} made run_python raise TypeError (unhashable) in the scorer."""
    r = run_python(_FORGE.format(forged=forged), ["assert f(1) == 3"], FAST)
    assert (r.passed, r.calls, r.stderr.startswith("the completion's process ended (status ")) == (False, 0, True), r


@needs_sandbox
@pytest.mark.parametrize("load", ["syntax_error", "memory_limit", "output_limit", "tmp_limit", "failed"])
def test_a_load_failure_the_runner_reports_is_the_verdict(load):
    r = run_python(_FORGE.format(forged={"load": load, "detail": "why " + load}), ["assert f(1) == 3"], FAST)
    assert (r.passed, r.reason.value, r.stderr, r.calls) == (False, load, "why " + load, 0), r


# --------------------------------------------------------------------------------------------------
# the parent's helpers: tests and prompts


def test_check_tests_needs_one_test_and_names_the_one_that_is_not_python():
    from intellect.verifier.sandbox import TestsRefusedError, check_tests

    with pytest.raises(TestsRefusedError) as err:
        check_tests([])
    assert str(err.value) == "a code task needs at least one test"
    with pytest.raises(TestsRefusedError) as err:
        check_tests(["assert True", "x = 1", "assert f(1) =="])
    assert str(err.value) == "test 2 is not Python: invalid syntax (<unknown>, line 1)"
    assert isinstance(err.value.__cause__, SyntaxError)
    assert check_tests(["assert True", "def g():\n    return 1"]) is None


_PROMPT = ('import math\nfrom os import path\nX = 3\nY = [1, 2]\nZ = foo()\nW = {[1]: 2}\n\n'
           'def helper(x):\n    return x + X\n\nasync def ahelper():\n    return 1\n\n'
           'def stub(x):\n    """doc"""\n    import re\n    from os import sep\n    pass\n    ...\n\n'
           'async def astub():\n    pass\n\ndef calls():\n    print(1)\n\nclass K:\n    pass\nprint(1)\n')


def test_prompt_prelude_keeps_imports_literal_constants_and_helpers_exactly():
    """Imports, assignments of a literal (not a call, not an unhashable key) and functions with a body are kept,
    in order; stubs (docstring, imports, pass, ...) of either kind, classes and statements are dropped."""
    from intellect.verifier.sandbox import prompt_prelude

    assert prompt_prelude(_PROMPT) == ("import math\nfrom os import path\nX = 3\nY = [1, 2]\n\n"
                                       "def helper(x):\n    return x + X\n\nasync def ahelper():\n    return 1\n\n"
                                       "def calls():\n    print(1)")


@pytest.mark.parametrize("prompt", [None, "", "Write a function f.", "import math\nX = 3\n",
                                    'def f(x):\n    """doc"""\n', "async def f():\n    ...\n", "x = '\0'"])
def test_prompt_prelude_is_none_without_a_helper_function(prompt):
    from intellect.verifier.sandbox import prompt_prelude

    assert prompt_prelude(prompt) is None


def test_a_stub_is_only_docstring_imports_pass_and_ellipsis():
    import ast

    from intellect.verifier.sandbox import _is_literal, _is_stub

    def fn(src):
        return ast.parse(src).body[0]

    assert _is_stub(fn('def f():\n    "doc"\n    import os\n    from os import sep\n    pass\n    ...\n'))
    assert _is_stub(fn("async def f():\n    pass\n"))
    for body in ("return 1", "x = 1", "print(1)", "'doc'\n    return None"):
        assert not _is_stub(fn(f"def f():\n    {body}\n")), body
    assert [_is_literal(ast.parse(s).body[0].value) for s in ("3", "[1, (2, 'a')]", "foo()", "{[1]: 2}", "x")] == [
        True, True, False, False, False]


# --------------------------------------------------------------------------------------------------
# how bwrap is started: its uid, the interpreter, the command line


def test_bwrap_runs_under_a_throw_away_uid_only_when_we_are_root(monkeypatch):
    from intellect.verifier import sandbox

    asked = []
    monkeypatch.setattr(sandbox.secrets, "randbelow", lambda n: asked.append(n) or 7)
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 0)
    assert (sandbox._sandbox_uid(), asked) == (0x7FF00007, [0x10000])
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    assert (sandbox._sandbox_uid(), asked) == (None, [0x10000])


def test_the_interpreters_tried_are_ours_with_its_base_prefix_then_the_systems(monkeypatch, tmp_path):
    import os

    from intellect.verifier import sandbox

    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("no /usr/bin/python3 here")
    (tmp_path / "base" / "bin").mkdir(parents=True)
    (tmp_path / "base" / "bin" / "python3.11").write_text("")
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(tmp_path / "base" / "bin" / "python3.11")
    (tmp_path / "baselink").symlink_to(tmp_path / "base")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "python3").write_text("")
    system = os.path.realpath("/usr/bin/python3")
    monkeypatch.setattr(sandbox.sys, "executable", str(tmp_path / "venv" / "bin" / "python"))
    monkeypatch.setattr(sandbox.sys, "base_prefix", str(tmp_path / "baselink"))
    which = {"python3": str(tmp_path / "other" / "python3")}
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: which.get(name))
    own = (str(tmp_path / "base" / "bin" / "python3.11"), str(tmp_path / "base"))
    assert sandbox._interpreters() == [own, (system, "/usr"), (str(tmp_path / "other" / "python3"), "/usr")]
    which["python3"] = "/usr/bin/python3"  # the same interpreter twice: once
    assert sandbox._interpreters() == [own, (system, "/usr")]
    which["python3"] = str(tmp_path / "missing")
    monkeypatch.setattr(sandbox.sys, "executable", str(tmp_path / "venv" / "bin" / "gone"))
    assert sandbox._interpreters() == [(system, "/usr")]
    monkeypatch.setattr(sandbox.sys, "executable", system)  # ours is the system's: listed once, with our prefix
    assert sandbox._interpreters() == [(system, os.path.realpath(str(tmp_path / "baselink")))]


_ISOLATE = ["--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--ro-bind", "/usr", "/usr"]
_TAIL = ["--remount-ro", "/dev", "--chdir", "/tmp", "--uid", "65534", "--gid", "65534", "--hostname", "sandbox",
         "--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "LANG", "C.UTF-8",
         "--setenv", "PYTHONHASHSEED", "0", "--setenv", "HOME", "/tmp", "--", "/P/bin/python", "-I", "-S", "-B", "-c"]


@pytest.fixture
def fake_root(monkeypatch, tmp_path):
    """A root with /bin a symlink, /lib a directory, no /lib64 and /sbin a plain file, for `_bwrap_argv`'s links."""
    import pathlib

    from intellect.verifier import sandbox

    root = tmp_path / "root"
    (root / "lib").mkdir(parents=True)
    (root / "bin").symlink_to("usr/bin")
    (root / "sbin").write_text("")
    monkeypatch.setattr(sandbox, "Path", lambda p: root if p == "/" else pathlib.Path(p))
    return ["--symlink", "usr/bin", str(root / "bin"), "--ro-bind", str(root / "lib"), str(root / "lib")]


def test_bwrap_argv_own_fs_binds_our_tmpfs_and_the_prefix_outside_usr(fake_root):
    from intellect.verifier.sandbox import SandboxLimits, _bwrap_argv, _Runtime

    rt = _Runtime("/B", "/P/bin/python", "/opt/py", True)
    assert _bwrap_argv(rt, "/F", SandboxLimits(tmp_bytes=3 * MIB), 7) == [
        "/B", *_ISOLATE, "--seccomp", "7", *fake_root, "--ro-bind", "/opt/py", "/opt/py", "--proc", "/proc",
        "--dev", "/dev", "--bind", "/F/tmp", "/tmp", "--bind", "/F/shm", "/dev/shm", *_TAIL]


@pytest.mark.parametrize("prefix, bound", [("/usr", False), ("/usr/local", False), ("/usrx", True), ("/", True)])
def test_bwrap_argv_without_own_fs_has_bwraps_ipc_namespace_and_sized_tmpfs(fake_root, prefix, bound):
    from intellect.verifier.sandbox import SandboxLimits, _bwrap_argv, _Runtime

    rt = _Runtime("/B", "/P/bin/python", prefix, False)
    size = str(3 * MIB + 4096)
    assert _bwrap_argv(rt, None, SandboxLimits(tmp_bytes=3 * MIB + 4096), None) == [
        "/B", *_ISOLATE, "--unshare-ipc", "--disable-userns", *fake_root,
        *(["--ro-bind", prefix, prefix] if bound else []), "--proc", "/proc", "--dev", "/dev",
        "--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/dev/shm", *_TAIL]


# --------------------------------------------------------------------------------------------------
# `_enter_private_fs`, step by step: what it asks of the kernel (a libc and /proc that record), then for real in
# a child (`test_the_child_sets_every_limit_and_mounts_the_bounded_tmpfs`)


class _Kernel:
    """libc's prctl/unshare/mount and the os calls `_enter_private_fs` makes, recorded; `fail` names a libc call
    that returns -1 with EPERM, `missing` the paths that do not exist."""

    def __init__(self, fail: str | None = None, missing: tuple[str, ...] = ()) -> None:
        import os

        self.log: list[tuple] = []
        self.fail, self.missing, self._os = fail, missing, os

    def _libc(self, name, *args):
        import ctypes

        self.log.append((name, *args))
        if name == self.fail:
            ctypes.set_errno(1)
            return -1
        return 0

    def prctl(self, *a):
        return self._libc("prctl", *a)

    def unshare(self, *a):
        return self._libc("unshare", *a)

    def mount(self, *a):
        return self._libc("mount", *a)

    # the os module, as `_enter_private_fs` sees it
    def __getattr__(self, name):
        return getattr(self._os, name)

    def getuid(self):
        return 4242

    def getgid(self):
        return 4343

    def open(self, path, flags):
        if path in self.missing:
            raise FileNotFoundError(2, "No such file or directory", path)
        self.log.append(("open", path, flags))
        return 1000 + len(self.log)

    def write(self, fd, data):
        self.log.append(("write", fd, data))
        return len(data)

    def close(self, fd):
        self.log.append(("close", fd))

    def mkdir(self, *a):
        self.log.append(("mkdir", *a))

    def chmod(self, *a):
        self.log.append(("chmod", *a))


def _enter(monkeypatch, kernel, limits):
    from intellect.verifier import sandbox

    monkeypatch.setattr(sandbox, "_libc", lambda: kernel)
    monkeypatch.setattr(sandbox, "os", kernel)
    sandbox._enter_private_fs("/F", limits)


def _writes(log):
    """(path, data) of each open-write-close of `log`, checking each fd is closed after its one write."""
    out = []
    for i, entry in enumerate(log):
        if entry[0] == "open":
            fd = 1000 + i + 1
            assert log[i + 1] == ("write", fd, log[i + 1][2]) and log[i + 2] == ("close", fd), log[i:i + 3]
            out.append((entry[1], entry[2], log[i + 1][2]))
    return out


def test_enter_private_fs_asks_the_kernel_for_exactly_the_bounded_namespaces(monkeypatch):
    import os

    k = _Kernel()
    _enter(monkeypatch, k, SandboxLimits(tmp_bytes=3 * MIB, tmp_inodes=77))
    calls = [e for e in k.log if e[0] not in ("open", "write", "close")]
    assert calls == [
        ("prctl", 4, 1, 0, 0, 0),
        ("unshare", 0x10000000 | 0x20000 | 0x08000000),
        ("mount", None, b"/", None, 0x4000 | 0x40000, None),
        ("mount", b"tmpfs", b"/F", b"tmpfs", 0x2 | 0x4, b"size=3145728,nr_inodes=77,mode=0755"),
        ("mkdir", "/F/tmp"), ("chmod", "/F/tmp", 0o1777), ("mkdir", "/F/shm"), ("chmod", "/F/shm", 0o1777)]
    w = os.O_WRONLY
    assert _writes(k.log) == [
        ("/proc/self/setgroups", w, b"deny"), ("/proc/self/uid_map", w, b"0 4242 1"),
        ("/proc/self/gid_map", w, b"0 4343 1"),
        ("/proc/sys/kernel/shmmax", w, b"0"), ("/proc/sys/kernel/shmall", w, b"0"),
        ("/proc/sys/kernel/shmmni", w, b"0"), ("/proc/sys/kernel/msgmni", w, b"0"),
        ("/proc/sys/kernel/sem", w, b"0 0 0 0"), ("/proc/sys/user/max_user_namespaces", w, b"2")]
    # the order: the maps are written in the new user namespace, before any mount; the sysctls after the tmpfs
    names = [e[1] if e[0] == "open" else e[0] for e in k.log if e[0] not in ("write", "close")]
    assert names.index("unshare") < names.index("/proc/self/setgroups") < names.index("/proc/self/uid_map") < \
        names.index("/proc/self/gid_map") < names.index("mount") and names.index("chmod") < names.index(
            "/proc/sys/kernel/shmmax")


@pytest.mark.parametrize("step, what", [("prctl", "prctl(PR_SET_DUMPABLE)"), ("unshare", "unshare(user, mount, ipc)"),
                                        ("mount", "mount(/, private)")])
def test_enter_private_fs_stops_at_the_first_step_the_kernel_refuses(monkeypatch, step, what):
    k = _Kernel(fail=step)
    with pytest.raises(OSError) as err:
        _enter(monkeypatch, k, SandboxLimits())
    assert (err.value.errno, err.value.strerror) == (1, f"{what}: Operation not permitted")
    assert k.log[-1][0] == step


def test_enter_private_fs_refused_tmpfs_names_the_mount(monkeypatch):
    class TmpfsRefused(_Kernel):
        def mount(self, *a):
            return self._libc("mount-tmpfs" if a[0] == b"tmpfs" else "mount", *a)

    k = TmpfsRefused(fail="mount-tmpfs")
    with pytest.raises(OSError) as err:
        _enter(monkeypatch, k, SandboxLimits())
    assert (err.value.errno, err.value.strerror) == (1, "mount(tmpfs): Operation not permitted")
    assert k.log[-1][0] == "mount-tmpfs"


def test_a_kernel_without_sysv_ipc_has_none_to_bound_but_the_userns_bound_must_hold(monkeypatch):
    import os

    shm = ("/proc/sys/kernel/shmmax", "/proc/sys/kernel/shmall", "/proc/sys/kernel/shmmni", "/proc/sys/kernel/msgmni",
           "/proc/sys/kernel/sem")
    k = _Kernel(missing=shm)
    _enter(monkeypatch, k, SandboxLimits())
    assert _writes(k.log)[-1] == ("/proc/sys/user/max_user_namespaces", os.O_WRONLY, b"2")
    k = _Kernel(missing=("/proc/sys/user/max_user_namespaces",))
    with pytest.raises(FileNotFoundError):
        _enter(monkeypatch, k, SandboxLimits())


# --------------------------------------------------------------------------------------------------
# the child's limits, set between fork and exec: `_preexec` run in a forked child of this process


_CHILD_REPORT = r'''
import ctypes, json, os, resource
R = resource
out = {n: list(R.getrlimit(getattr(R, "RLIMIT_" + n))) for n in ("CPU", "AS", "FSIZE", "CORE", "MSGQUEUE", "NOFILE")}
out["ids"] = [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups()]
libc = ctypes.CDLL(None, use_errno=True)
out["dumpable"] = libc.prctl(3, 0, 0, 0, 0)
out["session_keyring"] = KEYRING()
if FS:
    out["mount"] = [l.split()[2:4] for l in open("/proc/self/mounts") if l.split()[1] == FS]
    out["maps"] = [open("/proc/self/uid_map").read().split(), open("/proc/self/gid_map").read().split(),
                   open("/proc/self/setgroups").read().strip()]
    out["sysctl"] = [open("/proc/sys/" + n).read().split()
                     for n in ("kernel/shmmax", "kernel/shmall", "kernel/shmmni", "kernel/msgmni", "kernel/sem",
                               "user/max_user_namespaces")]
    out["dirs"] = [oct(os.stat(FS + "/" + d).st_mode & 0o7777) for d in ("tmp", "shm")]
'''


def _session_keyring() -> int:
    """The serial of this process's session keyring (KEYCTL_GET_KEYRING_ID of KEY_SPEC_SESSION_KEYRING)."""
    from intellect.verifier import sandbox

    nr = sandbox._SYS_KEYCTL.get(__import__("platform").machine().lower())
    return int(sandbox._libc().syscall(nr, 0, -3, 0)) if nr else 0


def _in_preexec_child(limits: SandboxLimits, uid, fs_dir) -> dict:
    """Fork; the child runs `_preexec(limits, uid, fs_dir)` as subprocess would, then reports what it sees."""
    import json
    import os

    from intellect.verifier import sandbox

    preexec = sandbox._preexec(limits, uid, fs_dir)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only the report pipe kept (preexec's descriptor limit is set last)
        try:
            os.dup2(w, 3)
            os.closerange(4, 4096)
            preexec()
            env = {"KEYRING": _session_keyring, "FS": fs_dir}
            exec(_CHILD_REPORT, env)
            os.write(3, json.dumps(env["out"]).encode())
            os._exit(0)
        except BaseException as exc:  # reported to the parent
            os.write(3, json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
            os._exit(1)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data)


_CHILD_LIMITS = SandboxLimits(cpu_seconds=3, memory_bytes=2**36 + 3 * 4096, max_output_bytes=5000, tmp_bytes=3 * MIB,
                              tmp_inodes=77)


def test_the_child_sets_every_limit_and_joins_a_keyring_of_its_own():
    import os

    got = _in_preexec_child(_CHILD_LIMITS, None, None)
    assert {k: got[k] for k in ("CPU", "AS", "FSIZE", "CORE", "MSGQUEUE", "NOFILE")} == {
        "CPU": [3, 4], "AS": [2**36 + 3 * 4096] * 2, "FSIZE": [5000, 5000], "CORE": [0, 0], "MSGQUEUE": [0, 0],
        "NOFILE": [64, 64]}, got
    assert got["ids"] == [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups()]  # no uid given
    if _session_keyring() > 0:
        assert got["session_keyring"] > 0 and got["session_keyring"] != _session_keyring(), got


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="drops root: runs as root only")
def test_as_root_the_child_drops_to_the_throw_away_uid_and_mounts_the_bounded_tmpfs():
    """uid, gid and no supplementary group of root's; then (own_fs) the tmpfs of `tmp_bytes` and `tmp_inodes` on the
    mount point, uid 0 of the new user namespace mapped to that uid, no SysV IPC and 2 user namespaces at most."""
    import os

    from intellect.verifier import sandbox

    uid = 0x7FF0_1234
    with sandbox._run_dir() as tmp:
        os.mkdir(f"{tmp}/fs", 0o755)
        got = _in_preexec_child(_CHILD_LIMITS, uid, f"{tmp}/fs")
    assert "error" not in got, got
    assert got["ids"] == [0, 0, 0, 0, []], got  # uid 0 of its own user namespace, which is `uid` outside
    assert got["maps"] == [["0", str(uid), "1"], ["0", str(uid), "1"], "deny"], got
    assert got["mount"] == [["tmpfs", f"rw,nosuid,nodev,relatime,size=3072k,nr_inodes=77,mode=755,uid={uid},gid={uid}"]]
    assert got["sysctl"] == [["0"], ["0"], ["0"], ["0"], ["0", "0", "0", "0"], ["2"]], got
    assert got["dirs"] == ["0o1777", "0o1777"], got
    assert got["dumpable"] == 1, got
    assert {k: got[k] for k in ("CPU", "AS", "FSIZE", "NOFILE")} == {
        "CPU": [3, 4], "AS": [2**36 + 3 * 4096] * 2, "FSIZE": [5000, 5000], "NOFILE": [64, 64]}, got


# --------------------------------------------------------------------------------------------------
# the channel: one sandbox's process, its JSON lines, its capped output


def _bare_proc(tmp_path, output: bytes | None = None):
    """A `_Proc` without a process: its output file (and, by `_pipe_proc`, its channel) only."""
    from intellect.verifier import sandbox

    p = sandbox._Proc.__new__(sandbox._Proc)
    p.out_path = tmp_path / "candidate.out"
    if output is not None:
        p.out_path.write_bytes(output)
    return p


@pytest.mark.parametrize("rc, reason", [
    (-24, "cpu_limit"), (128 + 24, "cpu_limit"), (-9, "cpu_limit"), (128 + 9, "cpu_limit"),
    (-25, "output_limit"), (128 + 25, "output_limit"), (-7, "tmp_limit"), (128 + 7, "tmp_limit"),
    (0, "early_exit"), (1, "early_exit"), (3, "early_exit"), (-11, "early_exit"), (128 + 11, "early_exit"),
    (-23, "early_exit"), (-26, "early_exit"), (None, "early_exit"), (24, "early_exit"),
    (9, "early_exit"), (25, "early_exit"), (7, "early_exit"), (-8, "early_exit"), (136, "early_exit"),
    (-10, "early_exit"), (138, "early_exit")])
def test_how_the_completions_process_ended_maps_to_a_verdict(tmp_path, rc, reason):
    from intellect.verifier.sandbox import _died_reason

    assert _died_reason(rc, _bare_proc(tmp_path, b"Traceback ...\nValueError: x\n")).value == reason
    # a MemoryError it printed counts only when no limit's signal ended it
    printed = _died_reason(rc, _bare_proc(tmp_path, b"x" * 5000 + b"\nMemoryError\n")).value
    assert printed == (reason if reason != "early_exit" else "memory_limit")


def test_a_memory_error_printed_before_the_last_4096_bytes_is_not_seen(tmp_path):
    from intellect.verifier.sandbox import _died_reason

    assert _died_reason(1, _bare_proc(tmp_path, b"MemoryError\n" + b"x" * 4096)).value == "early_exit"
    assert _died_reason(1, _bare_proc(tmp_path, b"MemoryError" + b"x" * 4085)).value == "memory_limit"


def test_the_output_is_the_last_4096_bytes_decoded_with_replacement(tmp_path):
    p = _bare_proc(tmp_path, b"a" * 10 + "é".encode() + b"b" * 4095)
    assert p.output() == "\ufffd" + "b" * 4095  # the cut leaves half of "é"
    assert _bare_proc(tmp_path, b"short\xff").output() == "short\ufffd"
    (tmp_path / "candidate.out").unlink()
    assert _bare_proc(tmp_path).output() == ""


def _pipe_proc(tmp_path):
    """A `_Proc` whose channel is a pipe this test writes to (the read end set up as `_Proc.__init__` does)."""
    import os
    import select

    p = _bare_proc(tmp_path)
    r, w = os.pipe()
    p.fd = r
    os.set_blocking(r, False)
    p.poll = select.poll()
    p.poll.register(r, select.POLLIN)
    p.buf, p.eof = bytearray(), False
    return p, w


def test_recv_returns_each_json_line_in_order_and_none_at_eof(tmp_path):
    import os
    import time

    p, w = _pipe_proc(tmp_path)
    try:
        os.write(w, b'{"a": 1}\n[2, 3]\n{"b"')
        assert p.recv(time.monotonic() + 5) == {"a": 1}
        assert p.recv(time.monotonic() + 5) == [2, 3]
        with pytest.raises(TimeoutError):  # half a line, nothing more within the deadline
            p.recv(time.monotonic() + 0.05)
        os.write(w, b': "c"}\n')
        assert p.recv(time.monotonic() - 1) == {"b": "c"}  # data already there: read even past the deadline
        os.write(w, b"tail without newline")
        os.close(w)
        w = None
        assert p.recv(time.monotonic() + 5) is None and p.eof is True
        assert p.recv(time.monotonic() + 5) is None
    finally:
        if w is not None:
            os.close(w)
        os.close(p.fd)


def test_recv_refuses_garbage_deep_nesting_and_a_message_over_16_mib(tmp_path):
    import os
    import threading
    import time

    from intellect.verifier.sandbox import MAX_MESSAGE_BYTES

    assert MAX_MESSAGE_BYTES == 16 * 2**20
    p, w = _pipe_proc(tmp_path)
    os.write(w, b"not json\n" + b"[" * 20_000 + b"\n")
    with pytest.raises(ValueError, match="Expecting value"):
        p.recv(time.monotonic() + 5)
    with pytest.raises(ValueError, match=r"^message nested too deep$"):
        p.recv(time.monotonic() + 5)
    os.close(w)
    os.close(p.fd)
    for size, refused in ((MAX_MESSAGE_BYTES, False), (MAX_MESSAGE_BYTES + 1, True)):
        p, w = _pipe_proc(tmp_path)

        def feed(w=w, size=size):
            os.set_blocking(w, True)
            os.write(w, b"x" * size)
            os.close(w)

        t = threading.Thread(target=feed)
        t.start()
        try:
            if refused:
                with pytest.raises(ValueError, match=r"^message too large$"):
                    p.recv(time.monotonic() + 30)
            else:  # exactly 16 MiB without its newline yet: still read, then EOF
                assert p.recv(time.monotonic() + 30) is None and len(p.buf) == MAX_MESSAGE_BYTES
        finally:
            os.close(p.fd)  # the writer, blocked on a full pipe, gets EPIPE
            t.join(10)


def test_send_writes_one_json_line_and_says_false_once_the_process_is_gone(tmp_path):
    import subprocess

    p = _bare_proc(tmp_path)
    p.p = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.send({"a": [1, "é"]}) is True and p.send(2) is True
    p.p.stdin.close()
    assert p.p.stdout.read() == b'{"a": [1, "\\u00e9"]}\n2\n'
    assert p.p.wait(10) == 0
    assert p.send({"a": 1}) is False  # closed: ValueError
    q = _bare_proc(tmp_path)
    q.p = subprocess.Popen(["true"], stdin=subprocess.PIPE)
    q.p.wait(10)
    assert q.send({"x": "y" * 2**20}) is False  # no reader: BrokenPipeError


def test_kill_kills_the_whole_process_group_and_returns_its_status(tmp_path):
    import os
    import subprocess
    import time

    p = _bare_proc(tmp_path)
    p.p = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           start_new_session=True)
    child = int(p.p.stdout.readline())
    assert p.kill() == -9
    assert p.p.stdin.closed and p.p.stdout.closed
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the group's other member, killed too (reaped by init)
        try:
            with open(f"/proc/{child}/stat") as fh:
                state = fh.read().split(")")[1].split()[0]
        except OSError:
            break
        if state in ("Z", "X"):
            break
        time.sleep(0.01)
    else:
        pytest.fail(f"{child} still running")
    assert p.kill() == -9  # already dead: no error, the same status
    q = _bare_proc(tmp_path)
    q.p = subprocess.Popen(["sh", "-c", "exit 3"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           start_new_session=True)
    q.p.wait(10)
    assert q.kill() == 3
    assert os.getpgid(0) != q.p.pid


# --------------------------------------------------------------------------------------------------
# the candidate's reply, rebuilt by the parent: only typed values cross


@pytest.mark.parametrize("reply, relayed", [
    (None, {"error": "the completion's process sent no valid reply"}),
    ([1], {"error": "the completion's process sent no valid reply"}),
    ({}, {"error": "the completion's process sent no valid reply"}),
    ({"ok": {"i": "0x10"}}, {"ok": {"i": "0x10"}}),
    ({"ok": {"l": [{"f": "0x1.8000000000000p+0"}, "s", None, True]}},
     {"ok": {"l": [{"f": "0x1.8000000000000p+0"}, "s", None, True]}}),
    ({"ok": {"i": "zz"}}, {"error": "the completion's process sent a malformed value"}),  # ValueError
    ({"ok": {"d": [[{"l": []}, 1]]}}, {"error": "the completion's process sent a malformed value"}),  # TypeError
    ({"ok": {"f": "0x1p+99999"}}, {"error": "the completion's process sent a malformed value"}),  # OverflowError
    ({"ok": {"x": 1}}, {"error": "the completion's process sent a malformed value"}),
    ({"ok": {"i": "0x1"}, "raise": "KeyError"}, {"ok": {"i": "0x1"}}),
    ({"raise": "KeyError", "msg": "m" * 301}, {"raise": "KeyError", "msg": "m" * 300}),
    ({"raise": "KeyError"}, {"raise": "KeyError", "msg": ""}),
    ({"raise": "E" * 100, "msg": ""}, {"raise": "E" * 100, "msg": ""}),
    ({"raise": "E" * 101, "msg": ""}, {"error": "the completion's process sent no valid reply"}),
    ({"raise": "not an identifier", "msg": ""}, {"error": "the completion's process sent no valid reply"}),
    ({"raise": 3, "msg": ""}, {"error": "the completion's process sent no valid reply"}),
    ({"raise": "KeyError", "msg": 3}, {"error": "the completion's process sent no valid reply"}),
    ({"raise": 3, "msg": "", "error": "e"}, {"error": "e"}),
    ({"error": "e" * 301}, {"error": "e" * 300}),
    ({"error": 3}, {"error": "the completion's process sent no valid reply"}),
])
def test_a_reply_is_relayed_only_as_a_typed_value_a_named_exception_or_an_error(reply, relayed):
    from intellect.verifier.sandbox import _relay

    assert _relay(reply) == relayed


def test_a_deeply_nested_reply_is_malformed_not_a_crash():
    from intellect.verifier.sandbox import _relay

    deep: dict = {"i": "0x1"}
    for _ in range(70):
        deep = {"l": [deep]}
    assert _relay({"ok": deep}) == {"error": "the completion's process sent a malformed value"}
    nested = {"i": "0x1"}
    for _ in range(64):
        nested = {"l": [nested]}
    assert _relay({"ok": nested}) == {"ok": nested}  # 64 levels: the codec's bound, still a value


# --------------------------------------------------------------------------------------------------
# run_python: each way a run ends, its verdict, what it says and how many calls it made

_SIGNAL = ("import os, signal\ndef f():\n    signal.signal(signal.SIG{0}, signal.SIG_DFL)\n"
           "    os.kill(os.getpid(), signal.SIG{0})\n")
# a load failure: the runner reports it and returns, so when the parent ends the run it has exited (0) or not yet (-9)
_LOAD_RC = (0, -9)
_ENDINGS = {
    # name: (code, tests, passed, reason, calls, stderr, returncode, or the returncodes a race allows)
    "passes": ("def f(x):\n    return x\n", ["assert f(1) == 1\nassert f(2) == 2", "assert f(3) == 3"],
               True, "passed", 3, "", -9),
    "fails": ("def f(x):\n    return x\n", ["assert f(1) == 2, 'nope'"], False, "failed", 1, "AssertionError: nope",
              -9),
    "syntax": ("def f(:\n", ["assert f() == 1"], False, "syntax_error", 0,
               "SyntaxError: invalid syntax (solution.py, line 1)", _LOAD_RC),
    "memory at load": ("x = bytearray(2**40)\n", ["assert f() == 1"], False, "memory_limit", 0, "MemoryError", _LOAD_RC),
    "output at load": ("import os\nfd = os.open('/tmp/o', os.O_WRONLY | os.O_CREAT)\nos.write(fd, b'x' * 4096)\n"
                       "os.write(fd, b'x')\n", ["assert f() == 1"], False, "output_limit", 0,
                       "OSError: [Errno 27] File too large", _LOAD_RC),
    "tmp at load": ("import os\nfd = os.open('/tmp/o', os.O_WRONLY | os.O_CREAT)\nwhile True:\n"
                    "    os.write(fd, b'x' * 65536)\n", ["assert f() == 1"], False, "tmp_limit", 0,
                    "OSError: [Errno 28] No space left on device", _LOAD_RC),
    "raises at load": ("raise KeyError('k')\n", ["assert f() == 1"], False, "failed", 0, "KeyError: 'k'", _LOAD_RC),
    "file too large in a call": ("import os\ndef f():\n    fd = os.open('/tmp/o', os.O_WRONLY | os.O_CREAT)\n"
                                 "    os.write(fd, b'x' * 4096)\n    os.write(fd, b'x')\n", ["f()"], False,
                                 "output_limit", 1, "OSError: OSError: [Errno 27] File too large", -9),
    "no space in a call": ("import os\ndef f():\n    fd = os.open('/tmp/o', os.O_WRONLY | os.O_CREAT)\n"
                           "    while True:\n        os.write(fd, b'x' * 65536)\n", ["f()"], False, "tmp_limit", 1,
                           "OSError: OSError: [Errno 28] No space left on device", -9),
    "forbidden": ("class A:\n    pass\ndef f():\n    return A()\n", ["f()"], False, "forbidden", 1,
                  "f(): unserialisable result: _Unserialisable: a value of type A", -9),
    "refused": ("def f(x):\n    return 1\n", ["f(lambda: 1)"], False, "refused", 0,
                "the test passes a value of type function to f()", -9),
    "no calls": ("x = 1\n", [], False, "no_calls", 0, "", -9),
    "no calls, tests pass": ("x = 1\n", ["assert True"], False, "no_calls", 0, "", -9),
    "builtin exception": ("def f():\n    raise KeyError('k')\n", ["f()"], False, "failed", 1,
                          "KeyError: \"KeyError: 'k'\"", -9),
    "own exception": ("class E(Exception):\n    pass\ndef f():\n    raise E('k')\n", ["f()"], False, "failed", 1,
                      "f() raised E: k", -9),
    "test process ends": ("def f():\n    return 1\n", ["assert f() == 1", "import os\nos._exit(0)"], False, "error",
                          1, "the test process ended: ", -9),
    "exit at load": ("import os\nos._exit(3)\n", ["assert f() == 1"], False, "early_exit", 0,
                     "the completion's process ended (status 3)", 3),
    "exit in a call": ("import os\ndef f():\n    os._exit(3)\n", ["assert f() == 1"], False, "early_exit", 1,
                       "f(): the completion's process has exited", 3),
    "sigxcpu in a call": (_SIGNAL.format("XCPU"), ["f()"], False, "cpu_limit", 1,
                          "f(): the completion's process has exited", 128 + 24),
    "sigxfsz in a call": (_SIGNAL.format("XFSZ"), ["f()"], False, "output_limit", 1,
                          "f(): the completion's process has exited", 128 + 25),
    "sigbus in a call": (_SIGNAL.format("BUS"), ["f()"], False, "tmp_limit", 1,
                         "f(): the completion's process has exited", 128 + 7),
    "memory error printed, then exit": ("import os, sys\ndef f():\n    print('MemoryError', flush=True)\n"
                                        "    os._exit(1)\n", ["f()"], False, "memory_limit", 1,
                                        "f(): the completion's process has exited", 1),
    "a call after the exit": ("import os\ndef f():\n    os._exit(3)\n",
                              ["try:\n    f()\nexcept BaseException:\n    pass\nf()"], False, "early_exit", 2,
                              "f(): the completion's process has exited", 3),
}
_OUT_LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=6, memory_bytes=256 * MIB, max_output_bytes=4096,
                            tmp_bytes=MIB)
_TMP_LIMITS = SandboxLimits(cpu_seconds=2, wall_seconds=6, memory_bytes=256 * MIB, max_output_bytes=64 * MIB,
                            tmp_bytes=MIB)


@needs_sandbox
@pytest.mark.parametrize("name", list(_ENDINGS))
def test_each_way_a_run_ends_has_its_verdict(name):
    code, tests, passed, reason, calls, stderr, rc = _ENDINGS[name]
    r = run_python(code, tests, _TMP_LIMITS if name.startswith(("tmp", "no space")) else _OUT_LIMITS)
    assert (r.passed, r.reason.value, r.calls, r.stderr) == (passed, reason, calls, stderr), r
    assert r.returncode in (rc if isinstance(rc, tuple) else (rc,)), r
    assert 0 < r.wall_seconds < _OUT_LIMITS.wall_seconds, r


@needs_sandbox
def test_the_wall_clock_limit_kills_both_and_says_so():
    import time

    t0 = time.monotonic()
    r = run_python("import time\ntime.sleep(60)\n", ["assert f() == 1"], SandboxLimits(wall_seconds=0.5))
    assert (r.passed, r.reason.value, r.calls, r.stderr, r.returncode) == (
        False, "timeout", 0, "past the wall-clock limit of 0.5 s", -9), r
    assert 0.5 <= r.wall_seconds < 3 and time.monotonic() - t0 < 3, r
    r = run_python("import time\ndef f():\n    time.sleep(60)\n", ["f()"], SandboxLimits(wall_seconds=1.0))
    assert (r.reason.value, r.calls, r.stderr) == ("timeout", 1, "past the wall-clock limit of 1.0 s"), r


@needs_sandbox
def test_what_the_completion_prints_is_its_capped_stdout_and_a_failure_detail_its_last_4096_chars():
    r = run_python("print('x' * 5000 + 'END')\ndef f():\n    return 1\n", ["assert f() == 2, 'y' * 5000"], FAST)
    assert r.stdout == "x" * 4092 + "END\n" and r.stderr == "AssertionError: " + "y" * 284, r


@needs_sandbox
def test_empty_code_runs_nothing_and_bad_tests_are_refused_before_any_sandbox():
    from intellect.verifier.sandbox import SandboxResult

    assert run_python(" \n\t", ["assert f() == 1"], FAST) == SandboxResult(passed=False, reason=SandboxReason.NO_CODE)
    assert run_python("", ["assert f() == 1"], FAST).reason is SandboxReason.NO_CODE
    r = run_python("def f():\n    return 1\n", ["assert f() == 1", "assert f( =="], FAST)
    assert r == SandboxResult(passed=False, reason=SandboxReason.REFUSED,
                              stderr="test 1 is not Python: invalid syntax (<unknown>, line 1)"), r


def test_a_network_in_the_limits_is_refused():
    with pytest.raises(ValueError) as err:
        run_python("def f():\n    return 1\n", ["assert f() == 1"], SandboxLimits(network=True))
    assert str(err.value) == "the code sandbox has no network; SandboxLimits.network must be False"


@needs_sandbox
def test_the_prelude_runs_on_the_tests_side_and_the_completion_cannot_replace_it():
    code = "def helper(x):\n    return 0\ndef f(x):\n    return x + 1\n"
    r = run_python(code, ["assert f(helper(1)) == 11 and helper(2) == 20"], FAST,
                   prelude="def helper(x):\n    return x * 10\n")
    assert (r.passed, r.calls) == (True, 1), r
    r = run_python(code, ["assert f(helper(1)) == 11"], FAST, prelude=None)  # without it, helper is the completion's
    assert (r.passed, r.calls, r.stderr) == (False, 2, "AssertionError: "), r


# --------------------------------------------------------------------------------------------------
# starting a sandbox: its process, its files, the one retry


def _runtime():
    from intellect.verifier import sandbox

    rt, why = sandbox._probe()
    if rt is None:
        pytest.skip(why)
    return rt


def _fd_count() -> int:
    import os

    return len(os.listdir("/proc/self/fd"))


@needs_sandbox
def test_what_a_runner_printed_before_a_reply_is_in_its_output_file_when_the_reply_arrives():
    """Flake found in this file (2026-12-02): stdout of the runner is a block-buffered file, so a print was lost
    when the sandbox was killed before Python exited on its own (the test above raced the kill against the
    runner's exit at end of input). Each reply flushes the runner's stdout and stderr first; here the call never
    returns, so only that flush can put the print in the file."""
    import time

    from intellect.verifier import sandbox

    rt = _runtime()
    with sandbox._run_dir() as tmp:
        p = sandbox._Proc(rt, sandbox._CANDIDATE, FAST, tmp, "cand8")
        try:
            code = "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\ndef f():\n    while True:\n        pass\n"
            assert p.send({"nproc": 4, "code": code})
            assert p.recv(time.monotonic() + 10) == {"load": "ok"}
            assert p.send({"name": "f", "args": {"l": []}, "kwargs": {"d": []}})
            time.sleep(0.2)  # f is running: no reply, and Python does not exit
        finally:
            assert p.kill() == -9
        assert sorted(p.output().splitlines()) == ["to stderr", "to stdout"]


@needs_sandbox
def test_a_sandbox_process_starts_alone_in_its_session_with_an_empty_environment_and_a_0600_output():
    import os
    import stat
    import time

    from intellect.verifier import sandbox

    rt = _runtime()
    fds = _fd_count()
    with sandbox._run_dir() as tmp:
        assert stat.S_IMODE(os.stat(tmp).st_mode) == 0o711
        p = sandbox._Proc(rt, sandbox._CANDIDATE, FAST, tmp, "cand7")
        try:
            assert stat.S_IMODE(os.stat(tmp / "cand7.out").st_mode) == 0o600
            assert stat.S_IMODE(os.stat(tmp / "cand7.fs").st_mode) == 0o755
            assert sorted(x.name for x in tmp.iterdir()) == ["cand7.fs", "cand7.out"]
            assert os.getsid(p.p.pid) == p.p.pid  # its own session: kill() reaches the whole group
            with open(f"/proc/{p.p.pid}/environ", "rb") as fh:
                assert fh.read() == b"PATH=/usr/bin:/bin\0"
            assert os.readlink(f"/proc/{p.p.pid}/cwd") == "/"
            with open(f"/proc/{p.p.pid}/status") as fh:
                status = dict(line.split(":", 1) for line in fh)
            uid = int(status["Uid"].split()[0])
            if os.geteuid() == 0:
                assert 0x7FF00000 <= uid < 0x7FF10000 and status["Gid"].split() == [str(uid)] * 4, status
                assert status["Groups"].split() == [], status
            else:
                assert uid == os.getuid()
            assert (os.get_blocking(p.fd), p.buf, p.eof) == (False, bytearray(), False)
            assert p.send({"nproc": 4, "code": "print('to the output file')\ndef f():\n    return 5\n"})
            assert p.recv(time.monotonic() + 10) == {"load": "ok"}
            assert p.send({"name": "f", "args": {"l": []}, "kwargs": {"d": []}})
            assert p.recv(time.monotonic() + 10) == {"ok": {"i": "0x5"}}
        finally:
            assert p.kill() == -9
        assert p.output() == "to the output file\n"
    assert _fd_count() == fds  # the seccomp pipe and the output file are closed in the parent


class _FailingPrctl:
    """libc whose prctl fails with EPERM while `budget` (a file: the child is a fork) still holds failures."""

    def __init__(self, budget) -> None:
        import ctypes

        self.budget, self.real = budget, ctypes.CDLL(None, use_errno=True)

    def prctl(self, *a):
        import ctypes

        left = int(self.budget.read_text())
        if left > 0:
            self.budget.write_text(str(left - 1))
            ctypes.set_errno(1)
            return -1
        return self.real.prctl(*a)

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.fixture
def shared_dir():
    """A folder the sandbox's child can write after it dropped root (pytest's tmp_path is root's, 0700)."""
    import os
    import shutil
    import tempfile
    from pathlib import Path

    d = Path(tempfile.mkdtemp(prefix="intellect-sbx-pins-"))
    os.chmod(d, 0o777)
    yield d
    shutil.rmtree(d)


def _budget(folder, n: int):
    import os

    f = folder / f"budget{n}"
    f.write_text(str(n))
    os.chmod(f, 0o666)
    return f


_PRCTL_STEP = "sandbox preexec: PermissionError: [Errno 1] prctl(PR_SET_DUMPABLE): Operation not permitted"


@needs_sandbox
def test_a_refused_start_is_tried_once_more_and_the_warning_names_the_step(monkeypatch, shared_dir, caplog):
    import logging

    from intellect.verifier import sandbox

    rt = _runtime()
    if not rt.own_fs:
        pytest.skip("the step that fails here is own_fs's")
    budget = _budget(shared_dir, 1)
    monkeypatch.setattr(sandbox, "_libc", lambda: _FailingPrctl(budget))
    with sandbox._run_dir() as tmp, caplog.at_level(logging.WARNING, logger=sandbox.__name__):
        cand, tester = sandbox._start_pair(rt, FAST, tmp)
        try:
            assert (cand.out_path.name, tester.out_path.name) == ("candidate2.out", "tests2.out")
            assert (tmp / "candidate1.out").read_text() == _PRCTL_STEP + "\n"
            assert not (tmp / "tests1.out").exists()
        finally:
            cand.kill()
            tester.kill()
    assert [r.getMessage() for r in caplog.records] == [
        f"sandbox: bubblewrap could not start: Exception occurred in preexec_fn. ({_PRCTL_STEP}); trying once more"]


@needs_sandbox
def test_a_start_refused_twice_is_no_sandbox_with_the_second_steps_reason(monkeypatch, shared_dir):
    from intellect.verifier import sandbox

    rt = _runtime()
    if not rt.own_fs:
        pytest.skip("the step that fails here is own_fs's")
    budget = _budget(shared_dir, 2)
    monkeypatch.setattr(sandbox, "_libc", lambda: _FailingPrctl(budget))
    with pytest.raises(sandbox.SandboxUnavailableError) as err:
        run_python("def f():\n    return 1\n", ["assert f() == 1"], FAST)
    assert str(err.value) == f"bubblewrap could not start: Exception occurred in preexec_fn. ({_PRCTL_STEP})"
    assert budget.read_text() == "0"
    budget.write_text("1")  # the tests' sandbox refused on the first try: the candidate's is killed, both retried
    zero = _budget(shared_dir, 0)
    with sandbox._run_dir() as tmp:
        monkeypatch.setattr(sandbox, "_libc", lambda: _FailingPrctl(budget) if (tmp / "candidate1.out").exists()
                            and not (tmp / "tests1.out").exists() else _FailingPrctl(zero))
        cand, tester = sandbox._start_pair(rt, FAST, tmp)
        cand.kill()
        tester.kill()
        assert (cand.out_path.name, tester.out_path.name) == ("candidate2.out", "tests2.out")


@needs_sandbox
def test_a_missing_bwrap_is_no_sandbox_after_two_tries():
    from intellect.verifier import sandbox

    rt = _runtime()._replace(bwrap="/nonexistent-intellect/bwrap")
    with sandbox._run_dir() as tmp, pytest.raises(sandbox.SandboxUnavailableError) as err:
        sandbox._start_pair(rt, FAST, tmp)
    assert str(err.value) == ("bubblewrap could not start: [Errno 2] No such file or directory: "
                              "'/nonexistent-intellect/bwrap'")
    assert isinstance(err.value.__cause__, FileNotFoundError)


def test_no_bwrap_no_sandbox(monkeypatch):
    from intellect.verifier import sandbox

    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    real_exists = sandbox.os.path.exists
    monkeypatch.setattr(sandbox.os.path, "exists", lambda p: False if p == "/usr/bin/bwrap" else real_exists(p))
    sandbox._probe.cache_clear()
    try:
        why = "bubblewrap (bwrap) is not installed: run tools/bootstrap.sh as root, or 'apt-get install bubblewrap'"
        assert sandbox.sandbox_available() == (False, why)
        with pytest.raises(sandbox.SandboxUnavailableError) as err:
            run_python("def f():\n    return 1\n", ["assert f() == 1"])
        assert str(err.value) == why
    finally:
        sandbox._probe.cache_clear()


# --------------------------------------------------------------------------------------------------
# what the sandboxed process sees: each limit and each isolating flag, from inside

_INSIDE = r'''
import ctypes, json, os, resource, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
sig = ctypes.c_int(-1)
libc.prctl(2, ctypes.byref(sig), 0, 0, 0)  # PR_GET_PDEATHSIG: bwrap's --die-with-parent
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
R = resource
mounts = {l.split()[1]: l.split()[2:4] for l in open("/proc/self/mounts")}
out = {
    "rlimits": {n: list(R.getrlimit(getattr(R, "RLIMIT_" + n)))
                for n in ("CPU", "AS", "FSIZE", "CORE", "MSGQUEUE", "NOFILE", "NPROC")},
    "env": dict(os.environ), "cwd": os.getcwd(), "hostname": socket.gethostname(),
    "pid": os.getpid(), "sid": os.getsid(0), "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "pdeathsig": sig.value, "caps": [status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")],
    "no_new_privs": status["NoNewPrivs"].strip(), "seccomp": status["Seccomp"].strip(),
    "cgroup_roots": sorted({l.strip().rsplit(":", 1)[1] for l in open("/proc/self/cgroup")}),
    "flags": [sys.flags.isolated, sys.flags.no_site, sys.flags.dont_write_bytecode, sys.flags.ignore_environment],
    "ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups()],
    "nics": sorted(n for _, n in socket.if_nameindex()), "executable": sys.executable,
    "ro": {p: mounts[p][1].split(",")[0] for p in ("/usr", "/dev", "/proc")},
    "tmp": mounts["/tmp"], "shm": mounts["/dev/shm"],
    "sysctl": [open("/proc/sys/" + n).read().split() for n in ("kernel/shmmax", "kernel/shmall", "kernel/shmmni",
                                                           "kernel/msgmni", "kernel/sem")],
}
try:
    os.memfd_create("m")
    out["memfd"] = "created"
except OSError as e:
    out["memfd"] = e.errno
print("INSIDE" + json.dumps(out), flush=True)
def f():
    return 1
'''


def _inside(limits):
    import json

    r = run_python(_INSIDE, ["assert f() == 1"], limits)
    assert r.passed, r
    return json.loads(r.stdout.split("INSIDE", 1)[1])


@needs_sandbox
def test_inside_every_limit_is_the_one_asked_for():
    got = _inside(SandboxLimits(cpu_seconds=3, wall_seconds=6, memory_bytes=300 * MIB, max_processes=7,
                                max_output_bytes=50_000, tmp_bytes=3 * MIB, tmp_inodes=77))
    assert got["rlimits"] == {"CPU": [3, 4], "AS": [300 * MIB] * 2, "FSIZE": [50_000] * 2, "CORE": [0, 0],
                              "MSGQUEUE": [0, 0], "NOFILE": [64, 64], "NPROC": [7, 7]}, got
    if _runtime().own_fs:
        assert got["tmp"][0] == "tmpfs" and "size=3072k,nr_inodes=77,mode=755" in got["tmp"][1], got
        assert got["shm"] == got["tmp"], got  # the same tmpfs
        assert got["sysctl"] == [["0"], ["0"], ["0"], ["0"], ["0", "0", "0", "0"]], got
    else:
        assert got["tmp"][0] == "tmpfs" and "size=3072k" in got["tmp"][1], got


@needs_sandbox
def test_inside_the_defaults_hold_when_no_limits_are_given():
    import json

    r = run_python(_INSIDE, ["assert f() == 1"])
    assert r.passed, r
    got = json.loads(r.stdout.split("INSIDE", 1)[1])
    assert got["rlimits"] == {"CPU": [5, 6], "AS": [512 * MIB] * 2, "FSIZE": [MIB] * 2, "CORE": [0, 0],
                              "MSGQUEUE": [0, 0], "NOFILE": [64, 64], "NPROC": [16, 16]}, got
    assert "size=65536k" in got["tmp"][1] and (not _runtime().own_fs or "nr_inodes=4096," in got["tmp"][1]), got


@needs_sandbox
def test_inside_it_is_nobody_alone_with_no_capability_network_or_environment():
    import platform

    got = _inside(FAST)
    assert got["env"] == {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "HOME": "/tmp",
                          "PWD": "/tmp"}, got
    assert (got["cwd"], got["hostname"], got["nics"]) == ("/tmp", "sandbox", ["lo"]), got
    assert (got["pid"], got["sid"], got["pids"]) == (2, 1, [1, 2]), got  # its own pid namespace and session
    assert got["pdeathsig"] == 9, got
    assert got["caps"] == ["0000000000000000"] * 5 and got["no_new_privs"] == "1", got
    assert got["cgroup_roots"] == ["/"], got
    assert got["flags"] == [1, 1, 1, 1], got
    assert got["ids"] == [65534, 65534, 65534, 65534, []], got
    assert got["executable"] == _runtime().python, got
    assert got["ro"] == {"/usr": "ro", "/dev": "ro", "/proc": "rw"}, got
    if platform.machine().lower() in ("x86_64", "amd64", "aarch64", "arm64"):
        assert (got["seccomp"], got["memfd"]) == ("2", 1), got


# --------------------------------------------------------------------------------------------------
# the runners inside the sandboxes, and the limits' defaults


def test_the_sandbox_is_here_where_it_must_be():
    """tools/mutate.py's sandbox mutants run with INTELLECT_SANDBOX_REQUIRED=own_fs: a mutant that breaks the sandbox
    (or its own tmpfs) would otherwise only make the other tests skip (or take bwrap's weaker --size tmpfs)."""
    import os

    from intellect.verifier import sandbox

    need = os.environ.get("INTELLECT_SANDBOX_REQUIRED")
    if not need:
        pytest.skip("INTELLECT_SANDBOX_REQUIRED is not set")
    assert sandbox.sandbox_available() == (True, "")
    if need == "own_fs":
        assert sandbox._probe()[0].own_fs is True


@needs_sandbox
def test_the_completion_reads_nothing_on_its_stdin_and_prints_only_to_its_output():
    code = "import os, sys\ndef f():\n    print('printed')\n    sys.stdout.flush()\n    return os.read(0, 100)\n"
    r = run_python(code, ["assert f() == b''", "assert f() == b''"], FAST)
    assert (r.passed, r.calls, r.stdout) == (True, 2, "printed\nprinted\n"), r


@needs_sandbox
def test_an_assertion_error_of_the_completion_cannot_be_caught_as_the_tests_own():
    code = "def f(x):\n    raise AssertionError('fine')\n"
    r = run_python(code, ["try:\n    assert f(1) == 3\nexcept AssertionError:\n    pass"], FAST)
    assert (r.passed, r.reason.value, r.stderr) == (False, "failed", "f() raised AssertionError: fine"), r


@needs_sandbox
def test_builtins_the_tests_use_are_their_own_not_calls_into_the_completion():
    r = run_python("x = 1\n", ["assert len([1, 2]) == 2 and isinstance(1, int) and sorted([2, 1]) == [1, 2]"], FAST)
    assert (r.passed, r.reason.value, r.calls) == (False, "no_calls", 0), r


def test_the_limits_defaults_and_bounds():
    from pydantic import ValidationError

    d = SandboxLimits()
    assert d.model_dump() == {"cpu_seconds": 5, "wall_seconds": 10.0, "memory_bytes": 512 * MIB, "max_processes": 16,
                              "max_output_bytes": MIB, "tmp_bytes": 64 * MIB, "tmp_inodes": 4096, "network": False}
    SandboxLimits(cpu_seconds=1, wall_seconds=0.01, memory_bytes=64 * MIB, max_processes=1, max_output_bytes=1024,
                  tmp_bytes=MIB, tmp_inodes=64)
    SandboxLimits(tmp_bytes=16 * 2**30, tmp_inodes=2**20)
    for bad in ({"cpu_seconds": 0}, {"wall_seconds": 0}, {"memory_bytes": 64 * MIB - 1}, {"max_processes": 0},
                {"max_output_bytes": 1023}, {"tmp_bytes": MIB - 1}, {"tmp_bytes": 16 * 2**30 + 1},
                {"tmp_inodes": 63}, {"tmp_inodes": 2**20 + 1}):
        with pytest.raises(ValidationError):
            SandboxLimits(**bad)
    with pytest.raises(ValidationError):
        SandboxLimits().model_copy(update={}).__class__(cpu_seconds=2, extra_field=1)
    with pytest.raises(ValidationError):
        d.cpu_seconds = 2  # frozen


def _bpf(prog: bytes, nr: int, arch: int, args=(0, 0, 0, 0, 0, 0)) -> int:
    """Classic BPF, the four instructions `_seccomp_program` uses, over a seccomp_data of (nr, arch, args)."""
    import struct

    data = struct.pack("=iIQ6Q", nr, arch, 0, *args)
    insns = [struct.unpack("=HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = struct.unpack("=I", data[k:k + 4])[0]
        elif code == 0x15:
            pc += jt if acc == k else jf
        elif code == 0x35:
            pc += jt if acc >= k else jf
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unknown instruction {code:#x}")
        pc += 1


@pytest.mark.parametrize("machine, arch, memfd, setsockopt", [("x86_64", 0xC000003E, 319, 54),
                                                              ("aarch64", 0xC00000B7, 279, 208)])
def test_the_seccomp_program_refuses_memfd_and_socket_buffer_growth_and_other_abis(monkeypatch, machine, arch, memfd,
                                                                                   setsockopt):
    from intellect.verifier import sandbox

    monkeypatch.setattr(sandbox.platform, "machine", lambda: machine)
    sandbox._seccomp_program.cache_clear()
    try:
        prog = sandbox._seccomp_program()
    finally:
        sandbox._seccomp_program.cache_clear()
    kill, eperm, allow = 0x80000000, 0x00050001, 0x7FFF0000
    assert len(prog) == 16 * 8
    assert _bpf(prog, memfd, arch) == eperm
    assert _bpf(prog, 0, arch) == allow and _bpf(prog, memfd + 1, arch) == allow
    assert _bpf(prog, memfd - 1, arch) == allow
    for opt in (7, 8, 32, 33):  # SO_SNDBUF, SO_RCVBUF and their FORCE forms, at SOL_SOCKET
        assert _bpf(prog, setsockopt, arch, (3, 1, opt, 0, 0, 0)) == eperm, opt
        assert _bpf(prog, setsockopt, arch, (3, 1, opt | 1 << 32, 0, 0, 0)) == eperm, opt  # the kernel reads an int
        assert _bpf(prog, setsockopt, arch, (3, 6, opt, 0, 0, 0)) == allow, opt  # another level (IPPROTO_TCP)
    for opt in (9, 6, 31, 34, 0):
        assert _bpf(prog, setsockopt, arch, (3, 1, opt, 0, 0, 0)) == allow, opt
    assert _bpf(prog, 0x40000000, arch) == eperm and _bpf(prog, 0x40000000 + 1, arch) == eperm  # x32
    assert _bpf(prog, 0x3FFFFFFF, arch) == allow
    assert _bpf(prog, 0, 0x40000003) == kill and _bpf(prog, memfd, arch + 1) == kill  # i386, another ABI


def test_no_seccomp_program_or_keyctl_where_the_numbers_are_not_known(monkeypatch):
    from intellect.verifier import sandbox

    monkeypatch.setattr(sandbox.platform, "machine", lambda: "sparc64")
    for f in (sandbox._seccomp_program, sandbox._keyctl):
        f.cache_clear()
    try:
        assert (sandbox._seccomp_program(), sandbox._seccomp_fd(), sandbox._keyctl()) == (None, None, None)
        assert sandbox._probe.__wrapped__()[0] is None
    finally:
        for f in (sandbox._seccomp_program, sandbox._keyctl):
            f.cache_clear()


def test_the_seccomp_pipe_holds_the_program_and_keyctl_joins_a_session_keyring(monkeypatch):
    import os

    from intellect.verifier import sandbox

    prog = sandbox._seccomp_program()
    if prog is None:
        pytest.skip("no seccomp numbers for this machine")
    fd = sandbox._seccomp_fd()
    try:
        assert os.read(fd, 4096) == prog and os.read(fd, 1) == b""
    finally:
        os.close(fd)
    monkeypatch.setattr(sandbox.platform, "machine", lambda: "aarch64")
    sandbox._keyctl.cache_clear()
    try:
        assert sandbox._keyctl().args == (219, 1, None)
    finally:
        # the real machine back before anything caches its number: aarch64's 219 is x86-64's restart_syscall, which
        # fails with EINTR (cached, it made every later sandbox start of this process fail: CI, 2026-12-02)
        monkeypatch.undo()
        sandbox._keyctl.cache_clear()
    assert sandbox._keyctl().args[1:] == (1, None)
    assert sandbox._keyctl().args[0] == sandbox._SYS_KEYCTL.get(__import__("platform").machine().lower())
