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
