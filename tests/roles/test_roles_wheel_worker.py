"""Install a node, not the workshop (issue 36): a worker installed from the wheel with its `[worker]` extra into a
fresh venv (torch, no brownie, no solc, no browser), started outside the checkout with that venv's
`intellect-agent`, joins a pool whose trainer and validator run from the checkout, passes `intellect node
preflight` from the same install, submits work and is paid after the window."""

from __future__ import annotations

import json
import subprocess

import pytest
from wheel_venv import node_env, node_venv  # type: ignore[import-not-found]

from intellect.sdk import dev_account

WORKSHOP = {"eth-brownie", "slither-analyzer", "playwright", "ruff", "atheris", "mutmut"}


@pytest.mark.slow  # installs torch and the ML stack into a fresh venv (7 min at load 20), then a pool runs
@pytest.mark.timeout(2400)
def test_worker_from_the_wheel_joins_a_pool_and_is_paid(swarm, tmp_path) -> None:
    bin_ = node_venv(tmp_path / "install", "worker")
    listed = json.loads(subprocess.run([str(bin_ / "python"), "-m", "pip", "list", "--format", "json"],
                                       capture_output=True, text=True, check=True, timeout=120).stdout)
    installed = {d["name"].lower() for d in listed}
    assert "torch" in installed and not installed & WORKSHOP, installed & WORKSHOP
    net = swarm.devnet
    swarm.add("trainer", "trainer", 0).start()
    swarm.add("validator", "validator", 2).start()
    worker = swarm.add("wheel-worker", "worker", 5)  # its config as every swarm agent's; started from the wheel
    env = {**node_env(bin_), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    run = tmp_path / "elsewhere"
    run.mkdir()
    chain = ["--network", net.url, "--deployment", str(net.deployment_file), "--dev-account", "5"]
    with open(worker.log_path, "ab") as log:
        worker.proc = subprocess.Popen([str(bin_ / "intellect-agent"), "--config", str(worker.cfg_path)], cwd=run,
                                       env=env, stdout=log, stderr=subprocess.STDOUT)
    p = net.protocol(0)
    me = dev_account(5).address
    swarm.wait(lambda: len(p.submissions(node=me)) >= 2, 900, "two submissions of the wheel's worker", 3)
    checked = subprocess.run([str(bin_ / "intellect"), *chain, "--json", "node", "preflight", "--role", "worker"],
                             capture_output=True, text=True, cwd=run, env=env, timeout=300)
    checks = {c["name"]: c["level"] for c in json.loads(checked.stdout)["checks"]}
    assert checks["stake"] == checks["registration"] == checks["trainer"] == "OK", checked.stdout
    assert checked.returncode == 0, checked.stdout
    worker.stop()
    assert worker.proc is not None and worker.proc.returncode == 0, worker.log_text()[-3000:]
    net.increase_time(p.pool(1).params.window_length + 1)
    paid = net.protocol(5).claim_all_rewards()
    assert paid > 0
