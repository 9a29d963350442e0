"""Start the js-ipfs daemon installed in `tools/ipfs` (tests and local demos; no Kubo binary here).

js-ipfs 0.66 speaks Kubo's RPC API. It runs on Node 20 with `Promise.withResolvers` polyfilled
(`tools/ipfs/polyfill.cjs`), is initialised with `--profile test` (no bootstrap peers, no MDNS),
binds API, gateway and swarm to 127.0.0.1 on free ports and starts with `--enable-preload=false`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import IpfsError
from .._fetch import fetch
from .._procs import free_port, stop_process, wait_until

__all__ = ["IpfsDaemon", "find_js_ipfs"]

log = logging.getLogger(__name__)


def find_js_ipfs(root: Path | None = None) -> Path:
    """Path of the js-ipfs CLI installed by tools/bootstrap.d/20-ipfs.sh."""
    candidates = []
    if env := os.environ.get("INTELLECT_JS_IPFS"):
        candidates.append(Path(env))
    base = root or Path(__file__).resolve().parents[2]
    candidates.append(base / "tools" / "ipfs" / "node_modules" / "ipfs" / "src" / "cli.js")
    for c in candidates:
        if c.exists():
            return c
    raise IpfsError(
        f"js-ipfs is not installed (looked for {candidates[-1]}); run tools/bootstrap.d/20-ipfs.sh"
    )


@dataclass
class IpfsDaemon:
    """A js-ipfs daemon in a temporary IPFS_PATH. `start()`; `.api_url`, `.gateway_url`; `stop()`."""

    repo: Path | None = None
    cli: Path | None = None
    api_port: int = 0
    gateway_port: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _own_repo: bool = field(default=False, repr=False)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}"

    def _env(self) -> dict[str, str]:
        cli = self.cli or find_js_ipfs()
        polyfill = cli.parents[3] / "polyfill.cjs"
        env = dict(os.environ, IPFS_PATH=str(self.repo))
        env["NODE_OPTIONS"] = (env.get("NODE_OPTIONS", "") + f" --require {polyfill}").strip()
        return env

    def start(self, timeout: float = 90.0) -> IpfsDaemon:
        cli = self.cli = self.cli or find_js_ipfs()
        node = shutil.which("node")
        if node is None:
            raise IpfsError("node is not on PATH; js-ipfs needs Node >= 20")
        if self.repo is None:
            self.repo = Path(tempfile.mkdtemp(prefix="intellect-ipfs-"))
            self._own_repo = True
        env = self._env()
        if not (self.repo / "config").exists():
            subprocess.run([node, str(cli), "init", "--profile", "test"], env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout)
        self.api_port = self.api_port or free_port()
        self.gateway_port = self.gateway_port or free_port()
        cfg_path = self.repo / "config"
        cfg = json.loads(cfg_path.read_text())
        cfg["Addresses"]["API"] = f"/ip4/127.0.0.1/tcp/{self.api_port}"
        cfg["Addresses"]["Gateway"] = f"/ip4/127.0.0.1/tcp/{self.gateway_port}"
        cfg["Addresses"]["Swarm"] = [f"/ip4/127.0.0.1/tcp/{free_port()}"]
        cfg["Addresses"]["RPC"] = ""
        cfg["Addresses"]["Delegates"] = []
        cfg["Bootstrap"] = []
        cfg_path.write_text(json.dumps(cfg, indent=2))
        log_path = self.repo / "daemon.log"
        self._log = open(log_path, "wb")  # noqa: SIM115 - lives as long as the daemon
        self.proc = subprocess.Popen([node, str(cli), "daemon", "--enable-preload=false"], env=env,
                                     stdout=self._log, stderr=subprocess.STDOUT)

        def ready() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise IpfsError(f"js-ipfs daemon exited: {log_path.read_text()[-2000:]}")
            return fetch("POST", f"{self.api_url}/api/v0/version", deadline=2.0).status == 200

        try:
            ok = wait_until(ready, timeout, 0.2)
        except IpfsError:
            self.stop()
            raise
        if not ok:
            self.stop()
            raise IpfsError(f"js-ipfs daemon not ready after {timeout} s: {log_path.read_text()[-2000:]}")
        log.info("js-ipfs daemon: api %s gateway %s", self.api_url, self.gateway_url)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None
            self._log.close()
        if self._own_repo and self.repo is not None:
            shutil.rmtree(self.repo, ignore_errors=True)
            self.repo = None

    def __enter__(self) -> IpfsDaemon:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
