"""Networks, deployment files and ABIs.

- Networks: `development`/`local` (anvil, http://127.0.0.1:8545, chain 31337), `base-sepolia` (84532),
  `base-mainnet` (8453). Real networks take their RPC URL from `--rpc-url` or `INTELLECT_RPC_URL`
  (or `INTELLECT_RPC_URL_BASE_SEPOLIA` / `..._BASE_MAINNET`).
- Deployments: `deployments/<chainId>.json`, schema `intellect.deployment/v1`. `Deployment` is the
  one model of that file: the SDK reads it, `scripts/deploy.py` (`brownie run deploy`) and the
  devnet write it with `Deployment.write`. The directory is `INTELLECT_DEPLOYMENTS` or the
  repository's `deployments/` (or the current directory's).
- ABIs ship inside the package (`intellect/sdk/abi/<Contract>.json`), so a pip-installed SDK works
  without brownie; in a source checkout brownie's `build/contracts/` is the fallback.
"""

from __future__ import annotations

import json
import os
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from ._errors import ConfigError, DeploymentError, DeploymentSchemaError, SchemaVersionError

__all__ = [
    "CONTRACT_NAMES",
    "DEPLOYMENT_SCHEMA",
    "NETWORKS",
    "OPTIONAL_CONTRACT_NAMES",
    "ContractRecord",
    "Deployment",
    "NetworkSpec",
    "load_abi",
    "load_deployment",
    "resolve_network",
]

DEPLOYMENT_SCHEMA = "intellect.deployment/v1"
CONTRACT_NAMES = ("IntellectToken", "NodeRegistry", "StakeManager", "TaskLedger")
#: Contracts a deployment file may record (used when present; older deployments lack them).
OPTIONAL_CONTRACT_NAMES = ("AttesterBook",)
_REPO = Path(__file__).resolve().parents[1]


class NetworkSpec(BaseModel):
    """A network the SDK knows by name."""

    model_config = ConfigDict(frozen=True)

    name: str
    chain_id: int
    rpc_url: str | None = None
    dev: bool = False  # dev accounts and the faucet are allowed only here


NETWORKS: dict[str, NetworkSpec] = {
    "development": NetworkSpec(name="development", chain_id=31337, rpc_url="http://127.0.0.1:8545", dev=True),
    "base-sepolia": NetworkSpec(name="base-sepolia", chain_id=84532),
    "base-mainnet": NetworkSpec(name="base-mainnet", chain_id=8453),
}
_ALIASES = {"local": "development", "anvil": "development", "dev": "development", "base": "base-mainnet"}
DEV_CHAIN_IDS = frozenset({31337, 1337})


def resolve_network(network: str | None = None, rpc_url: str | None = None) -> tuple[NetworkSpec | None, str]:
    """(known network or None, RPC URL). A bare URL as `network` is taken as the RPC URL."""
    if network and network.startswith(("http://", "https://", "ws://", "wss://")):
        return None, network
    if network is None and rpc_url:
        return None, rpc_url
    name = _ALIASES.get(network or "development", network or "development")
    spec = NETWORKS.get(name)
    if spec is None:
        raise ConfigError(
            f"unknown network {network!r}: use one of {', '.join(NETWORKS)} or an RPC URL (--rpc-url)"
        )
    env_key = "INTELLECT_RPC_URL_" + name.upper().replace("-", "_")
    url = rpc_url or os.environ.get(env_key) or os.environ.get("INTELLECT_RPC_URL") or spec.rpc_url
    if not url:
        raise ConfigError(f"network {name} needs an RPC URL: pass --rpc-url or set {env_key}")
    return spec, url


class ContractRecord(BaseModel):
    """One deployed contract in the deployment file: its address and how it was deployed."""

    model_config = ConfigDict(extra="allow")

    address: str
    abiSha256: str = Field("", description="sha256 of the canonical JSON of the contract's ABI "
                                           "(scripts/export_abi.py: abi_sha256)")
    blockNumber: int = 0
    txHash: str = ""


class Deployment(BaseModel):
    """`deployments/<chainId>.json`: where the contracts live on one chain. The one model of the file:

        {"schema": "intellect.deployment/v1", "chainId": 31337, "network": "development",
         "blockNumber": 1, "deployer": "0x...", "contracts": {"TaskLedger": {"address": "0x...",
         "abiSha256": "...", "blockNumber": 4, "txHash": "0x..."}, ...},
         "parameters": {...}, "defaultPoolId": 1}

    A contract may also be given as a bare address string; `deployBlock` is read as `blockNumber`.
    `parameters` are the deploy parameters as written (`scripts/_deployment.py: DeployParams`).
    """

    model_config = ConfigDict(populate_by_name=True, extra="allow")

    schema_: str = Field(DEPLOYMENT_SCHEMA, alias="schema")
    chain_id: int = Field(alias="chainId")
    contracts: dict[str, ContractRecord]
    block: int = Field(default=0, validation_alias=AliasChoices("blockNumber", "deployBlock", "block"),
                       serialization_alias="blockNumber")  # first block worth scanning for events
    network: str = ""
    deployer: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)
    default_pool_id: int | None = Field(default=None, alias="defaultPoolId")

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "chain_id" in data and "chainId" not in data:
            data["chainId"] = data.pop("chain_id")
        contracts = data.get("contracts", {})
        if isinstance(contracts, dict):
            data["contracts"] = {k: {"address": v} if isinstance(v, str) else v for k, v in contracts.items()}
        if isinstance(data.get("parameters"), BaseModel):
            data["parameters"] = data["parameters"].model_dump()
        return data

    @model_validator(mode="after")
    def _check(self) -> Deployment:
        if self.schema_ != DEPLOYMENT_SCHEMA:
            raise DeploymentSchemaError("deployment file", self.schema_, DEPLOYMENT_SCHEMA)
        missing = [c for c in CONTRACT_NAMES if c not in self.contracts]
        if missing:
            raise ValueError(f"deployment lacks contract address(es): {', '.join(missing)}")
        return self

    def address(self, name: str) -> str:
        try:
            return self.contracts[name].address
        except KeyError:
            raise ConfigError(f"deployment for chain {self.chain_id} has no {name} address") from None

    @classmethod
    def read(cls, path: Path | str) -> Deployment:
        """The deployment file at `path` (`DeploymentError` naming the file on any problem)."""
        return load_deployment(path=path)

    def write(self, directory: Path) -> Path:
        """Write `<directory>/<chainId>.json` atomically; returns its path."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.chain_id}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(self.model_dump_json(by_alias=True, indent=2) + "\n")
        tmp.replace(path)
        return path


def deployments_dir() -> Path:
    if env := os.environ.get("INTELLECT_DEPLOYMENTS"):
        return Path(env)
    for cand in (Path.cwd() / "deployments", _REPO / "deployments"):
        if cand.is_dir():
            return cand
    return Path.cwd() / "deployments"


def load_deployment(chain_id: int | None = None, path: Path | str | None = None) -> Deployment:
    """Read and validate a deployment file (by chain id from the deployments directory, or a path)."""
    if path is None:
        if chain_id is None:
            raise ConfigError("load_deployment needs a chain id or a path")
        path = deployments_dir() / f"{chain_id}.json"
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise DeploymentError(
            f"no deployment file {path}: pass --deployment PATH with the network's file (from whoever deployed it), "
            f"or deploy one (`intellect devnet`, `intellect deploy`, `brownie run deploy`)"
        ) from None
    except (OSError, ValueError, RecursionError) as exc:  # unreadable, not UTF-8/JSON, >4300 digits, deep nesting
        raise DeploymentError(f"deployment file {path} is not JSON: {exc}") from exc
    try:
        dep = Deployment.model_validate(raw)
    except SchemaVersionError:
        raise
    except RecursionError as exc:
        raise DeploymentError(f"deployment file {path} is nested too deeply") from exc
    except ValidationError as exc:
        cause = exc.errors()[0]
        if isinstance(cause.get("ctx", {}).get("error"), SchemaVersionError):
            raise cause["ctx"]["error"] from None
        raise DeploymentError(f"deployment file {path} is invalid: {exc}") from None
    if chain_id is not None and dep.chain_id != chain_id:
        raise DeploymentError(f"deployment file {path} is for chain {dep.chain_id}, but the RPC node is chain {chain_id}")
    return dep


@cache
def load_abi(name: str) -> list[dict[str, Any]]:
    """The ABI of contract `name`: the package's `abi/<name>.json`, else brownie's `build/contracts/`."""
    text: str | None = None
    try:
        res = resources.files("intellect.sdk").joinpath("abi", f"{name}.json")
        if res.is_file():
            text = res.read_text()
    except (FileNotFoundError, ModuleNotFoundError, NotADirectoryError):
        text = None
    if text is None:
        build = _REPO / "build" / "contracts" / f"{name}.json"
        if build.is_file():
            text = build.read_text()
    if text is None:
        raise ConfigError(f"no ABI for {name}: the package's abi/{name}.json is missing (reinstall the SDK)")
    data = json.loads(text)
    abi = data["abi"] if isinstance(data, dict) else data
    if not isinstance(abi, list):
        raise ConfigError(f"ABI file for {name} holds no ABI list")
    return abi
