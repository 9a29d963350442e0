"""Helpers of the dashboard tests (a module with a unique name: conftest modules are not importable)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from intellect.sdk import Protocol
from intellect.sdk.devnet import Devnet

TOKEN = 10**18
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


class _StatusHandler(BaseHTTPRequestHandler):
    server: _StatusServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = json.dumps(self.server.doc).encode() if self.path == "/status" else b"{}"
        self.send_response(200 if self.path == "/status" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _StatusServer(ThreadingHTTPServer):
    daemon_threads = True
    doc: dict[str, Any]


def serve_status(doc: dict[str, Any]) -> tuple[_StatusServer, str]:
    """An HTTP server answering GET /status with `doc` (the agent's status document)."""
    srv = _StatusServer(("127.0.0.1", 0), _StatusHandler)
    srv.doc = doc
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


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
