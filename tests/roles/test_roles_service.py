"""An agent stays up unattended (issue 36): the shipped systemd unit (`deploy/systemd/intellect-agent@.service`) is
valid as systemd reads it, and the agent speaks the service manager's protocol: READY=1 once started, WATCHDOG=1
as its loop comes round under a watchdog, STOPPING=1 on SIGTERM (then exit 0), and `GET /healthz` answers 200 while
the loop is live, 503 once it has not come round for `server.liveness_s`.

A real agent process (the relay role: no model) on a real anvil chain, with `NOTIFY_SOCKET` pointing at a datagram
socket this test reads, as systemd's would be; `systemd-analyze verify` where it is installed."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parents[2] / "deploy" / "systemd" / "intellect-agent@.service"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_the_shipped_unit_is_valid_as_systemd_reads_it(tmp_path):
    agent = Path(sys.executable).with_name("intellect-agent")
    assert agent.exists()
    text = UNIT.read_text()
    for need in ("Type=notify", "Restart=on-failure", "WatchdogSec=", "ExecStart=/opt/intellect/venv/bin/intellect-agent "
                 "--role %i --config /etc/intellect/%i.yaml", "EnvironmentFile=-/etc/intellect/%i.env"):
        assert need in text, need
    unit = tmp_path / "intellect-agent@worker.service"  # an instance, the binary where this checkout has it
    unit.write_text(text.replace("/opt/intellect/venv/bin/intellect-agent", str(agent)))
    out = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and not out.stderr.strip(), out.stderr  # a bad directive is only a warning: none
    unit.write_text(text.replace("Restart=on-failure", "Restart=sometimes").replace(
        "/opt/intellect/venv/bin/intellect-agent", str(agent)))
    bad = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert "restart specifier" in bad.stderr  # the check above would see one


def _datagrams(sock: socket.socket, until: float, stop: str | None = None) -> list[str]:
    """The notifications received until `until` (monotonic), or until one starting with `stop`."""
    got: list[str] = []
    while time.monotonic() < until:
        sock.settimeout(max(0.05, until - time.monotonic()))
        try:
            got.append(sock.recv(4096).decode())
        except TimeoutError:
            break
        if stop is not None and got[-1].startswith(stop):
            break
    return got


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_agent_notifies_the_service_manager_and_answers_healthz(swarm, tmp_path):
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    relay = swarm.add("relay", "relay", 5, {"server": {"liveness_s": 3.0}})
    relay.env = {**swarm.env, "NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "1000000"}
    try:
        relay.start()
        msgs = _datagrams(sock, time.monotonic() + 120, stop="READY=1")
        assert msgs and msgs[-1] == "READY=1\nSTATUS=relay running", msgs
        beats = _datagrams(sock, time.monotonic() + 15)
        assert beats.count("WATCHDOG=1") >= 3, beats  # each pass of the loop (a 2 s wait), the period 0.5 s

        code, doc = _get(relay.url() + "/healthz")
        assert code == 200 and doc["live"] is True and doc["loop_age_s"] < 3.0, doc
        relay.proc.send_signal(signal.SIGTERM)
        assert relay.proc.wait(timeout=60) == 0
        assert "STOPPING=1" in _datagrams(sock, time.monotonic() + 5, stop="STOPPING=1")
    finally:
        sock.close()


def test_healthz_is_503_once_the_loop_stops_coming_round(devnet, tmp_path):
    """In process: the agent's real server; the loop's last pass moved back past `server.liveness_s`."""
    from role_config import role_config  # type: ignore[import-not-found]

    from intellect.agents.roles.relay import RelayAgent

    cfg = role_config(devnet, "relay", tmp_path / "relay", 5, {"server.port": "0", "server.liveness_s": "60"})
    agent = RelayAgent(cfg)
    agent.start_server()
    try:
        url = agent.server.url + "/healthz"
        assert _get(url)[0] == 200
        agent.last_beat = time.monotonic() - 61
        code, doc = _get(url)
        assert code == 503 and "the loop last came round 61 s ago" in doc["error"] and "liveness_s 60" in doc["error"]
        agent.beat()
        assert _get(url)[0] == 200
        agent.stop_event.set()
        code, doc = _get(url)
        assert code == 503 and "stopping" in doc["error"]
    finally:
        agent.close()
