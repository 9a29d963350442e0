"""`GET /attestations` before and after it cost its page (issue 32), on a real StateStore over real HTTP.

    .venv/bin/python bench/security/attestation_pages.py --records 1000 30000 --clients 4 --seconds 5

For each history size, `--records` attestations (the validator's record shape: a signed attestation's JSON) are
put in a fresh state file, and one AgentServer serves both paths side by side:

- old: what the endpoint did before (`attestation_page` over `state.records("attestation")`: every record read
  under the state lock and decoded, then sorted, per request);
- new: the validator's endpoint (`_runtime.attestations_reply`, which `Validator`'s `GET /attestations` route
  calls, → `StateStore.page`: an index seek on the read connection, the page decoded).

Measured per path, in the same run: the latency of one request alone (`limit=1` and `limit=256`, from the middle
of the history), and the latency of the validator's own state operations (a put, a record read and a cursor
write, as its loop does) while `--clients` clients ask for pages back to back, against the same operations with
no client. Prints a table and the ratios old / new; `--json` writes them too. No rate limit is set here (the
cost per request is what is measured; the limit bounds the number of requests separately).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from intellect.agents.roles._runtime import attestation_page, attestations_reply
from intellect.agents.roles._server import AgentServer, Metrics
from intellect.agents.roles._state import StateStore

SIG = "0x" + "ab" * 65


def fill(state: StateStore, n: int) -> None:
    with state.transaction():
        for sid in range(n):
            state.put("attestation", sid, "posted", {"attestation": {
                "schema": "intellect.attestation/v1", "chain_id": 31337,
                "ledger": "0x5FbDB2315678afecb367f032d93F642f64180aa3", "submission_id": sid,
                "rollouts_cid": f"bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy{sid}",
                "proofs_hash": "0x" + f"{sid:064x}", "policy_step": sid // 100, "accepted": True,
                "validator": "0x70997970C51812dc3A010C7d01be5cbc161dc79C", "signature": SIG}})


def old_route(state: StateStore):
    def handler(query: dict[str, list[str]], _body: Any) -> Any:  # the endpoint as it was (e9e6ad5)
        since = float(query.get("since", ["0"])[0])
        after = int(query.get("after", ["-1"])[0])
        limit = int(query.get("limit", ["256"])[0])
        page = attestation_page(state.records("attestation"), since, after, limit)
        return [r["data"]["attestation"] | {"_updated_at": r["updated_at"], "_id": int(r["id"])} for r in page]
    return handler


def get(url: str) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as resp:
        resp.read()
    return time.perf_counter() - t0


def state_ops(state: StateStore, seconds: float, stop: threading.Event) -> list[float]:
    """The validator loop's kind of state work, timed per round (put + record + set)."""
    lat: list[float] = []
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end and not stop.is_set():
        t0 = time.perf_counter()
        state.put("submission", 10_000_000 + i, "queued", {"node": "0x00", "attempts": 0})
        state.record("submission", 10_000_000 + i)
        state.set("cursor:bench", i)
        lat.append(time.perf_counter() - t0)
        i += 1
        time.sleep(0.005)
    return lat


def under_load(state: StateStore, url: str, clients: int, seconds: float) -> tuple[list[float], list[float]]:
    """State-op latencies while `clients` threads fetch `url` back to back; and the requests' latencies."""
    stop = threading.Event()
    req: list[float] = []

    def client() -> None:
        while not stop.is_set():
            req.append(get(url))

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    ops = state_ops(state, seconds, stop)
    stop.set()
    for t in threads:
        t.join(120)
    return ops, req


def ms(xs: list[float], q: float = 0.5) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return 1000 * xs[min(len(xs) - 1, int(q * len(xs)))]


def bench(n: int, clients: int, seconds: float, repeats: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        state = StateStore(Path(tmp) / "state.sqlite")
        t0 = time.perf_counter()
        fill(state, n)
        fill_s = time.perf_counter() - t0
        srv = AgentServer(lambda: {}, Metrics())
        srv.route("GET", "/old", old_route(state))
        srv.route("GET", "/attestations", lambda query, _body: attestations_reply(state, query))  # the validator's
        mid = state.page("attestation", 0.0, n // 2 - 1, 1)  # ids are put in time order: a cursor mid-history
        cursor = f"since={mid[0]['updated_at']!r}&after={mid[0]['id']}" if mid else ""
        out: dict[str, Any] = {"records": n, "fill_s": round(fill_s, 2)}
        with srv:
            for path in ("old", "attestations"):
                assert json.loads(urllib.request.urlopen(f"{srv.url}/{path}?{cursor}&limit=3").read())
            stop = threading.Event()
            out["state_op_idle_ms"] = ms(state_ops(state, seconds, stop))
            for name, path in (("old", "old"), ("new", "attestations")):
                for limit in (1, 256):
                    lat = [get(f"{srv.url}/{path}?{cursor}&limit={limit}") for _ in range(repeats)]
                    out[f"{name}_request_limit{limit}_ms"] = ms(lat)
                ops, req = under_load(state, f"{srv.url}/{path}?{cursor}&limit=256", clients, seconds)
                out[f"{name}_state_op_median_ms"] = ms(ops)
                out[f"{name}_state_op_p95_ms"] = ms(ops, 0.95)
                out[f"{name}_loaded_request_ms"] = ms(req)
                out[f"{name}_requests_per_s"] = round(len(req) / seconds, 1)
        state.close()
    for key in ("request_limit1_ms", "request_limit256_ms", "state_op_median_ms", "state_op_p95_ms"):
        out[f"ratio_{key}"] = round(out[f"old_{key}"] / out[f"new_{key}"], 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, nargs="+", default=[1000, 30000])
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=5.0, help="load phase per path")
    ap.add_argument("--repeats", type=int, default=20, help="lone requests per path and limit")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = [bench(n, args.clients, args.seconds, args.repeats) for n in args.records]
    cols = ["records", "state_op_idle_ms", "old_request_limit1_ms", "new_request_limit1_ms",
            "old_request_limit256_ms", "new_request_limit256_ms", "old_state_op_median_ms", "new_state_op_median_ms",
            "old_state_op_p95_ms", "new_state_op_p95_ms", "old_requests_per_s", "new_requests_per_s",
            "ratio_request_limit1_ms", "ratio_state_op_median_ms"]
    print("| " + " | ".join(cols) + " |")
    print("|" + " --- |" * len(cols))
    for r in rows:
        print("| " + " | ".join(f"{r[c]:.1f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
