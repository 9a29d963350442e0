"""The operator's path from nothing to paid, across hosts (issue 36; docs/operators.md runs these commands).

    chain      anvil on its LAN address, the contracts deployed (the deployer = dev account 0, the token's admin)
    (tester)   the network's "website": serves the signed network descriptor at http://<tester>:<port>/network.json
    trainer    the pool's trainer, public     validator  a validator, public
    op         the operator's host behind a real NAT router (`op-gw`, iptables masquerading): no inbound route

On `op`, everything comes from one install and one name: a fresh venv with the wheel and its `[worker]` extra
(no contract toolchain, chain or browser), and the descriptor's URL (`--descriptor` / `chain.descriptor`), no RPC
URL or deployment file. The operator makes an owner key and a node key, registers the node, stakes, passes
preflight, runs the worker under `intellect-agent --supervise`, which restarts it after a `kill -9`, rotates the
node to a new key (the owner signs), works on with the new key, and exits: rewards claimed for both keys, stake
withdrawn; the owner ends with its stake back and every reward paid (to the wei), no slash. (A validator behind a
NAT router winning a challenge whose evidence other voters fetch: tests/net/test_net_swarm.py.)

Run: `pytest -m net tests/net/test_net_operator.py` (root; installs torch into a venv: ~10 min of the run).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from net_hosts import NetUnavailable
from page_server import serve_pages  # type: ignore[import-not-found]
from wheel_venv import node_env, node_venv  # type: ignore[import-not-found]

from intellect.sdk import TaskStatus, dev_account
from intellect.sdk.network import sign_network, write_network

pytestmark = [pytest.mark.net, pytest.mark.slow, pytest.mark.timeout(2700)]

PASSWORD = "operator's long passphrase"
PUBLIC = {"port": 8000, "ipfs_port": 8001, "shardcast_port": 8002}


class Operator:
    """The operator's shell on host `op`: the venv's `intellect` with the network's one name."""

    def __init__(self, host: Any, bin_: Path, home: Path, descriptor: str) -> None:
        self.host, self.bin, self.home, self.descriptor = host, bin_, home, descriptor
        self.env = {**node_env(bin_), "INTELLECT_KEYSTORE_PASSWORD": PASSWORD, "HF_HUB_OFFLINE": "1",
                    "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}

    def run(self, keystore: str | None, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        key = ["--keystore", str(self.home / keystore)] if keystore else []
        argv = [str(self.bin / "intellect"), "--descriptor", self.descriptor, *key, *args]
        out = subprocess.run(self.host.cmd(argv), capture_output=True, text=True, cwd=self.home, env=self.env,
                             timeout=300)
        if ok:
            assert out.returncode == 0, f"intellect {' '.join(args)}: {out.stderr[-2000:]}"
        return out

    def json(self, keystore: str | None, *args: str) -> Any:
        return json.loads(self.run(keystore, "--json", *args).stdout)


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def test_operator_behind_nat_joins_from_one_name_survives_a_kill_rotates_its_key_and_exits_paid(
        lab, net_devnet, net_swarm, ns_agent, tmp_path):
    devnet, swarm = net_devnet, net_swarm
    swarm.ns_agent = ns_agent
    for name in ("trainer", "validator"):
        lab.host(name)
    try:
        op_host = lab.nat_host("op")
    except NetUnavailable as exc:
        pytest.skip(str(exc))
    p = devnet.protocol(0)
    params = p.pool(p.deployment.default_pool_id).params

    # the pool's trainer and one validator on public hosts (from the checkout)
    agents = {}
    for name, role, acct in (("trainer", "trainer", 0), ("validator", "validator", 2)):
        addr = lab.hosts[name].addr
        base = swarm.add(name, role, acct, {"server": {"host": addr, "public_host": addr, **PUBLIC},
                                            **({"trainer": {"max_steps": 50}} if role == "trainer" else {})})
        agent = swarm.ns_agent(base.name, base.cfg_path, base.log_path, base.env)
        agent.host, agent.module = lab.hosts[name], "intellect.agents.cli"
        swarm.agents[name] = agents[name] = agent.start()

    # the network's one name: the deployer signs the descriptor; the tester's LAN address serves it
    desc = sign_network(devnet.deployment, name="lab-net", rpc_urls=[devnet.url], account=dev_account(0))
    pages = {"/network.json": write_network(desc, tmp_path / "network.json").read_bytes()}
    with serve_pages(f"{lab.subnet}.254", pages) as site:  # the network's "website"
        url = f"{site}/network.json"
        bin_ = node_venv(tmp_path / "install", "worker")  # while the pool's agents start
        home = tmp_path / "op-home"
        home.mkdir()
        op = Operator(op_host, bin_, home, url)

        # 1. find the network, make the keys, get tokens and gas (dev chain faucet), register, stake
        shown = op.json(None, "network", "show")
        assert shown["name"] == "lab-net" and shown["rpc_url"] == devnet.url, shown
        owner = op.json("owner.json", "account", "new")["address"]
        node = op.json("node.json", "account", "new")["address"]
        for ks in ("owner.json", "node.json"):
            op.run(ks, "faucet")
        op.run("owner.json", "node", "register", "--role", "worker", "--node-keystore", str(home / "node.json"))
        op.run("owner.json", "stake", "deposit", "100", "--node", node)
        before = p.balance_of(owner)

        # 2. preflight from the node key: ready (an outbound-only worker registers no endpoint)
        swarm.wait(lambda: all(a.status() is not None for a in agents.values()), 300, "the pool's agents up")
        checked = op.run("node.json", "--json", "node", "preflight", "--role", "worker", ok=False)
        checks = {c["name"]: c["level"] for c in json.loads(checked.stdout)["checks"]}
        assert checked.returncode == 0, checked.stdout
        assert checks["stake"] == checks["registration"] == checks["trainer"] == "OK", checks

        # 3. the worker, supervised, from the venv with only the descriptor's URL; kill -9 -> it comes back
        def start(keystore: str, data: str) -> subprocess.Popen[bytes]:
            """The worker under --supervise; config and log named `data`, its records always in data_dir `worker`
            (the new key takes over the old one's folder, as an operator would leave it)."""
            cfg = yaml.safe_load(swarm.add(f"op-{data}", "worker", 9).cfg_path.read_text())
            cfg["chain"] = {"descriptor": url, "keystore": str(home / keystore), "pool_id": desc.deployment.default_pool_id}
            cfg.update(data_dir=str(home / "worker"), server={"host": "127.0.0.1", "advertise": False},
                       ipfs={"gateway": False})
            cfg["worker"] = {**cfg.get("worker", {}), "push_to": "trainer", "auto_stake": False}
            (home / f"{data}.yaml").write_text(yaml.safe_dump(cfg))
            log = open(home / f"{data}.log", "ab")  # noqa: SIM115 - owned by the child
            return subprocess.Popen(op_host.cmd([str(bin_ / "intellect-agent"), "--supervise", "--config",
                                                 str(home / f"{data}.yaml")]),
                                    cwd=home, env=op.env, stdout=log, stderr=subprocess.STDOUT)

        def log_tail(data: str) -> str:
            return "\n".join((home / f"{data}.log").read_text(errors="replace").splitlines()[-40:])

        def wait_for(cond: Any, timeout: float, what: str, data: str) -> None:
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                if cond():
                    return
                time.sleep(2)
            raise AssertionError(f"timed out waiting for {what}:\n{log_tail(data)}\n{swarm.tails(15)}")

        sup = start("node.json", "worker")
        try:
            wait_for(lambda: len(p.submissions(node=node)) >= 1, 900, "the operator's first submission", "worker")
            first = _children(sup.pid)[0]
            os.kill(first, signal.SIGKILL)
            wait_for(lambda: [c for c in _children(sup.pid) if c != first], 60, "the supervisor's restart", "worker")
            n = len(p.submissions(node=node))
            wait_for(lambda: len(p.submissions(node=node)) > n, 900, "a submission after the restart", "worker")
            sup.send_signal(signal.SIGTERM)
            assert sup.wait(timeout=120) == 0, log_tail("worker")
        finally:
            if sup.poll() is None:
                sup.kill()
        text = (home / "worker.log").read_text(errors="replace")
        assert "the agent died (killed by SIGKILL)" in text and "the agent stopped (exit code 0)" in text

        # 4. rotate the node to a new key (the owner signs), work on with it
        new = op.json("node2.json", "account", "new")["address"]
        op.run("node2.json", "faucet")
        rotated = op.run("owner.json", "node", "rotate-key", node, "--new-keystore", str(home / "node2.json"))
        assert f"rotated {node} -> {new}" in rotated.stdout
        assert p.active_stake(new) == 100 * 10**18 and p.current_key(node) == new
        sup = start("node2.json", "worker2")
        try:
            wait_for(lambda: len(p.submissions(node=new)) >= 1, 900, "the new key's submission", "worker2")
            assert f"holds the records of key {node}; this agent runs as {new}" in (home / "worker2.log").read_text()
            sup.send_signal(signal.SIGTERM)
            assert sup.wait(timeout=120) == 0, log_tail("worker2")
        finally:
            if sup.poll() is None:
                sup.kill()

        # 5. exit with stake and rewards: after the windows the new key's worker claims its own rewards (the old
        #    key's records in its data_dir set aside), the owner claims the old key's, exits, withdraws
        done = {k: {s.submission_id for s in p.submissions(node=k)} for k in (node, new)}  # before the windows end
        devnet.increase_time(params.window_length + params.vote_period + 5)
        for key in (node, new):
            wait_for(lambda key=key: all(p.task(i).status in (TaskStatus.SUBMITTED, TaskStatus.PAID)
                                         for i in done[key]), 60, "no challenge", "worker2")
        sup = start("node2.json", "worker3")
        try:
            wait_for(lambda: p.rewards(new).paid > 0 and not p.rewards(new).claimable_ids, 300,
                     "the new key's worker claiming its rewards", "worker3")
            sup.send_signal(signal.SIGTERM)
            assert sup.wait(timeout=120) == 0, log_tail("worker3")
        finally:
            if sup.poll() is None:
                sup.kill()
        assert "claiming rewards failed" not in (home / "worker3.log").read_text()
        op.run("owner.json", "rewards", "claim", "--node", node)
        paid = p.rewards(node).paid + p.rewards(new).paid
        # every submission made before the windows ended is paid (the new key's worker may have sent more since)
        assert paid > 0 and all(p.task(i).status == TaskStatus.PAID for ids in done.values() for i in ids)
        op.run("owner.json", "node", "exit", new)
        op.run("owner.json", "stake", "unstake", "100", "--node", new)
        devnet.increase_time(p.unbonding_period() + 5)
        op.run("owner.json", "stake", "withdraw", "--node", new)
        assert p.balance_of(owner) == before + 100 * 10**18 + paid
        assert not p.get_events(["Slashed"], filters={"node": node}) and not p.get_events(["Slashed"],
                                                                                           filters={"node": new})
