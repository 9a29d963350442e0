"""The code sandbox: every escape or exhaustion attempt scores zero, fast, without harm."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from intellect.verifier.sandbox import (
    SandboxLimits,
    SandboxReason,
    TestsRefusedError,
    check_tests,
    prompt_prelude,
    run_python,
    sandbox_available,
)

pytestmark = pytest.mark.skipif(not sandbox_available()[0], reason=f"no sandbox here: {sandbox_available()[1]}")

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
    r = run_python("while True:\n    pass\n", ["assert f()"], FAST)
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
    r = run_python("import os\nwhile True:\n    os.fork()\ndef f():\n    return 1\n", ["assert f() == 1"], FAST)
    assert not r.passed and "Resource temporarily unavailable" in r.stderr  # RLIMIT_NPROC
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


def test_run_python_write_outside_sandbox_leaves_no_trace(tmp_path):
    """The sandbox's /tmp is a private tmpfs: a write there succeeds inside and never reaches the host."""
    target = Path("/tmp") / f"intellect-sbx-escape-{uuid.uuid4().hex}"
    code = f"open({str(target)!r}, 'w').write('x')\ndef f():\n    return 1\n"
    r = run_python(code, ["assert f() == 1"], FAST)
    assert r.passed and not target.exists()
    r = run_python(f"import os\nos.rmdir({str(tmp_path)!r})\n", [], FAST)
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
def test_run_python_subprocess_and_ctypes_gain_nothing(code):
    """No audit hook refuses them any more: they run, as uid 65534 in empty namespaces, and a run that
    calls nothing never passes."""
    r = run_python(code, ["assert True"], FAST)
    assert not r.passed and r.reason is SandboxReason.NO_CALLS


def test_run_python_stdlib_still_works():
    code = (
        "import collections, dataclasses, json, re, math, itertools, functools, typing, fractions, heapq\n"
        "P = collections.namedtuple('P', 'a b')\n"
        "@dataclasses.dataclass\nclass C:\n    x: int\n"
        "def f():\n    return P(1, 2).b + C(3).x, json.loads('[1]'), fractions.Fraction(1, 2) == 0.5\n"
    )
    assert run_python(code, ["import json", "assert f() == (5, [1], True)"], FAST).passed


def test_run_python_typed_results_compare_like_python():
    code = ("def f(x):\n    return x\n"
            "def g():\n    return {'a': (1, 2.5, float('inf')), 'b': {1, 2}, 'c': b'x', 'd': None, 'e': 1j}\n")
    tests = ["assert f([1, 2]) == [1, 2] and f(True) is True and f(2**300) == 2**300",
             "assert g() == {'a': (1, 2.5, float('inf')), 'b': {1, 2}, 'c': b'x', 'd': None, 'e': 1j}",
             "assert type(f(1)) is int and type(f(1.0)) is float and type(f((1,))) is tuple",
             "import math\nassert math.isnan(f(float('nan')))"]
    assert run_python(code, tests, FAST).passed


def test_run_python_calls_are_by_value_and_exceptions_cross_back():
    code = ("def sort_in_place(xs):\n    xs.sort()\n"
            "def boom(x):\n    raise ValueError('no ' + str(x))\n")
    tests = ["xs = [3, 1, 2]\nsort_in_place(xs)\nassert xs == [3, 1, 2]",
             "try:\n    boom(1)\nexcept ValueError as e:\n    assert 'no 1' in str(e)\nelse:\n    raise AssertionError"]
    assert run_python(code, tests, FAST).passed


def test_run_python_unserialisable_results_fail():
    r = run_python("class A:\n    pass\ndef f():\n    return A()\n", ["f()"], FAST)
    assert not r.passed and r.reason is SandboxReason.FORBIDDEN
    r = run_python("def f():\n    return 1\n", ["assert f() == 1", "f(lambda: 1)"], FAST)
    assert not r.passed and r.reason is SandboxReason.REFUSED


def test_check_tests_refuses_what_cannot_run():
    with pytest.raises(TestsRefusedError, match="not Python"):
        check_tests(["assert f(1) =="])
    with pytest.raises(TestsRefusedError, match="at least one"):
        check_tests([])
    assert run_python("def f():\n    return 1\n", ["assert f( =="], FAST).reason is SandboxReason.REFUSED


def test_prompt_prelude_keeps_helpers_and_drops_the_stub():
    prompt = ("import math\n\ndef poly(xs, x):\n    return sum(c * x**i for i, c in enumerate(xs))\n\n"
              "def find_zero(xs):\n    import math\n    \"\"\"doc\"\"\"\n")
    prelude = prompt_prelude(prompt)
    assert prelude is not None and "def poly" in prelude and "find_zero" not in prelude
    assert prompt_prelude("Write a function f.") is None
    assert prompt_prelude("def f(x):\n    \"\"\"doc\"\"\"\n") is None


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
