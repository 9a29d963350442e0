"""The reference: PyPI `shardcast` 0.3.2 in the same topology (origin → 2 middles → 8 clients).

Run by bench_tree.py --reference PY, with PY a Python that has the reference installed, kept
OUTSIDE this repository:

    python3.11 -m venv /tmp/refvenv && /tmp/refvenv/bin/pip install shardcast==0.3.2   # needs wget on PATH
    .venv/bin/python bench/shardcast/bench_tree.py --reference /tmp/refvenv/bin/python

or alone: /tmp/refvenv/bin/python bench/shardcast/bench_reference.py --ckpt DIR [--poll 30 --poll 1]

Quirks: the reference's ShardDownloader probes `data1.bin` on every server it is given when it
starts (and raises if that file is missing), so each origin/middle data dir gets a 1-byte
`data1.bin`; and it downloads that probe to the fixed path `/tmp/dummy.bin` (via
`/tmp/dummy.tmp`), which 8 clients and 2 middles started at once on one machine race for
(rename/unlink of another process's file → "Failed to download dummy file"). The harness gives
each process its own probe path (`PROBE_FIX`); the download code itself is untouched. It shards a single file, so the checkpoint's files are concatenated into one.
Timing starts when `broadcast()` returns (the origin lists the version) and ends when every
client has reassembled and blake3-checked the file; middles are already running (as
relays are in ours), clients are started at that moment and poll for the version each second.
Prints one JSON line last: {"median_s": {"poll30": s, "poll1": s}, "runs": {...}}.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

# The one change to the reference: a per-process path for its start-up probe (see the docstring).
PROBE_FIX = textwrap.dedent("""
    import os, pathlib
    import shardcast.client as _sc
    def _probe_path(*parts):
        p = pathlib.Path(*parts)
        return pathlib.Path(f"/tmp/dummy-{os.getpid()}.bin") if str(p) == "/tmp/dummy.bin" else p
    _sc.Path = _probe_path
""")

ORIGIN = textwrap.dedent("""
    import sys, time, pathlib, logging
    from shardcast import OriginServer
    from shardcast.utils import logger
    logger.setLevel(logging.WARNING)
    data, port, src, work = sys.argv[1], int(sys.argv[2]), sys.argv[3], pathlib.Path(sys.argv[4])
    o = OriginServer(data, port)
    (pathlib.Path(data) / "data1.bin").write_bytes(b"x")
    (work / "origin.ready").write_text("1")
    while not (work / "go").exists():
        time.sleep(0.01)
    o.broadcast(src)
    (work / "published").write_text(repr(time.time()))
    while True:
        time.sleep(1)
""")

MIDDLE = textwrap.dedent("""
    import sys, time, pathlib, logging
    from shardcast import MiddleNode
    from shardcast.utils import logger
    logger.setLevel(logging.WARNING)
    upstream, data, port, poll = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    pathlib.Path(data).mkdir(parents=True, exist_ok=True)
    (pathlib.Path(data) / "data1.bin").write_bytes(b"x")
    m = MiddleNode([upstream], data, port, check_interval=poll)
    while True:
        time.sleep(1)
""")
MIDDLE = PROBE_FIX + MIDDLE

CLIENT = textwrap.dedent("""
    import sys, time, logging
    from shardcast import ClientNode
    from shardcast.utils import logger
    logger.setLevel(logging.WARNING)
    servers, out = sys.argv[1].split(","), sys.argv[2]
    # Its constructor raises when a busy server drops the data1.bin probe, and its server
    # sampling raises once every server's success rate hits 0: restart it, as a supervisor would.
    while True:
        try:
            c = ClientNode(servers, out)
            while not ("v1" in c.list_available_versions() and c.download_version("v1", out + "/model.bin")):
                time.sleep(1)
            break
        except Exception as e:
            print("client restart after:", repr(e), flush=True)
            time.sleep(1)
""")
CLIENT = PROBE_FIX + CLIENT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, timeout: float = 60) -> None:
    t = time.monotonic()
    while time.monotonic() - t < timeout:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(url)


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one_run(src: Path, work: Path, *, middles: int, clients: int, poll: int, limit: float) -> tuple[float, float]:
    """(wall seconds, CPU seconds of middles + clients incl. their wget children)."""
    work.mkdir(parents=True)
    procs: list[subprocess.Popen[bytes]] = []
    py = sys.executable

    def spawn(code: str, *args: str, name: str) -> subprocess.Popen[bytes]:
        log = open(work / f"{name}.log", "wb")  # noqa: SIM115
        p = subprocess.Popen([py, "-c", code, *args], stdout=log, stderr=subprocess.STDOUT, cwd=work)
        procs.append(p)
        return p

    try:
        op = free_port()
        spawn(ORIGIN, str(work / "origin"), str(op), str(src), str(work), name="origin")
        o_url = f"http://127.0.0.1:{op}"
        wait_http(o_url + "/data1.bin")
        m_urls = []
        for i in range(middles):
            mp = free_port()
            spawn(MIDDLE, o_url, str(work / f"middle{i}"), str(mp), str(poll), name=f"middle{i}")
            m_urls.append(f"http://127.0.0.1:{mp}")
        for u in m_urls:
            wait_http(u + "/data1.bin")
        (work / "go").write_text("1")
        while not (work / "published").exists():
            time.sleep(0.01)
        t0 = time.monotonic()
        cpu0 = children_cpu()
        cps = [spawn(CLIENT, ",".join(m_urls), str(work / f"client{i}"), name=f"client{i}") for i in range(clients)]
        for i, p in enumerate(cps):
            if p.wait(timeout=max(1.0, t0 + limit - time.monotonic())) != 0:
                raise RuntimeError(f"reference client {i} failed: {(work / f'client{i}.log').read_text()[-2000:]}")
        wall = time.monotonic() - t0
        for p in procs[1 : 1 + middles]:
            p.kill()
            p.wait()
        return wall, children_cpu() - cpu0
    except Exception:
        for f in sorted(work.glob("*.log")):
            print(f"== {f.name}\n{f.read_text(errors='replace')[-1500:]}", file=sys.stderr)
        raise
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", type=Path, required=True, help="checkpoint directory (files are concatenated)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--relays", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--limit", type=float, default=300.0, help="give a run up this many seconds")
    ap.add_argument("--poll", type=int, action="append", default=None, help="middle poll interval(s), s")
    args = ap.parse_args()
    polls = args.poll or [30, 1]
    root = Path(tempfile.mkdtemp(prefix="shardcast-ref-"))
    try:
        src = root / "checkpoint.bin"
        with open(src, "wb") as out:
            for p in sorted(q for q in args.ckpt.rglob("*") if q.is_file()):
                with open(p, "rb") as f:
                    shutil.copyfileobj(f, out, 16 << 20)
        runs: dict[str, list[float]] = {}
        cpus: dict[str, list[float]] = {}
        for poll in polls:
            for r in range(args.repeat):
                try:
                    s, c = one_run(src, root / f"p{poll}-{r}", middles=args.relays, clients=args.clients,
                                   poll=poll, limit=args.limit)
                except subprocess.TimeoutExpired:
                    s, c = float("inf"), float("nan")  # did not finish within --limit
                runs.setdefault(f"poll{poll}", []).append(s)
                cpus.setdefault(f"poll{poll}", []).append(c)
                print(f"reference run poll={poll}s #{r}: {s:.2f} s, {c:.1f} CPU s", flush=True)
        print(json.dumps({"median_s": {k: statistics.median(v) for k, v in runs.items()},
                          "median_cpu_s": {k: statistics.median(v) for k, v in cpus.items()}, "runs": runs,
                          "load": os.getloadavg()}))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
