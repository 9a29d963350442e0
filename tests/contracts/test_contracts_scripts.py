"""scripts/deploy.py (deployment file, wiring check, ABI export) and scripts/stake.py (messages per error)."""

from __future__ import annotations

import json

import pytest
from brownie import accounts, chain, web3
from contracts_helpers import MIN_STAKE, ROOT, TOKEN, WORKER

from scripts import stake as stake_script
from scripts._deployment import DEPLOYMENT_SCHEMA, Deployment, DeploymentError, params_for_network
from scripts.deploy import verify_wiring
from scripts.export_abi import abi_sha256, export_abis


def test_deployment_file_roundtrip_and_schema(net, tmp_path):
    path = net.d.deployment.write(tmp_path)
    assert path.name == f"{web3.eth.chain_id}.json"
    raw = json.loads(path.read_text())
    assert raw["schema"] == DEPLOYMENT_SCHEMA and raw["defaultPoolId"] == 1
    assert raw["contracts"]["TaskLedger"]["address"] == net.ledger.address
    assert raw["parameters"]["defaultPool"]["windowLength"] == 300
    assert Deployment.read(path).contracts["StakeManager"].address == net.stake.address


def test_deployment_read_refuses_unknown_schema(tmp_path):
    path = tmp_path / "1.json"
    path.write_text(json.dumps({"schema": "intellect.deployment/v9"}))
    with pytest.raises(DeploymentError, match="v9"):
        Deployment.read(path)
    path.write_text("{not json")
    with pytest.raises(DeploymentError, match=r"1\.json"):
        Deployment.read(path)


def test_params_for_network_profiles():
    assert params_for_network("development").faucet
    assert params_for_network("base-sepolia").defaultPool is None
    assert not params_for_network("base-mainnet").faucet
    assert params_for_network("base-mainnet").minWindowLength == 24 * 3600
    with pytest.raises(DeploymentError, match="INTELLECT_DEPLOY_PARAMS"):
        params_for_network("some-l2")


def test_verify_wiring_detects_missing_slasher_role(net):
    verify_wiring(net.d)
    net.stake.revokeRole(net.stake.SLASHER_ROLE(), net.ledger, {"from": accounts[0]})
    with pytest.raises(DeploymentError, match="SLASHER_ROLE"):
        verify_wiring(net.d)


def test_exported_abis_match_deployment_hashes(net, tmp_path):
    hashes = export_abis(out_dir=tmp_path)
    for name, record in net.d.deployment.contracts.items():
        doc = json.loads((tmp_path / f"{name}.json").read_text())
        assert doc["schema"] == "intellect.abi/v1"
        assert abi_sha256(doc["abi"]) == doc["abiSha256"] == hashes[name] == record.abiSha256
    ledger = json.loads((tmp_path / "TaskLedger.json").read_text())
    errors = {e["name"] for e in ledger["abi"] + ledger["errors"] if e["type"] == "error"}
    # the ledger's own errors and those that bubble up from the stake manager and the token
    assert {"TaskLedgerWindowClosed", "StakeManagerUnbondingTooShort", "ERC20InsufficientAllowance"} <= errors
    # the committed copies are current
    for name in hashes:
        committed = json.loads((ROOT / "sdk" / "abi" / f"{name}.json").read_text())
        assert committed["abiSha256"] == hashes[name], f"sdk/abi/{name}.json is stale: run scripts/export_abi.py"


@pytest.fixture
def deployment_dir(net, tmp_path, monkeypatch):
    net.d.deployment.write(tmp_path)
    monkeypatch.setenv("INTELLECT_DEPLOYMENTS_DIR", str(tmp_path))
    return tmp_path


def test_stake_script_flow(net, deployment_dir, capsys):
    node = net.register(WORKER, owner=accounts[0], stake=0)
    net.fund(accounts[0], 500 * TOKEN)
    stake_script.stake(node.address, "150")
    info = stake_script.status(node.address)
    assert info["active"] == 150 * TOKEN and info["role"] == "worker" and info["owner"] == accounts[0]
    stake_script.request_unstake(node.address, "50")
    assert "unbonding 50 INTL" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        stake_script.withdraw(node.address)
    assert "releases at unix time" in capsys.readouterr().err
    chain.sleep(3601)
    stake_script.withdraw(node.address)
    assert "withdrew 50 INTL" in capsys.readouterr().out
    assert stake_script.balance(accounts[0].address) > 0


def test_stake_script_clear_errors(net, deployment_dir, capsys):
    node = net.register(WORKER, owner=accounts[3], stake=MIN_STAKE)
    for call, expected in [
        (lambda: stake_script.request_unstake(node.address, "1"), "is not the owner of node"),
        (lambda: stake_script.stake(node.address, "abc"), "is not a number"),
        (lambda: stake_script.stake("0x1234", "1"), "is not an address"),
        (lambda: stake_script.withdraw(node.address), "is not the owner"),
        (lambda: stake_script.claim_rewards("99"), "submission 99 does not exist"),
        (lambda: stake_script.claim_rewards("x"), "must be integers"),
    ]:
        with pytest.raises(SystemExit):
            call()
        assert expected in capsys.readouterr().err


def test_stake_script_without_deployment(net, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("INTELLECT_DEPLOYMENTS_DIR", str(tmp_path / "none"))
    with pytest.raises(SystemExit):
        stake_script.status(accounts[1].address)
    assert "run `brownie run deploy`" in capsys.readouterr().err
