"""`intellect-agent --supervise`: the agent restarts itself where no service manager does (issue 36).

systemd (`deploy/systemd/intellect-agent@.service`) is the supervisor of choice on a host that has it. Where there
is none (a container, a shell on a rented box, a host whose operator cannot install units), `--supervise` runs
the same command line as a child process and starts it again whenever it dies of anything but a clean stop:

- exit 0 (stopped on request) and exit 2 (a configuration error: a restart would fail the same way) end the
  supervisor with the child's code; any other exit or a signal (`kill -9`, OOM) restarts it;
- the delay before a restart doubles from 1 s to 60 s and goes back to 1 s once a child ran `STABLE_S`;
- SIGTERM / SIGINT / SIGHUP to the supervisor go to the child, which stops cleanly, and the supervisor exits
  with its code; SIGUSR1 (the agent's stack dump) is passed on too.

Every restart is logged with the child's exit code or signal. The agent's state lives on disk (its state store,
claims, keys), so a restarted child resumes its leases and rewards as after any restart.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

__all__ = ["FINAL_CODES", "STABLE_S", "child_argv", "supervise"]

log = logging.getLogger(__name__)

FINAL_CODES = frozenset({0, 2})
"""Exit codes that end supervision: a clean stop, a configuration error."""
STABLE_S = 60.0
"""A child that ran this long resets the restart delay to its first step."""
FIRST_DELAY_S = 1.0
MAX_DELAY_S = 60.0
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1)


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def supervise(argv: Sequence[str], *, first_delay: float = FIRST_DELAY_S, max_delay: float = MAX_DELAY_S,
              stable_s: float = STABLE_S) -> int:
    """Run `argv` until it ends with a code in FINAL_CODES or the supervisor is told to stop; returns the code
    the supervisor should exit with (the child's last, 0 for a stop request that killed it by signal)."""
    stopping = threading.Event()
    child: list[subprocess.Popen[bytes]] = []

    def forward(signum: int, _frame: object) -> None:
        if signum != signal.SIGUSR1:
            stopping.set()
        if child and child[0].poll() is None:
            child[0].send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in _FORWARDED}
    delay = first_delay
    try:
        while True:
            started = time.monotonic()
            child[:] = [subprocess.Popen(list(argv))]
            log.info("supervisor: started the agent (pid %d)", child[0].pid)
            code = child[0].wait()
            ran = time.monotonic() - started
            if stopping.is_set():
                log.info("supervisor: the agent stopped (%s); exiting", _describe(code))
                return code if code >= 0 else 0
            if code in FINAL_CODES:
                log.info("supervisor: the agent ended (%s); not restarting", _describe(code))
                return code
            delay = first_delay if ran >= stable_s else delay
            log.warning("supervisor: the agent died (%s) after %.0f s; restarting in %.3g s", _describe(code), ran,
                        delay)
            if stopping.wait(delay):
                return 0
            delay = min(max_delay, delay * 2)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def child_argv(argv: Sequence[str]) -> list[str]:
    """This process's command line for the child: the same interpreter and arguments without `--supervise`."""
    return [sys.executable, "-m", "intellect.agents.cli", *(a for a in argv if a != "--supervise")]
