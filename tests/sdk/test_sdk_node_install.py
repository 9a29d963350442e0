"""Install a node, not the workshop: pyproject's role extras (`worker`, `validator`, `trainer`, `relay`) pull no
contract toolchain, chain, browser or linter; the wheel built from the checkout, installed with `[relay]` into a
fresh venv (no system site-packages; versions pinned to requirements.lock), runs `intellect devnet` and
`intellect-agent --role relay` outside the checkout, against each other, with no torch and no brownie."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKSHOP = {"eth-brownie", "slither-analyzer", "playwright", "ruff", "pytest-timeout", "uv", "atheris", "mutmut",
            "solc-select", "py-solc-x", "web3[tester]", "matplotlib"}
ROLES = ("worker", "validator", "trainer", "relay")


def _name(req: str) -> str:
    return re.split(r"[<>=!~;\s]", req, maxsplit=1)[0].lower()


def test_role_extras_pull_no_workshop() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    ml = {_name(r) for r in extras["ml"]}
    for role in ROLES:
        names = {_name(r) for r in extras[role]}
        assert not names & WORKSHOP, (role, names & WORKSHOP)
        assert names <= ml, (role, names - ml)  # nothing the lock does not already resolve
    # a relay moves shards and replicates pool documents: the core (web3, pydantic, click, ...) and numpy, which the
    # evidence rules' parser imports (intellect.verifier.toploc); no torch (a relay image without numpy failed to start)
    assert extras["relay"] == ["numpy>=1.26"]
    assert {"torch", "transformers", "pyarrow"} <= {_name(r) for r in extras["worker"]}


def _wait(pred, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    end = time.monotonic() + timeout
    while not pred():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the process exited with {proc.returncode}")
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.mark.slow  # 3-10 min: builds the wheel and a fresh venv (pip fetches the core dependencies)
@pytest.mark.timeout(1800)
def test_wheel_with_relay_extra_runs_a_devnet_and_a_relay_outside_the_checkout(tmp_path: Path) -> None:
    from wheel_venv import node_env, node_venv  # type: ignore[import-not-found]

    bin_ = node_venv(tmp_path, "relay")
    py = bin_ / "python"
    listed = json.loads(subprocess.run([str(py), "-m", "pip", "list", "--format", "json"], capture_output=True,
                                       text=True, check=True, timeout=120).stdout)
    installed = {d["name"].lower() for d in listed}
    assert not installed & (WORKSHOP | {"torch", "transformers"}), installed & (WORKSHOP | {"torch", "transformers"})

    run = tmp_path / "elsewhere"  # not the checkout: nothing of it is on the path or in the cwd
    run.mkdir()
    env = node_env(bin_)
    anvil = shutil.which("anvil") or str(REPO / "node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil")
    env["INTELLECT_ANVIL"] = anvil  # anvil is not a Python package: an operator installs it (npm) for a devnet
    helped = subprocess.run([str(bin_ / "intellect-agent"), "--help"], capture_output=True, text=True, cwd=run,
                            env=env, timeout=120)
    assert helped.returncode == 0 and "--role" in helped.stdout, helped.stderr[-2000:]

    from intellect.sdk.procs import free_port

    port = free_port()
    chain = subprocess.Popen([str(bin_ / "intellect"), "devnet", "--port", str(port), "--deployments", "d"],
                             cwd=run, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    relay = None
    try:
        _wait(lambda: (run / "d" / "31337.json").exists(), 180, "the devnet's deployment file", chain)
        shown = subprocess.run([str(bin_ / "intellect"), "--network", f"http://127.0.0.1:{port}", "--deployment",
                                "d/31337.json", "--json", "pool", "show", "1"], capture_output=True, text=True,
                               cwd=run, env=env, timeout=120)
        assert shown.returncode == 0 and json.loads(shown.stdout)["params"]["quorum"] == 1, shown.stderr
        relay = subprocess.Popen([str(bin_ / "intellect-agent"), "--role", "relay",
                                  "--set", f"chain.rpc_url=http://127.0.0.1:{port}",
                                  "--set", "chain.deployment_file=d/31337.json", "--set", "chain.dev_account=3",
                                  "--set", "data_dir=relay"], cwd=run, env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.STDOUT)
        _wait(lambda: (run / "relay" / "url").exists(), 120, "the relay's URL", relay)
        url = (run / "relay" / "url").read_text().strip()
        status: dict = {}

        def registered() -> bool:
            nonlocal status
            with urllib.request.urlopen(url + "/status", timeout=10) as resp:
                status = json.loads(resp.read())
            return status.get("role") == "relay" and status.get("node") is not None

        _wait(registered, 60, "the relay's /status", relay)
        assert "torch" not in subprocess.run([str(py), "-c", "import intellect.agents.cli, sys; print(sorted(sys.modules))"],
                                             capture_output=True, text=True, cwd=run, env=env, timeout=120).stdout
        relay.send_signal(signal.SIGTERM)
        assert relay.wait(timeout=60) == 0
    finally:
        for proc in (relay, chain):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
