"""Deploy the protocol contracts with web3 and the bytecode shipped in the package (`intellect/sdk/abi/*.json`).

    from intellect.sdk.deploy import deploy_contracts, dev_params
    dep = deploy_contracts("http://127.0.0.1:8545", dev_account(0), dev_params(), out_dir=Path("deployments"))

This is the deploy of `intellect devnet`, `intellect deploy` and `brownie run deploy` (whose script exports the
ABIs and bytecode brownie just compiled into `sdk/abi/` and then calls this), so an installed wheel deploys and
starts a devnet outside any checkout. It deploys IntellectToken, NodeRegistry, StakeManager, the PoolRules library
(linked into TaskLedger), TaskLedger and AttesterBook; wires the ledger and the attester book as the stake
manager's slashers and the stake manager as the registry's stake hook; sets minimum stakes and the pools' floors;
on dev chains mints to the deployer and creates and funds the default pool; checks the wiring; and only then
writes `<out_dir>/<chainId>.json` (atomically: a failed deploy leaves no file, and never a stale one).

The brownie contract tests keep `scripts/deploy.py: deploy_all` (brownie contract objects of the sources they
compile); `tests/contracts/test_contracts_sdk_deploy.py` checks that both deploys configure the same chain.
The parameter models (`DeployParams`, `DeployPoolParams`) and network profiles live here; `scripts/_deployment.py`
re-exports them.
"""

from __future__ import annotations

import json
import logging
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from eth_account.signers.local import LocalAccount
from pydantic import BaseModel, ConfigDict, Field, field_validator
from web3 import Web3
from web3.logs import DISCARD

from ._config import DEV_CHAIN_IDS, ContractRecord, Deployment
from ._errors import ConfigError, DeploymentError
from ._tx import ErrorDecoder, RetryPolicy, Transactor, redact_url, with_retries
from .poolrules import EMPTY_FILE_CID

__all__ = [
    "DEPLOY_ORDER",
    "EMPTY_FILE_CID",
    "PROFILES",
    "ROLE_IDS",
    "TOKEN",
    "DeployParams",
    "DeployPoolParams",
    "deploy_contracts",
    "dev_params",
    "load_artifact",
    "mainnet_params",
    "params_for_network",
    "testnet_params",
]

log = logging.getLogger(__name__)

ROLE_IDS = {"worker": 1, "validator": 2, "trainer": 3, "relay": 4}
TOKEN = 10**18
DEPLOY_ORDER = ("IntellectToken", "NodeRegistry", "StakeManager", "PoolRules", "TaskLedger", "AttesterBook")
_LINK = re.compile(r"__([A-Za-z0-9_]+?)_*__")  # brownie/solc placeholder of a linked library (40 characters)


class DeployPoolParams(BaseModel):
    """Parameters of a pool (mirrors ITaskLedger.PoolParams); durations in seconds, amounts in wei."""

    model_config = ConfigDict(extra="forbid")

    trainer: str | None = Field(None, description="trainer address; None = the deployer")
    rulesCid: str = Field(EMPTY_FILE_CID, min_length=1, description="IPFS CID of the pool's rules document (intellect.poolrules/v1), or of a bare task set")
    rewardPerUnit: int = Field(1 * TOKEN, gt=0, lt=2**96)
    challengeBond: int = Field(10 * TOKEN, gt=0, lt=2**128)
    slashAmount: int = Field(50 * TOKEN, ge=0, lt=2**128)
    windowLength: int = Field(24 * 3600, gt=0, lt=2**32, description="challenge window (default 24 h)")
    votePeriod: int = Field(6 * 3600, gt=0, lt=2**32)
    leaseDuration: int = Field(3600, gt=0, lt=2**32)
    maxUnitsPerSubmission: int = Field(16_384, gt=0, lt=2**32, description="admits the agents' largest default "
                                       "budget: gpu-large 2,048 tokens × group_size 4 × problems_per_task 2")
    asyncLevel: int = Field(2, ge=0, lt=2**16, description="INTELLECT-2's async_level")
    quorum: int = Field(3, gt=0, lt=2**16)
    maxOpenLeases: int = Field(2, gt=0, lt=2**8, description="unsubmitted leases one node may hold")
    maxReservationBps: int = Field(1_000, gt=0, le=10_000, description="most of the escrow one node may reserve")

    def as_tuple(self, default_trainer: str) -> tuple:
        """The ITaskLedger.PoolParams tuple, in field order."""
        return (
            self.trainer or default_trainer,
            self.rulesCid,
            self.rewardPerUnit,
            self.challengeBond,
            self.slashAmount,
            self.windowLength,
            self.votePeriod,
            self.leaseDuration,
            self.maxUnitsPerSubmission,
            self.asyncLevel,
            self.quorum,
            self.maxOpenLeases,
            self.maxReservationBps,
        )


class DeployParams(BaseModel):
    """Everything a deploy needs besides the deployer account."""

    model_config = ConfigDict(extra="forbid")

    faucet: bool = Field(False, description="enable the token faucet (dev/test networks only)")
    faucetAmount: int = Field(10_000 * TOKEN, ge=0)
    faucetCooldown: int = Field(3600, ge=0)
    treasury: str | None = Field(None, description="treasury address; None = the deployer")
    unbondingPeriod: int = Field(7 * 24 * 3600, gt=0, lt=2**32)
    challengerShareBps: int = Field(5_000, ge=0, le=10_000)
    minStake: dict[str, int] = Field(
        default_factory=lambda: {"worker": 100 * TOKEN, "validator": 100 * TOKEN, "trainer": 0, "relay": 0}
    )
    minWindowLength: int = Field(24 * 3600, gt=0, lt=2**32)
    minChallengeBond: int = Field(10 * TOKEN, ge=0, lt=2**128, description="protocol floor on pools' bonds")
    minQuorum: int = Field(3, ge=0, lt=2**16, description="protocol floor on pools' quorum")
    reservationLeverage: int = Field(
        10, ge=0, lt=2**32, description="tokens of reservations a node may hold in a pool per token of active stake"
    )
    attesterSlash: int = Field(20 * TOKEN, ge=0, description="slash per accepting attestation of upheld work")
    voterSlash: int = Field(10 * TOKEN, ge=0, description="slash per vote against a challenge's outcome")
    initialMint: int = Field(0, ge=0, description="tokens minted to the deployer")
    defaultPool: DeployPoolParams | None = Field(None, description="pool created on deployment (dev networks)")
    defaultPoolFunding: int = Field(0, ge=0)

    @field_validator("minStake")
    @classmethod
    def _known_roles(cls, value: dict[str, int]) -> dict[str, int]:
        unknown = set(value) - set(ROLE_IDS)
        if unknown:
            raise ValueError(f"unknown role(s) {sorted(unknown)}; roles are {sorted(ROLE_IDS)}")
        if any(v < 0 for v in value.values()):
            raise ValueError("minimum stakes must be >= 0")
        return value


def dev_params() -> DeployParams:
    """Local anvil: faucet on, short windows, a funded default pool with quorum 1."""
    return DeployParams(
        faucet=True,
        unbondingPeriod=3600,
        minWindowLength=60,
        minChallengeBond=1,
        minQuorum=1,
        # never binds before the dev pool's 25 % share (100 INTL of stake: 100,000 INTL); public networks: 10
        reservationLeverage=1_000,
        initialMint=1_000_000 * TOKEN,
        # a 25 % reservation share admits a full-length gpu-large submission (16,384 units) of the funded escrow
        defaultPool=DeployPoolParams(windowLength=300, votePeriod=120, leaseDuration=600, quorum=1,
                                     maxReservationBps=2_500),
        defaultPoolFunding=100_000 * TOKEN,
    )


def testnet_params() -> DeployParams:
    """Base Sepolia: faucet on, 24 h minimum window, no default pool."""
    return DeployParams(faucet=True)


def mainnet_params() -> DeployParams:
    """Base mainnet: no faucet, 24 h minimum window, no default pool."""
    return DeployParams(faucet=False)


PROFILES = {"development": dev_params, "base-sepolia": testnet_params, "base-mainnet": mainnet_params}


def params_for_network(network_name: str, override_file: str | Path | None = None) -> DeployParams:
    """Default parameters for `network_name` (unknown networks get the dev profile only if chain-local),
    or the DeployParams JSON at `override_file`."""
    if override_file:
        try:
            return DeployParams.model_validate_json(Path(override_file).read_text())
        except (OSError, ValueError) as exc:
            raise DeploymentError(f"deployment parameters {override_file}: {exc}") from exc
    factory = PROFILES.get(network_name)
    if factory is None:
        if network_name.startswith("development") or network_name.endswith("-fork"):
            return dev_params()
        raise DeploymentError(
            f"no deployment parameters for network {network_name!r}; "
            f"known: {sorted(PROFILES)}; or set INTELLECT_DEPLOY_PARAMS to a DeployParams JSON file"
        )
    return factory()


@cache
def load_artifact(name: str) -> dict[str, Any]:
    """`{"abi", "bytecode", "abiSha256"}` of contract `name` as the package ships it (`abi/<name>.json`, written by
    scripts/export_abi.py from brownie's build)."""
    try:
        text = resources.files("intellect.sdk").joinpath("abi", f"{name}.json").read_text()
        doc = json.loads(text)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"the package's abi/{name}.json is missing or unreadable ({exc}): reinstall the SDK") from None
    if not isinstance(doc, dict) or not str(doc.get("bytecode", "")).removeprefix("0x"):
        raise ConfigError(f"the package's abi/{name}.json has no bytecode: re-export it (scripts/export_abi.py)")
    return doc


def _link(bytecode: str, libraries: dict[str, str]) -> str:
    """`bytecode` with every library placeholder replaced by that library's address."""
    code = bytecode.removeprefix("0x")

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in libraries:
            raise ConfigError(f"bytecode links library {name}, which this deploy does not deploy")
        return libraries[name].lower().removeprefix("0x")

    linked = _LINK.sub(sub, code)
    if "_" in linked:
        raise ConfigError("bytecode still holds an unlinked library placeholder")
    return "0x" + linked


def deploy_contracts(rpc: str | Web3, deployer: LocalAccount, params: DeployParams, *, dev: bool | None = None,
                     network: str = "", out_dir: Path | None = None, max_fee_gwei: float | None = None,
                     artifacts: dict[str, dict[str, Any]] | None = None,
                     retry: RetryPolicy | None = None, receipt_timeout: float = 300.0) -> Deployment:
    """Deploy, wire and check the contracts on the chain at `rpc` as `deployer`; returns the Deployment and, with
    `out_dir`, writes `<out_dir>/<chainId>.json` once everything checked out. `dev` (default: the chain is 31337 or
    1337) mints `initialMint` and creates and funds `defaultPool`. `artifacts` (name -> {"abi", "bytecode"}) replaces
    the package's copies (brownie passes what it just compiled)."""
    retry = retry or RetryPolicy()
    w3 = rpc if isinstance(rpc, Web3) else Web3(Web3.HTTPProvider(rpc, request_kwargs={"timeout": 30},
                                                                  exception_retry_configuration=None))
    where = redact_url(str(getattr(w3.provider, "endpoint_uri", "") or rpc))
    chain_id = int(with_retries(lambda: w3.eth.chain_id, retry, f"connect to {where}"))
    dev = chain_id in DEV_CHAIN_IDS if dev is None else dev
    arts = {n: (artifacts or {}).get(n) or load_artifact(n) for n in DEPLOY_ORDER}
    abis = [a["abi"] for a in arts.values()]
    tx = Transactor(w3, deployer, ErrorDecoder(abis), chain_id=chain_id, retry=retry,
                    max_fee_per_gas=int(max_fee_gwei * 10**9) if max_fee_gwei is not None else None,
                    receipt_timeout=receipt_timeout)
    me = deployer.address
    treasury = params.treasury or me
    if params.faucet and not dev:
        log.warning("faucet enabled on a non-dev deployment (testnet?)")
    first_block = int(with_retries(lambda: w3.eth.block_number, retry, "block_number")) + 1
    d = _Deployer(w3, tx, retry, arts)
    token = d.create("IntellectToken", me, params.faucet, params.faucetAmount, params.faucetCooldown)
    registry = d.create("NodeRegistry")
    stake = d.create("StakeManager", me, token.address, registry.address, treasury, params.unbondingPeriod,
                     params.challengerShareBps)
    d.create("PoolRules")  # createPool's checks, a library linked into the ledger (keeps it under EIP-170)
    ledger = d.create("TaskLedger", me, token.address, registry.address, stake.address, params.minWindowLength)
    slasher = d.call(stake, "SLASHER_ROLE")
    d.send(stake, "StakeManager", "grantRole", slasher, ledger.address)
    book = d.create("AttesterBook", me, ledger.address, params.attesterSlash, params.voterSlash)
    d.send(stake, "StakeManager", "grantRole", slasher, book.address)
    d.send(registry, "NodeRegistry", "setStakeHook", stake.address)
    for role, amount in params.minStake.items():
        if amount:
            d.send(stake, "StakeManager", "setMinStake", ROLE_IDS[role], amount)
    d.send(ledger, "TaskLedger", "setPoolBounds", params.minChallengeBond, params.minQuorum,
           params.reservationLeverage)

    default_pool_id: int | None = None
    if dev and params.initialMint:
        d.send(token, "IntellectToken", "mint", me, params.initialMint)
    if dev and params.defaultPool is not None:
        rc = d.send(ledger, "TaskLedger", "createPool", params.defaultPool.as_tuple(me))
        default_pool_id = int(ledger.events.PoolCreated().process_receipt(rc, errors=DISCARD)[0]["args"]["poolId"])
        if params.defaultPoolFunding:
            d.send(token, "IntellectToken", "approve", ledger.address, params.defaultPoolFunding)
            d.send(ledger, "TaskLedger", "fundPool", default_pool_id, params.defaultPoolFunding)

    problems = _wiring_problems(d, token, registry, stake, ledger, book, slasher)
    if problems:
        raise DeploymentError("deployment wiring is wrong: " + "; ".join(problems))

    records = d.records
    records.pop("PoolRules")  # a library: nothing calls it by address
    deployment = Deployment(chainId=chain_id, network=network or ("development" if dev else f"chain-{chain_id}"),
                            blockNumber=first_block, deployer=me, contracts=records,
                            parameters=params.model_dump(), defaultPoolId=default_pool_id)
    if out_dir is not None:
        path = deployment.write(Path(out_dir))
        log.info("deployment file  %s", path)
    return deployment


class _Deployer:
    """Creates the contracts in order (linking libraries deployed before) and sends their wiring transactions."""

    def __init__(self, w3: Web3, tx: Transactor, retry: RetryPolicy, arts: dict[str, dict[str, Any]]) -> None:
        self.w3, self.tx, self.retry, self.arts = w3, tx, retry, arts
        self.addresses: dict[str, str] = {}
        self.records: dict[str, ContractRecord] = {}

    def create(self, name: str, *args: Any) -> Any:
        art = self.arts[name]
        code = _link(str(art["bytecode"]), self.addresses)
        fn = self.w3.eth.contract(abi=art["abi"], bytecode=code).constructor(*args)
        h = self.tx.send(fn, contract=name, function="constructor")
        rc = self.tx.wait(h, contract=name, function="constructor")
        addr = Web3.to_checksum_address(rc["contractAddress"])
        self.addresses[name] = addr
        self.records[name] = ContractRecord(address=addr,
                                            abiSha256=str(art.get("abiSha256") or _abi_sha256(art["abi"])),
                                            blockNumber=int(rc["blockNumber"]), txHash=h)
        log.info("%-15s %s", name, addr)
        return self.w3.eth.contract(address=addr, abi=art["abi"])

    def send(self, contract: Any, name: str, function: str, *args: Any) -> Any:
        fn = contract.functions[function](*args)
        return self.tx.wait(self.tx.send(fn, contract=name, function=function), fn_for_replay=fn, contract=name,
                            function=function)

    def call(self, contract: Any, function: str, *args: Any) -> Any:
        return with_retries(lambda: contract.functions[function](*args).call(), self.retry, function)


def _wiring_problems(d: _Deployer, token: Any, registry: Any, stake: Any, ledger: Any, book: Any,
                     slasher: Any) -> list[str]:
    """What the deployed contracts, read back, say is not wired as deploy_contracts wired them."""
    problems = []
    if not d.call(stake, "hasRole", slasher, ledger.address):
        problems.append("TaskLedger lacks StakeManager.SLASHER_ROLE (it could not slash)")
    if not d.call(stake, "hasRole", slasher, book.address):
        problems.append("AttesterBook lacks StakeManager.SLASHER_ROLE (it could not slash attesters)")
    if (d.call(ledger, "token"), d.call(ledger, "registry"), d.call(ledger, "stakeManager")) != (
            token.address, registry.address, stake.address):
        problems.append("TaskLedger is not wired to IntellectToken/NodeRegistry/StakeManager")
    if (d.call(stake, "stakeToken"), d.call(stake, "registry")) != (token.address, registry.address):
        problems.append("StakeManager is not wired to IntellectToken/NodeRegistry")
    if d.call(registry, "stakeHook") != stake.address:
        problems.append("NodeRegistry.stakeHook() is not StakeManager (validator weights would not follow exits)")
    return problems


def _abi_sha256(abi: list[dict[str, Any]]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(abi, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

