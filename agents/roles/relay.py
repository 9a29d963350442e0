"""The relay agent: a Shardcast relay that registers on-chain as a Relay node.

Workers and validators find relays in the registry (role relay, endpoint = this agent's URL) and
read the Shardcast URL from its `/status`. Upstreams: `relay.upstreams`, else the pool trainer's
Shardcast origin (from its `/status`), rediscovered if the trainer restarts elsewhere.

It also keeps a replica of the pool's documents (rules, task set, held-out set, evidence rules: `PoolReplica`),
served by its IPFS gateway, so the pool stays readable while its trainer is down (issue 36).
"""

from __future__ import annotations

import logging
from typing import Any

from intellect.agents.roles._runtime import Agent
from intellect.agents.roles.pool_rules import PoolReplica
from intellect.sdk.shardcast import SERVER_LIMITS as LIMITS
from intellect.sdk.shardcast import Relay

__all__ = ["RelayAgent"]

log = logging.getLogger(__name__)


class RelayAgent(Agent):
    role = "relay"
    node_role = "relay"

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.relay: Any = None
        self.upstreams: list[str] = []
        self.replica = PoolReplica()  # the pool's rules and task sets, served while its trainer is down (issue 36)

    def discover_upstreams(self) -> list[str]:
        if self.cfg.relay.upstreams:
            return list(self.cfg.relay.upstreams)
        assert self.directory is not None
        ups = [u for u in [self.directory.service(self.pool.params.trainer, "shardcast")] if u]
        return ups

    def start(self) -> None:
        super().start()
        self.ensure_node(stake_amount=0.0001, auto_stake=True)
        self._start_relay()

    def _start_relay(self) -> None:
        ups = self.discover_upstreams()
        if not ups:
            self.doing = "waiting for the trainer's shardcast origin"
            return

        if self.relay is not None:
            self.relay.stop()
        self.relay = Relay(upstreams=ups, data_dir=self.data_dir / "shardcast", keep=self.cfg.relay.keep_versions,
                           host=self.cfg.server.host, port=self.cfg.server.shardcast_port, poll_wait=5.0,
                           ram_bytes=self.cfg.relay.ram_mib * 2**20, limits=self.cfg.server.limits(LIMITS)).start()
        self.upstreams = ups
        log.info("relay serving at %s from %s", self.relay.url, ups)

    def services(self) -> dict[str, str]:
        out = super().services()
        if self.relay is not None:
            out["shardcast"] = self.cfg.server.advertised("shardcast", self.relay.url)
        return out

    def loop(self) -> None:
        while not self.stop_event.is_set():
            try:
                ups = self.discover_upstreams()
                if ups and ups != self.upstreams:
                    self._start_relay()
                self.doing = f"relaying from {self.upstreams}" if self.relay else "waiting for an upstream"
                self.replica.tick(self)
            except Exception as exc:
                self.metrics.inc("errors_total", kind=type(exc).__name__)
                log.exception("relay step failed")
            self.wait(2.0)
        if self.relay is not None:
            self.relay.stop()

    def status(self) -> dict[str, Any]:
        doc = super().status()
        versions = []
        if self.relay is not None:
            versions = [{"step": st.manifest.step, "complete": st.complete} for st in self.relay.store.versions()]
        doc.update({"upstreams": self.upstreams, "versions": versions, "pool_documents": self.replica.kept})
        return doc
