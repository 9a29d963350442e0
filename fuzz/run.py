"""Run the coverage-guided fuzzers (atheris/libFuzzer), each reader's harness in its own process.

    python fuzz/run.py --all --seconds 20 --jobs 2          # the short CI run
    python fuzz/run.py --reader manifest --runs 1000000     # a long run of one reader
    python fuzz/run.py --list

Each harness gets libFuzzer's -rss_limit_mb, -timeout (seconds per input), -max_len (per reader), the run's
limit (-max_total_time or -runs), -artifact_prefix=<crashes>/<reader>/ and two corpus folders: a scratch one
it grows (fuzz/.work/<reader>/, not committed) and the committed seeds (fuzz/corpus/<reader>/, read only).
Printed per reader: executions, exec/s, coverage (libFuzzer's `cov:` edges and `ft:` features), corpus size
and crashes (a crash, an uncaught exception, a hang past -timeout, memory past -rss_limit_mb). Exits 1 when
any reader crashed (or its harness failed to run), 0 otherwise. --log DIR keeps each harness's full output.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
READERS = sorted(p.stem.removeprefix("fuzz_") for p in HERE.glob("fuzz_*.py"))
MAX_LEN = {"store": 8192, "agent_http": 8192, "rollouts": 16384, "manifest": 16384, "unixfs": 8192, "cid": 256, "toploc": 512}
_STATUS = re.compile(r"^#(\d+)\s+(\w+)\s+cov: (\d+) ft: (\d+)(?: corp: (\d+))?")
_STAT = re.compile(r"^stat::(\w+):\s+(\d+)")


@dataclass
class Result:
    reader: str
    executions: int = 0
    exec_per_s: int = 0
    cov: int = 0
    ft: int = 0
    corpus: int = 0
    seconds: float = 0.0
    crashes: int = 0
    returncode: int = 0
    artifacts: list[str] | None = None
    error: str = ""


def run_one(reader: str, args: argparse.Namespace) -> Result:
    work = args.work / reader
    work.mkdir(parents=True, exist_ok=True)
    crashes = args.crashes / reader
    crashes.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in crashes.iterdir()}
    cmd = [sys.executable, str(HERE / f"fuzz_{reader}.py"),
           f"-rss_limit_mb={args.rss_limit_mb}", f"-timeout={args.timeout}",
           f"-max_len={MAX_LEN.get(reader, 4096)}", f"-artifact_prefix={crashes}/", "-print_final_stats=1",
           *([f"-seed={args.seed}"] if args.seed is not None else [])]
    if args.runs:
        cmd.append(f"-runs={args.runs}")
    if args.seconds:
        cmd.append(f"-max_total_time={args.seconds}")
    cmd += [str(work), str(HERE / "corpus" / reader)]
    tmp = args.work / f"{reader}.tmp"  # libFuzzer exits without Python's atexit: temp folders are removed here
    tmp.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "TMPDIR": str(tmp)}
    started = time.monotonic()
    limit = None if not args.seconds else 2 * args.seconds + 180  # startup and seed loading on a busy machine
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=env, timeout=limit)
        out, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        out += (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        rc = -9
    shutil.rmtree(tmp, ignore_errors=True)
    res = Result(reader, seconds=round(time.monotonic() - started, 1), returncode=rc)
    for line in out.splitlines():
        if m := _STATUS.match(line):
            res.executions, res.cov, res.ft = int(m[1]), int(m[3]), int(m[4])
            res.corpus = int(m[5] or res.corpus)
        elif m := _STAT.match(line):
            if m[1] == "number_of_executed_units":
                res.executions = int(m[2])
            elif m[1] == "average_exec_per_sec":
                res.exec_per_s = int(m[2])
    new = sorted(p.name for p in crashes.iterdir() if p.name not in before)
    res.artifacts = [str(crashes / n) for n in new]
    res.crashes = len(new)
    if rc != 0 and not new:
        res.error = f"harness exited {rc} without a crash artifact: " + " | ".join(out.strip().splitlines()[-5:])
    if args.log:
        args.log.mkdir(parents=True, exist_ok=True)
        (args.log / f"{reader}.log").write_text(out)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reader", action="append", choices=READERS, help="a reader to fuzz (repeatable)")
    ap.add_argument("--all", action="store_true", help="every reader")
    ap.add_argument("--list", action="store_true", help="list the readers and exit")
    ap.add_argument("--seconds", type=int, help="wall-clock seconds per reader (default 20 unless --runs)")
    ap.add_argument("--runs", type=int, help="executions per reader (with --seconds: whichever comes first)")
    ap.add_argument("--jobs", type=int, default=1, help="readers fuzzed at once (default 1)")
    ap.add_argument("--timeout", type=int, default=10, help="libFuzzer -timeout: seconds one input may take")
    ap.add_argument("--rss-limit-mb", type=int, default=2048, help="libFuzzer -rss_limit_mb")
    ap.add_argument("--seed", type=int, help="libFuzzer -seed (default: a random one, printed in the log)")
    ap.add_argument("--crashes", type=Path, default=HERE / "crashes", help="where crash inputs go (per reader)")
    ap.add_argument("--work", type=Path, default=HERE / ".work", help="scratch corpus the fuzzers grow")
    ap.add_argument("--log", type=Path, help="keep each harness's libFuzzer output here")
    ap.add_argument("--json", type=Path, help="also write the results as JSON")
    args = ap.parse_args()
    if args.list:
        for r in READERS:
            print(r)
        return 0
    readers = READERS if args.all else (args.reader or [])
    if not readers:
        ap.error("name a --reader or --all")
    args.crashes, args.work = args.crashes.resolve(), args.work.resolve()
    if not args.runs and not args.seconds:
        args.seconds = 20
    what = " or ".join(x for x in (f"{args.runs} runs" if args.runs else "",
                                    f"{args.seconds} s" if args.seconds else "") if x)
    print(f"fuzzing {len(readers)} reader(s), {what} each, {args.jobs} at a time", flush=True)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = []
        for res in pool.map(lambda r: run_one(r, args), readers):
            results.append(res)
            print(f"{res.reader:12} executions {res.executions:>9}  exec/s {res.exec_per_s:>6}  cov {res.cov:>5}"
                  f"  ft {res.ft:>6}  corpus {res.corpus:>5}  crashes {res.crashes}  ({res.seconds:.0f} s)", flush=True)
            for a in res.artifacts or []:
                print(f"    crash input: {a}", flush=True)
            if res.error:
                print(f"    {res.error}", flush=True)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    bad = [r.reader for r in results if r.crashes or r.error]
    total = sum(r.executions for r in results)
    print(f"{len(results)} readers, {total} executions, {'crashes in: ' + ', '.join(bad) if bad else '0 crashes'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
