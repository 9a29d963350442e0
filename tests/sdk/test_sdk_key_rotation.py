"""Node key rotation through the SDK and the CLI (issue 36), on anvil with the shipped contracts: the owner moves
a node to a new key (`Protocol.rotate_node_key`, `intellect node rotate-key`); the new key works at once with the
moved stake; the old key's pending reward stays claimable by the owner; and the budget-class record
(`WorkHistory`) of the new key includes the old key's leases."""

from __future__ import annotations

import json
from pathlib import Path

from cli_runner import run_cli  # type: ignore[import-not-found]
from eth_account import Account
from eth_utils import keccak
from nodes import staked_node  # type: ignore[import-not-found]

from intellect.sdk import NodeStatus, Role, WorkHistory
from intellect.sdk.devnet import Devnet

PASSWORD = "correct horse battery staple"


def _funded(net: Devnet, seed: str) -> Account:
    acct = Account.from_key(keccak(text=f"intellect-sdk-rotation-{seed}"))
    net.anvil.rpc("anvil_setBalance", [acct.address, hex(10**20)])
    return acct


def test_rotation_keeps_stake_rewards_and_record(net: Devnet) -> None:
    pool_id = net.deployment.default_pool_id or 1
    trainer = net.protocol(0)
    trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestrotation")
    owner = staked_node(net, 1, Role.WORKER, gpu_model="H100")  # self-owned: the owner key is the node key
    old = owner.address
    claim = owner.claim_task(pool_id)
    owner.submit_work(claim.task_id, "bafkreirotationwork", b"\x11" * 32, 2, 1)
    stake_before = owner.stake_of(old)

    new_acct = _funded(net, "new")
    node = owner.rotate_node_key(old, new_node_account=new_acct)
    assert (node.address, node.owner, node.role, node.status) == (new_acct.address, old, Role.WORKER,
                                                                  NodeStatus.ACTIVE)
    assert node.gpu_model == "H100"
    assert owner.node(old).status == NodeStatus.ROTATED
    assert owner.current_key(old) == new_acct.address
    moved = owner.stake_of(new_acct.address)
    assert (moved.active, moved.unbonding) == (stake_before.active, stake_before.unbonding)
    assert owner.stake_of(old).active == 0

    # the new key claims and submits at once with the moved stake
    worker = net.protocol(None, account=new_acct)
    claim2 = worker.claim_task(pool_id)
    worker.submit_work(claim2.task_id, "bafkreirotationwork2", b"\x12" * 32, 2, 1)

    # after the windows: the old key's reward is the owner's to claim; the record of the new key holds both leases
    net.increase_time(int(owner.pool(pool_id).params.window_length) + 1)
    rewards = owner.rewards(old)
    assert rewards.claimable_ids == [claim.task_id]
    assert owner.claim_rewards(rewards.claimable_ids) == rewards.claimable
    params = owner.pool(pool_id).params
    history = WorkHistory(owner, pool_id, lease_duration=params.lease_duration, window_length=params.window_length)
    head = owner.block_number()
    outcomes = history.outcomes(new_acct.address, head)
    assert [(o.task_id, o.verified) for o in outcomes] == [(claim.task_id, True), (claim2.task_id, True)]
    assert [o.task_id for o in history.outcomes(old, head)] == [claim.task_id]  # the old key's own record
    assert history.declared(new_acct.address, head) == ("H100", 0, 0)


def test_cli_rotate_key_recovers_a_node_without_its_old_key(net: Devnet, tmp_path: Path) -> None:
    """The owner (a separate key) moves its node to a new keystore; the old node key signs nothing."""
    env = {"INTELLECT_KEYSTORE_PASSWORD": PASSWORD}
    chain = ["--network", net.url, "--deployment", str(net.deployment_file)]
    addresses = {}
    for name in ("owner", "old", "new"):
        code, out, err = run_cli(["--keystore", str(tmp_path / f"{name}.json"), "--json", "account", "new"], env=env)
        assert code == 0, err
        addresses[name] = json.loads(out)["address"]
    args = [*chain, "--keystore", str(tmp_path / "owner.json")]
    code, _, err = run_cli([*args, "faucet"], env=env)
    assert code == 0, err
    code, _, err = run_cli([*args, "node", "register", "--role", "worker", "--node-keystore",
                            str(tmp_path / "old.json")], env=env)
    assert code == 0, err
    code, _, err = run_cli([*args, "stake", "deposit", "100", "--node", addresses["old"]], env=env)
    assert code == 0, err

    (tmp_path / "old.json").unlink()  # the node key is lost
    code, out, err = run_cli([*args, "node", "rotate-key", addresses["old"], "--new-keystore",
                              str(tmp_path / "new.json")], env=env)
    assert code == 0, err
    assert f"rotated {addresses['old']} -> {addresses['new']}" in out and "status     active" in out
    code, out, err = run_cli([*args, "--json", "stake", "status", "--node", addresses["new"]], env=env)
    assert code == 0, err
    assert json.loads(out)["active"] == 100 * 10**18
    code, out, err = run_cli([*args, "--json", "node", "show", addresses["old"]], env=env)
    assert code == 0 and json.loads(out)["status"] == NodeStatus.ROTATED
    # a second rotation of the retired key is refused with one line naming the error (exit 4: a revert)
    code, out, err = run_cli([*args, "node", "rotate-key", addresses["old"], "--new-keystore",
                              str(tmp_path / "owner.json")], env=env)
    assert code == 4 and "NodeRegistryNotActive" in err
