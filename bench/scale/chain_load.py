"""The chain and the validators under load (issue 19, scale (b)): W simulated workers and V validators
against anvil, replaying recorded rollout files.

    .venv/bin/python bench/scale/chain_load.py                       # 200 workers x 3 rounds, 10 validators
    .venv/bin/python bench/scale/chain_load.py --workers 20 --rounds 2 --validators 3

Each simulated worker is a real staked worker node with its own key and its own client (`Protocol`): per
round it claims a task and submits the CID of one of the recorded rollout files (bench/scale/recorded/, made
by the tiny-model swarm of tests/net) held in a store the pool names (an embedded IPFS store behind its
gateway, as the trainer's `POST /store` keeps them). Each validator is a real staked validator node that
follows `WorkSubmitted` from the chain, fetches every submission's file by CID from that store over HTTP,
checks the CID of the bytes and parses and checks the rollout file (`RolloutFile.from_bytes`); it does not
run the model's prefill (the TOPLOC check: bench/agents/verify_vs_generate.py measures that, 0.108x the
generation cost). Reported: submissions/s accepted by the chain, failed transactions (target: none lost),
and the validators' backlog (submitted but not yet checked by every validator) sampled every second, and the
JSON-RPC requests each node's client sent per minute of the run (median and max over the workers and over the
validators, with the methods' shares).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from intellect.sdk import Role
from intellect.sdk import devnet as dn
from intellect.sdk.http import fetch
from intellect.sdk.ipfs import EmbeddedIpfs, IpfsGateway, compute_cid
from intellect.verifier.rollouts import RolloutFile

RECORDED = Path(__file__).with_name("recorded")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=200)
    ap.add_argument("--validators", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--setup-threads", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=480.0)
    args = ap.parse_args()
    W, V = args.workers, args.validators
    work = Path(tempfile.mkdtemp(prefix="ipn-chainload-"))
    anvil = dn.Anvil(extra_args=["--accounts", str(W + V + 2)]).start()
    gw = None
    try:
        dep = dn.deploy(anvil.url, work / "deployments")
        net = dn.Devnet(anvil, dep, work / "deployments", False)
        trainer = net.protocol(0)
        pool = int(dep.default_pool_id or 1)
        store = EmbeddedIpfs(work / "store")
        files = [p.read_bytes() for p in sorted(RECORDED.glob("*.rollouts"))]
        cids = [store.add(b) for b in files]
        units = [sum(len(r.completion_ids) for r in RolloutFile.from_bytes(b).rows) for b in files]
        gw = IpfsGateway(store).start()
        trainer.publish_checkpoint(pool, 0, cids[0])

        t_setup = time.monotonic()

        def join(i: int, role: Role) -> object:
            p = net.protocol(i)
            p.register_node(role, gpu_model="cpu", endpoint="")
            p.drip()
            p.stake(p.address, p.min_stake(role))
            return p

        with ThreadPoolExecutor(args.setup_threads) as ex:
            workers = list(ex.map(lambda i: join(i, Role.WORKER), range(2, 2 + W)))
        # validators one at a time: concurrent validator stakes on anvil revert in gas estimation with
        # CheckpointUnorderedInsertion (StakeManager's weight trace is keyed by block number; see the report)
        validators = [join(i, Role.VALIDATOR) for i in range(2 + W, 2 + W + V)]
        setup_s = time.monotonic() - t_setup
        start_block = trainer.w3.eth.block_number + 1 if hasattr(trainer, "w3") else 0

        submitted: dict[int, float] = {}  # submission id -> time accepted on-chain
        failures: list[str] = []
        lock = threading.Lock()
        checked: list[dict[int, float]] = [{} for _ in range(V)]
        done = threading.Event()
        fetch_retries = [0]  # validator fetches cut short or not the CID's bytes, tried again

        def worker(k: int) -> None:
            p = workers[k]
            for r in range(args.rounds):
                j = (k + r) % len(cids)
                try:
                    claim = p.claim_task(pool)  # type: ignore[attr-defined]
                    sub = p.submit_work(claim.task_id, cids[j], bytes.fromhex(f"{k:08x}{r:08x}" * 4), units[j], 0)  # type: ignore[attr-defined]
                    with lock:
                        submitted[sub.submission_id] = time.monotonic()
                except Exception as exc:  # counted, not hidden: the target is none
                    with lock:
                        failures.append(f"worker {k} round {r}: {type(exc).__name__}: {exc}"[:300])

        def validator(v: int) -> None:
            p = validators[v]
            seen: set[int] = set()
            frm = start_block
            while not done.is_set() or len(checked[v]) < len(submitted):
                subs = p.submissions(pool_id=pool, from_block=frm)  # type: ignore[attr-defined]
                for s in subs:
                    if s.submission_id in seen:
                        continue
                    try:  # a fetch cut short (the one gateway under load) is tried again next pass, as an agent does
                        reply = fetch("GET", f"{gw.url}/ipfs/{s.rollouts_cid}", deadline=10.0, max_bytes=1 << 20)
                    except Exception:  # PeerHttpError and friends: counted, retried
                        with lock:
                            fetch_retries[0] += 1
                        continue
                    if reply.status != 200 or compute_cid(reply.body) != s.rollouts_cid:
                        with lock:
                            fetch_retries[0] += 1
                        continue
                    RolloutFile.from_bytes(reply.body)
                    seen.add(s.submission_id)
                    checked[v][s.submission_id] = time.monotonic()
                if subs and all(s.submission_id in seen for s in subs):  # rescan from the first one not yet checked
                    frm = max(frm, max(s.block_number or 0 for s in subs))
                time.sleep(0.5)
                if time.monotonic() - t0 > args.timeout:
                    return

        # JSON-RPC requests each node's client puts on the wire during the load (below web3's request cache: its
        # HTTP session's POSTs, one JSON-RPC request each; web3's private session manager, a benchmark's liberty)
        rpc_counts: dict[int, dict[str, int]] = {}

        def count_rpc(node: int, p: object) -> None:
            counts = rpc_counts.setdefault(node, {})
            session = p.w3.provider._request_session_manager  # type: ignore[attr-defined]
            post = session.make_post_request

            def counted(uri, data, **kwargs):  # type: ignore[no-untyped-def]
                try:
                    method = str(json.loads(data)["method"])
                except (ValueError, KeyError, TypeError):
                    method = "?"
                counts[method] = counts.get(method, 0) + 1
                return post(uri, data, **kwargs)

            session.make_post_request = counted

        for i, p in enumerate([*workers, *validators]):
            count_rpc(i, p)

        t0 = time.monotonic()
        backlog: list[tuple[float, int]] = []
        vthreads = [threading.Thread(target=validator, args=(v,), daemon=True) for v in range(V)]
        for t in vthreads:
            t.start()
        wthreads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(W)]
        for t in wthreads:
            t.start()
        while any(t.is_alive() for t in wthreads) or any(t.is_alive() for t in vthreads):
            with lock:
                n = len(submitted)
            backlog.append((round(time.monotonic() - t0, 1), n - min(len(c) for c in checked)))
            if not any(t.is_alive() for t in wthreads):
                done.set()
            if time.monotonic() - t0 > args.timeout + 30:
                break
            time.sleep(1.0)
        elapsed_min = (time.monotonic() - t0) / 60
        load_end = max(submitted.values()) - t0 if submitted else 0.0

        def per_minute(nodes: range) -> dict[str, float]:
            totals = sorted(sum(rpc_counts.get(i, {}).values()) / elapsed_min for i in nodes)
            methods: dict[str, int] = {}
            for i in nodes:
                for m, c in rpc_counts.get(i, {}).items():
                    methods[m] = methods.get(m, 0) + c
            top = sorted(methods.items(), key=lambda kv: -kv[1])[:4]
            return {"median": round(statistics.median(totals), 1), "max": round(totals[-1], 1),
                    "top_methods_share": {m: round(c / max(sum(methods.values()), 1), 2) for m, c in top}}

        lat = [max(c.get(sid, float("nan")) for c in checked) - ts for sid, ts in submitted.items()]
        lat = [x for x in lat if x == x]
        print(json.dumps({
            "workers": W, "validators": V, "rounds": args.rounds, "setup_seconds": round(setup_s, 1),
            "submissions_accepted": len(submitted), "submissions_expected": W * args.rounds,
            "failed_transactions": len(failures), "failures_first": failures[:5],
            "load_seconds": round(load_end, 1),
            "submissions_per_second": round(len(submitted) / load_end, 2) if load_end else None,
            "checked_by_every_validator": min(len(c) for c in checked),
            "check_latency_s_median": round(statistics.median(lat), 2) if lat else None,
            "check_latency_s_max": round(max(lat), 2) if lat else None,
            "backlog_peak": max((b for _, b in backlog), default=0),
            "backlog_every_5s": " ".join(f"{t:g}s:{b}" for t, b in backlog[::5]),
            "validator_fetch_retries": fetch_retries[0],
            "run_minutes": round(elapsed_min, 2),
            "rpc_per_worker_per_minute": per_minute(range(W)),
            "rpc_per_validator_per_minute": per_minute(range(W, W + V)),
        }, indent=1))
        if failures or len(submitted) != W * args.rounds:
            sys.exit(1)
    finally:
        if gw is not None:
            gw.stop()
        anvil.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
