"""The code sandbox: every escape or exhaustion attempt scores zero, fast, without harm."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from intellect.verifier.sandbox import SandboxLimits, SandboxReason, run_python

FAST = SandboxLimits(cpu_seconds=2, wall_seconds=4, memory_bytes=256 * 2**20)


def test_run_python_passing_tests():
    r = run_python("def f(x):\n    return x * 2\n", ["assert f(2) == 4", "assert f(0) == 0"], FAST)
    assert r.passed and r.reason is SandboxReason.PASSED


def test_run_python_failing_test():
    r = run_python("def f(x):\n    return x\n", ["assert f(2) == 4"], FAST)
    assert not r.passed and r.reason is SandboxReason.FAILED


def test_run_python_syntax_error():
    assert run_python("def f(:\n", [], FAST).reason is SandboxReason.SYNTAX_ERROR


def test_run_python_empty_code():
    assert run_python("  \n", ["assert True"], FAST).reason is SandboxReason.NO_CODE


def test_run_python_infinite_loop_hits_cpu_limit():
    t0 = time.monotonic()
    r = run_python("while True:\n    pass\n", [], FAST)
    assert r.reason in (SandboxReason.CPU_LIMIT, SandboxReason.TIMEOUT)
    assert time.monotonic() - t0 < FAST.wall_seconds + 3


def test_run_python_sleep_hits_wall_timeout():
    t0 = time.monotonic()
    r = run_python("import time\ntime.sleep(60)\n", [], SandboxLimits(wall_seconds=1.5))
    assert r.reason is SandboxReason.TIMEOUT
    assert time.monotonic() - t0 < 5


def test_run_python_memory_bomb_is_contained():
    r = run_python("x = bytearray(8 * 1024**3)\n", [], FAST)
    assert r.reason is SandboxReason.MEMORY_LIMIT


def test_run_python_fork_bomb_is_contained():
    t0 = time.monotonic()
    r = run_python("import os\nwhile True:\n    os.fork()\n", [], FAST)
    assert not r.passed
    assert time.monotonic() - t0 < FAST.wall_seconds + 3


def test_run_python_output_flood_is_capped():
    r = run_python("while True:\n    print('x' * 65536)\n", [], SandboxLimits(max_output_bytes=64 * 1024))
    assert r.reason is SandboxReason.OUTPUT_LIMIT


@pytest.mark.parametrize(
    "code",
    [
        "import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)\n",
        "import _socket\n_socket.socket().connect(('127.0.0.1', 9))\n",
        "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9/', timeout=1)\n",
    ],
)
def test_run_python_network_attempt_fails(code):
    r = run_python(code + "print('connected')\n", [], FAST)
    assert not r.passed and "connected" not in r.stdout


def test_run_python_write_outside_tempdir_is_refused(tmp_path):
    target = Path("/tmp") / f"intellect-sbx-escape-{uuid.uuid4().hex}"
    r = run_python(f"open({str(target)!r}, 'w').write('x')\n", [], FAST)
    assert r.reason is SandboxReason.FORBIDDEN
    assert not target.exists()
    r = run_python(f"import os\nos.remove({str(tmp_path)!r})\n", [], FAST)
    assert not r.passed and tmp_path.exists()


def test_run_python_write_inside_tempdir_is_allowed():
    code = "open('scratch.txt', 'w').write('hi')\ndef f():\n    return open('scratch.txt').read()\n"
    assert run_python(code, ["assert f() == 'hi'"], FAST).passed


@pytest.mark.parametrize(
    "code", ["import os\nos._exit(0)\n", "import sys\nsys.exit(0)\n", "raise SystemExit(0)\n"]
)
def test_run_python_early_exit_is_not_a_pass(code):
    assert not run_python(code, ["assert False"], FAST).passed


@pytest.mark.parametrize(
    "code",
    ["import subprocess\nsubprocess.run(['true'])\n", "import os\nos.system('true')\n", "import ctypes\n"],
)
def test_run_python_subprocess_and_ctypes_refused(code):
    assert run_python(code, [], FAST).reason is SandboxReason.FORBIDDEN


def test_run_python_stdlib_still_works():
    code = (
        "import collections, dataclasses, json, re, math, itertools, functools, typing, fractions, heapq\n"
        "P = collections.namedtuple('P', 'a b')\n"
        "@dataclasses.dataclass\nclass C:\n    x: int\n"
    )
    assert run_python(
        code, ["assert P(1, 2).b == 2 and C(3).x == 3", "assert json.loads('[1]') == [1]"], FAST
    ).passed


def test_run_python_leaves_no_processes():
    r = run_python("import time\ntime.sleep(30)\n", [], SandboxLimits(wall_seconds=1))
    assert r.reason is SandboxReason.TIMEOUT
    time.sleep(0.2)
    mine = [p for p in os.listdir("/proc") if p.isdigit()]
    leftovers = []
    for pid in mine:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"time.sleep(30)" in cmd and b"SANDBOX" not in cmd:
            leftovers.append(pid)
    assert not leftovers
