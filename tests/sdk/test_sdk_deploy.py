"""The SDK's deploy (`intellect.sdk.deploy`: web3 and the bytecode shipped in the package) on fresh anvil chains,
and the commands over it: `intellect deploy` and `intellect devnet --host`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import run_cli  # type: ignore[import-not-found]
from eth_account import Account

from intellect.sdk import Protocol, RpcError, dev_account, parse_tokens
from intellect.sdk.deploy import DeployParams, deploy_contracts, dev_params, params_for_network
from intellect.sdk.devnet import Anvil
from intellect.sdk.procs import free_port


def test_deploy_contracts_on_a_fresh_anvil_and_use_them(tmp_path: Path) -> None:
    with Anvil() as anvil:
        dep = deploy_contracts(anvil.url, dev_account(0), dev_params(), out_dir=tmp_path)
        path = tmp_path / "31337.json"
        assert json.loads(path.read_text())["defaultPoolId"] == dep.default_pool_id == 1
        assert set(dep.contracts) == {"IntellectToken", "NodeRegistry", "StakeManager", "TaskLedger", "AttesterBook"}
        p = Protocol.connect(anvil.url, deployment=path, dev_account_index=3)
        assert p.wiring()["TaskLedger.stakeManager"] == dep.address("StakeManager")
        assert p.min_stake("worker") == parse_tokens("100") and p.pool_bounds() == (1, 1)
        assert p.pool(1).budget == parse_tokens("100000") and p.pool(1).params.quorum == 1
        p.drip()
        p.register_node("worker", gpu_model="cpu", endpoint="http://10.0.0.5:8000")
        stake = p.stake(p.address, parse_tokens("100"))
        assert stake.meets_minimum and p.is_active(p.address, "worker")
        trainer = Protocol.connect(anvil.url, deployment=path, dev_account_index=0)  # the default pool's trainer
        trainer.publish_checkpoint(1, 0, "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku")
        claim = p.claim_task(1)  # the ledger (linked to the PoolRules library) works end to end
        assert claim.task_id >= 1


def test_a_failed_deploy_writes_no_file(tmp_path: Path) -> None:
    broke = Account.create()  # no ETH for gas: the first transaction is refused
    with Anvil() as anvil, pytest.raises(RpcError):
        deploy_contracts(anvil.url, broke, dev_params(), out_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_live_profiles_create_no_pool_and_mint_nothing(tmp_path: Path) -> None:
    params = params_for_network("base-sepolia")
    assert params.defaultPool is None and params.faucet
    with Anvil() as anvil:
        dep = deploy_contracts(anvil.url, dev_account(0), params, dev=False, network="base-sepolia")
        p = Protocol.connect(anvil.url, deployment=dep)
        assert dep.default_pool_id is None and p.pool_count() == 0 and p.total_supply() == 0
        assert p.min_window_length() == DeployParams().minWindowLength


def test_cli_deploy_then_use(tmp_path: Path) -> None:
    with Anvil() as anvil:
        out = tmp_path / "deployments"
        code, stdout, err = run_cli(["--network", anvil.url, "--dev-account", "0", "--json", "deploy",
                                     "--out", str(out)])
        assert code == 0, err
        doc = json.loads(stdout)
        assert doc["default_pool_id"] == 1 and Path(doc["deployment"]) == out / "31337.json"
        code, stdout, err = run_cli(["--network", anvil.url, "--deployment", str(out / "31337.json"), "--json",
                                     "pool", "show", "1"])
        assert code == 0 and json.loads(stdout)["params"]["quorum"] == 1, err
        # a deploy needs a signer; a chain that is not a dev chain needs a chosen profile (checked before signing)
        code, _, err = run_cli(["--network", anvil.url, "deploy", "--out", str(tmp_path / "x")])
        assert code == 2 and "--keystore" in err and not (tmp_path / "x").exists()


def _devnet(tmp_path: Path, port: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "intellect.sdk.cli", "devnet", "--port", str(port),
                             "--deployments", str(tmp_path), *extra], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ})


def _wait_file(path: Path, proc: subprocess.Popen[str], timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert time.monotonic() < end, "devnet did not write its deployment file"
        time.sleep(0.2)


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_devnet_host_decides_who_can_reach_it(tmp_path: Path, host: str) -> None:
    # 127.0.0.2 is another loopback address: anvil bound to 0.0.0.0 answers there, bound to 127.0.0.1 it does not
    port = free_port()
    proc = _devnet(tmp_path, port, "--host", host)
    try:
        _wait_file(tmp_path / "31337.json", proc)
        other = f"http://127.0.0.2:{port}"
        if host == "0.0.0.0":
            p = Protocol.connect(other, deployment=tmp_path / "31337.json", dev_account_index=4)
            p.drip()
            assert p.balance_of() > 0
        else:
            from intellect.sdk import RetryPolicy

            with pytest.raises(RpcError):
                Protocol.connect(other, deployment=tmp_path / "31337.json",
                                 retry=RetryPolicy(attempts=1, base_delay=0.01))
            assert Protocol.connect(f"http://127.0.0.1:{port}", deployment=tmp_path / "31337.json").pool_count() == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
