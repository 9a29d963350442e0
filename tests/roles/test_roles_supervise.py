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


def _runs(tmp_path, crashes: int, sleep_s: float) -> list[str]:
    """A child that sleeps `sleep_s`, then exits 3 (a crash) `crashes` times and 0 after."""
    count = tmp_path / "runs"
    return [sys.executable, "-c", f"import pathlib, sys, time; p = pathlib.Path({str(count)!r}); "
            f"n = int(p.read_text()) if p.exists() else 0; p.write_text(str(n + 1)); time.sleep({sleep_s}); "
            f"sys.exit(3 if n < {crashes} else 0)"]


def _restart_delays(caplog) -> list[str]:
    return [m.rsplit("restarting in ", 1)[1] for m in (r.getMessage() for r in caplog.records) if "restarting in" in m]


def test_supervise_restarts_a_crash_with_a_doubling_delay_and_stops_on_a_final_code(tmp_path, caplog):
    caplog.set_level("INFO", logger="intellect.agents.supervise")
    # four crashes, then 0: the delay doubles from 0.05 s to its cap 0.2 s
    assert supervise(_runs(tmp_path, 4, 0), first_delay=0.05, max_delay=0.2, stable_s=60) == 0
    assert (tmp_path / "runs").read_text() == "5"
    assert _restart_delays(caplog) == ["0.05 s", "0.1 s", "0.2 s", "0.2 s"]
    assert caplog.records[-1].getMessage() == "supervisor: the agent ended (exit code 0); not restarting"
    assert supervise(_child(2), first_delay=0.01) == 2  # a configuration error ends supervision


def test_the_restart_delay_goes_back_to_its_first_step_after_a_stable_run(tmp_path, caplog):
    caplog.set_level("INFO", logger="intellect.agents.supervise")
    # each child runs 0.3 s, past stable_s 0.2 s: every restart waits the first delay again
    assert supervise(_runs(tmp_path, 3, 0.3), first_delay=0.05, max_delay=1.0, stable_s=0.2) == 0
    assert _restart_delays(caplog) == ["0.05 s", "0.05 s", "0.05 s"]


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
