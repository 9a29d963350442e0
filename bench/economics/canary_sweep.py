"""Canary rate sweep (issue 21): lazy vs honest vs idle validators at several canary rates, against the contracts.

Plays `simulate.py`'s game with honest workers only (so the canaries are the only bad work) and the validators
honest (two nodes), lazy and idle, once per canary rate (`every_n_steps`: one canary every n rounds, a round
being one trainer step) and per challenger (`validators`: the honest validators open the canaries' challenges
and collect the challenger's half of the canary worker's slash; `pool`: the pool's own validator key does, as
`trainer.canary.challenger_*`). Each run has a multiple of n rounds, so c (the canaries' share of submissions)
is exactly 1 / (n·S + 1) with S honest submissions per round.

Next to each measured profit per submission it prints the closed form (r attester reward, s attesterSlash,
k check cost, w worker slash, H = 2 honest validators, c measured):

    lazy   = (1 - c)·m·r - c·s                       (paid for its slots of good work, slashed for every canary)
    honest = (1 - c)·m·r - k [+ c·w / (2H)]          (paid for its slots of the good ones, checks all; + share)
    idle   = 0

with m = K / V the expected slots a validator holds per submission (issue 33: attesters are paid per assigned
slot; K = quorum + 1 = 2 slots drawn by stake among the V equally staked validators, the pool's challenger key
included): the measured figures equal the closed form in expectation, no longer to the digit (before slots,
m = 1: every attester was recorded once per submission, and they matched exactly)

so lazy earns less than honest above c* = k / s (since issue 33 for either challenger: the worker slash goes
wholly to the treasury, so the bracketed challenger share is 0; before, k / (s + w / (2H)) when validators challenged),
and loses outright above r / (r + s); honest beats idle while (1 - c)·r + c·w / (2H) > k.

Since `simulate.py`'s honest validator plays the agent's `validator.check: assigned` (it checks its slots and votes
every challenge: docs/economics.md, "Validators check their slots"), the honest closed form above is that of a
validator checking every submission (simulate.py's `volunteer`), and the measured honest row no longer follows it:
not re-derived (with validators challenging, a canary no honest node holds a slot of is challenged by nobody).

Usage:
    nice -n 10 .venv/bin/python bench/economics/canary_sweep.py [--every 0,10,9,6,5,4,1] [--min-rounds 30]
        [--challengers validators,pool] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import math
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import simulate  # noqa: E402  (this directory's simulation)

log = logging.getLogger("economics.canary_sweep")
HONEST_VALIDATORS = 2  # simulate.Sim plays two honest validator nodes


def predicted(c: float, r: float, s: float, k: float, w: float, challenger: str, m: float = 1.0) -> dict[str, float]:
    """The closed form per submission of the pool (see the module docstring); `m`: expected slots per validator."""
    share = 0.0  # issue 33: the worker slash goes wholly to the treasury, no challenger share (was c·w / (2H))
    return {"honest": (1 - c) * m * r - k + share, "lazy": (1 - c) * m * r - c * s, "idle": 0.0}


def break_even(r: float, s: float, k: float, w: float, challenger: str, m: float = 1.0) -> dict[str, float]:
    """c above which lazy < honest, lazy < 0; and below which honest > idle (1.0: always); r paid per slot, `m`
    expected slots per validator and submission."""
    r = m * r
    bonus = 0.0  # issue 33: no challenger share of the worker slash (was w / (2H) when validators challenge)
    # honest > idle  <=>  r - k + c·(bonus - r) > 0
    idle = 1.0 if bonus >= r and r > k else ((r - k) / (r - bonus) if r > bonus else (1.0 if r > k else 0.0))
    return {"lazy_below_honest": k / (s + bonus), "lazy_loses": r / (r + s), "honest_above_idle_until": idle}


def one(every: int, min_rounds: int, challenger: str, base: simulate.Params) -> dict:
    rounds = every * math.ceil(min_rounds / every) if every > 0 else min_rounds
    p = simulate.Params(**{**base.__dict__, "rounds": rounds, "canary_every": every, "canary_challenger": challenger,
                           "workers": "honest", "validators": "honest,lazy,idle"})
    sim = simulate.Sim(p)
    result = sim.run()
    s = sim.book.attesterSlash() / sim.TOKEN
    w = sim.ledger.pool(sim.pool)["params"]["slashAmount"] / sim.TOKEN
    c = simulate.canary_share(result)
    m = sim.k_slots / (len(sim.validators) + (sim.pool_challenger is not None))  # every validator stakes the same
    rows = {r["strategy"]: r for r in result["rows"] if r["role"] == "validator"}
    return {"every": every, "rounds": rounds, "challenger": challenger, "c": c,
            "canaries": result["stats"].get("canaries", 0), "submissions": result["stats"]["submissions"],
            "sim": {k: rows[k]["per_submission"] for k in ("honest", "lazy", "idle")},
            "per_day": {k: rows[k]["per_day"] for k in ("honest", "lazy", "idle")},
            "formula": predicted(c, p.attester_reward, s, p.check_cost, w, challenger, m),
            "break_even": break_even(p.attester_reward, s, p.check_cost, w, challenger, m), "slots_per_validator": m,
            "honest_strictly_best": rows["honest"]["honest_strictly_best"],
            "books_balanced_rounds": result["stats"].get("rounds with the books balanced to the wei", 0),
            "slash": {"attester": s, "worker": w}}


def table(runs: list[dict]) -> str:
    lines = ["| challenger | every n rounds | rounds | c (canaries / submissions) | honest INTL/sub (sim = formula) | "
             "lazy INTL/sub (sim = formula) | idle | honest INTL/day | lazy INTL/day | honest strictly best? | "
             "books balanced |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for x in runs:
        sim, f = x["sim"], x["formula"]

        def both(k: str, sim: dict = sim, f: dict = f) -> str:
            mark = "=" if abs(sim[k] - f[k]) < 1e-9 else "≠"
            return f"{round(sim[k], 9) + 0.0:.3f} {mark} {round(f[k], 9) + 0.0:.3f}"  # no "-0.000"

        every = "none" if x["every"] == 0 else str(x["every"])
        lines.append(f"| {x['challenger']} | {every} | {x['rounds']} | {x['canaries']}/{x['submissions']} = "
                     f"{x['c']:.2%} | {both('honest')} | {both('lazy')} | {sim['idle']:.3f} | "
                     f"{x['per_day']['honest']:.0f} | {x['per_day']['lazy']:.0f} | "
                     f"{'yes' if x['honest_strictly_best'] else '**NO**'} | {x['books_balanced_rounds']}/{x['rounds']} |")
    lines.append("")
    for ch in dict.fromkeys(x["challenger"] for x in runs):
        be = next(x["break_even"] for x in runs if x["challenger"] == ch)
        lines.append(f"- {ch} challenge the canaries: lazy earns less than honest above c = "
                     f"{be['lazy_below_honest']:.2%}, loses outright above {be['lazy_loses']:.2%}; honest beats idle "
                     + ("at every c" if be["honest_above_idle_until"] >= 1 else
                        f"only below c = {be['honest_above_idle_until']:.2%}"))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--every", default="0,10,9,6,5,4,1", help="canary every n rounds, comma-separated (0: none)")
    ap.add_argument("--min-rounds", type=int, default=30, help="rounds per run (rounded up to a multiple of n)")
    ap.add_argument("--challengers", default="validators,pool")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--check-cost", type=float, default=simulate.Params.check_cost)
    ap.add_argument("--attester-reward", type=float, default=simulate.Params.attester_reward)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    # class_history=0: the declaration believed, so every honest worker submits `tasks` gpu-small tasks a round
    # from the first (no cpu probation) and c = 1 / (n·S + 1) holds exactly
    base = simulate.Params(seed=args.seed, check_cost=args.check_cost, attester_reward=args.attester_reward,
                           class_history=0)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    warnings.filterwarnings("ignore", category=FutureWarning)
    from brownie import network, project
    from brownie.exceptions import TransactionError

    from scripts._anvil import use_private_anvil_port

    proj = project.load(str(simulate.ROOT), name="IntellectProtocol")
    proj.load_config()
    use_private_anvil_port()
    started = time.monotonic()
    runs: list[dict] = []
    retried = 0
    with contextlib.redirect_stdout(io.StringIO()):  # brownie prints every transaction
        for ch in (c.strip() for c in args.challengers.split(",") if c.strip()):
            for every in (int(n) for n in args.every.split(",")):
                for attempt in range(3):  # each run on a fresh anvil; again when brownie loses a deploy_all tx
                    network.connect("development")
                    try:
                        runs.append(one(every, args.min_rounds, ch, base))
                        break
                    except TransactionError:
                        if attempt == 2:
                            raise
                        retried += 1
                    finally:
                        network.disconnect()
                print(f"{ch} every {every}: done", file=sys.stderr)
    print(f"check cost {base.check_cost} INTL, attester reward {base.attester_reward} INTL, "
          f"attesterSlash {runs[0]['slash']['attester']:g}, worker slash {runs[0]['slash']['worker']:g} INTL, "
          f"{base.tasks} honest submissions per round, seed {base.seed}")
    print()
    print(table(runs))
    print(f"wall time {time.monotonic() - started:.1f} s; runs restarted after brownie lost a set-up transaction: "
          f"{retried}")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
