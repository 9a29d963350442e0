"""`intellect-agent --supervise` (issue 36): on a host without systemd the agent restarts itself. A real relay
agent (no model) on a real anvil chain, run with `--supervise`: its child killed with SIGKILL comes back by itself
(a new pid, /healthz live again), SIGTERM to the supervisor stops the child cleanly and ends the supervisor with 0;
a configuration error is not restarted. The restart rules themselves, with a short-lived child: `supervise`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from intellect.agents.supervise import supervise

AGENT = Path(sys.executable).with_name("intellect-agent")


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(c) for c in text.split()]


def _live(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False


def _wait(cond, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_supervised_agent_killed_comes_back_and_stops_on_sigterm(swarm):
    relay = swarm.add("relay", "relay", 5)
    with open(relay.log_path, "ab") as log:
        sup = subprocess.Popen([str(AGENT), "--supervise", "--config", str(relay.cfg_path)], stdout=log,
                               stderr=subprocess.STDOUT, env=swarm.env)
    try:
        first = _wait(lambda: _children(sup.pid), 60, "the supervised child")[0]
        url = _wait(relay.url, 120, "the relay's URL")
        _wait(lambda: _live(url), 120, "the relay live")
        os.kill(first, signal.SIGKILL)
        second = _wait(lambda: [c for c in _children(sup.pid) if c != first], 60, "a restarted child")[0]
        assert sup.poll() is None
        _wait(lambda: _live(relay.url() or url), 120, "the restarted relay live")
        sup.send_signal(signal.SIGTERM)
        assert sup.wait(timeout=60) == 0
        assert not Path(f"/proc/{second}").exists() or "zombie" in Path(f"/proc/{second}/status").read_text()
        text = relay.log_text()
        assert "the agent died (killed by SIGKILL)" in text and "restarting in 1 s" in text, text[-3000:]
        assert "the agent stopped (exit code 0); exiting" in text
    finally:
        if sup.poll() is None:
            sup.kill()
            sup.wait(timeout=10)


def test_a_configuration_error_is_not_restarted(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("role: relay\nserver: {port: not-a-port}\n")
    out = subprocess.run([str(AGENT), "--supervise", "--config", str(bad)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and "server.port" in out.stderr, out.stderr


def _child(code: int) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.exit({code})"]


def test_supervise_restarts_a_crash_with_a_doubling_delay_and_stops_on_a_final_code(tmp_path, caplog):
    count = tmp_path / "runs"
    # exits 3 (a crash) twice, then 0: three runs, two restarts at 0.05 s then 0.1 s
    script = (f"import pathlib, sys; p = pathlib.Path({str(count)!r}); n = int(p.read_text()) if p.exists() else 0; "
              "p.write_text(str(n + 1)); sys.exit(3 if n < 2 else 0)")
    caplog.set_level("INFO", logger="intellect.agents.supervise")
    started = time.monotonic()
    assert supervise([sys.executable, "-c", script], first_delay=0.05, max_delay=1.0, stable_s=60) == 0
    assert count.read_text() == "3" and time.monotonic() - started >= 0.15
    msgs = [r.getMessage() for r in caplog.records]
    assert [m for m in msgs if "restarting in" in m] == [
        "supervisor: the agent died (exit code 3) after 0 s; restarting in 0 s",
        "supervisor: the agent died (exit code 3) after 0 s; restarting in 0 s",
    ] and msgs[-1] == "supervisor: the agent ended (exit code 0); not restarting"
    assert supervise(_child(2), first_delay=0.01) == 2  # a configuration error ends supervision


@pytest.mark.parametrize(("ran", "expect"), [(0.0, [0.05, 0.1, 0.2, 0.2]), (1.0, [0.05, 0.05, 0.05, 0.05])])
def test_the_restart_delay_doubles_to_its_cap_and_resets_after_a_stable_run(monkeypatch, ran, expect):
    """Delays waited between five crashes: doubling to max_delay, back to the first after a child ran stable_s."""
    import intellect.agents.supervise as sv

    waits: list[float] = []
    runs = iter(range(5))
    clock = [0.0]

    class FakeStop:
        def __init__(self) -> None:
            self.stop = False

        def set(self) -> None:
            self.stop = True

        def is_set(self) -> bool:
            return self.stop

        def wait(self, delay: float) -> bool:
            waits.append(round(delay, 3))
            return False

    class Child:
        pid = 1

        def __init__(self, argv: list[str]) -> None:
            self.n = next(runs)

        def wait(self) -> int:
            clock[0] += ran
            return 0 if self.n == 4 else 1

        def poll(self) -> int:
            return 0

    monkeypatch.setattr(sv.threading, "Event", FakeStop)
    monkeypatch.setattr(sv.subprocess, "Popen", Child)
    monkeypatch.setattr(sv.time, "monotonic", lambda: clock[0])
    assert supervise(["x"], first_delay=0.05, max_delay=0.2, stable_s=1.0) == 0
    assert waits == expect


def test_an_agent_whose_key_was_rotated_away_stops_as_a_configuration_error(devnet, tmp_path):
    """Exit 2, not 3: neither `--supervise` nor the systemd unit (RestartPreventExitStatus=2) restarts an agent
    whose key its owner moved to another (it would fail the same way every time)."""
    from eth_account import Account
    from role_config import role_config  # type: ignore[import-not-found]

    from intellect.agents.roles.relay import RelayAgent
    from intellect.sdk import ConfigError

    first = RelayAgent(role_config(devnet, "relay", tmp_path / "relay", 5, {"server.port": "0"}))
    try:
        first.start()  # registers and stakes the relay's node
    finally:
        first.close()
    new = Account.create()
    p = devnet.protocol(5)
    p.rotate_node_key(p.address, new_node_account=new)
    agent = RelayAgent(role_config(devnet, "relay", tmp_path / "relay", 5, {"server.port": "0"}))
    try:
        with pytest.raises(ConfigError, match=f"was rotated to {new.address} by its owner"):
            agent.start()
    finally:
        agent.close()
    out = subprocess.run([str(AGENT), "--supervise", "--role", "relay", "--set", f"chain.rpc_url={devnet.url}",
                          "--set", f"chain.deployment_file={devnet.deployment_file}", "--set", "chain.dev_account=5",
                          "--set", f"data_dir={tmp_path / 'relay2'}", "--set", "server.port=0"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "was rotated to" in out.stderr and "not restarting" in out.stderr, out.stderr[-2000:]
