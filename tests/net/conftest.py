"""Fixtures for tests across hosts: a lab of network namespaces (tests/net/net_hosts.py), anvil on the chain
host and the roles tests' agent processes, each started inside its own host's namespace.

The hosts tests skip, saying why, where namespaces cannot be made (not root, a sandbox). The swarm test
is marked `net` (and `slow`, so the default run leaves it out): `pytest -m net tests/net`.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from swarm_loader import roles_helpers, running_swarm

sys.path.insert(0, str(Path(__file__).parent))
from net_hosts import Host, NetLab, NetUnavailable

ROOT = Path(__file__).resolve().parents[2]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "net: multi-host tests in network namespaces (root); opt-in with -m net")




@pytest.fixture
def lab():
    try:
        net = NetLab.create()
    except NetUnavailable as exc:
        pytest.skip(f"no network namespaces here: {exc}")
    try:
        yield net
    finally:
        net.close()


@dataclass
class NsAnvil:
    """anvil inside `host`'s namespace, listening on the host's LAN address (the chain host)."""

    host: Host
    port: int = 8545
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host.addr}:{self.port}"

    def start(self) -> NsAnvil:
        from intellect.sdk import devnet as dn
        from intellect.sdk.procs import wait_until

        self.proc = subprocess.Popen(self.host.cmd([dn.anvil_binary(), "--host", self.host.addr, "--port",
                                                    str(self.port), "--chain-id", "31337"]),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_until(lambda: self.rpc("eth_chainId") is not None, 30):
            self.stop()
            raise RuntimeError(f"anvil did not start at {self.url}")
        return self

    def stop(self) -> None:
        if self.proc is not None:
            from intellect.sdk.procs import stop_process

            stop_process(self.proc, timeout=15)
            self.proc = None

    def rpc(self, method: str, params: list[Any] | None = None) -> Any:
        import requests

        body = requests.post(self.url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []},
                             timeout=10).json()
        if "error" in body:
            raise RuntimeError(f"anvil {method}: {body['error']}")
        return body["result"]

    def increase_time(self, seconds: int) -> None:
        self.rpc("evm_increaseTime", [int(seconds)])
        self.rpc("evm_mine")


@pytest.fixture
def net_devnet(lab, tmp_path):
    """anvil on host `chain` (the lab's first host) + the real dev deployment, as the roles' `devnet`."""
    from intellect.sdk import devnet as dn

    anvil = NsAnvil(lab.host("chain")).start()
    try:
        dep = dn.deploy(anvil.url, tmp_path / "deployments")
        yield dn.Devnet(anvil, dep, tmp_path / "deployments", False)  # type: ignore[arg-type]
    finally:
        anvil.stop()


def ns_agent_class() -> type:
    """The roles tests' AgentProc, started inside a host's namespace (`ip netns exec` execs: same pid)."""
    base = roles_helpers().AgentProc

    class NsAgentProc(base):  # type: ignore[misc,valid-type]
        host: Host

        def start(self) -> Any:
            log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
            log.write(f"\n==== start {self.starts} in {self.host.ns} ====\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.host.cmd([sys.executable, "-m", self.module, "--config",
                                                        str(self.cfg_path)]),
                                         stdout=log, stderr=subprocess.STDOUT, env=self.env)
            self.starts += 1
            return self

    return NsAgentProc


@pytest.fixture
def ns_agent() -> type:
    """The AgentProc class that starts an agent inside its `host` (set `.host` and `.module`)."""
    return ns_agent_class()


@pytest.fixture
def net_swarm(net_devnet, tmp_path):
    with running_swarm(net_devnet, tmp_path, settle=0.5) as s:
        yield s
