"""Figures for docs/security.md "Attack surface: inbound servers": each server kind under the attack of
tests/security/test_security_held_servers.py (2,000 idle, half-sent and dripping connections from stranger
addresses; the server in a child under RLIMIT_NOFILE 1024, deadlines 2 s, 8 workers).

Usage:
    .venv/bin/python bench/security/held_servers.py [agent gateway origin relay]
    .venv/bin/python bench/security/held_servers.py --old-agent DIR   # an older tree's agent server, unbounded

For each kind one JSON line: honest fetch times from 127.0.0.1 before and during the attack (ms), the
server's thread count before and during, stranger connections held once every one was accepted, seconds
until all were closed, and the server's `stats()`. `--old-agent DIR`: DIR holds `intellect/{sdk,agents,verifier}`
of an older commit (e.g. `git archive e9e6ad5 sdk agents verifier | tar -x -C /tmp/old` and symlinks
`/tmp/oldpkg/intellect/<d>` -> `/tmp/old/<d>`); its agent server is started with PYTHONPATH=DIR and
attacked the same way.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "security"))
import test_security_held_servers as t  # the test's child, strangers and limits

OLD_CHILD = """
import json, os, sys
from intellect.agents.roles._server import AgentServer, Metrics
s = AgentServer(lambda: {"ok": True}, Metrics()).start()
print(json.dumps({"url": s.url, "pid": os.getpid()}), flush=True)
sys.stdin.read()
"""


def fetch_ms(addr: tuple[str, int], path: str, timeout: float = 5.0) -> float | str:
    t0 = time.monotonic()
    try:
        conn = http.client.HTTPConnection(*addr, timeout=timeout, source_address=("127.0.0.1", 0))
        conn.request("GET", path)
        resp = conn.getresponse()
        resp.read()
        conn.close()
        return round(1000 * (time.monotonic() - t0), 1) if resp.status == 200 else f"status {resp.status}"
    except OSError as exc:
        return f"{type(exc).__name__} after {1000 * (time.monotonic() - t0):.0f} ms"


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise RuntimeError("no Threads line")


def measure(kind: str) -> dict[str, object]:
    child = t.Child(kind, Path(tempfile.mkdtemp(prefix="held-")))
    strangers = t.Strangers()
    try:
        before = [fetch_ms(child.addr, p) for p in child.info["fetch"]]
        th0 = child.threads()
        t0 = time.monotonic()
        strangers.open(child.addr, t.CONNECTIONS)
        during: list[float | str] = []
        for _ in range(5):
            strangers.drip()
            during += [fetch_ms(child.addr, p) for p in child.info["fetch"]]
            time.sleep(0.05)
        th1 = child.threads()
        t.all_taken(child, strangers)
        held = strangers.held()
        while strangers.held() and time.monotonic() - t0 < 30:
            strangers.drip()
            time.sleep(0.1)
        ok = [x for x in during if isinstance(x, float)]
        return {"kind": kind, "honest_ms_before_max": max(x for x in before if isinstance(x, float)),
                "honest_ms_during_median": statistics.median(ok) if ok else None,
                "honest_ms_during_max": max(ok) if ok else None, "honest_failed": [x for x in during if isinstance(x, str)],
                "threads_before": th0, "threads_during": th1, "held_after_accepts": held,
                "all_closed_after_s": round(time.monotonic() - t0, 1), "stats": child.stats()}
    finally:
        strangers.close()
        child.close()


def measure_old(pythonpath: str) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=pythonpath)
    p = subprocess.Popen([sys.executable, "-c", OLD_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=env, preexec_fn=t._child_limits, cwd="/tmp")
    assert p.stdout is not None and p.stdin is not None
    info = json.loads(p.stdout.readline())
    host, port = info["url"].removeprefix("http://").rsplit(":", 1)
    addr = (host, int(port))
    strangers = t.Strangers()
    try:
        out: dict[str, object] = {"kind": "old agent", "threads_before": threads(info["pid"]),
                                  "honest_before": fetch_ms(addr, "/status")}
        strangers.open(addr, t.CONNECTIONS)
        for _ in range(5):
            strangers.drip()
            time.sleep(0.2)
        out.update(threads_after_1s=threads(info["pid"]), held_after_1s=strangers.held(),
                   honest_after_1s=fetch_ms(addr, "/status"))
        time.sleep(5)
        strangers.drip()
        out.update(threads_after_6s=threads(info["pid"]), held_after_6s=strangers.held(),
                   honest_after_6s=fetch_ms(addr, "/status"))
        return out
    finally:
        strangers.close()
        p.stdin.close()
        p.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kinds", nargs="*", default=["agent", "gateway", "origin", "relay"])
    ap.add_argument("--old-agent", metavar="PYTHONPATH")
    args = ap.parse_args()
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, t.CONNECTIONS + 1000), hard))
    print(f"# load average: {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores", flush=True)
    if args.old_agent:
        print(json.dumps(measure_old(args.old_agent)), flush=True)
        return
    for kind in args.kinds:
        print(json.dumps(measure(kind)), flush=True)


if __name__ == "__main__":
    main()
