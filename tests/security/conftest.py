"""Fixtures for the security suite's contract attacks: the real deployment (scripts/deploy.py:deploy_all) on
brownie's anvil, nodes with their own keys (EIP-712 registration), a second deployment of StakeManager and
TaskLedger over a test token with a transfer hook (contracts/test/HookToken.sol) for reentrancy attacks, and a
revert matcher for custom errors.

Helpers shared with the test modules live in security_helpers.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from brownie import accounts
from brownie_dropped_race import install as _install_dropped_race_fix
from security_helpers import (
    MIN_STAKE,
    TOKEN,
    VALIDATOR,
    WORKER,
    Net,
    running_devnet,
    running_swarm,
)

from scripts._deployment import dev_params
from scripts.deploy import Deployed, deploy_all

_install_dropped_race_fix()  # brownie/anvil "Tx dropped without known replacement" race (tests/brownie_dropped_race.py)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.filterwarnings("ignore::FutureWarning"))


@pytest.fixture(scope="module")
def deployed(module_isolation) -> Deployed:
    return deploy_all(accounts[0], dev_params(), dev=True)


@pytest.fixture(scope="module")
def hooked(module_isolation) -> Net:
    """StakeManager + TaskLedger deployed over HookToken (a token that calls its recipients back), wired like
    deploy_all wires the real ones, with a funded pool of quorum 1."""
    import brownie

    p = brownie.project.get_loaded_projects()[0]
    admin = accounts[0]
    tx = {"from": admin}
    params = dev_params()
    token = p.HookToken.deploy(tx)
    registry = p.NodeRegistry.deploy(tx)
    stake = p.StakeManager.deploy(admin, token, registry, admin, params.unbondingPeriod,
                                  params.challengerShareBps, tx)
    p.PoolRules.deploy(tx)  # linked into the ledger
    ledger = p.TaskLedger.deploy(admin, token, registry, stake, params.minWindowLength, tx)
    stake.grantRole(stake.SLASHER_ROLE(), ledger, tx)
    registry.setStakeHook(stake, tx)
    stake.setMinStake(WORKER, MIN_STAKE, tx)
    stake.setMinStake(VALIDATOR, MIN_STAKE, tx)
    assert params.defaultPool is not None
    pool_id = int(ledger.createPool(params.defaultPool.as_tuple(admin.address), tx).return_value)
    token.mint(admin, 100_000 * TOKEN, tx)
    token.approve(ledger, 100_000 * TOKEN, tx)
    ledger.fundPool(pool_id, 100_000 * TOKEN, tx)
    return Net(token, registry, stake, ledger, pool_id)


@pytest.fixture(autouse=True)
def isolation(request) -> None:
    """brownie's per-test chain snapshot, for the contract attack tests only (the fuzz and swarm tests do not
    touch brownie's chain, and hypothesis refuses function-scoped fixtures around @given)."""
    if "brownie" in request.keywords or request.node.path.name == "test_security_contracts.py":
        request.getfixturevalue("fn_isolation")


@pytest.fixture
def net(deployed) -> Net:
    d = deployed
    return Net(d.token, d.registry, d.stake_manager, d.ledger, d.default_pool_id)


@pytest.fixture
def big_devnet(tmp_path):
    with running_devnet(tmp_path) as net:
        yield net


@pytest.fixture
def sec_swarm(big_devnet, tmp_path):
    with running_swarm(big_devnet, tmp_path) as s:
        yield s
