"""Work that outlives the worker (issue 19): a worker pushes each rollout file to a store the pool
names before `submitWork`, so it needs no inbound connection and may go offline afterwards.

    trainer            POST <trainer endpoint>/store  {"schema", "cid", "node", "data" (base64), "signature"}
                       the trainer checks the CID of the bytes, that the signer is `node` and that `node`
                       is an active worker of the registry, then adds and pins the file in its IPFS store;
                       validators fetch it by CID from the trainer's gateway like from any peer (and check
                       the CID, as every IPFS fetch here does)
    kubo:<RPC URL>     `ipfs add --cid-version 1 --raw-leaves` on any Kubo node (pinned); the CID it
                       answers must be the worker's

A validator only challenges a file as `unavailable` once no peer serves it for the whole retry period
(agents/roles/validator.py): a file pinned at the trainer is always served, so a worker that went
offline is not slashed for it. No contract change: availability stays an off-chain judgement.
"""

from __future__ import annotations

import base64
import binascii
import logging
from pathlib import Path
from typing import Any

from eth_account import Account
from eth_account.messages import encode_defunct

from intellect.agents.roles._server import HttpError

__all__ = ["MAX_STORE_BYTES", "STORE_SCHEMA", "accept_pushed_file", "push_file", "store_message", "store_request"]

log = logging.getLogger(__name__)

STORE_SCHEMA = "intellect.store/v1"
#: largest file the trainer's /store accepts: base64 of it must fit the agent server's 4 MiB body cap
MAX_STORE_BYTES = 3 * 1024 * 1024 - 4096


def store_message(chain_id: int, cid: str) -> str:
    """What a worker signs (EIP-191) to push `cid`: bound to the chain, so a push is no use elsewhere."""
    return f"{STORE_SCHEMA}:{chain_id}:{cid}"


def store_request(private_key: Any, chain_id: int, cid: str, data: bytes) -> dict[str, Any]:
    """The body of `POST /store` for `data` (whose CID is `cid`), signed with the worker's node key."""
    account = Account.from_key(private_key)
    signed = account.sign_message(encode_defunct(text=store_message(chain_id, cid)))
    return {"schema": STORE_SCHEMA, "cid": cid, "node": account.address, "data": base64.b64encode(data).decode(),
            "signature": "0x" + bytes(signed.signature).hex()}


def push_file(agent: Any, path: Path, cid: str) -> str | None:
    """Store `path` (whose CID is `cid`) where `worker.push_to` says; returns where, or None for `none`.

    Raises on failure: the caller decides whether to submit anyway (its own gateway still serves it)."""
    target = agent.cfg.worker.push_to.strip()
    data = Path(path).read_bytes()
    if target == "none":
        return None
    if target.startswith("kubo:"):
        from intellect.sdk.ipfs import KuboIpfs

        url = target[len("kubo:"):]
        got = KuboIpfs(url, timeout=60.0).add(data, pin=True)
        if got != cid:
            raise RuntimeError(f"Kubo node {url} stored the file as {got}, not {cid}")
        return url
    if target != "trainer":
        raise RuntimeError(f"worker.push_to {target!r}: not 'trainer', 'kubo:<RPC API URL>' or 'none'")
    from intellect.sdk._fetch import fetch

    if len(data) > MAX_STORE_BYTES:
        raise RuntimeError(f"rollout file {path} is {len(data)} bytes, over the trainer store's {MAX_STORE_BYTES}")
    p = agent.protocol
    endpoint = p.node(agent.pool.params.trainer).endpoint
    if not endpoint:
        raise RuntimeError(f"pool {agent.pool_id}'s trainer registered no endpoint to push to")
    body = store_request(p.account.key, p.chain_id, cid, data)
    reply = fetch("POST", endpoint.rstrip("/") + "/store", json_body=body, deadline=60.0, max_bytes=64 * 1024)
    if reply.status != 200:
        raise RuntimeError(f"trainer store {endpoint}: HTTP {reply.status} {reply.body[:200]!r}")
    return endpoint


def accept_pushed_file(agent: Any, body: Any) -> dict[str, Any]:
    """The trainer's `POST /store`: check and pin a worker's file (HttpError 4xx naming what was wrong)."""
    from intellect.sdk import NodeStatus, Role
    from intellect.sdk.ipfs import compute_cid

    if not isinstance(body, dict) or body.get("schema") != STORE_SCHEMA:
        raise HttpError(400, f"body must be a {STORE_SCHEMA} object")
    cid, node, sig, b64 = (body.get(k) for k in ("cid", "node", "signature", "data"))
    if not all(isinstance(v, str) for v in (cid, node, sig, b64)):
        raise HttpError(400, "cid, node, signature and data must be strings")
    if len(b64) > (MAX_STORE_BYTES * 4) // 3 + 4:
        raise HttpError(413, f"file over {MAX_STORE_BYTES} bytes")
    try:
        data = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise HttpError(400, "data is not base64") from None
    p = agent.protocol
    try:
        signer = Account.recover_message(encode_defunct(text=store_message(p.chain_id, cid)), signature=sig)
    except Exception as exc:  # eth_keys raises several types for a malformed signature
        raise HttpError(400, f"bad signature: {type(exc).__name__}") from None
    if signer.lower() != node.lower():
        raise HttpError(403, f"signed by {signer}, not {node}")
    info = p.node(signer)
    if info.role != Role.WORKER or info.status != NodeStatus.ACTIVE:
        raise HttpError(403, f"{signer} is not an active worker")
    got = compute_cid(data)
    if got != cid:
        raise HttpError(400, f"the bytes' CID is {got}, not {cid}")
    stored = agent.ipfs.add(data, pin=True)
    if stored != cid:  # a store with other import settings (a misconfigured Kubo): say so, keep nothing
        if hasattr(agent.ipfs, "unpin"):
            agent.ipfs.unpin(stored)
        raise HttpError(500, f"this store imports the file as {stored}, not {cid}")
    agent.count("files_stored")
    log.info("stored %s (%d bytes) for worker %s", cid, len(data), signer)
    return {"cid": cid, "pinned": True}
