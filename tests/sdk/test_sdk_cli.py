"""The `intellect` CLI through click's CliRunner isolation, against anvil + deploy_all."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from cli_runner import run_cli
from click.testing import CliRunner

from intellect.sdk.cli import EXIT_NETWORK, EXIT_REVERT, EXIT_USER, cli
from intellect.sdk.devnet import Devnet

PASSWORD = "correct horse battery staple"


def run(args: list[str], *, input: str | None = None, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    return run_cli(args, input=input, env={"INTELLECT_KEYSTORE_PASSWORD": PASSWORD, **(env or {})})


def _chain(net: Devnet) -> list[str]:
    return ["--network", net.url, "--deployment", str(net.deployment_file)]


def test_cli_operator_flow(net: Devnet, tmp_path: Path) -> None:
    ks = tmp_path / "op.json"
    code, out, err = run(["--keystore", str(ks), "--json", "account", "new"])
    assert code == 0, err
    address = json.loads(out)["address"]
    assert ks.exists() and oct(ks.stat().st_mode & 0o777) == "0o600"
    args = [*_chain(net), "--keystore", str(ks)]

    code, out, err = run([*args, "faucet"])
    assert code == 0, err
    assert "dripped 10000 INTL" in out
    code, out, err = run([*args, "node", "register", "--role", "worker", "--gpu-model", "H100-80GB",
                          "--vram-gib", "80", "--gpu-count", "8", "--endpoint", "http://w"])
    assert code == 0, err
    assert "8 x H100-80GB (80 GiB)" in out and "worker" in out
    code, out, err = run([*args, "stake", "deposit", "100"])
    assert code == 0, err
    code, out, err = run([*args, "stake", "deposit", "0.5", "--permit"])
    assert code == 0, err
    code, out, err = run([*args, "--json", "stake", "status"])
    assert code == 0, err
    st = json.loads(out)
    assert st["node"] == address and st["active"] == 100_500_000_000_000_000_000 and st["min_stake"] > 0
    code, out, err = run([*args, "stake", "status"])
    assert "active       100.5 INTL" in out and "(met: yes)" in out

    # a revert: one line naming the custom error and its arguments, exit code 4
    code, out, err = run([*args, "stake", "unstake", "1000"])
    assert code == EXIT_REVERT
    assert err.count("\n") == 1 and "StakeManagerInsufficientStake" in err and "stake status" in err

    code, out, err = run([*args, "--json", "node", "show"])
    assert code == 0 and json.loads(out)["role"] == 1
    code, out, err = run([*args, "rewards", "status"])
    assert code == 0 and "claimable  0 INTL" in out
    code, out, err = run([*args, "rewards", "claim"])
    assert code == 0 and "nothing claimable" in out
    code, out, err = run([*args, "stake", "unstake", "50"])
    assert code == 0, err
    code, out, err = run([*args, "stake", "withdraw"])
    assert code == EXIT_REVERT and "StakeManagerStillUnbonding" in err
    code, out, err = run([*args, "node", "exit"])
    assert code == 0 and "exited" in out


def test_cli_pool_views(net: Devnet) -> None:
    trainer = net.protocol(0)
    trainer.publish_checkpoint(1, 3, "bafkreicheckpoint3")
    code, out, err = run([*_chain(net), "--json", "pool", "show", "1"])
    assert code == 0, err
    assert json.loads(out)["latest_step"] == 3
    code, out, err = run([*_chain(net), "pool", "show"])
    assert code == 0 and "pool 1" in out and "latest step 3" in out
    code, out, err = run([*_chain(net), "pool", "checkpoints", "1"])
    assert code == 0 and "bafkreicheckpoint3" in out
    code, out, err = run([*_chain(net), "--json", "pool", "submissions", "1"])
    assert code == 0 and json.loads(out) == []


def test_cli_account_import_and_wrong_password(tmp_path: Path, net: Devnet) -> None:
    ks = tmp_path / "imp.json"
    key = "0x" + "11" * 32
    code, out, err = run(["--keystore", str(ks), "account", "import"], input=key + "\n")
    assert code == 0, err
    assert "imported 0x19E7E376E7C213B7E7e7e46cc70A5dD086DAff2A" in out
    code, out, err = run([*_chain(net), "--keystore", str(ks), "faucet"], env={"INTELLECT_KEYSTORE_PASSWORD": "no"})
    assert code == EXIT_USER and "wrong password" in err
    code, out, err = run(["--keystore", str(ks), "account", "new"])
    assert code == EXIT_USER and "already exists" in err


def test_cli_user_and_network_errors(net: Devnet) -> None:
    code, _, err = run(["--network", "nowhere", "pool", "show"])
    assert code == EXIT_USER and "unknown network" in err
    code, _, err = run([*_chain(net), "stake", "deposit", "12.x"])
    assert code == EXIT_USER and "not an amount" in err
    code, _, err = run([*_chain(net), "faucet"])
    assert code == EXIT_USER and "--keystore" in err
    code, _, err = run([*_chain(net), "--deployment", "/nonexistent/31337.json", "pool", "show"])
    assert code == EXIT_USER and "no deployment file" in err
    code, _, err = run(["--network", "http://127.0.0.1:9", "pool", "show"])
    assert code == EXIT_NETWORK and "RPC node kept failing" in err


def _all_commands(group: click.Group, prefix: list[str]) -> list[list[str]]:
    out = [prefix]
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        if name in {"shardcast"}:  # owned by another part; it has its own tests
            continue
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            out += _all_commands(cmd, [*prefix, name])
        else:
            out.append([*prefix, name])
    return out


@pytest.mark.parametrize("path", _all_commands(cli, []), ids=lambda p: " ".join(p) or "intellect")
def test_cli_help_on_every_command(path: list[str]) -> None:
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.output


def test_cli_plugin_commands_listed() -> None:
    assert "shardcast" in cli.list_commands(click.Context(cli))


def test_cli_ipfs_add_get_cid(tmp_path: Path) -> None:
    data = bytes(range(256)) * 5000  # 1.28 MB: a 5-leaf DAG
    f = tmp_path / "blob.bin"
    f.write_bytes(data)
    spec = f"embedded:{tmp_path / 'store'}"
    code, cid, err = run(["ipfs", "add", str(f), "--ipfs", spec])
    assert code == 0, err
    code, cid2, _ = run(["ipfs", "cid", str(f)])
    assert cid2 == cid and cid.startswith("bafybei")
    out_file = tmp_path / "out.bin"
    code, _out, err = run(["ipfs", "get", cid.strip(), "-o", str(out_file), "--ipfs", spec])
    assert code == 0, err
    assert out_file.read_bytes() == data
    code, _, err = run(["ipfs", "get", cid.strip(), "-o", str(out_file), "--ipfs", spec, "--max-size", "1MiB"])
    assert code == EXIT_USER and "over the limit" in err
    code, _, err = run(["ipfs", "get", "bafkreinotacid", "-o", str(out_file), "--ipfs", spec])
    assert code == EXIT_USER and "not a CID" in err


def test_cli_devnet_serves_a_deployment_until_sigterm(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    from intellect.sdk.procs import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "intellect.sdk.cli", "devnet", "--port", str(port),
                             "--deployments", str(tmp_path / "deployments")], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        dep = tmp_path / "deployments" / "31337.json"
        deadline = time.monotonic() + 120
        while not dep.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert dep.exists(), proc.stderr.read() if proc.poll() is not None else "no deployment file"
        code, out, err = run(["--network", f"http://127.0.0.1:{port}", "--deployment", str(dep), "--dev-account", "2",
                              "stake", "status"])
        assert code == 0, err
        assert "active       0 INTL" in out
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    code, _, err = run(["--network", f"http://127.0.0.1:{port}", "--deployment", str(dep), "pool", "show"])
    assert code == EXIT_NETWORK  # anvil went away with the command
