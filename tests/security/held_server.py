"""A child process serving one kind of inbound server for `test_security_held_servers.py`.

    python held_server.py KIND WORKDIR LIMITS_JSON

KIND: agent (an `AgentServer` with `/status` and a `GET /attestations` route), gateway (an
`IpfsGateway` over an `EmbeddedIpfs` holding a file), origin (a Shardcast `Origin` with one published
version), relay (a `Relay` that has pulled that version from an origin in this process). LIMITS_JSON:
`ServerLimits` fields replacing the server's own defaults. It prints one JSON line (url, pid, and the
paths an honest client fetches with the sha256 of each answer's body), then answers `stats` lines with
the server's `stats()` and stops at EOF. The parent runs it under RLIMIT_NOFILE 1024.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def main() -> None:
    kind, work, overrides = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
    from intellect.sdk.http import HttpServer

    server: HttpServer
    stoppers: list[Any] = []
    fetch: dict[str, str] = {}  # path -> sha256 of the body an honest client must get
    if kind == "agent":
        from intellect.agents.roles._server import AgentServer, Metrics

        status = {"schema": "intellect.agent.status/v1", "role": "validator", "verdicts": list(range(50))}
        atts = [{"cid": f"bafy{i}", "ok": True} for i in range(10)]
        server = AgentServer(lambda: status, Metrics(), limits=AgentServer.default_limits.with_(**overrides))
        server.route("GET", "/attestations", lambda _q, _b: atts)
        server.start()
        stoppers.append(server.stop)
        fetch["/status"] = hashlib.sha256(json.dumps(status).encode()).hexdigest()
        fetch["/attestations"] = hashlib.sha256(json.dumps(atts).encode()).hexdigest()
    elif kind == "gateway":
        from intellect.sdk.ipfs import GATEWAY_LIMITS as LIMITS
        from intellect.sdk.ipfs import EmbeddedIpfs, IpfsGateway

        store = EmbeddedIpfs(work / "ipfs")
        data = os.urandom(600_000)  # more than one block: the gateway walks a real UnixFS DAG
        cid = store.add(data)
        server = IpfsGateway(store, limits=LIMITS.with_(**overrides)).start()
        stoppers.append(server.stop)
        fetch[f"/ipfs/{cid}"] = hashlib.sha256(data).hexdigest()
    elif kind in ("origin", "relay"):
        from intellect.sdk.shardcast import SERVER_LIMITS as LIMITS
        from intellect.sdk.shardcast import Origin, Relay

        ckpt = work / "ckpt"
        ckpt.mkdir()
        (ckpt / "model.safetensors").write_bytes(os.urandom(300_000))
        (ckpt / "config.json").write_text('{"layers": 2}')
        origin = Origin(work / "origin", shard_size=100_000,
                        limits=LIMITS.with_(**overrides) if kind == "origin" else None).start()
        stoppers.append(origin.stop)
        manifest, _ = origin.publish(ckpt, step=1, model_name="held")
        server = origin.server
        if kind == "relay":
            relay = Relay([origin.url], work / "relay", poll_wait=1.0, limits=LIMITS.with_(**overrides)).start()
            stoppers.insert(0, relay.stop)
            for _ in range(200):  # bounded: the relay pulls 4 shards from loopback
                if any(s.manifest.id == manifest.id and s.complete for s in relay.store.versions()):
                    break
                time.sleep(0.05)
            else:
                raise SystemExit("relay did not pull the version")
            server = relay.server
        prefix = "/shardcast/v1"
        fetch[f"{prefix}/versions/{manifest.id}/manifest"] = hashlib.sha256(manifest.to_bytes()).hexdigest()
        for s in manifest.shards:
            fetch[f"{prefix}/versions/{manifest.id}/shards/{s.index}"] = s.sha256
    else:
        raise SystemExit(f"unknown kind {kind!r}")
    print(json.dumps({"url": server.url, "pid": os.getpid(), "fetch": fetch,
                      "limits": server.limits.__dict__}), flush=True)
    try:
        for line in sys.stdin:
            if line.strip() == "stats":
                print(json.dumps(server.stats()), flush=True)
    finally:
        for stop in stoppers:
            stop()


if __name__ == "__main__":
    main()
