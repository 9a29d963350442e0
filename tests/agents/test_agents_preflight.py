"""`intellect node preflight` (agents/preflight.py, offered by the `intellect` CLI through the `intellect.cli.node`
entry point) on anvil chains with the real deployment: a fresh key is told it is not ready and why; a registered,
staked worker in a pool with published rules gets its budget class and what raises it; an advertised loopback
address is refused off dev chains. The live-trainer check runs against a real trainer agent in
tests/roles/test_roles_preflight.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runner import run_cli  # type: ignore[import-not-found]

from intellect.agents.preflight import EXIT_NOT_READY, advertised_address_problem
from intellect.sdk import Protocol, dev_account, import_keystore, parse_tokens
from intellect.sdk import devnet as dn
from intellect.sdk.deploy import deploy_contracts, dev_params
from intellect.sdk.devnet import Anvil, Devnet


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    n = dn.start(tmp_path_factory.mktemp("devnet"))
    try:
        yield n
    finally:
        n.stop()


def _checks(stdout: str) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(stdout)["checks"]}


def test_a_fresh_key_is_not_ready_and_told_why(net: Devnet) -> None:
    code, out, err = run_cli(["--network", net.url, "--deployment", str(net.deployment_file), "--dev-account", "5",
                              "--json", "node", "preflight", "--role", "worker", "--endpoint", "http://127.0.0.1:9"])
    assert code == EXIT_NOT_READY, err
    doc = json.loads(out)
    checks = _checks(out)
    assert doc["verdict"] == "NOT READY"
    assert checks["stake"]["level"] == "FAIL" and "minimum 100 INTL" in checks["stake"]["detail"]
    assert checks["registration"]["level"] == "WARN" and "node register" in checks["registration"]["fix"]
    assert checks["trainer"]["level"] == "FAIL" and "no endpoint" in checks["trainer"]["detail"]
    # loopback is only warned about on a dev chain
    assert checks["endpoint"]["level"] == "WARN" and "loopback" in checks["endpoint"]["detail"]
    assert checks["hardware"]["level"] == "OK" and "cpu" in checks["hardware"]["detail"]
    assert doc["facts"]["min_stake"] == parse_tokens("100")
    # the human screen says the same, one line per check, and the verdict last
    code, out, _ = run_cli(["--network", net.url, "--deployment", str(net.deployment_file), "--dev-account", "5",
                            "node", "preflight", "--role", "worker"])
    assert code == EXIT_NOT_READY and out.strip().splitlines()[-1] == "verdict: NOT READY"
    assert any(ln.startswith("[FAIL] stake") for ln in out.splitlines())


def test_a_staked_worker_gets_its_budget_class_and_pending_rewards(net: Devnet, tmp_path: Path) -> None:
    ipfs = f"embedded:{tmp_path / 'ipfs'}"
    chain = ["--network", net.url, "--deployment", str(net.deployment_file)]
    code, out, err = run_cli([*chain, "--dev-account", "0", "--json", "pool", "create", "--model-family", "tiny",
                              "--group-size", "4", "--problems-per-task", "2", "--budget", "cpu=8,16",
                              "--budget", "gpu-large=32,64", "--length-alpha", "0.001", "--window", "300",
                              "--vote-period", "120", "--lease", "600", "--taskset",
                              "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", "--fund", "1000",
                              "--ipfs", ipfs])
    assert code == 0, err
    pool_id = json.loads(out)["pool_id"]
    p = net.protocol(6)
    p.drip()
    p.register_node("worker", gpu_model="H100-80GB", vram_gib=80, gpu_count=8, endpoint="")
    p.stake(p.address, parse_tokens("100"))
    code, out, err = run_cli([*chain, "--dev-account", "6", "--json", "node", "preflight", "--role", "worker",
                              "--pool", str(pool_id), "--ipfs", ipfs, "--gas-price-gwei", "0.5"])
    checks, facts = _checks(out), json.loads(out)["facts"]
    assert checks["stake"]["level"] == "OK" and checks["registration"]["level"] == "OK", err
    assert checks["pool rules"]["level"] == "OK" and "budgets" in checks["pool rules"]["detail"]
    # declared gpu-large, but a node with no decided leases earns only cpu: it is told what raises it
    assert (facts["declared_class"], facts["earned_class"], facts["budget_class"]) == ("gpu-large", "cpu", "cpu")
    assert "decided lease" in checks["budget class"]["detail"] and facts["class_units"] == 16 * 4 * 2
    assert checks["endpoint"]["level"] == "OK" and "outbound only" in checks["endpoint"]["detail"]
    assert "0.5 gwei" in checks["per day (estimate)"]["detail"] and facts["gas_price_wei"] == 5 * 10**8
    # the trainer (account 0) advertises no endpoint: a worker cannot fetch checkpoints, so it is not ready
    assert code == EXIT_NOT_READY and checks["trainer"]["level"] == "FAIL"


def test_loopback_endpoint_refused_off_dev_chains(tmp_path: Path) -> None:
    key = dev_account(5)
    ks = tmp_path / "node.json"
    import_keystore(ks, key.key.hex(), "pw")
    with Anvil(chain_id=4242) as anvil:  # not a dev chain id: dev accounts and loopback endpoints are refused
        dep = deploy_contracts(anvil.url, dev_account(0), dev_params(), dev=True, out_dir=tmp_path / "d")
        Protocol.connect(anvil.url, deployment=dep, account=dev_account(0)).transfer(key.address, parse_tokens("500"))
        code, out, err = run_cli(["--network", anvil.url, "--deployment", str(tmp_path / "d" / "4242.json"),
                                  "--keystore", str(ks), "--json", "node", "preflight", "--role", "validator",
                                  "--endpoint", "http://192.168.1.20:8000"], env={"INTELLECT_KEYSTORE_PASSWORD": "pw"})
    assert code == EXIT_NOT_READY, err
    checks = _checks(out)
    assert checks["endpoint"]["level"] == "FAIL" and "private" in checks["endpoint"]["detail"]
    assert checks["stake"]["level"] == "WARN"  # 500 INTL in hand covers the 100 minimum: stake it


@pytest.mark.parametrize(("endpoint", "bad"), [
    ("http://127.0.0.1:8000", "loopback"), ("http://10.1.2.3", "private"), ("http://localhost:1", "this host"),
    ("http://[::1]:80", "loopback"), ("http://0.0.0.0:80", "unspecified"), ("http://100.64.0.7", "non-public"), ("http://1.1.1.1:8000", None),
    ("http://8.8.8.8", None)])
def test_advertised_address_problem(endpoint: str, bad: str | None) -> None:
    problem = advertised_address_problem(endpoint)
    assert (problem is None) if bad is None else (bad in (problem or ""))
