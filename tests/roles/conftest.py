"""Fixtures for the role agents: a devnet (anvil + real deployment) and a swarm of agent processes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

AGENT = [sys.executable, "-m", "intellect.agents.cli"]  # the product's `intellect-agent`
ATTACK_KIT = [sys.executable, "-m", "intellect.agents.adversary"]  # the same CLI with the cheating workers

# the pool's rules, shared by every agent of a test swarm (tiny: seconds per task on CPU)
POOL_RULES: dict[str, Any] = {
    "tasks": {"source": "synthetic:64:0", "budgets": {"cpu": [6, 8], "gpu-small": [10, 12], "gpu-large": [12, 16]}},
    "worker": {"problems_per_task": 2, "group_size": 4, "poll_interval": 0.5},
    # the verification profile a pool gets by default (`mixed`: bf16 and fp32 workers welcome), as users run it;
    # a test about the strict profile adds FP32 (the slow cheater matrix runs under both)
    "validator": {"poll_interval": 0.5, "concurrency": 2},
    # the random tiny model solves nothing, so every group is flat: with INTELLECT-2's zero-advantage filter on,
    # the trainer would (rightly) wait for signal forever; these protocol tests train on the flat groups instead
    "trainer": {"batch_groups": 2, "max_steps": 3, "poll_interval": 0.5,
                "grpo": {"lr": 1e-3, "filter_zero_advantage": False}},
}


FP32: dict[str, Any] = {"validator": {"toploc_profile": "fp32"}}
"""`extra` for `Swarm.add` of a validator that applies the strict `fp32` profile (every node computes in fp32)."""


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def status_at(data_dir: Path) -> dict[str, Any] | None:
    """The /status of the agent whose data directory is `data_dir` (it writes its URL to `<data_dir>/url`); None
    while it has no URL or does not answer."""
    p = data_dir / "url"
    if not p.is_file():
        return None
    try:
        with urllib.request.urlopen(p.read_text().strip() + "/status", timeout=20) as resp:
            return json.loads(resp.read())
    except OSError:
        return None


def sent_submissions(data_dir: Path) -> set[int]:
    """The task ids a worker's own state store (under `data_dir`) records as submitted."""
    db = sqlite3.connect(data_dir / "state.sqlite")
    try:
        return {int(r[0]) for r in db.execute("SELECT id FROM records WHERE kind = 'submission' AND status = 'sent'")}
    finally:
        db.close()


def assert_sent_kept_and_nobody_slashed(p: Any, sent: set[int], node: str, who: str) -> dict[int, Any]:
    """Every submission `who` (worker `node`) recorded as sent is its Submitted or Paid work on the ledger, no
    challenge was upheld and nobody slashed (the kill soaks' invariants); returns the ledger's tasks by id."""
    from intellect.sdk import ChallengeStatus, TaskStatus

    tasks = {sid: p.task(sid) for sid in sent}
    lost = {sid: t.status.name for sid, t in tasks.items()
            if t.node.lower() != node.lower() or t.status not in (TaskStatus.SUBMITTED, TaskStatus.PAID)}
    assert not lost, f"submissions {who} recorded as sent but the ledger does not hold as its paid work: {lost}"
    upheld = [e.args["challengeId"] for e in p.get_events(["ChallengeResolved"])
              if p.challenge_info(int(e.args["challengeId"])).status == ChallengeStatus.UPHELD]
    assert not upheld, f"honest work slashed: {upheld}"
    assert not p.get_events(["Slashed"]), "an honest node was slashed"
    return tasks


class AgentProc:
    def __init__(self, name: str, cfg_path: Path, log_path: Path, env: dict[str, str],
                 launcher: list[str] | None = None) -> None:
        self.name = name
        self.cfg_path = cfg_path
        self.log_path = log_path
        self.env = env
        self.launcher = launcher
        """the command that runs `intellect-agent` (default AGENT; e.g. torchrun's, issue 38)"""
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> AgentProc:
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        log.write(f"\n==== start {self.starts} ====\n".encode())
        log.flush()
        doc = yaml.safe_load(self.cfg_path.read_text())
        cheater = any((doc.get(r) or {}).get("adversary") is not None for r in ("worker", "validator"))
        command = self.launcher or (ATTACK_KIT if cheater else AGENT)
        self.proc = subprocess.Popen([*command, "--config", str(self.cfg_path)], stdout=log,
                                     stderr=subprocess.STDOUT,
                                     env=self.env)
        self.starts += 1
        return self

    @property
    def data_dir(self) -> Path:
        return Path(yaml.safe_load(self.cfg_path.read_text())["data_dir"])

    def url(self) -> str | None:
        p = self.data_dir / "url"
        return p.read_text().strip() if p.is_file() else None

    def status(self) -> dict[str, Any] | None:
        return status_at(self.data_dir)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self, timeout: float = 20.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:  # hung: its threads' stacks to its log (SIGUSR1), then SIGKILL
                self.proc.send_signal(signal.SIGUSR1)
                time.sleep(2)
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.is_file() else ""


class Swarm:
    """Agent processes against one devnet; each writes its URL to `<data_dir>/url`."""

    def __init__(self, devnet: Any, root: Path) -> None:
        self.devnet = devnet
        self.root = root
        self.agents: dict[str, AgentProc] = {}
        self.env = dict(os.environ)
        self.env["PYTHONUNBUFFERED"] = "1"
        self.env["OMP_NUM_THREADS"] = "1"

    def add(self, name: str, role: str, dev_account: int, extra: dict[str, Any] | None = None,
            launcher: list[str] | None = None) -> AgentProc:
        cfg = _merge(POOL_RULES, {
            "role": role, "data_dir": str(self.root / name), "log_level": "INFO",
            "chain": {"rpc_url": self.devnet.url, "deployment_file": str(self.devnet.deployment_file),
                      "dev_account": dev_account},
        })
        cfg = _merge(cfg, extra or {})
        path = self.root / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        agent = AgentProc(name, path, self.root / f"{name}.log", self.env, launcher)
        self.agents[name] = agent
        return agent

    def wait(self, pred: Any, timeout: float, what: str, interval: float = 1.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [a.name for a in self.agents.values() if a.proc is not None and not a.alive()
                    and a.proc.returncode not in (0, -9)]
            if dead:
                raise AssertionError(f"agent(s) {dead} died while waiting for {what}:\n{self.tails()}")
            try:
                if pred():
                    return
            except (KeyError, TypeError):
                pass
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}:\n{self.diagnose()}")

    def diagnose(self) -> str:
        """Every live agent's thread stacks (SIGUSR1: the agent writes them to its log and goes on), the log
        tails, then one line per agent from its /status: last, so a truncated CI log still shows who waits."""
        for a in self.agents.values():
            if a.alive():
                assert a.proc is not None
                a.proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        lines = []
        for a in self.agents.values():
            st = a.status() if a.alive() else None
            brief = {k: st.get(k) for k in ("doing", "done", "submitted", "policy_step", "backlog") if k in st} \
                if st else "no /status"
            lines.append(f"{a.name} (alive {a.alive()}): {brief}")
        return self.tails(60) + "\n--- status ---\n" + "\n".join(lines)

    def tails(self, n: int = 25) -> str:
        return "\n".join(f"--- {a.name} ---\n" + "\n".join(a.log_text().splitlines()[-n:])
                         for a in self.agents.values())

    def stop(self) -> None:
        for a in self.agents.values():
            a.stop()


@pytest.fixture
def devnet(tmp_path):
    from intellect.sdk import devnet as dn

    net = dn.start(tmp_path / "deployments")
    try:
        yield net
    finally:
        net.stop()


@pytest.fixture
def swarm(devnet, tmp_path):
    s = Swarm(devnet, tmp_path / "swarm")
    s.root.mkdir()
    try:
        yield s
    finally:
        s.stop()
