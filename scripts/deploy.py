"""Deploy and wire the protocol contracts, create the default pool on dev networks, write the deployment file.

Usage:
    anvil &  (or: intellect devnet)                     # a running chain first
    brownie run deploy                                  # local anvil (development): faucet, default pool
    BASE_SEPOLIA_RPC_URL=... DEPLOYER_PRIVATE_KEY=... brownie run deploy --network base-sepolia
    DEPLOYER_KEYSTORE=path DEPLOYER_KEYSTORE_PASSWORD=... brownie run deploy --network base-mainnet

Environment:
    DEPLOYER_PRIVATE_KEY         hex key of the deployer on live networks (never printed)
    DEPLOYER_KEYSTORE(+_PASSWORD) or a keystore file instead of the raw key
    INTELLECT_DEPLOY_PARAMS      optional DeployParams JSON file overriding the network's defaults
    INTELLECT_DEPLOYMENTS_DIR    where deployments/<chainId>.json goes (default: ./deployments)

``brownie run deploy`` (``main``) is a thin wrapper: it exports what brownie compiled into ``sdk/abi/`` and runs
the SDK's deploy (``intellect.sdk.deploy.deploy_contracts``, the one ``intellect devnet`` and ``intellect deploy`` run
from an installed wheel). Start the chain first: on a development network with no chain running brownie would
launch its own anvil and stop it on exit, so ``main`` refuses. The brownie tests and tools call
``deploy_all(deployer, params)``, the same wiring with brownie contract objects of the sources they compile;
``tests/contracts/test_contracts_sdk_deploy.py`` checks the two configure the same chain.
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
from scripts.export_abi import ABI_DIR, BUILD_DIR, CALLEES, _artifact, artifact_abi_sha256, export_abis

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
    ledger.setPoolBounds(params.minChallengeBond, params.minQuorum, params.reservationLeverage, tx)

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


def _deployer_key(dev: bool) -> Any:
    """The deployer as a signing key for the SDK's deploy: anvil's account 0 on local networks (the account brownie
    calls accounts[0]); DEPLOYER_PRIVATE_KEY or DEPLOYER_KEYSTORE(+_PASSWORD) on live ones (never printed)."""
    from eth_account import Account

    from intellect.sdk import dev_account, load_keystore

    if dev:
        acct = dev_account(0)
        if accounts and accounts[0].address != acct.address:
            raise DeploymentError(f"the chain's first account {accounts[0].address} is not anvil's dev account 0 "
                                  f"({acct.address}): set DEPLOYER_PRIVATE_KEY or DEPLOYER_KEYSTORE")
        return acct
    key = os.environ.get("DEPLOYER_PRIVATE_KEY")
    if key:
        return Account.from_key(key)
    keystore = os.environ.get("DEPLOYER_KEYSTORE")
    if keystore:
        return load_keystore(keystore, os.environ.get("DEPLOYER_KEYSTORE_PASSWORD"))
    raise DeploymentError(
        f"network {network.show_active()!r} needs a deployer: set DEPLOYER_PRIVATE_KEY or DEPLOYER_KEYSTORE"
    )


def main() -> Deployment:
    """`brownie run deploy [--network NAME]`: exports the ABIs and bytecode brownie just compiled into sdk/abi/
    and deploys exactly those with the SDK's deploy (`intellect.sdk.deploy.deploy_contracts`: web3, EIP-1559 fees
    read from the chain, so a plain `anvil` works; the deployment file is written only once the wiring checked
    out). Refuses to deploy onto an anvil brownie launched itself: it dies when this script ends, and the
    deployment file would name a chain that no longer exists (start `intellect devnet` or `anvil` first)."""
    from brownie.network import rpc

    from intellect.sdk.deploy import deploy_contracts

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    name = network.show_active()
    if rpc.is_active() and rpc.is_child():
        raise DeploymentError(
            "no chain was running at the development network's address, so brownie launched its own anvil, which "
            "it stops when this script ends (the deployment file would name a chain that no longer exists): start "
            "the chain first (`intellect devnet`, or `anvil` in another shell), then `brownie run deploy`"
        )
    dev = name.startswith("development") or web3.eth.chain_id in (31337, 1337)
    params = params_for_network(name, os.environ.get("INTELLECT_DEPLOY_PARAMS"))
    export_abis(BUILD_DIR, ABI_DIR)
    artifacts = {n: _artifact(n, BUILD_DIR) for n in CALLEES}
    out_dir = Path(os.environ.get("INTELLECT_DEPLOYMENTS_DIR", ROOT / "deployments"))
    deployment = deploy_contracts(web3.provider.endpoint_uri, _deployer_key(dev), params, dev=dev, network=name,
                                  out_dir=out_dir, artifacts=artifacts)
    if deployment.default_pool_id is not None:
        log.info("default pool     %d", deployment.default_pool_id)
    return deployment
