"""Fixtures for the contract tests: the real deployment (scripts/deploy.py:deploy_all) on brownie's anvil,
nodes with their own keys (EIP-712 registration signatures). Helpers shared with the test modules (constants,
the revert matcher for custom errors, `Net`) live in contracts_helpers.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from brownie import accounts
from brownie_dropped_race import install as _install_dropped_race_fix
from contracts_helpers import VALIDATOR, WORKER, Net

from scripts._deployment import dev_params
from scripts.deploy import Deployed, deploy_all

_install_dropped_race_fix()  # brownie/anvil "Tx dropped without known replacement" race (tests/brownie_dropped_race.py)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # brownie's own deprecation noise (rpc.sleep via chain.sleep, ...) would bury real warnings
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.filterwarnings("ignore::FutureWarning"))


@pytest.fixture(scope="module")
def deployed(module_isolation) -> Deployed:
    return deploy_all(accounts[0], dev_params(), dev=True)


@pytest.fixture(autouse=True)
def isolation(fn_isolation) -> None:
    pass


@pytest.fixture
def net(deployed) -> Net:
    return Net(deployed)


@pytest.fixture
def worked(net):
    """A worker with one submission in its window, a validator and the pool at step 0."""
    worker = net.register(WORKER)
    validator = net.register(VALIDATOR)
    net.publish(0)
    task_id = net.claim(worker)
    net.submit(worker, task_id, units=4, step=0)
    return net, worker, validator, task_id
