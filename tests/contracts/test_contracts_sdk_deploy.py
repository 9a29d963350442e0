"""The SDK's deploy (`intellect.sdk.deploy.deploy_contracts`, what `intellect devnet`, `intellect deploy` and
`brownie run deploy` run) and the brownie tests' `deploy_all` configure the same chain: both run here, on brownie's
anvil, from the sources brownie just compiled, and every setting a node relies on is compared. The package's
shipped bytecode is the build's (a stale copy would make an installed wheel deploy old contracts)."""

from __future__ import annotations

import json

from brownie import web3
from contracts_helpers import ROOT

from intellect.sdk import Protocol, dev_account
from intellect.sdk.deploy import DEPLOY_ORDER, deploy_contracts, dev_params
from scripts.export_abi import BUILD_DIR, CALLEES, _artifact, export_abis

ROLES = ("worker", "validator", "trainer", "relay")


def _settings(p: Protocol) -> dict:
    pool = p.pool(1)
    names = {r.address: n for n, r in p.deployment.contracts.items()}
    return {
        "min_stake": {r: p.min_stake(r) for r in ROLES},
        "unbonding": p.unbonding_period(), "challenger_share": p.challenger_share_bps(),
        "pool_bounds": p.pool_bounds(), "min_window": p.min_window_length(),
        "faucet": p.faucet_info(p.deployment.deployer).model_dump(exclude={"next_drip_at"}),
        "pool": pool.params.model_dump(exclude={"trainer"}), "budget": pool.budget, "pools": p.pool_count(),
        "slashers": [p.has_role("StakeManager", "SLASHER_ROLE", p.deployment.address(c))
                     for c in ("TaskLedger", "AttesterBook")],
        "deployer_supply": p.balance_of(p.deployment.deployer) + pool.budget,
        "wiring": {k: names.get(v, v) for k, v in p.wiring().items()},
    }


def test_sdk_deploy_and_deploy_all_configure_the_same_chain(net, tmp_path):
    url = web3.provider.endpoint_uri
    brownie_side = Protocol.connect(url, deployment=net.d.deployment)
    artifacts = {n: _artifact(n, BUILD_DIR) for n in DEPLOY_ORDER}
    dep = deploy_contracts(url, dev_account(0), dev_params(), out_dir=tmp_path, artifacts=artifacts)
    sdk_side = Protocol.connect(url, deployment=dep)
    assert set(dep.contracts) == set(net.d.deployment.contracts)
    assert {n: r.abiSha256 for n, r in dep.contracts.items()} == {
        n: r.abiSha256 for n, r in net.d.deployment.contracts.items()}
    assert dep.parameters == net.d.deployment.parameters
    a, b = _settings(brownie_side), _settings(sdk_side)
    assert a == b


def test_the_package_ships_the_builds_bytecode(tmp_path):
    export_abis(out_dir=tmp_path)
    for name in CALLEES:
        fresh = json.loads((tmp_path / f"{name}.json").read_text())
        committed = json.loads((ROOT / "sdk" / "abi" / f"{name}.json").read_text())
        assert committed["bytecode"] == fresh["bytecode"], (
            f"sdk/abi/{name}.json holds other bytecode than the build: run `python scripts/export_abi.py` "
            "after `brownie compile` and commit sdk/abi/")
