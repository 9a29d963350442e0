"""The demo orchestrator as a user runs it: `python -m intellect.agents.demo` in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def _procs_mentioning(text: str) -> list[int]:
    """PIDs of live (non-zombie) processes whose command line mentions `text`."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (d / "stat").read_text().split()[2]
        except OSError:
            continue
        if text in cmd and state != "Z":
            out.append(int(d.name))
    return out


def _demo(run_dir: Path, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "intellect.agents.demo", "--run-dir", str(run_dir), "--port", "0",
                             "--no-live", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def test_demo_ctrl_c_stops_every_process(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = _demo(run_dir, "--steps", "1", "--model", "tiny")  # no warm start: agents start at once
    try:
        deadline = time.monotonic() + 240
        # wait until every agent has started its server (it writes <data_dir>/url)
        while time.monotonic() < deadline and proc.poll() is None:
            urls = list((run_dir / "agents").glob("*/url")) if (run_dir / "agents").is_dir() else []
            if len(urls) >= 8:
                break
            time.sleep(1)
        assert proc.poll() is None, proc.communicate()[0]
        assert _procs_mentioning(str(run_dir)), "no agent process found"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert "interrupted" in out
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _procs_mentioning(str(run_dir)):
        time.sleep(0.5)
    assert _procs_mentioning(str(run_dir)) == []


@pytest.mark.slow
def test_demo_short_run_reaches_final_table(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = _demo(run_dir, "--steps", "2", "--timeout", "900")
    try:
        out, _ = proc.communicate(timeout=1500)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-5000:]
    assert "Nodes" in out and "Steps" in out and "report:" in out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["schema"] == "intellect.demo.summary/v1" and summary["completed"]
    rows = {r["name"]: r for r in summary["nodes"]}
    honest = [r for r in rows.values() if r["role"] == "worker" and r["honest"]]
    cheat = rows["cheater-1"]
    assert len(honest) == 3 and len({r["hardware"] for r in honest}) == 3
    for r in honest:
        assert r["submissions"] > 0 and r["accepted"] == r["submissions"] and r["slashed"] == 0
        assert r["rewards_claimed"] > 0 and r["stake_after"] == r["stake_before"]
    assert cheat["challenged"] > 0 and cheat["slashed"] > 0 and cheat["rewards_claimed"] == 0
    assert [s["step"] for s in summary["steps"]] == [0, 1, 2]
    for s in summary["steps"]:
        assert s["checkpoint_cid"].startswith("bafk") and s["checkpoint_cid"] in out
    # tiny-warm learns: rewards are non-zero, and each policy step's rollouts exist (one task per step)
    assert all(s["mean_reward"] and s["mean_reward"] > 0 for s in summary["steps"][1:])
    # the pool finishes at max_steps (issue 37): the last checkpoint is the result, never rolled out
    assert all(s["submissions"] > 0 for s in summary["steps"][:-1])
    for f in ("report.html", "reward_curve.png", "throughput.png", "stake.png", "snapshot.json"):
        assert (run_dir / f).is_file(), f
    assert _procs_mentioning(str(run_dir)) == []
