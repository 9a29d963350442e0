"""Markdown tables from a calibration run (results.json of calibrate_toploc.py).

Usage:
    .venv/bin/python bench/verifier/calib_report.py runs/verifier-calib/results.json
    # detection/pass rates at other thresholds, from the stored per-sample statistics:
    .venv/bin/python bench/verifier/calib_report.py runs/verifier-calib/results.json --exp 24 --mean 10 --median 8 --floor -30
"""

from __future__ import annotations

import json
from pathlib import Path

import click


def rate(case: dict, exp: int, mean: float, median: float, floor: float | None) -> float:
    acc = 0
    for s in case["per_sample"]:
        ok = s["structural"] is None and all(
            e <= exp and m <= mean and md <= median for e, m, md in s["chunks"]
        )
        if ok and floor is not None and s["min_logprob"] < floor:
            ok = False
        acc += ok
    n = len(case["per_sample"])
    return (acc if case["honest"] else n - acc) / max(1, n)


@click.command()
@click.argument("results", type=click.Path(exists=True, path_type=Path))
@click.option("--exp", type=int, default=None, help="max exponent mismatches (extra column)")
@click.option("--mean", type=float, default=None)
@click.option("--median", type=float, default=None)
@click.option("--floor", type=float, default=None, help="min token log-prob (sampling check)")
def main(
    results: Path, exp: int | None, mean: float | None, median: float | None, floor: float | None
) -> None:
    data = json.loads(results.read_text())
    profiles = data["profiles"]
    extra = exp is not None and mean is not None and median is not None
    head = "| case | n | exp mismatches | mantissa mean | mantissa median | min token log-prob |"
    head += "".join(f" {p} |" for p in profiles) + (" custom |" if extra else "")
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    for c in data["cases"]:
        cells = [c["case"], str(c["samples"])]
        for key in ("exp_mismatches", "mant_err_mean", "mant_err_median", "min_logprob"):
            v = c.get(key) or []
            cells.append(" / ".join(f"{x:g}" for x in v) if v else "—")
        for p in profiles:
            cells.append(f"{c[f'rate_{p}'] * 100:.1f}%")
        if extra:
            cells.append(f"{rate(c, exp, mean, median, floor) * 100:.1f}%")
        print("| " + " | ".join(cells) + " |")
    print()
    print("statistics: min / p50 / p99 / max over chunks (log-prob: over samples); rates: pass rate for")
    print("honest cases, detection rate for attacks. Profiles:", json.dumps(profiles))
    print()
    print("overhead:", json.dumps(data["overhead"]))


if __name__ == "__main__":
    main()
