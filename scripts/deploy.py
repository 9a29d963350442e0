"""Deploy and wire the protocol contracts, create the default pool on dev networks, write the deployment file.

Usage:
    brownie run deploy                                  # local anvil (development): faucet, default pool
    BASE_SEPOLIA_RPC_URL=... DEPLOYER_PRIVATE_KEY=... brownie run deploy --network base-sepolia
    DEPLOYER_KEYSTORE=path DEPLOYER_KEYSTORE_PASSWORD=... brownie run deploy --network base-mainnet

Environment:
    DEPLOYER_PRIVATE_KEY         hex key of the deployer on live networks (never printed)
    DEPLOYER_KEYSTORE(+_PASSWORD) or a keystore file instead of the raw key
    INTELLECT_DEPLOY_PARAMS      optional DeployParams JSON file overriding the network's defaults
    INTELLECT_DEPLOYMENTS_DIR    where deployments/<chainId>.json goes (default: ./deployments)

Tests and tools call ``deploy_all(deployer, params)`` so they exercise this exact wiring; so does
``scripts/deploy_devnet.py``, the deploy command ``intellect.sdk.devnet`` runs against its own anvil.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import brownie
from brownie import accounts, network, web3

from intellect.sdk import ContractRecord, Deployment, DeploymentError  # the deployment file's one model
from scripts._deployment import ROLE_IDS, DeployParams, params_for_network
from scripts.export_abi import ABI_DIR, BUILD_DIR, artifact_abi_sha256, export_abis

log = logging.getLogger("intellect.deploy")

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Deployed:
    """The deployed contracts (brownie ProjectContract objects) and the deployment record."""

    token: Any
    registry: Any
    stake_manager: Any
    ledger: Any
    deployment: Deployment
    attester_book: Any  # AttesterBook (validators' attestation rewards and slashes; issue 21)

    @property
    def default_pool_id(self) -> int | None:
        return self.deployment.default_pool_id


def _project() -> Any:
    projects = brownie.project.get_loaded_projects()
    if not projects:
        raise DeploymentError("no brownie project is loaded (run through `brownie run deploy` or load it first)")
    return projects[0]


def deploy_all(deployer: Any, params: DeployParams, dev: bool = True) -> Deployed:
    """Deploys IntellectToken, NodeRegistry, StakeManager and TaskLedger, wires the ledger as the stake
    manager's slasher, sets minimum stakes, and on dev deployments mints to the deployer and creates and
    funds the default pool. Verifies the wiring before returning."""
    p = _project()
    tx = {"from": deployer}
    first_block = web3.eth.block_number + 1
    treasury = params.treasury or deployer.address

    if params.faucet and not dev:
        log.warning("faucet enabled on a non-dev deployment (testnet?)")
    token = p.IntellectToken.deploy(
        deployer, params.faucet, params.faucetAmount, params.faucetCooldown, tx
    )
    registry = p.NodeRegistry.deploy(tx)
    stake_manager = p.StakeManager.deploy(
        deployer, token, registry, treasury, params.unbondingPeriod, params.challengerShareBps, tx
    )
    # the ledger links the PoolRules library (createPool's checks; keeps the ledger under EIP-170)
    p.PoolRules.deploy(tx)
    ledger = p.TaskLedger.deploy(deployer, token, registry, stake_manager, params.minWindowLength, tx)

    stake_manager.grantRole(stake_manager.SLASHER_ROLE(), ledger, tx)
    # validators paid for attesting and slashed for attesting work the ledger upheld as bad
    attester_book = p.AttesterBook.deploy(deployer, ledger, params.attesterSlash, params.voterSlash, tx)
    stake_manager.grantRole(stake_manager.SLASHER_ROLE(), attester_book, tx)
    # the registry tells the stake manager of registrations and exits (validator weights follow them)
    registry.setStakeHook(stake_manager, tx)
    for role, amount in params.minStake.items():
        if amount:
            stake_manager.setMinStake(ROLE_IDS[role], amount, tx)
    ledger.setPoolBounds(params.minChallengeBond, params.minQuorum, tx)

    default_pool_id: int | None = None
    if dev and params.initialMint:
        token.mint(deployer, params.initialMint, tx)
    if dev and params.defaultPool is not None:
        receipt = ledger.createPool(params.defaultPool.as_tuple(deployer.address), tx)
        default_pool_id = int(receipt.return_value)
        if params.defaultPoolFunding:
            token.approve(ledger, params.defaultPoolFunding, tx)
            ledger.fundPool(default_pool_id, params.defaultPoolFunding, tx)

    contracts = {"IntellectToken": token, "NodeRegistry": registry, "StakeManager": stake_manager, "TaskLedger": ledger,
                 "AttesterBook": attester_book}
    records = {}
    for name, c in contracts.items():
        receipt = c.tx
        records[name] = ContractRecord(
            address=c.address,
            abiSha256=artifact_abi_sha256(name),
            blockNumber=receipt.block_number if receipt is not None else first_block,
            txHash=receipt.txid if receipt is not None else "",
        )
    deployment = Deployment(
        chainId=web3.eth.chain_id,
        network=network.show_active() or "unknown",
        blockNumber=first_block,
        deployer=deployer.address,
        contracts=records,
        parameters=params,
        defaultPoolId=default_pool_id,
    )
    deployed = Deployed(token, registry, stake_manager, ledger, deployment, attester_book)
    verify_wiring(deployed)
    return deployed


def verify_wiring(d: Deployed) -> None:
    """Raises DeploymentError unless every contract points at the others and the ledger can slash."""
    problems = []
    if not d.stake_manager.hasRole(d.stake_manager.SLASHER_ROLE(), d.ledger):
        problems.append("TaskLedger lacks StakeManager.SLASHER_ROLE (it could not slash)")
    if d.ledger.token() != d.token.address:
        problems.append("TaskLedger.token() is not IntellectToken")
    if d.ledger.registry() != d.registry.address:
        problems.append("TaskLedger.registry() is not NodeRegistry")
    if d.ledger.stakeManager() != d.stake_manager.address:
        problems.append("TaskLedger.stakeManager() is not StakeManager")
    if d.stake_manager.stakeToken() != d.token.address or d.stake_manager.registry() != d.registry.address:
        problems.append("StakeManager is not wired to IntellectToken/NodeRegistry")
    if not d.stake_manager.hasRole(d.stake_manager.SLASHER_ROLE(), d.attester_book):
        problems.append("AttesterBook lacks StakeManager.SLASHER_ROLE (it could not slash attesters)")
    if d.registry.stakeHook() != d.stake_manager.address:
        problems.append("NodeRegistry.stakeHook() is not StakeManager (validator weights would not follow exits)")
    if problems:
        raise DeploymentError("deployment wiring is wrong: " + "; ".join(problems))


def _deployer() -> Any:
    """The dev account on local networks; the key or keystore from the environment on live ones."""
    if network.show_active() in ("development",) or network.show_active().startswith("development"):
        return accounts[0]
    key = os.environ.get("DEPLOYER_PRIVATE_KEY")
    if key:
        return accounts.add(key)
    keystore = os.environ.get("DEPLOYER_KEYSTORE")
    if keystore:
        return accounts.load(keystore, os.environ.get("DEPLOYER_KEYSTORE_PASSWORD"))
    raise DeploymentError(
        f"network {network.show_active()!r} needs a deployer: set DEPLOYER_PRIVATE_KEY or DEPLOYER_KEYSTORE"
    )


def main() -> Deployed:
    """`brownie run deploy [--network NAME]`."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    name = network.show_active()
    dev = name.startswith("development") or web3.eth.chain_id in (31337, 1337)
    params = params_for_network(name, os.environ.get("INTELLECT_DEPLOY_PARAMS"))
    deployer = _deployer()
    deployed = deploy_all(deployer, params, dev=dev)
    export_abis(BUILD_DIR, ABI_DIR)
    out_dir = Path(os.environ.get("INTELLECT_DEPLOYMENTS_DIR", ROOT / "deployments"))
    path = deployed.deployment.write(out_dir)
    for contract, record in deployed.deployment.contracts.items():
        log.info("%-15s %s", contract, record.address)
    if deployed.default_pool_id is not None:
        log.info("default pool     %d", deployed.default_pool_id)
    log.info("deployment file  %s", path)
    return deployed
