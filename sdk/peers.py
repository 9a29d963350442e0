"""Peers found through the chain, for callers without an agent's `Directory` (the CLI, scripts).

Every agent registers its node with its HTTP server's URL as the endpoint and serves `/status` naming its other
services (`services.ipfs`: its IPFS gateway). `parse_status` and `peer_service` read such a document from a
stranger (bounded, refused by name when malformed; the agents' `Directory` uses them too); `pool_gateways` lists the
IPFS gateways a pool's documents (rules, task sets, evidence) can be fetched from: the pool's trainer first, then
the relays and validators staked to be listed, the most staked first (registration is free: an unstaked node is
never asked).
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ._errors import IntellectError
from ._fetch import PeerHttpError, fetch
from ._models import LISTING_FLOOR, NodeStatus, Role
from ._validators import ValidatorHistory

__all__ = ["MAX_STATUS_BYTES", "PeerDocumentError", "parse_status", "peer_service", "pool_gateways"]

log = logging.getLogger(__name__)

MAX_STATUS_BYTES = 1 << 20
"""Largest `/status` document read from a peer (a real one is a few KB)."""


class PeerDocumentError(IntellectError, ValueError):
    """A peer's `/status` document is not a JSON object of the expected shape."""


def parse_status(body: bytes, source: str) -> dict[str, Any]:
    """A peer's `/status` JSON object; `PeerDocumentError` naming `source` (its URL) if it is not one."""
    if len(body) > MAX_STATUS_BYTES:
        raise PeerDocumentError(f"status document from {source} is {len(body)} bytes, over {MAX_STATUS_BYTES}")
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:  # not UTF-8/JSON, an int over 4300 digits, deep nesting
        raise PeerDocumentError(f"status document from {source} is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise PeerDocumentError(f"status document from {source} is a JSON {type(doc).__name__}, not an object")
    services = doc.get("services")
    if services is not None and not isinstance(services, dict):
        raise PeerDocumentError(f"status document from {source}: 'services' is not an object")
    return doc


def peer_service(doc: dict[str, Any], name: str) -> str | None:
    """The URL a peer's status document gives for service `name`, if it is an http(s) URL."""
    url = (doc.get("services") or {}).get(name)
    if not isinstance(url, str) or len(url) > 2048 or not url.startswith(("http://", "https://")):
        return None
    return url


def _gateway(endpoint: str, timeout: float) -> str | None:
    url = endpoint.rstrip("/") + "/status"
    try:
        reply = fetch("GET", url, deadline=timeout, max_bytes=MAX_STATUS_BYTES)
        if not reply.ok:
            return None
        return peer_service(parse_status(reply.body, url), "ipfs")
    except (PeerHttpError, ValueError) as exc:  # PeerDocumentError is a ValueError
        log.debug("no gateway from %s: %s", url, exc)
        return None


def pool_gateways(protocol: Any, pool_id: int, *, limit: int = 16, timeout: float = 3.0) -> list[str]:
    """IPFS gateway URLs that may serve pool `pool_id`'s documents: its trainer's, then those of active relays and
    validators staked at least `max(minStake(role), LISTING_FLOOR)`, the most staked first; at most `limit` nodes are
    asked (concurrently, each `/status` within `timeout` seconds). Unreachable nodes are left out.

    Cost: the validators' stakes come from the event log (`ValidatorHistory`: no call per validator), relays are
    read one by one (two calls each: few register), and only the nodes to be asked have their endpoint read: a
    few `eth_getLogs` and O(relays + `limit`) `eth_call`s, whatever the number of validators. (Before: two calls
    per registered relay or validator on every CLI call.)"""
    trainer = protocol.pool(pool_id).params.trainer.lower()
    head = protocol.block_number()
    floor = max(protocol.min_stake(Role.VALIDATOR), LISTING_FLOOR)
    ranked: list[tuple[int, str]] = [(w, v) for v, w in ValidatorHistory(protocol).stakes_at(head).items()
                                     if w >= floor and v != trainer]
    relay_floor = max(protocol.min_stake(Role.RELAY), LISTING_FLOOR)
    # `role` is indexed: the node returns the relays' registrations only, not every worker's
    relays = {str(e.args["node"]) for e in protocol.get_events(["NodeRegistered"], to_block=head,
                                                                filters={"role": int(Role.RELAY)})
              if str(e.args["node"]).lower() != trainer}
    for a in relays:
        stake = protocol.active_stake(a)
        if stake >= relay_floor:
            ranked.append((stake, a))
    endpoints: list[str] = []
    first = protocol.node(trainer).endpoint
    if first:
        endpoints.append(first)
    for _, a in sorted(ranked, key=lambda t: -t[0]):  # endpoints read only until `limit` are found
        if len(endpoints) >= limit:
            break
        node = protocol.node(a)
        if node.status == NodeStatus.ACTIVE and node.endpoint and node.role in (Role.RELAY, Role.VALIDATOR) \
                and node.endpoint not in endpoints:
            endpoints.append(node.endpoint)
    if not endpoints:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(endpoints))) as pool:
        found = list(pool.map(lambda ep: _gateway(ep, timeout), endpoints))
    return list(dict.fromkeys(g.rstrip("/") for g in found if g))
