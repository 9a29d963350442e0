"""How `run_isolated` reads its child's end (`_outcome`: exit status, framed stdout, stderr's tail) and how it
starts the child, each branch with its exact text (issue 39: written against mutmut's survivors of
`verifier/isolation.py`'s parent side; the child's own code runs in another process, where mutmut cannot follow,
and is exercised end to end by test_verifier_isolation.py)."""

from __future__ import annotations

import json
import logging
import os
import signal
from pathlib import Path

import pytest

from intellect.verifier.isolation import (
    ChildLimits,
    ParseCrashed,
    ParseRefused,
    ParseUnavailable,
    _outcome,
    run_isolated,
)

HERE = Path(__file__).parent
LIMITS = ChildLimits(memory_bytes=1 << 30, cpu_seconds=2, wall_seconds=30)
READY, OK, REFUSED = b"READY\n", b"OK\n", b"REFUSED\n"


def _raised(rc: int, out: bytes, err: bytes = b"") -> BaseException:
    with pytest.raises((ParseCrashed, ParseRefused, ParseUnavailable)) as exc:
        _outcome(rc, out, err, LIMITS)
    return exc.value


def test_a_result_and_a_refusal_come_back_only_with_exit_status_0():
    assert _outcome(0, READY + OK + b"\x00bytes", b"", LIMITS) == b"\x00bytes"
    e = _raised(0, READY + REFUSED + b"bad \xff row")
    assert type(e) is ParseRefused and str(e) == "bad \ufffd row"  # undecodable bytes replaced, not raised
    e = _raised(1, READY + REFUSED + b"bad")  # a refusal framed, but the child then died: its status rules
    assert type(e) is ParseCrashed and str(e) == "exited with status 1 on this file"


def test_a_child_that_never_read_the_bytes_is_the_nodes_trouble_with_stderrs_last_300_bytes():
    err = b"x" * 500 + b"Traceback \xff end  \n"
    e = _raised(4, b"", err)
    tail = err[-300:].decode("utf-8", "replace").strip()
    assert type(e) is ParseUnavailable and str(e) == f"isolated parser could not start (exit status 4): {tail}"
    assert len(tail) < 300 and tail.endswith("\ufffd end")


def test_broken_framing_after_a_clean_exit_is_the_nodes_bug():
    e = _raised(0, READY + b"garbage" * 20)
    assert type(e) is ParseUnavailable
    assert str(e) == f"isolated parser ended without a result: {(b'garbage' * 20)[:80]!r}"


def test_exit_statuses_and_signals_each_make_their_verdict(caplog):
    e = _raised(3, READY)
    assert type(e) is ParseCrashed and str(e) == "ran out of its 1024 MiB memory limit"
    e = _raised(0 - signal.SIGXCPU, READY)
    assert type(e) is ParseCrashed and e.signal == signal.SIGXCPU
    assert str(e) == f"passed its 2 s CPU-time limit (signal {int(signal.SIGXCPU)})"
    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        e = _raised(-sig, READY)
        assert type(e) is ParseUnavailable
        assert str(e) == f"isolated parser was killed by {sig.name} (signal {int(sig)}), not by the bytes"
    with caplog.at_level(logging.INFO, logger="intellect.verifier.isolation"):
        e = _raised(-signal.SIGSEGV, READY, b"  fault here \n")
    assert type(e) is ParseCrashed and e.signal == signal.SIGSEGV
    assert str(e) == f"aborted on this file (signal {int(signal.SIGSEGV)}, SIGSEGV)"
    assert caplog.messages == ["isolated parser died by SIGSEGV: fault here"]
    e = _raised(-200, READY)  # no such signal: named by number
    assert str(e) == "aborted on this file (signal 200, signal 200)"
    e = _raised(2, READY)
    assert type(e) is ParseCrashed and str(e) == "exited with status 2 on this file" and e.signal is None


def test_the_child_runs_one_thread_writes_no_bytecode_leads_its_session_and_inherits_no_descriptor(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(HERE), prepend=os.pathsep)
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    r, w = os.pipe()
    os.set_inheritable(w, True)  # an inheritable descriptor of the parent: close_fds keeps it out of the child
    try:
        got = json.loads(run_isolated("isolation_targets:environment", b"", None, LIMITS))
    finally:
        os.close(r)
        os.close(w)
    assert got["omp"] == "1" and got["nobytecode"] == "1" and got["session_leader"] is True
    assert got["dumpable"] == 0  # no core dump, even through a core_pattern pipe
    assert w not in got["fds"] and got["fds"][:3] == [0, 1, 2] and len(got["fds"]) <= 4  # + listdir's own


def test_a_child_that_cannot_be_started_is_the_nodes_trouble(monkeypatch):
    import subprocess

    def no_fork(*_a, **_k):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(subprocess, "Popen", no_fork)
    with pytest.raises(ParseUnavailable) as exc:
        run_isolated("isolation_targets:echo", b"", None, LIMITS)
    assert str(exc.value) == "isolated parser could not start: [Errno 11] Resource temporarily unavailable"


def test_the_child_writes_no_file_and_a_wrapped_memory_error_is_the_memory_limit(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", str(HERE), prepend=os.pathsep)
    out = tmp_path / "written"
    with pytest.raises(ParseRefused) as exc:
        run_isolated("isolation_targets:writes", b"", {"path": str(out)}, LIMITS)
    assert "File too large" in str(exc.value) and out.stat().st_size == 0
    with pytest.raises(ParseCrashed) as crash:
        run_isolated("isolation_targets:wrapped_memory", b"", None, LIMITS)
    assert str(crash.value) == "ran out of its 1024 MiB memory limit"


def test_a_target_that_cannot_be_imported_says_so_with_the_setup_status(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(HERE), prepend=os.pathsep)
    with pytest.raises(ParseUnavailable) as exc:
        run_isolated("isolation_targets:no_such_target", b"", None, LIMITS)
    assert str(exc.value).startswith("isolated parser could not start (exit status 4): isolated parser setup failed: ")
