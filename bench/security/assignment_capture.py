"""Assignment capture by cheap keys (issue 33), old rule against new, and what the trainer's rule lets through.

Part 1, capture: 8 honest validators of 1,000 INTL each against an attacker's 2,400 INTL (23.1 % of the stake)
split over `n` keys, each under its own fresh owner; the attacker's worker submits; every submission is
assigned k = 4 slots (quorum 3) from `--seeds` claim seeds. Capture = the share of the attacker's submissions
whose slots it holds at least `quorum` of. Three rules:

- old: keys ranked by keccak(seed ‖ address), one key per owner, the k best (main before issue 33);
- wrs: weighted rendezvous without replacement (score -ln(u)/stake, the k lowest distinct keys);
- new: `intellect.verifier.assignment.assigned_validators` (k stake-weighted draws with replacement, slots).

The stake-proportional figure is P(Binomial(k, s) ≥ quorum). Printed per split: capture per rule and the ratio
old / new.

Part 2, the trainer (`intellect.verifier.assignment.trainable` against the old rule "≥ quorum distinct assigned
operators attested, train at once"): the attacker's keys attest its junk at once and withhold their attestation
from honest work; each honest validator is online with probability `--online`, and an online one attests honest
work, or challenges junk, after a delay uniform in [`--lat-min`, `--lat-max`] s; unassigned honest validators are
assumed silent (an upper bound on what gets through). Printed: junk trained (share of the attacker's submissions),
and for honest submissions the mean and 95th-percentile time from submission to trainable, and the share never
trainable (censored by withheld attestations).

Usage:
    .venv/bin/python bench/security/assignment_capture.py [--seeds 10000] [--wait 120] [--k 4 --quorum 3]
        [--splits 1,2,4,8,24,100] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

from eth_utils import keccak

from intellect.verifier.assignment import assigned_validators, trainable

K, QUORUM = 4, 3
HONEST, HONEST_STAKE, ATTACK_STAKE = 8, 1000, 2400
WORKER = "0x" + "ab" * 20


def _addr(tag: str, i: int) -> str:
    return "0x" + keccak(f"{tag}:{i}".encode())[:20].hex()


def old_assigned_validators(seed: bytes, owners: Mapping[str, str], k: int, exclude: Sequence[str] = ()) -> list[str]:
    """The rule before issue 33 (main at 026e503): keys ranked by keccak(seed ‖ address), one per owner."""
    out_of = {a.lower() for a in exclude}
    ranked = sorted(owners, key=lambda v: keccak(seed + bytes.fromhex(v[2:])))
    picked: list[str] = []
    seen: set[str] = set()
    for v in ranked:
        if len(picked) >= k:
            break
        op = owners[v]
        if v in out_of or op in out_of or op in seen:
            continue
        seen.add(op)
        picked.append(v)
    return picked


def wrs_assigned_validators(seed: bytes, stakes: Mapping[str, int], k: int) -> list[str]:
    """Weighted rendezvous hashing without replacement: the k lowest -ln(u)/stake, u from keccak(seed ‖ address)."""
    def score(v: str) -> float:
        u = (int.from_bytes(keccak(seed + bytes.fromhex(v[2:]))[:8], "big") + 0.5) / 2**64
        return -math.log(u) / stakes[v]
    return sorted(stakes, key=score)[:k]


def network(keys: int) -> tuple[dict[str, int], dict[str, str], set[str]]:
    """(stakes, owners, attacker keys): 8 honest validators of 1,000 and the attacker's 2,400 over `keys` keys
    (integer split, the remainder on the first keys), each key under a fresh owner."""
    stakes = {_addr("honest", i): HONEST_STAKE for i in range(HONEST)}
    bad = [_addr(f"attacker{keys}", i) for i in range(keys)]  # 0 keys: no attacker, honest validators only
    for i, v in enumerate(bad):
        stakes[v] = ATTACK_STAKE // keys + (1 if i < ATTACK_STAKE % keys else 0)
    owners = {v: _addr("owner", i) for i, v in enumerate(stakes)}
    return stakes, owners, set(bad)


def binomial_tail(k: int, p: float, at_least: int) -> float:
    return sum(math.comb(k, j) * p**j * (1 - p) ** (k - j) for j in range(at_least, k + 1))


def capture(keys: int, seeds: int) -> dict[str, float]:
    stakes, owners, bad = network(keys)
    got = {"old": 0, "wrs": 0, "new": 0}
    for i in range(seeds):
        seed = keccak(b"capture" + i.to_bytes(8, "big"))
        old = old_assigned_validators(seed, owners, K, exclude=(WORKER,))
        got["old"] += sum(v in bad for v in old) >= QUORUM
        got["wrs"] += sum(v in bad for v in wrs_assigned_validators(seed, stakes, K)) >= QUORUM
        got["new"] += sum(v in bad for v in assigned_validators(seed, stakes, K, exclude=(WORKER,))) >= QUORUM
    return {r: n / seeds for r, n in got.items()}


def trainer_sim(keys: int, seeds: int, wait_s: float, online: float, lat: tuple[float, float],
                rng: random.Random) -> dict[str, Any]:
    """Junk let through and honest delay, old trainer rule (on the old assignment) against the new (module doc)."""
    stakes, owners, bad = network(keys)
    honest = [v for v in stakes if v not in bad]
    junk = {"old": 0, "new": 0}
    delays: dict[str, list[float]] = {"old": [], "new": []}
    never = {"old": 0, "new": 0}
    waited = 0
    for i in range(seeds):
        seed = keccak(b"trainer" + i.to_bytes(8, "big"))
        up = {v: rng.random() < online for v in honest}
        when = {v: rng.uniform(*lat) for v in honest}  # this submission's check time per honest validator
        old = old_assigned_validators(seed, owners, K, exclude=(WORKER,))
        new = assigned_validators(seed, stakes, K, exclude=(WORKER,))
        # junk: the attacker's keys attest at t = 0; an online assigned honest validator challenges at `when`
        junk["old"] += sum(v in bad for v in old) >= QUORUM  # trained at once, before anyone can challenge
        challenged_at = min((when[v] for v in set(new) if v not in bad and up[v]), default=math.inf)
        at_once = trainable(new, bad, quorum=QUORUM, waited_s=0.0, wait_s=wait_s)
        later = trainable(new, bad, quorum=QUORUM, waited_s=wait_s, wait_s=wait_s) and challenged_at > wait_s
        junk["new"] += at_once or later
        # honest work: the attacker's keys withhold; online honest validators attest at `when`
        for rule, slots in (("old", old), ("new", new)):
            times = sorted(when[v] if (v not in bad and up[v]) else math.inf for v in slots)
            if rule == "old":
                t = times[QUORUM - 1]
            else:
                t = min(times[-1], max(times[QUORUM - 1], wait_s))
                waited += times[-1] > t
            if math.isinf(t):
                never[rule] += 1
            else:
                delays[rule].append(t)

    def pct(xs: list[float], q: float) -> float:
        return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] if xs else math.nan

    return {"junk_old": junk["old"] / seeds, "junk_new": junk["new"] / seeds,
            **{f"{s}_{r}": f(delays[r]) for r in ("old", "new")
               for s, f in (("mean_s", lambda x: statistics.fmean(x) if x else math.nan),
                            ("p95_s", lambda x: pct(x, 0.95)))},
            "never_old": never["old"] / seeds, "never_new": never["new"] / seeds,
            "waited_out_new": waited / seeds}


def main() -> None:
    global K, QUORUM
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=10000)
    ap.add_argument("--splits", default="1,2,4,8,24,100")
    ap.add_argument("--wait", type=float, default=120.0, help="the trainer's wait_s (trainer.attestation_wait)")
    ap.add_argument("--online", type=float, default=0.9)
    ap.add_argument("--lat-min", type=float, default=5.0)
    ap.add_argument("--lat-max", type=float, default=60.0)
    ap.add_argument("--k", type=int, default=K, help="slots per submission (pool rule assigned_validators)")
    ap.add_argument("--quorum", type=int, default=QUORUM)
    ap.add_argument("--json")
    a = ap.parse_args()
    K, QUORUM = a.k, a.quorum
    s = ATTACK_STAKE / (ATTACK_STAKE + HONEST * HONEST_STAKE)
    ref = binomial_tail(K, s, QUORUM)
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    print(f"attacker stake share s = {s:.4f}; k = {K}, quorum = {QUORUM}; stake-proportional capture "
          f"P(Bin(k, s) >= quorum) = {ref:.4f}; {a.seeds} seeds per split")
    print(f"{'keys':>5} {'old':>7} {'wrs':>7} {'new':>7} {'old/new':>8} {'sigma':>7}")
    sigma = math.sqrt(ref * (1 - ref) / a.seeds)
    for keys in (int(x) for x in a.splits.split(",") if int(x) > 0):
        c = capture(keys, a.seeds)
        rows.append({"keys": keys, **c})
        print(f"{keys:>5} {c['old']:>7.4f} {c['wrs']:>7.4f} {c['new']:>7.4f} "
              f"{c['old'] / c['new'] if c['new'] else math.inf:>7.1f}x {sigma:>7.4f}")
    rng = random.Random(1)
    sims: list[dict[str, Any]] = []
    print(f"\ntrainer: wait {a.wait:.0f} s, honest validators online {a.online:.0%}, latency "
          f"U[{a.lat_min:.0f}, {a.lat_max:.0f}] s")
    print(f"{'keys':>5} {'junk old':>9} {'junk new':>9} {'mean s old':>10} {'mean s new':>10} {'p95 old':>8} "
          f"{'p95 new':>8} {'never old':>9} {'never new':>9} {'waited':>7}")
    for keys in sorted({0, *(int(x) for x in a.splits.split(",") if int(x) in (1, 24, 100))}):
        r = trainer_sim(keys, a.seeds // 2, a.wait, a.online, (a.lat_min, a.lat_max), rng)
        sims.append({"keys": keys, **r})
        print(f"{keys:>5} {r['junk_old']:>9.4f} {r['junk_new']:>9.4f} {r['mean_s_old']:>10.1f} "
              f"{r['mean_s_new']:>10.1f} {r['p95_s_old']:>8.1f} {r['p95_s_new']:>8.1f} {r['never_old']:>9.4f} "
              f"{r['never_new']:>9.4f} {r['waited_out_new']:>7.4f}")
    print(f"\n{time.perf_counter() - t0:.1f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"share": s, "reference": ref, "capture": rows, "trainer": sims, "args": vars(a)}, f, indent=1)


if __name__ == "__main__":
    main()
