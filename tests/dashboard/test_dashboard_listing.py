"""The dashboard asks agents' `/status` only of listed nodes (issue 22): registering is free, so a flood of
registrations without stake is shown from its events but costs the page no HTTP call."""

from __future__ import annotations

from typing import ClassVar

from intellect.sdk import LISTING_FLOOR
from intellect.sdk.dashboard import ChainIndex, StatusFetcher, collect
from intellect.sdk.http import HttpServer, JsonHandler

TOKEN = 10**18


class CountingStatus(JsonHandler):
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).paths.append(self.path)
        self.reply_json(200, {"schema": "intellect.agent.status/v1", "role": "worker", "state": "running"})


def test_unstaked_registrations_are_shown_but_never_asked(fresh_devnet) -> None:
    from eth_account import Account

    from intellect.sdk import Role

    with HttpServer(CountingStatus, name="counting-status") as srv:
        CountingStatus.paths = []
        worker = fresh_devnet.protocol(1)
        worker.drip()
        worker.register_node(Role.WORKER, endpoint=srv.url + "/worker")
        worker.stake(worker.address, 100 * TOKEN)
        spam = fresh_devnet.protocol(2)
        spam.drip()
        keys = [Account.create() for _ in range(40)]
        for i, key in enumerate(keys):
            spam.register_node([Role.WORKER, Role.VALIDATOR, Role.TRAINER, Role.RELAY][i % 4], node_account=key,
                               endpoint=f"{srv.url}/spam{i}")
        spam.stake(keys[0].address, 100 * TOKEN - 1)  # a worker under its minimum, above the floor: asked
        spam.stake(keys[3].address, LISTING_FLOOR - 1)  # a relay (minimum 0) under the listing floor
        spam.stake(keys[7].address, LISTING_FLOOR)  # a relay at the floor: listed, asked

        p = fresh_devnet.protocol(0)
        snap = collect(p, ChainIndex(p), StatusFetcher(timeout=2.0))
        assert sorted(CountingStatus.paths) == ["/spam0/status", "/spam7/status", "/worker/status"]  # 5e47eb6: all 42
        assert len(snap.nodes) >= 41
        w = snap.node(worker.address)
        assert w is not None and w.agent_asked and w.agent_status is not None
        for key in keys[1:7]:
            nv = snap.node(key.address)
            assert nv is not None and not nv.agent_asked and (nv.agent_error or "").startswith("not asked")
        assert snap.totals.agents_up == 3 and snap.totals.agents_down == 0
