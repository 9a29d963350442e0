"""Our own anvil for brownie's development network.

brownie's `development` network always launches anvil on 8545, and ATTACHES to whatever already listens there:
two test sessions, a benchmark and a test run, or a gas report beside a demo would share (and kill) one chain.
`use_private_anvil_port()` points it at a free port (or $INTELLECT_ANVIL_PORT) before brownie connects.
"""

from __future__ import annotations

import os
import socket


def use_private_anvil_port() -> None:
    """Before `network.connect("development")`: a free loopback port for the anvil brownie launches. A no-op once
    connected, or when a port other than 8545 was chosen already (the test suites' helpers share this)."""
    from brownie import network
    from brownie._config import CONFIG

    if network.is_connected() or "development" not in CONFIG.networks:
        return
    if CONFIG.networks["development"].get("cmd_settings", {}).get("port") not in (None, 8545):
        return
    port = os.environ.get("INTELLECT_ANVIL_PORT")
    if not port:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = str(sock.getsockname()[1])
    dev = CONFIG.networks["development"]
    dev["host"] = "http://127.0.0.1"
    dev.setdefault("cmd_settings", {})["port"] = int(port)

