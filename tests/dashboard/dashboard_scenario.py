"""Helpers of the dashboard tests (a module with a unique name: conftest modules are not importable)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from intellect.sdk import Protocol
from intellect.sdk.devnet import Devnet
from intellect.sdk.http import HttpServer, JsonHandler

TOKEN = 10**18
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


class _StatusHandler(JsonHandler):
    def do_GET(self) -> None:
        if self.path == "/status":
            self.reply_json(200, self.server.owner.doc)  # type: ignore[attr-defined]
        else:
            self.reply_json(404, {})


def serve_status(doc: dict[str, Any]) -> tuple[HttpServer, str]:
    """An HTTP server answering GET /status with `doc` (the agent's status document); `.stop()` it."""
    srv = HttpServer(_StatusHandler, name="test-status")
    srv.doc = doc  # type: ignore[attr-defined]
    return srv.start(), srv.url


@dataclass
class Scenario:
    net: Devnet
    pool_id: int
    trainer: str
    honest: str
    cheat: str
    validators: list[str]
    down_endpoint: str
    manifest_cids: list[str]
    honest_subs: list[int]
    cheat_sub: int
    cheat_wiped: int
    servers: list[Any] = field(default_factory=list)

    def reader(self) -> Protocol:
        return self.net.protocol(None)


def status_doc(role: str, address: str, **extra: Any) -> dict[str, Any]:
    return {"schema": "intellect.agent.status/v1", "role": role, "node": address, "state": "running", **extra}
