"""Addresses that work from elsewhere (issue 19): every service a node runs has a configured listen
address and port and an advertised URL; outside loopback nothing advertises a bind address or a
random port unless a public URL says so."""

import pytest

from intellect.agents.config import AgentConfig, ConfigError, ServerSettings, load_config


def test_loopback_advertises_the_bound_address():
    s = ServerSettings()
    assert s.is_loopback()
    assert s.advertised("status", "http://127.0.0.1:40123") == "http://127.0.0.1:40123"
    assert s.advertised("ipfs", "http://127.0.0.1:40124/") == "http://127.0.0.1:40124"


@pytest.mark.parametrize("role", ["worker", "validator", "trainer", "relay"])
def test_wildcard_host_without_public_address_is_refused(role):
    with pytest.raises(ConfigError, match=r"server\.public_host"):
        load_config(None, env={}, overrides={"role": role, "server.host": "0.0.0.0"})


def test_public_host_needs_fixed_ports_naming_the_key():
    base = {"role": "trainer", "server.host": "0.0.0.0", "server.public_host": "node.example.org",
            "server.port": "8000", "server.ipfs_port": "8001"}
    with pytest.raises(ConfigError, match=r"server\.shardcast_port is 0"):
        load_config(None, env={}, overrides=base)
    cfg = load_config(None, env={}, overrides={**base, "server.shardcast_port": "8002"})
    s = cfg.server
    assert s.advertised("status", "http://0.0.0.0:8000") == "http://node.example.org:8000"
    assert s.advertised("ipfs", "http://0.0.0.0:8001") == "http://node.example.org:8001"
    assert s.advertised("shardcast", "http://0.0.0.0:8002") == "http://node.example.org:8002"


def test_explicit_public_urls_win_and_cover_random_ports():
    """Behind a reverse proxy or a NAT port forward: each service's own URL, whatever port it binds."""
    cfg = AgentConfig(role="relay", server={
        "host": "10.0.0.5", "public_url": "https://relay.example.org/", "ipfs_public_url": "https://relay.example.org/ipfs-gw",
        "shardcast_public_url": "https://cast.example.org"})
    s = cfg.server
    assert s.advertised("status", "http://10.0.0.5:41000") == "https://relay.example.org"
    assert s.advertised("ipfs", "http://10.0.0.5:41001") == "https://relay.example.org/ipfs-gw"
    assert s.advertised("shardcast", "http://10.0.0.5:41002") == "https://cast.example.org"


def test_concrete_non_loopback_host_is_not_advertised_as_is():
    """A LAN or container address is a bind address too: peers elsewhere cannot use it."""
    with pytest.raises(ConfigError, match=r"its listen address 10\.0\.0\.5"):
        load_config(None, env={}, overrides={"role": "validator", "server.host": "10.0.0.5"})
    # a validator with no gateway needs a status address only
    cfg = load_config(None, env={}, overrides={"role": "validator", "server.host": "10.0.0.5", "ipfs.gateway": "false",
                                               "server.public_host": "10.0.0.5", "server.port": "8000"})
    assert cfg.server.advertised("status", "http://10.0.0.5:8000") == "http://10.0.0.5:8000"


def test_ipv6_public_host_is_bracketed():
    s = ServerSettings(host="::", public_host="2001:db8::7", port=8000)
    assert s.advertised("status", "http://[::]:8000") == "http://[2001:db8::7]:8000"
