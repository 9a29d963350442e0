"""A local devnet for tests, agents, the demo and operators: anvil + the contracts deployed by
`intellect.sdk.deploy.deploy_contracts` (web3 and the bytecode shipped in the package), so an installed wheel starts
one outside any checkout.

    from intellect.sdk import devnet
    with devnet.start() as net:              # anvil + deploy_contracts(dev_params()); returns a Devnet
        p = net.protocol(dev_account=1)      # a Protocol acting as anvil's dev account 1
        net.increase_time(3600)              # evm_increaseTime + evm_mine

`Anvil(host="0.0.0.0")` listens on every interface (a chain other hosts join: `intellect devnet --host 0.0.0.0`).
anvil itself comes from PATH, `$INTELLECT_ANVIL`, or a checkout's node_modules (npm `@foundry-rs/anvil`).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._accounts import dev_account
from ._config import Deployment
from ._errors import ConfigError, IntellectError
from ._fetch import fetch
from ._procs import free_port, stop_process, wait_until

__all__ = ["Anvil", "Devnet", "deploy", "start", "start_anvil"]

log = logging.getLogger(__name__)
_REPO = Path(__file__).resolve().parents[1]
_MAX_RPC_ANSWER = 64 << 20  # anvil's answers to the test helpers below are a few hundred bytes

def anvil_binary() -> str:
    for cand in (os.environ.get("INTELLECT_ANVIL"), shutil.which("anvil"),
                 str(_REPO / "node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil")):
        if cand and Path(cand).exists():
            return cand
    raise ConfigError("anvil is not installed: `npm install -g @foundry-rs/anvil` (or foundryup), put it on PATH "
                      "or set INTELLECT_ANVIL; in a checkout `make bootstrap` installs it")


@dataclass
class Anvil:
    """An anvil process. `state_file` keeps the chain across stop()/start() (kill and restart tests)."""

    port: int = 0
    state_file: Path | None = None
    host: str = "127.0.0.1"
    """The address anvil listens on; `0.0.0.0` for a chain other hosts reach."""
    chain_id: int = 31337
    block_time: float | None = None
    extra_args: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The URL this host uses (loopback when anvil listens on every interface)."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 30.0) -> Anvil:
        if self.proc is not None and self.proc.poll() is None:
            return self
        self.port = self.port or free_port()
        # --max-persisted-states 0: anvil keeps its recent states (~500 blocks) in memory and writes older ones
        # to ~/.foundry/anvil/tmp, which it leaves behind when stopped (hundreds of MB per thousand blocks, every
        # demo and test run); nothing here reads state that old, so none is kept on disk.
        cmd = [anvil_binary(), "--host", self.host, "--port", str(self.port), "--chain-id", str(self.chain_id),
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


def deploy(rpc_url: str, out_dir: Path, *, params: dict[str, Any] | None = None) -> Deployment:
    """Deploy onto the dev chain at `rpc_url` as anvil's account 0 (`deploy_contracts`: dev parameters, or
    `params` = a DeployParams dict); the deployment file lands in `out_dir`."""
    from .deploy import DeployParams, deploy_contracts, dev_params  # deferred: web3 (read by the CLI)

    chosen = dev_params() if params is None else DeployParams.model_validate(params)
    return deploy_contracts(rpc_url, dev_account(0), chosen, dev=True, network="development", out_dir=out_dir)


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
        from ._client import Protocol  # deferred: web3 (the `intellect` CLI imports this)

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
          params: dict[str, Any] | None = None, host: str = "127.0.0.1") -> Devnet:
    """Start anvil and deploy the contracts with dev parameters; the deployment file lands in `directory`."""
    own = directory is None
    directory = Path(tempfile.mkdtemp(prefix="intellect-devnet-")) if directory is None else directory
    anvil = Anvil(port=port, state_file=state_file, host=host).start()
    try:
        dep = deploy(anvil.url, directory, params=params)
    except BaseException:
        anvil.stop()
        raise
    return Devnet(anvil, dep, directory, own)
