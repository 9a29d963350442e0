"""A relay following a lying upstream: garbage `/versions` documents and manifests never stop it.

The upstream is a real HTTP server on loopback answering each request with the next lie; the relay's
watch thread must log, back off and keep polling (before: a `versions` list of non-objects raised
TypeError outside the guarded block and killed the thread, so the relay stopped following for good).
"""

from __future__ import annotations

import json
import time
from itertools import cycle
from pathlib import Path

from intellect.sdk.http import HttpServer, JsonHandler
from intellect.sdk.shardcast import VERSIONS_SCHEMA, Relay

_EMPTY = json.dumps({"schema": VERSIONS_SCHEMA, "versions": []}).encode()
_GARBAGE = [
    json.dumps({"schema": VERSIONS_SCHEMA, "versions": [5]}).encode(),
    json.dumps({"schema": VERSIONS_SCHEMA, "versions": "abc"}).encode(),
    b"[" * 5000 + b"]" * 5000,
    json.dumps({"schema": VERSIONS_SCHEMA, "versions": [{"id": 7}]}).encode(),
    json.dumps({"schema": VERSIONS_SCHEMA, "versions": {"id": "x"}}).encode(),
    json.dumps({"schema": VERSIONS_SCHEMA, "versions": [{"id": "ab" * 32}]}).encode(),  # its manifest: garbage
    b"\xff\xfe",
]
# a valid empty answer after each lie resets the relay's backoff (0.5 s per lie instead of doubling)
LIES = [doc for lie in _GARBAGE for doc in (lie, _EMPTY)]


def test_relay_survives_lying_upstream(tmp_path: Path) -> None:
    lies = cycle(LIES)
    seen: list[str] = []

    class Handler(JsonHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.reply(200, b"[" * 5000 if "/manifest" in self.path else next(lies))

    with HttpServer(Handler, name="lying-upstream") as server, \
            Relay([server.url], tmp_path / "relay", poll_wait=0.1) as relay:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum("/versions?" in p for p in seen) < len(LIES) + 2:
            time.sleep(0.05)
        watchers = [t for t in relay._threads if t.name.startswith("shardcast-watch-")]
        assert watchers and all(t.is_alive() for t in watchers)
        assert sum("/versions?" in p for p in seen) >= len(LIES) + 2, seen[-5:]
        assert any("/manifest" in p for p in seen)  # the garbage manifest was fetched and refused
        assert relay.store.versions() == []
