"""`intellect.sdk.peers.pool_gateways` against a real devnet: the gateways a pool's documents can be fetched from,
the most staked node first, at a cost that does not grow with the number of validators (the stakes come from the
event log; only the nodes asked have their endpoint read)."""

from __future__ import annotations

import json

from nodes import staked_node  # type: ignore[import-not-found]
from page_server import serve_pages  # type: ignore[import-not-found]
from rpc_counter import count_rpc  # type: ignore[import-not-found]

from intellect.sdk import Role
from intellect.sdk.devnet import Devnet
from intellect.sdk.peers import pool_gateways

TOKEN = 10**18


def test_pool_gateways_most_staked_first_at_a_cost_independent_of_the_validators(net: Devnet) -> None:
    pages: dict[str, bytes] = {}
    p = net.protocol(0)
    pool_id = net.deployment.default_pool_id or 1
    with serve_pages("127.0.0.1", pages) as base:
        def add(i: int, stake: int) -> None:
            pages[f"/v{i}/status"] = json.dumps({"services": {"ipfs": f"http://gw{i}.example"}}).encode()
            staked_node(net, i, Role.VALIDATOR, stake, endpoint=f"{base}/v{i}")

        for i in (1, 2, 3):
            add(i, (100 + i) * TOKEN)
        with count_rpc(p.w3) as calls:
            assert pool_gateways(p, pool_id, limit=2) == ["http://gw3.example", "http://gw2.example"]
        few = calls.count("eth_call")
        for i in range(4, 10):
            add(i, (100 + i) * TOKEN)
        with count_rpc(p.w3) as calls:
            assert pool_gateways(p, pool_id, limit=2) == ["http://gw9.example", "http://gw8.example"]
        assert calls.count("eth_call") == few  # three validators or nine: the same calls (before: 2 per node)
        assert pool_gateways(p, pool_id, limit=16) == [f"http://gw{i}.example" for i in range(9, 0, -1)]
        net.protocol(9).exit_node()  # an exited validator weighs nothing and is not asked
        assert pool_gateways(p, pool_id, limit=2) == ["http://gw8.example", "http://gw7.example"]
