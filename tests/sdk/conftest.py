"""Fixtures of the SDK tests: a real js-ipfs daemon, anvil chains with the contracts deployed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from intellect.sdk.ipfs._daemon import IpfsDaemon


@pytest.fixture(scope="session")
def ipfs_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IpfsDaemon]:
    """A real IPFS daemon (js-ipfs 0.66.1 from tools/ipfs) on free loopback ports, temp IPFS_PATH."""
    daemon = IpfsDaemon(repo=tmp_path_factory.mktemp("ipfs-repo"))
    daemon.start()
    try:
        yield daemon
    finally:
        daemon.stop()
