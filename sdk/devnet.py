"""A local devnet for tests, agents and the demo: anvil on a free port + the contracts deployed
by THE SAME code as `brownie run deploy` (`scripts/deploy.py: deploy_all`).

    from intellect.sdk import devnet
    with devnet.start() as net:              # anvil + deploy_all; returns a Devnet
        p = net.protocol(dev_account=1)      # a Protocol acting as anvil's dev account 1
        net.increase_time(3600)              # evm_increaseTime + evm_mine

The deploy is the checkout's own program, `scripts/deploy_devnet.py` (DEPLOY_PROGRAM), run in a
subprocess: it loads the brownie project, attaches brownie's `development` network to this anvil,
calls `deploy_all(accounts[0], params)`, writes `<chainId>.json` into the devnet's own directory
and names it on stdout (DEPLOY_MARKER). The SDK imports nothing of `scripts/`: the two meet in
that command line and the deployment file (`Deployment`, whose one owner is `_config`). Needs a
source checkout (the contracts and the brownie project); a pip-installed SDK can still `connect`
to any deployment.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._config import Deployment, load_deployment
from ._errors import ConfigError, IntellectError
from ._fetch import fetch
from ._procs import free_port, stop_process, wait_until

__all__ = ["DEPLOY_MARKER", "DEPLOY_PROGRAM", "Anvil", "Devnet", "deploy", "start", "start_anvil"]

log = logging.getLogger(__name__)
_REPO = Path(__file__).resolve().parents[1]
_MAX_RPC_ANSWER = 64 << 20  # anvil's answers to the test helpers below are a few hundred bytes

DEPLOY_PROGRAM = Path("scripts") / "deploy_devnet.py"
"""The checkout's deploy command, relative to its root: `python DEPLOY_PROGRAM RPC_URL OUT_DIR`."""
DEPLOY_MARKER = "INTELLECT_DEPLOYMENT="
"""The deploy command's stdout line that names the deployment file it wrote."""


def _anvil_binary() -> str:
    for cand in (shutil.which("anvil"), str(_REPO / "node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil")):
        if cand and Path(cand).exists():
            return cand
    raise ConfigError("anvil is not installed: run `make bootstrap` (npm @foundry-rs/anvil)")


@dataclass
class Anvil:
    """An anvil process. `state_file` keeps the chain across stop()/start() (kill and restart tests)."""

    port: int = 0
    state_file: Path | None = None
    block_time: float | None = None
    extra_args: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> Anvil:
        if self.proc is not None and self.proc.poll() is None:
            return self
        self.port = self.port or free_port()
        # --max-persisted-states 0: anvil keeps its recent states (~500 blocks) in memory and writes older ones
        # to ~/.foundry/anvil/tmp, which it leaves behind when stopped (hundreds of MB per thousand blocks, every
        # demo and test run); nothing here reads state that old, so none is kept on disk.
        cmd = [_anvil_binary(), "--host", "127.0.0.1", "--port", str(self.port), "--chain-id", "31337",
               "--max-persisted-states", "0"]
        if self.state_file is not None:
            cmd += ["--state", str(self.state_file), "--preserve-historical-states"]
        if self.block_time:
            cmd += ["--block-time", str(self.block_time)]
        cmd += self.extra_args
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if not wait_until(lambda: self.rpc("eth_chainId") is not None, timeout):
            err = b""
            if self.proc.poll() is not None and self.proc.stderr is not None:
                err = self.proc.stderr.read()
            self.stop()
            raise IntellectError(f"anvil did not start on port {self.port}: {err.decode(errors='replace')[-500:]}")
        log.info("anvil at %s (pid %d)", self.url, self.proc.pid)
        return self

    def stop(self) -> None:
        """SIGTERM (anvil dumps `state_file` on the way out), then wait."""
        if self.proc is not None:
            stop_process(self.proc, timeout=15)
            if self.proc.stderr is not None:
                self.proc.stderr.close()
            self.proc = None

    def rpc(self, method: str, params: list[Any] | None = None) -> Any:
        reply = fetch("POST", self.url, json_body={"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []},
                      deadline=30.0, timeout=10.0, max_bytes=_MAX_RPC_ANSWER)
        body = reply.json()
        if "error" in body:
            raise IntellectError(f"anvil {method}: {body['error']}")
        return body["result"]

    def increase_time(self, seconds: int) -> None:
        """Move chain time forward and mine a block with the new time."""
        self.rpc("evm_increaseTime", [int(seconds)])
        self.rpc("evm_mine")

    def mine(self, blocks: int = 1) -> None:
        self.rpc("anvil_mine", [hex(blocks)])

    def snapshot(self) -> str:
        return str(self.rpc("evm_snapshot"))

    def revert(self, snapshot_id: str) -> bool:
        return bool(self.rpc("evm_revert", [snapshot_id]))

    def __enter__(self) -> Anvil:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_anvil(port: int = 0, *, state_file: Path | None = None) -> Anvil:
    return Anvil(port=port, state_file=state_file).start()


def deploy(rpc_url: str, out_dir: Path, *, params: dict[str, Any] | None = None, root: Path | None = None,
           timeout: float = 300.0) -> Deployment:
    """Deploy onto `rpc_url` with the checkout's deploy command (`root`/DEPLOY_PROGRAM: `deploy_all` with dev
    parameters, or `params` = a DeployParams dict); the deployment file lands in `out_dir`."""
    root = root or _REPO
    program = root / DEPLOY_PROGRAM
    if not program.exists():
        raise ConfigError(f"{program} not found: devnet deploys need the source checkout")
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if params is not None:
        pfile = out_dir / "deploy-params.json"
        pfile.write_text(json.dumps(params))
        env["INTELLECT_DEPLOY_PARAMS"] = str(pfile)
    proc = subprocess.run([sys.executable, str(program), rpc_url, str(out_dir)], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd=root)
    marker = [ln for ln in proc.stdout.splitlines() if ln.startswith(DEPLOY_MARKER)]
    if proc.returncode != 0 or not marker:
        raise IntellectError(f"deploy failed (exit {proc.returncode}): {(proc.stderr or proc.stdout)[-2000:]}")
    return load_deployment(path=marker[-1].split("=", 1)[1])


@dataclass
class Devnet:
    """anvil + a deployment. `protocol(dev_account=i)` gives a client acting as anvil's account i."""

    anvil: Anvil
    deployment: Deployment
    directory: Path
    _own_dir: bool = False

    @property
    def url(self) -> str:
        return self.anvil.url

    @property
    def deployment_file(self) -> Path:
        return self.directory / f"{self.deployment.chain_id}.json"

    def protocol(self, dev_account: int | None = 0, **kw: Any) -> Any:
        from ._client import Protocol

        return Protocol.connect(self.url, deployment=self.deployment, dev_account_index=dev_account, **kw)

    def increase_time(self, seconds: int) -> None:
        self.anvil.increase_time(seconds)

    def stop(self) -> None:
        self.anvil.stop()
        if self._own_dir:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Devnet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start(directory: Path | None = None, *, port: int = 0, state_file: Path | None = None,
          params: dict[str, Any] | None = None) -> Devnet:
    """Start anvil and deploy the contracts with dev parameters; the deployment file lands in `directory`."""
    own = directory is None
    directory = Path(tempfile.mkdtemp(prefix="intellect-devnet-")) if directory is None else directory
    anvil = Anvil(port=port, state_file=state_file).start()
    try:
        dep = deploy(anvil.url, directory, params=params)
    except BaseException:
        anvil.stop()
        raise
    return Devnet(anvil, dep, directory, own)
