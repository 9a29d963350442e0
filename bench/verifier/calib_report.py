"""Markdown tables from a calibration run (results_*.json of calibrate_toploc.py).

Usage:
    .venv/bin/python bench/verifier/calib_report.py runs/verifier-calib/results_r2_200_32.json
    # rates at other bounds, from the stored per-sample statistics:
    .venv/bin/python bench/verifier/calib_report.py RESULTS --exp 24 --mean 10 --median 8 --margin 1.0

Tables: per case the TOPLOC chunk statistics and the replay margins (min / p50 / p99 / max) and
the per-sample pass / detection rate for the profiles of the CURRENT code (`Thresholds()`, the
same without replay and aggregate, `Thresholds.fp32()`), recomputed from the stored per-sample
statistics; then the submission-level statistic of `toploc.check_aggregate` (mean over a
submission's chunks of the chunks' mantissa-error means) for random submissions of k samples
drawn from each case (fixed seed), and the submission-level rates (a submission of k samples
fails if any sample fails or its aggregate does).
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np

from intellect.verifier.toploc import Thresholds

BIG = float(2**64)


def profiles_now() -> dict[str, Thresholds]:
    return {
        "default": Thresholds(),
        "toploc-only": Thresholds(max_replay_margin=None, max_agg_mant_err_mean=None),
        "fp32": Thresholds.fp32(),
    }


def ok_sample(s: dict, th: Thresholds) -> bool:
    return accepted(s, th.max_exp_mismatches, th.max_mant_err_mean, th.max_mant_err_median, th.max_replay_margin)


def ok_submission(samples: list[dict], th: Thresholds) -> bool:
    if not all(ok_sample(s, th) for s in samples):
        return False
    means = [m for s in samples for _, m, _ in s["chunks"] if m < BIG]
    if th.max_agg_mant_err_mean is None or len(means) < th.min_agg_chunks:
        return True
    return float(np.mean(means)) <= th.max_agg_mant_err_mean


def accepted(s: dict, exp: int, mean: float, median: float, margin: float | None) -> bool:
    if s["structural"] is not None:
        return False
    if margin is not None and s["max_margin"] > margin:
        return False
    return all(e <= exp and m <= mean and md <= median for e, m, md in s["chunks"])


def fmt(v: list[float]) -> str:
    return " / ".join(f"{x:.3g}" for x in v) if v else "—"


@click.command()
@click.argument("results", type=click.Path(exists=True, path_type=Path))
@click.option("--exp", type=int, default=None, help="max exponent mismatches (extra column)")
@click.option("--mean", type=float, default=None)
@click.option("--median", type=float, default=None)
@click.option("--margin", type=float, default=None, help="max replay margin (extra column)")
@click.option("--draws", default=2000, show_default=True, help="random submissions per case and size")
def main(results: Path, exp: int | None, mean: float | None, median: float | None, margin: float | None,
         draws: int) -> None:
    data = json.loads(results.read_text())
    profiles = profiles_now()
    extra = exp is not None and mean is not None and median is not None
    head = "| case | n | exp mismatches | mantissa mean | mantissa median | max replay margin | flips / sample |"
    head += "".join(f" {p} |" for p in profiles) + (" custom |" if extra else "")
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    for c in data["cases"]:
        cells = [c["case"], str(c["samples"])]
        for key in ("exp_mismatches", "mant_err_mean", "mant_err_median", "max_margin", "flips"):
            cells.append(fmt(c.get(key) or []))
        n = len(c["per_sample"])
        for th in profiles.values():
            acc = sum(ok_sample(s, th) for s in c["per_sample"])
            cells.append(f"{(acc if c['honest'] else n - acc) / max(1, n) * 100:.1f} %")
        if extra:
            acc = sum(accepted(s, exp, mean, median, margin) for s in c["per_sample"])  # type: ignore[arg-type]
            n = len(c["per_sample"])
            cells.append(f"{(acc if c['honest'] else n - acc) / max(1, n) * 100:.1f} %")
        print("| " + " | ".join(cells) + " |")
    print()
    print("statistics: min / p50 / p99 / max over chunks (margins, flips: over samples); rates: pass rate")
    print("for honest cases, detection rate for attacks. Profiles:",
          json.dumps({k: v.model_dump() for k, v in profiles.items()}))
    print()

    rng = np.random.default_rng(0)
    sizes = (1, 4, 8, 16)
    print("submission-level mean of chunk mantissa-error means, random submissions of k samples "
          f"({draws} draws per k): min / p1 / p50 / p99 / max")
    print()
    print("| case | " + " | ".join(f"k = {k}" for k in sizes) + " |")
    print("|" + " --- |" * (len(sizes) + 1))
    for c in data["cases"]:
        per = [[m for _, m, _ in s["chunks"] if m < BIG] for s in c["per_sample"] if s["chunks"]]
        per = [p for p in per if p]
        if not per:
            continue
        cells = [c["case"]]
        for k in sizes:
            picks = rng.integers(0, len(per), size=(draws, k))
            vals = [float(np.mean([m for i in row for m in per[i]])) for row in picks]
            q = np.percentile(vals, [0, 1, 50, 99, 100])
            cells.append(" / ".join(f"{x:.2f}" for x in q))
        print("| " + " | ".join(cells) + " |")
    print()
    k = 8
    print(f"submission-level rates, {draws} random submissions of k = {k} samples per case (pass rate for honest")
    print("cases, detection rate for attacks): a submission fails if any sample fails or its aggregate does")
    print()
    print("| case | " + " | ".join(profiles) + " |")
    print("|" + " --- |" * (len(profiles) + 1))
    for c in data["cases"]:
        per = c["per_sample"]
        picks = rng.integers(0, len(per), size=(draws, k))
        cells = [c["case"]]
        for th in profiles.values():
            acc = sum(ok_submission([per[i] for i in row], th) for row in picks)
            cells.append(f"{(acc if c['honest'] else draws - acc) / draws * 100:.1f} %")
        print("| " + " | ".join(cells) + " |")
    print()
    print("overhead:", json.dumps(data["overhead"]))


if __name__ == "__main__":
    main()
