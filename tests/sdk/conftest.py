"""Fixtures of the SDK tests: a real js-ipfs daemon, anvil chains with the contracts deployed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from intellect.sdk import devnet
from intellect.sdk.devnet import Devnet
from intellect.sdk.ipfs import IpfsDaemon


@pytest.fixture(scope="session")
def ipfs_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IpfsDaemon]:
    """A real IPFS daemon (js-ipfs 0.66.1 from tools/ipfs) on free loopback ports, temp IPFS_PATH."""
    daemon = IpfsDaemon(repo=tmp_path_factory.mktemp("ipfs-repo"))
    daemon.start()
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="session")
def devnet_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    """anvil on a free port (not brownie's 8545) with the contracts deployed by scripts/deploy.py."""
    net = devnet.start(tmp_path_factory.mktemp("devnet"))
    try:
        yield net
    finally:
        net.stop()


@pytest.fixture
def net(devnet_session: Devnet) -> Iterator[Devnet]:
    """The session devnet, with every test's chain changes rolled back (evm_snapshot / evm_revert)."""
    snap = devnet_session.anvil.snapshot()
    try:
        yield devnet_session
    finally:
        devnet_session.anvil.revert(snap)
