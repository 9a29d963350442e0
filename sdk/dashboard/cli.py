"""`intellect dashboard`: serve the web dashboard of a deployment until Ctrl-C.

    intellect dashboard                                   # local anvil (development), port 8090
    intellect --network base-sepolia --rpc-url https://... dashboard --port 8090
    intellect dashboard --network http://127.0.0.1:8545 --deployment runs/x/31337.json

Read-only: no keystore is needed. Mounted through `intellect.sdk.cli.PLUGINS`.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import click

from intellect.sdk import Protocol

from ._server import Dashboard, DashboardServer

__all__ = ["dashboard"]


@click.command(short_help="Serve the web dashboard of a deployment (chain + agents' /status).")
@click.option("--network", "network", default=None,
              help="development | base-sepolia | base-mainnet, or an RPC URL (default: the global --network).")
@click.option("--rpc-url", default=None, help="RPC URL (default: the global --rpc-url or the network's).")
@click.option("--deployment", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Deployment file (default: the global --deployment, else deployments/<chainId>.json).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8090, show_default=True, help="0 picks a free port.")
@click.option("--refresh", type=click.FloatRange(0.5, 3600), default=3.0, show_default=True,
              help="Seconds between page refreshes (and the snapshot cache lifetime).")
@click.option("--status-timeout", type=click.FloatRange(0.1, 60), default=1.5, show_default=True,
              help="Seconds to wait for each agent's /status.")
@click.pass_context
def dashboard(ctx: click.Context, network: str | None, rpc_url: str | None, deployment: Path | None, host: str,
              port: int, refresh: float, status_timeout: float) -> None:
    """Serve the dashboard: nodes with stake and status, checkpoints per step, submissions with verdict and
    window countdown, challenges with votes, the reward curve, and each node's path
    registered → task → proof → verdict → reward/slash."""
    root: Any = ctx.find_root().obj
    opts: dict[str, Any] = getattr(root, "opts", {}) or {}
    p = Protocol.connect(network or opts.get("network") or "development", rpc_url=rpc_url or opts.get("rpc_url"),
                         deployment=deployment or opts.get("deployment"), descriptor=opts.get("descriptor"))
    try:
        server = DashboardServer(Dashboard(p, ttl=refresh * 0.9, status_timeout=status_timeout), host, port,
                                 refresh_ms=int(refresh * 1000)).start()
    except OSError as exc:
        raise click.UsageError(f"cannot listen on {host}:{port} ({exc.strerror}): pick another --port "
                               f"(0 = any free port)") from None
    click.echo(f"dashboard of chain {p.chain_id} at {server.url} (Ctrl-C to stop)", err=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop()


if __name__ == "__main__":  # pragma: no cover
    dashboard()
