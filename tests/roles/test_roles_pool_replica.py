"""A pool stays joinable while its trainer is down (issue 36): every node that read the pool's documents keeps them
(pinned, served by its gateway), a relay replicates all of them (rules, task set, held-out set), and
`intellect pool show POOL --rules` fetches the rules from any of the pool's listed peers, not only the trainer.

Real anvil chain and contracts, a real `Trainer` agent holding the documents (its store, gateway and /status), a
real `RelayAgent` replicating them, the CLI in-process; peers found from the chain (registry and /status)."""

from __future__ import annotations

import json

import yaml
from cli_runner import run_cli  # type: ignore[import-not-found]
from role_config import role_config  # type: ignore[import-not-found]

from intellect.agents.config import TaskSettings
from intellect.agents.roles._runtime import load_task_set
from intellect.agents.tasks import synthetic_task_set
from intellect.sdk.ipfs import EmbeddedIpfs
from intellect.sdk.peers import pool_gateways
from intellect.sdk.poolrules import PoolRules


def _cfg(devnet, data_dir, role: str, account: int, pool_id: int):
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir.parent / f"{data_dir.name}.yaml"
    path.write_text(yaml.safe_dump({}))
    return role_config(devnet, role, data_dir, account,
                       {"server.port": "0", "server.ipfs_port": "0", "server.shardcast_port": "0",
                        "chain.pool_id": str(pool_id)}, path=path)


def test_relays_replicate_the_pools_documents_and_pool_show_reads_them_without_the_trainer(devnet, tmp_path):
    from intellect.agents.roles.relay import RelayAgent
    from intellect.agents.roles.trainer import Trainer

    p = devnet.protocol(0)
    default = devnet.deployment.default_pool_id or 1
    trainer = Trainer(_cfg(devnet, tmp_path / "trainer", "trainer", 0, default))
    trainer.connect()
    trainer.open_ipfs()
    train = synthetic_task_set(8, seed=0, max_operand=9, ops=("+",))
    held = synthetic_task_set(3, seed=7, max_operand=9, ops=("+",))
    rules = PoolRules.build({"taskset_cid": trainer.ipfs.add(train.to_jsonl_bytes()),
                             "heldout_cid": trainer.ipfs.add(held.to_jsonl_bytes()),
                             "model": {"family": "tiny-llama"}, "group_size": 4, "problems_per_task": 2,
                             "budgets": {"cpu": [4, 6]}, "length_alpha": 0.01, "max_units_per_submission": 64})
    rules_cid = trainer.ipfs.add(rules.to_bytes())
    pool_id = p.create_pool(p.pool(default).params.model_copy(update={"rules_cid": rules_cid}))
    trainer.pool_id = pool_id
    trainer.start_server()
    trainer.ensure_node(stake_amount=0.0001, auto_stake=True)  # its endpoint and /status name its gateway
    relay = RelayAgent(_cfg(devnet, tmp_path / "relay", "relay", 5, pool_id))
    relay.connect()
    relay.open_ipfs()
    relay.start_server()
    relay.ensure_node(stake_amount=0.0001, auto_stake=True)
    try:
        assert pool_gateways(p, pool_id) == [trainer.gateway.url, relay.gateway.url]  # the trainer's first
        relay.replica.tick(relay)  # fetched from the trainer (every block CID-checked) and pinned
        want = [rules_cid, rules.taskset_cid, rules.heldout_cid]
        assert relay.replica.kept == want and relay.replica.missing == []
        assert set(want) <= set(relay.ipfs.pins())
        assert relay.status()["pool_documents"] == want

        trainer.close()  # the trainer goes away: the pool is still readable
        assert pool_gateways(p, pool_id) == [relay.gateway.url]
        chain = ["--network", devnet.url, "--deployment", str(devnet.deployment_file), "--json"]
        code, out, err = run_cli([*chain, "pool", "show", str(pool_id), "--rules"])
        assert code == 0, err
        doc = json.loads(out)
        assert doc["rules"]["taskset_cid"] == rules.taskset_cid and doc["rules"]["heldout_cid"] == rules.heldout_cid

        # a validator or worker joining now reads the task set from the relay, and keeps it for the next joiner
        joiner = EmbeddedIpfs(tmp_path / "joiner", peers=pool_gateways(p, pool_id))
        ts = load_task_set(TaskSettings(source="pool"), rules.taskset_cid, joiner)
        assert len(ts) == len(train) and rules.taskset_cid in joiner.pins()

        relay.close()  # nobody serves the pool now: one line naming what to do, the network exit code
        code, _, err = run_cli([*chain, "pool", "show", str(pool_id), "--rules"])
        assert code == 3 and f"no peer of pool {pool_id} serves its documents" in err, err
        code, _, err = run_cli([*chain, "pool", "show", "--rules"])
        assert code == 2 and "give its POOL_ID" in err
    finally:
        relay.close()
        trainer.close()
