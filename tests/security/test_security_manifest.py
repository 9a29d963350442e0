"""Trainer and manifest attacks (issue 5), against real agent processes on a local pool (anvil + the real
deployment + embedded IPFS + Shardcast + the tiny model).

The attacker runs a relay node registered on-chain (`intellect.agents.adversary.relay.MaliciousRelay`): the
registry advertises it to every worker and validator as a checkpoint source and an IPFS peer. Before the pool
has any checkpoint, it forges a poisoned copy of the model as "step 1" under its own manifest, puts the
manifest on its IPFS store, announces it in its Shardcast `/versions`, and posts it on-chain everywhere it
can: on the victim pool (`publishCheckpoint` by a non-trainer: must revert, before the trainer's first post
and again as the plausible next step after it) and on a pool of its own, where it is the trainer (so
`CheckpointPublished` events carrying the forged CID exist on-chain). Meanwhile it serves the trainer's
shards with one byte flipped.

The honest worker must never ask for the forged manifest (neither on IPFS nor from the relay), must hold
byte-identical copies of the trainer's checkpoints, must have dropped the tampered shards and fetched them
elsewhere (the relay benched after its first bad shard), and its work must be accepted by the validator
(which checks the file names the on-chain checkpoint and re-runs it through TOPLOC)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from intellect.sdk import ContractRevert

SHARD_SIZE = 64 * 1024  # the tiny checkpoint (~1.9 MB) in ~30 shards: every source gets asked
FETCH_THREADS = 4  # shardcast Client(workers=4): shards in flight at once before a bad one benches a source


def _digests(step_dir: Path) -> dict[str, str]:
    return {str(f.relative_to(step_dir)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(step_dir.rglob("*")) if f.is_file()}


def _refused(fn: Any) -> str:
    try:
        fn()
    except ContractRevert as exc:
        return exc.name
    raise AssertionError("the transaction did not revert")


@pytest.mark.timeout(1200)
def test_manifest_forged_by_relay_never_loaded_and_tampered_shards_avoided(sec_swarm, big_devnet, tmp_path):
    from intellect.agents.adversary.relay import MaliciousRelay
    from intellect.agents.models import tiny_model_dir

    swarm, devnet = sec_swarm, big_devnet
    p = devnet.protocol(0)
    pool_id = p.deployment.default_pool_id
    attacker_p = devnet.protocol(6)
    attacker = MaliciousRelay(attacker_p, pool_id, tmp_path / "attacker").start()
    try:
        # -- the forgery: a poisoned copy of the model, its own manifest, "step 1", on IPFS and announced
        forged_cid = attacker.forge(tiny_model_dir(), step=1, model_name="tiny")
        assert _digests(attacker.forged_dir(1)) != _digests(tiny_model_dir())

        # -- on-chain: the victim pool refuses a non-trainer's post (no checkpoint yet: the attacker races)
        assert _refused(lambda: attacker_p.publish_checkpoint(pool_id, 0, forged_cid)) == "TaskLedgerNotTrainer"
        assert p.latest_step(pool_id) is None
        # ... while on a pool of its own the attacker is the trainer: forged CheckpointPublished events exist
        own = attacker_p.create_pool(p.pool(pool_id).params.model_copy(update={"trainer": attacker_p.address}))
        attacker_p.publish_checkpoint(own, 0, forged_cid)
        attacker_p.publish_checkpoint(own, 1, forged_cid)
        assert attacker_p.checkpoint(own, 1).manifest_cid == forged_cid

        shards = {"trainer": {"max_steps": 2, "shard_size": SHARD_SIZE}}
        trainer = swarm.add("trainer", "trainer", 0, shards).start()
        swarm.add("relay", "relay", 5).start()
        validator = swarm.add("validator", "validator", 4).start()
        worker = swarm.add("worker", "worker", 1, {"worker": {"max_tasks": 2}}).start()

        swarm.wait(lambda: p.latest_step(pool_id) == 0, 600, "the trainer's step 0", 1)
        # the plausible next step, posted by the attacker before the trainer: refused
        assert _refused(lambda: attacker_p.publish_checkpoint(pool_id, 1, forged_cid)) == "TaskLedgerNotTrainer"

        swarm.wait(lambda: worker.status()["submitted"] >= 2, 900, "the worker's two submissions", 2)
        swarm.wait(lambda: any(f["step"] >= 1 for f in worker.status()["checkpoint_fetches"]), 900,
                   "the worker fetching the trainer's step 1", 2)
        sent = {s["task_id"] for s in worker.status()["submissions"] if s["status"] == "sent"}
        swarm.wait(lambda: sent <= {v["submission_id"] for v in validator.status()["verdicts"]}, 600,
                   "the validator's verdicts on the worker's work", 2)

        st = worker.status()
        vs = {v["submission_id"]: v for v in validator.status()["verdicts"]}
        stats = attacker.stats.snapshot()
        print("attacker:", stats, "worker fetches:", st["checkpoint_fetches"])

        # 1. nobody asked for the forged manifest: not on IPFS, not from the relay (manifest or shards)
        assert stats["forged_ipfs_requests"] == 0, stats
        assert stats["forged_manifest_requests"] == 0 and stats["forged_shard_requests"] == 0, stats
        # the chain holds only the trainer's manifests for the pool
        onchain = {s: p.checkpoint(pool_id, s).manifest_cid for s in range(p.latest_step(pool_id) + 1)}
        assert forged_cid not in onchain.values()
        posted = [(int(e.args["poolId"]), e.args["manifestCid"]) for e in p.get_events(["CheckpointPublished"])]
        assert (own, forged_cid) in posted  # the forged manifest is on-chain, in the attacker's own pool
        assert all(cid != forged_cid for pid, cid in posted if pid == pool_id)

        # 2. the worker holds the trainer's checkpoints byte for byte, fetched by the on-chain CIDs
        for f in st["checkpoint_fetches"]:
            assert f["manifest_cid"] == onchain[f["step"]], f
        compared = 0
        for step in st["local_checkpoints"]:
            mine = _digests(worker.data_dir / "checkpoints" / f"step-{step}")
            theirs = trainer.data_dir / "checkpoints" / f"step-{step}"
            if theirs.is_dir():
                assert mine == _digests(theirs), f"step {step} differs from the trainer's"
                compared += 1
            assert mine != _digests(attacker.forged_dir(1))
        assert compared >= 1
        assert st["policy_step"] is not None and st["policy_step"] in onchain

        # 3. tampered shards: served, dropped by sha256, fetched from another source, the relay benched
        assert stats["tampered_shards"] >= 1, stats
        assert st["counters"]["corrupt_shards_dropped"] >= 1, st["counters"]
        for f in st["checkpoint_fetches"]:
            assert attacker.url not in f["per_source"], f"verified shards came from the attacker: {f}"
            assert sum(f["per_source"].values()) == f["shards"]
            # benched after its first bad shard: at most the shards already in flight went to it
            assert f["corrupt_dropped"] <= FETCH_THREADS, f
        assert f"source {attacker.url} served a corrupt shard: marked down" in worker.log_text()

        # 4. the worker kept working on the trainer's checkpoints: its work was accepted
        for tid in sent:
            assert vs[tid]["status"] == "accepted", vs[tid]
        codes = {name: a.stop(timeout=120) for name, a in swarm.agents.items()}  # a loaded machine: slow exits
        assert codes == dict.fromkeys(swarm.agents, 0), codes
    finally:
        attacker.stop()
