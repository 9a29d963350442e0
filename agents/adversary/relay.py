"""A malicious relay node for the security suite (issue 5): tests and demos only.

`MaliciousRelay` is what an attacker with a registered relay node can do to the pool's checkpoint
distribution without the trainer's key:

- forge: publish its own checkpoint (a perturbed copy of a model: a poisoned policy) under its own
  Shardcast manifest, put that manifest on its IPFS store (served from its gateway, which the
  registry advertises to every agent), and announce it in its `/versions` list with a plausible step;
- tamper: serve the shards of every other version (the trainer's, proxied from the pool trainer's
  origin, found through the registry) with one byte flipped, keeping the size and headers.

It registers on-chain as a relay (endpoint = its HTTP server, whose `/status` lists its `shardcast`
and `ipfs` services like a `RelayAgent`), so workers and validators include it among their
checkpoint sources and IPFS peers. It counts every request for the forged manifest (IPFS or
Shardcast) and every tampered shard it served: the tests assert that honest agents never asked for
the former and dropped the latter.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from intellect.agents.adversary import rewrite_checkpoint
from intellect.agents.roles._runtime import LISTING_FLOOR, Directory
from intellect.sdk import NodeStatus, Role
from intellect.sdk.http import HttpServer, JsonHandler, PeerHttpError, fetch
from intellect.sdk.ipfs import Cid, EmbeddedIpfs
from intellect.sdk.shardcast import API_PREFIX, VERSIONS_SCHEMA, Origin

__all__ = ["MaliciousRelay", "RelayAttackStats"]

log = logging.getLogger(__name__)

_MAX_PROXIED = 1 << 30  # a shard (50 MB by default) or a manifest from the upstream relay
_SHARD = re.compile(r"^/versions/([0-9a-f]{64})/shards/(\d+)$")
_MANIFEST = re.compile(r"^/versions/([0-9a-f]{64})/manifest$")


class RelayAttackStats:
    """What the malicious relay was asked for and served (thread-safe counters)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.forged_manifest_requests = 0  # Shardcast GET of a forged version's manifest
        self.forged_shard_requests = 0  # Shardcast GET of a forged version's shard
        self.forged_ipfs_requests = 0  # IPFS block GET of a forged manifest CID
        self.tampered_shards = 0  # other versions' shards served with a flipped byte
        self.proxied_errors = 0  # upstream answered 404/503 or failed

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {k: v for k, v in vars(self).items() if not k.startswith("_")}


class MaliciousRelay:
    """An attacker's relay node. `start()` registers it on-chain and serves; `forge()` publishes a poisoned
    checkpoint under the attacker's own manifest; `stop()` shuts the server down."""

    def __init__(self, protocol: Any, pool_id: int, data_dir: Path | str, *, host: str = "127.0.0.1",
                 upstream: Callable[[], str | None] | None = None) -> None:
        """protocol: the attacker's `intellect.sdk.Protocol` (its own key). upstream: where to take the shards it
        tampers (default: the pool trainer's Shardcast origin, from the registry)."""
        self.protocol = protocol
        self.pool_id = pool_id
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.ipfs = EmbeddedIpfs(self.data_dir / "ipfs")
        self.origin = Origin(self.data_dir / "origin", ipfs=self.ipfs, host=host, keep=None)
        self.stats = RelayAttackStats()
        self.forged: dict[str, str] = {}  # forged manifest id -> its CID
        self._upstream = upstream or self._trainer_origin
        self._server = HttpServer(self._handler(), host, 0, owner=self, name="malicious-relay")
        self._directory: Any = None

    @property
    def url(self) -> str:
        return self._server.url

    def start(self) -> MaliciousRelay:
        """Serve, then register the node as a relay (endpoint = `url`) and stake what peers need to list it."""
        self._server.start()
        p = self.protocol
        if p.node().status == NodeStatus.NONE:
            p.register_node(Role.RELAY, endpoint=self.url)
        # peers list a relay only with the listing stake: an attacker that wants to be found pays it
        need = max(p.min_stake(Role.RELAY), LISTING_FLOOR) - p.active_stake(p.address)
        if need > 0:
            if p.balance_of() < need and p.is_dev_chain:
                p.drip()
            p.stake(p.address, need)
        log.warning("malicious relay %s registered at %s", p.address, self.url)
        return self

    def stop(self) -> None:
        self._server.stop()

    def forge(self, checkpoint_dir: Path | str, step: int, model_name: str, noise: float = 0.5) -> str:
        """Publish a perturbed copy of `checkpoint_dir` as step `step` under the attacker's own manifest (on its
        IPFS store, announced in its `/versions`); returns the manifest CID."""
        import torch

        gen = torch.Generator().manual_seed(4321 + step)

        def poison(v: torch.Tensor) -> torch.Tensor:
            n = torch.randn(v.shape, generator=gen, dtype=torch.float32) * (float(v.float().std()) * noise)
            return (v.float() + n).to(v.dtype)

        out = rewrite_checkpoint(Path(checkpoint_dir), self.data_dir / "forged" / f"step-{step}", poison)
        self.origin.relay_hints = [self.url]
        manifest, cid = self.origin.publish(out, step, model_name)
        assert cid is not None
        self.forged[manifest.id] = cid
        log.warning("malicious relay: forged step %d of %s as manifest %s (cid %s)", step, model_name,
                    manifest.id[:12], cid)
        return cid

    def forged_dir(self, step: int) -> Path:
        return self.data_dir / "forged" / f"step-{step}"

    # -- serving -------------------------------------------------------------------------------------

    def _trainer_origin(self) -> str | None:
        if self._directory is None:
            self._directory = Directory(self.protocol)
        trainer = self.protocol.pool(self.pool_id).params.trainer
        return self._directory.service(trainer, "shardcast")

    def _status(self) -> dict[str, Any]:
        return {"role": "relay", "node": self.protocol.address, "pool": self.pool_id, "doing": "relaying",
                "services": {"status": self.url + "/status", "shardcast": self.url, "ipfs": self.url},
                "versions": [{"id": vid, "cid": cid} for vid, cid in self.forged.items()]}

    def _handler(self) -> type[JsonHandler]:
        relay = self

        class Handler(JsonHandler):
            def do_GET(self) -> None:
                try:
                    self._route()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                except Exception:  # the attacker's server must not die on a bad request either
                    log.exception("malicious relay: error serving %s", self.path)
                    self.close_connection = True

            def _route(self) -> None:
                url = urlsplit(self.path)
                path = url.path
                if path == "/status":
                    return self.reply(200, json.dumps(relay._status()).encode(), "application/json")
                if path.startswith("/ipfs/"):
                    return self._ipfs(path[len("/ipfs/"):].strip("/"))
                if not path.startswith(API_PREFIX):
                    return self.reply(404, b"not found", "text/plain")
                path = path[len(API_PREFIX):]
                if path == "/versions":  # announce the forged versions (with plausible steps)
                    versions = [{"id": vid, "step": st.manifest.step, "model_name": st.manifest.model_name,
                                 "complete": True}
                                for vid in relay.forged if (st := relay.origin.store.get(vid)) is not None]
                    return self.reply(200, json.dumps({"schema": VERSIONS_SCHEMA, "versions": versions}).encode(),
                                      "application/json")
                if (m := _MANIFEST.match(path)) and m.group(1) in relay.forged:
                    relay.stats.add("forged_manifest_requests")
                    st = relay.origin.store.get(m.group(1))
                    assert st is not None
                    return self.reply(200, st.manifest.to_bytes(), "application/json")
                if (m := _SHARD.match(path)) and m.group(1) in relay.forged:
                    relay.stats.add("forged_shard_requests")
                    st = relay.origin.store.get(m.group(1))
                    assert st is not None
                    return self.reply(200, st.shard_path(int(m.group(2))).read_bytes())
                return self._proxy(path, url.query, tamper=bool(_SHARD.match(path)))

            def _ipfs(self, text: str) -> None:
                try:
                    cid = Cid.parse(text)
                except Exception:
                    return self.reply(400, b"bad cid", "text/plain")
                if str(cid) in relay.forged.values():
                    relay.stats.add("forged_ipfs_requests")
                if not relay.ipfs.has_block(cid):
                    return self.reply(404, b"not here", "text/plain")
                return self.reply(200, relay.ipfs.get_local_block(cid))

            def _proxy(self, path: str, query: str, *, tamper: bool) -> None:
                up = relay._upstream()
                if not up:
                    relay.stats.add("proxied_errors")
                    return self.reply(503, b"no upstream yet", "text/plain", {"Retry-After": "1"})
                try:
                    resp = fetch("GET", up.rstrip("/") + API_PREFIX + path + (f"?{query}" if query else ""),
                                 deadline=60.0, max_bytes=_MAX_PROXIED)
                except PeerHttpError:
                    relay.stats.add("proxied_errors")
                    return self.reply(503, b"upstream down", "text/plain", {"Retry-After": "1"})
                body, status = resp.body, resp.status
                headers = {k: v for k, v in resp.headers.items() if k in ("x-shard-sha256", "retry-after")}
                if status != 200 or not tamper or not body:
                    if status != 200:
                        relay.stats.add("proxied_errors")
                    return self.reply(status, body, resp.headers.get("content-type") or "application/octet-stream",
                                      headers)
                tampered = bytearray(body)
                tampered[len(tampered) // 2] ^= 0x01  # same size, same headers, one bit off
                relay.stats.add("tampered_shards")
                return self.reply(200, bytes(tampered), headers=headers)

        return Handler
