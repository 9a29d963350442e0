"""RPC requests per pass of three chain readers, before and after they became incremental (issues 21/22: events,
not rescans), on one anvil with the deployed contracts.

    .venv/bin/python bench/agents/rpc_per_pass.py --validators 24 --claims 24 --blocks 12000

- `ValidatorHistory.at(b)` for a new claim block b (the Assigner's read): before, two eth_getLogs of the new
  blocks plus one `validatorWeightAt` eth_call per validator ever registered; after, one eth_getLogs.
- the worker's `free_expired_leases` (its restart path, and after every TaskLedgerTooManyLeases): before,
  TaskClaimed from the deployment block (one eth_getLogs per 10,000 blocks) and one task read per claim ever made;
  after, the blocks since the last pass and a read per open claim whose lease ran out.
- `Protocol.claim_attester_rewards`: before, AttestationRecorded from the deployment block and one eth_call per
  record ever made (two per unsettled one); after, the blocks since the last call and one eth_call per due record.

The "before" readers are the previous code's algorithms, inlined here (same Protocol calls). `--blocks` empty
blocks are mined before and after the history so the chain is longer than one eth_getLogs chunk.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from web3.middleware import Web3Middleware

from intellect.sdk import ContractRevert, Role, TaskStatus, ValidatorHistory, dev_account, devnet

TOKEN = 10**18


@contextmanager
def counting(w3: Any) -> Iterator[Counter[str]]:
    seen: Counter[str] = Counter()

    class _Count(Web3Middleware):
        def wrap_make_request(self, make_request: Callable[..., Any]) -> Callable[..., Any]:
            def counted(method: str, params: Any) -> Any:
                seen[method] += 1
                if method == "eth_getLogs":  # blocks the request covers
                    lo, hi = (int(params[0][k], 16) if isinstance(params[0][k], str) else int(params[0][k])
                              for k in ("fromBlock", "toBlock"))
                    seen["log_blocks"] += hi - lo + 1
                return make_request(method, params)

            return counted

    w3.middleware_onion.add(_Count, name="bench-counter")
    try:
        yield seen
    finally:
        w3.middleware_onion.remove("bench-counter")


def old_history_at(p: Any, block: int, scanned: list[Any]) -> dict[str, str]:
    """ValidatorHistory.at before (98bd84d): registrations and minimums scanned incrementally, then one
    validatorWeightAt per candidate."""
    start = scanned[0] + 1
    if block >= start:
        scanned[1] += p.get_events(["NodeRegistered"], from_block=start, to_block=block, filters={"role": int(Role.VALIDATOR)})
        scanned[2] += p.get_events(["MinStakeSet"], from_block=start, to_block=block, filters={"role": int(Role.VALIDATOR)})
        scanned[0] = block
    floor = next((int(e.args["amount"]) for e in reversed(scanned[2]) if e.block_number <= block), 0)
    cands = {str(e.args["node"]).lower(): str(e.args["owner"]).lower() for e in scanned[1] if e.block_number <= block}
    return {n: o for n, o in cands.items() if (w := p.validator_weight_at(n, block)) > 0 and w >= floor}


def old_free_expired_leases(p: Any, pool_id: int) -> int:
    now, freed = p.chain_time(), 0
    for e in p.get_events(["TaskClaimed"], filters={"node": p.address, "poolId": pool_id}):
        t = p.task(int(e.args["taskId"]))
        if t.status == TaskStatus.CLAIMED and t.lease_expiry < now:
            p.expire_lease(t.task_id)
            freed += 1
    return freed


def old_claim_attester_rewards(p: Any) -> int:
    total = 0
    for rec in p.attester_records(p.address):
        try:
            p.call("AttesterBook", "claimAttesterReward", rec.submission_id, p.address)
        except ContractRevert:
            continue
        total += p.claim_attester_reward(rec.submission_id, p.address)
    return total


def mine(net: Any, blocks: int) -> None:
    for _ in range(0, blocks, 200):  # anvil_mine of many blocks at once outlasts the RPC client's deadline
        net.anvil.rpc("anvil_mine", [hex(min(200, blocks))])
        blocks -= 200


def staked(net: Any, i: int, role: Role) -> Any:
    net.anvil.rpc("anvil_setBalance", [dev_account(i).address, hex(100 * TOKEN)])
    p = net.protocol(i)
    p.drip()
    p.register_node(role, gpu_model="cpu")
    p.stake(p.address, 100 * TOKEN)
    return p


KEEP = ("eth_getLogs", "log_blocks", "eth_call", "eth_sendRawTransaction")


def row(what: str, before: Counter[str], after: Counter[str]) -> dict[str, Any]:
    return {"what": what, "before": {k: before[k] for k in KEEP}, "after": {k: after[k] for k in KEEP},
            "requests": [sum(before.values()) - before["log_blocks"], sum(after.values()) - after["log_blocks"]]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--validators", type=int, default=24)
    ap.add_argument("--claims", type=int, default=24)
    ap.add_argument("--blocks", type=int, default=12_000)
    a = ap.parse_args()
    net = devnet.start(Path(tempfile.mkdtemp(prefix="bench-rpc-per-pass-")))
    try:
        trainer = net.protocol(0)
        pool_id = net.deployment.default_pool_id or 1
        trainer.set_attester_reward(pool_id, TOKEN)
        trainer.fund_attester_rewards(pool_id, (a.claims + 3) * TOKEN)
        trainer.publish_checkpoint(pool_id, 1, "bafkreimanifestbenchrpc")
        mine(net, a.blocks // 2)
        validators = [staked(net, 100 + i, Role.VALIDATOR) for i in range(a.validators)]
        w = staked(net, 1, Role.WORKER)
        v = validators[0]
        for i in range(a.claims):  # claim and submit in turn (the pool caps open leases)
            c = w.claim_task(pool_id)
            w.submit_work(c.task_id, f"bafkreibenchrpc{i}", bytes([i % 250 + 1]) * 32, 2, 1)
            trainer.record_attestations(c.task_id, [v.address])
        mine(net, a.blocks - a.blocks // 2)
        net.increase_time(trainer.pool(pool_id).params.window_length + 1)
        rows = []

        # 1. the validator set at a new claim block (after both readers are warm)
        reader = net.protocol(5)
        new, old_state = ValidatorHistory(reader), [int(net.deployment.block) - 1, [], []]
        head = reader.block_number()
        assert new.at(head - 1) == old_history_at(reader, head - 1, old_state)
        trainer.publish_checkpoint(pool_id, 2, "bafkreimanifestbenchrpc2")  # a new block
        b = reader.block_number() - 1
        with counting(reader.w3) as before:
            old = old_history_at(reader, b, old_state)
        with counting(reader.w3) as after:
            assert new.at(b) == old
        rows.append(row(f"ValidatorHistory.at(new block), {a.validators} validators", before, after))

        # 2. the worker's free_expired_leases, steady state (a second pass)
        from intellect.agents.config import load_config
        from intellect.agents.roles.leases import free_expired_leases
        from intellect.agents.roles.worker import Worker

        tmp = Path(tempfile.mkdtemp(prefix="bench-rpc-worker-"))
        cfg = load_config(None, env={}, overrides={
            "role": "worker", "data_dir": str(tmp / "w"), "chain.rpc_url": net.url,
            "chain.deployment_file": str(net.deployment_file), "chain.dev_account": "1"})
        agent = Worker(cfg)
        agent.connect()
        free_expired_leases(agent.protocol, agent.state, agent.pool_id)  # first pass: imports the history once
        trainer.publish_checkpoint(pool_id, 3, "bafkreimanifestbenchrpc3")
        with counting(w.w3) as before:
            old_free_expired_leases(w, pool_id)
        with counting(agent.protocol.w3) as after:
            free_expired_leases(agent.protocol, agent.state, agent.pool_id)
        rows.append(row(f"worker free_expired_leases pass, {a.claims} past claims, 0 open", before, after))
        agent.state.close()

        # 3. attester claims, steady state: everything settled but one due record
        v.claim_attester_rewards()  # every window closed: pays every record, and nothing is left unsettled
        c = w.claim_task(pool_id)
        w.submit_work(c.task_id, "bafkreibenchrpclast", b"\x77" * 32, 2, 3)
        trainer.record_attestations(c.task_id, [v.address])
        net.increase_time(trainer.pool(pool_id).params.window_length + 1)
        fresh = net.protocol(100)
        with counting(fresh.w3) as before:  # old: a full scan, one eth_call per record
            old_paid = old_claim_attester_rewards(fresh)
        c = w.claim_task(pool_id)
        w.submit_work(c.task_id, "bafkreibenchrpclast2", b"\x78" * 32, 2, 3)
        trainer.record_attestations(c.task_id, [v.address])
        net.increase_time(trainer.pool(pool_id).params.window_length + 1)
        with counting(v.w3) as after:
            new_paid = v.claim_attester_rewards()
        assert old_paid == new_paid == TOKEN, (old_paid, new_paid)
        rows.append(row(f"claim_attester_rewards pass, {a.claims + 2} past records, 1 due", before, after))
        print(json.dumps({"blocks": reader.block_number() - int(net.deployment.block), "rows": rows}, indent=1))
    finally:
        net.stop()


if __name__ == "__main__":
    main()
