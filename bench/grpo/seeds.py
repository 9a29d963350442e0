"""Several `pool_vs_trl.py` runs (one per seed) read as one comparison: mean curves, paired differences, the tax.

Usage (from the repository root; reads only the runs' `pool-vs-trl.json`, needs neither torch nor trl):
    for s in 0 1 2 3; do .venv-trl/bin/python bench/grpo/pool_vs_trl.py --out runs/paired-s$s --seed $s ...; done
    .venv/bin/python bench/grpo/seeds.py runs/paired-s0 runs/paired-s1 runs/paired-s2 runs/paired-s3 [--json F]

One run's curves are five evaluated points of 50 greedy answers each (one SE ~0.07) and cross back and forth, so
its "time to the same accuracy" mostly measures which problems and samples that trajectory happened to get. Here
the runs must share every setting but the seed (refused otherwise, naming the field); per evaluated step this
prints each side's mean pass@1 (held-out and training problems) with its standard error over the seeds, the mean
paired difference pool − TRL with its standard error (each seed's two sides train on the same problems when run
with `--trl-order pool`), and each side's mean wall-clock. From the mean curves it takes the issue's figure, the
tax to the same accuracy: the highest mean accuracy both sides reach (if above the start), and each side's time
to it, (a) at the first evaluated point at or above it, as `pool_vs_trl.py` does for one run, and (b) with the
mean curve linearly interpolated between evaluated points (time and accuracy both), which a coarse evaluation grid
otherwise rounds up to the next point. Also printed: every run's own tax to its own target, for the spread.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

REPORT = "pool-vs-trl.json"
VARYING = {"seed"}
"""the only `BenchConfig` field the runs may differ in"""
ADDED_LATER = {"min_signal_groups": 0}
"""`BenchConfig` fields newer than some stored reports, with the value that means what those reports ran"""


@dataclass(frozen=True)
class Curve:
    """One side's mean curve over the runs, at the shared evaluated steps."""

    steps: list[int]
    wall_s: list[float]
    samples: list[float]
    heldout: list[float]
    heldout_se: list[float]
    train: list[float]
    train_se: list[float]


def mean_se(xs: Sequence[float]) -> tuple[float, float]:
    """Mean and its standard error (sample standard deviation / √n; 0 for one value)."""
    n = len(xs)
    if n == 0:
        raise ValueError("mean of no values")
    m = sum(xs) / n
    if n == 1:
        return m, 0.0
    var = sum((x - m) ** 2 for x in xs) / (n - 1)
    return m, math.sqrt(var / n)


def load_runs(dirs: Sequence[Path]) -> list[dict[str, Any]]:
    """The runs' reports, checked to be comparable: both sides present, same settings but the seed, no seed twice,
    and a point at every evaluated step on each side (kept as `_points`: [pool, TRL], each in step order)."""
    if not dirs:
        raise click.UsageError("give at least one run directory")
    runs: list[dict[str, Any]] = []
    for d in dirs:
        path = d / REPORT
        try:
            report = json.loads(path.read_text())
        except FileNotFoundError:
            raise click.ClickException(f"{path}: not found (is {d} a finished pool_vs_trl.py run?)") from None
        except json.JSONDecodeError as exc:
            raise click.ClickException(f"{path}: not JSON ({exc})") from None
        if not isinstance(report, dict) or not isinstance(report.get("config"), dict):
            raise click.ClickException(f"{path}: not a pool_vs_trl.py report (no config object)")
        names = [s.get("name") for s in report.get("sides", [])]
        if names != ["pool", "trl"]:
            raise click.ClickException(f"{path}: needs both sides (pool, trl), has {names}")
        report["_dir"] = str(d)
        runs.append(report)
    for r in runs:
        for key, value in ADDED_LATER.items():
            r["config"].setdefault(key, value)
    first = runs[0]["config"]
    for r in runs[1:]:
        for key in sorted(set(first) | set(r["config"])):
            if key not in VARYING and first.get(key) != r["config"].get(key):
                raise click.ClickException(f"{r['_dir']}: config field {key!r} is {r['config'].get(key)!r}, "
                                           f"{runs[0]['_dir']} has {first.get(key)!r}: runs must differ only in "
                                           f"the seed")
    seeds = [r["config"]["seed"] for r in runs]
    if len(set(seeds)) != len(seeds):
        raise click.ClickException(f"a seed appears twice: {seeds}")
    steps = eval_steps(first)
    for r in runs:
        # each side's points at the evaluated steps, in order (the pool side also keeps checkpoints at TRL's
        # generated counts for pool_vs_trl.py's equal-samples table, at steps that differ from run to run: skipped)
        r["_points"] = []
        for side in r["sides"]:
            by_step = {p["step"]: p for p in side["points"]}
            if missing := [s for s in steps if s not in by_step]:
                raise click.ClickException(f"{r['_dir']}: the {side['name']} side has no evaluated point at "
                                           f"step(s) {missing}")
            r["_points"].append([by_step[s] for s in steps])
    return runs


def eval_steps(config: dict[str, Any]) -> list[int]:
    """The steps both sides evaluate in every run (`BenchConfig.eval_steps`: 0, every `eval_every`, the last)."""
    steps, every = int(config["steps"]), int(config["eval_every"])
    return sorted({0, *range(every, steps + 1, every), steps})


def mean_curve(runs: Sequence[dict[str, Any]], side: int) -> Curve:
    points = [r["_points"][side] for r in runs]
    steps = [p["step"] for p in points[0]]
    cols: dict[str, list[float]] = {k: [] for k in ("wall_s", "samples", "heldout", "heldout_se", "train", "train_se")}
    for i in range(len(steps)):
        at = [ps[i] for ps in points]
        cols["wall_s"].append(mean_se([p["wall_s"] for p in at])[0])
        cols["samples"].append(mean_se([p["samples"] for p in at])[0])
        for metric in ("heldout", "train"):
            m, se = mean_se([p[metric] for p in at])
            cols[metric].append(m)
            cols[f"{metric}_se"].append(se)
    return Curve(steps=steps, **cols)


def first_time(curve: Curve, metric: str, target: float) -> float | None:
    """Mean wall-clock at the first evaluated point whose mean accuracy reaches `target`."""
    for wall, acc in zip(curve.wall_s, getattr(curve, metric), strict=True):
        if acc >= target - 1e-12:
            return wall
    return None


def interpolated_time(curve: Curve, metric: str, target: float) -> float | None:
    """The time at which the mean curve, linear between evaluated points, first reaches `target`."""
    accs = getattr(curve, metric)
    if accs[0] >= target - 1e-12:
        return curve.wall_s[0]
    for i in range(1, len(accs)):
        a0, a1 = accs[i - 1], accs[i]
        if a1 >= target - 1e-12:
            frac = 1.0 if a1 == a0 else (target - a0) / (a1 - a0)
            return curve.wall_s[i - 1] + frac * (curve.wall_s[i] - curve.wall_s[i - 1])
    return None


def tax(pool: Curve, trl: Curve, metric: str) -> dict[str, Any]:
    """The tax to the same accuracy on the mean curves (see the module docstring)."""
    values = getattr(pool, metric), getattr(trl, metric)
    start = min(values[0][0], values[1][0])
    target = min(max(values[0]), max(values[1]))
    out: dict[str, Any] = {"start": start, "target": None}
    if target <= start + 1e-12:
        return out
    out["target"] = target
    for name, fn in (("first_point", first_time), ("interpolated", interpolated_time)):
        tp, tt = fn(pool, metric, target), fn(trl, metric, target)
        out[name] = {"pool_s": tp, "trl_s": tt, "tax": tp / tt if tp is not None and tt else None}
    return out


def paired(runs: Sequence[dict[str, Any]], metric: str) -> list[tuple[float, float]]:
    """Per evaluated step: mean and SE over the runs of pool − TRL (same step, same run)."""
    sides = [r["_points"] for r in runs]
    return [mean_se([pool[i][metric] - trl[i][metric] for pool, trl in sides]) for i in range(len(sides[0][0]))]


def aggregate(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    pool, trl = mean_curve(runs, 0), mean_curve(runs, 1)
    per_run = []
    for r in runs:
        s = r.get("summary", {})
        per_run.append({"dir": r["_dir"], "seed": r["config"]["seed"], "tax_equal_steps": s.get("tax_equal_steps"),
                        "heldout_final": (r["_points"][0][-1]["heldout"], r["_points"][1][-1]["heldout"]),
                        "heldout_tax_to_target": s.get("heldout", {}).get("tax_to_target"),
                        "heldout_target": s.get("heldout", {}).get("target")})
    walls = [(r["sides"][0]["wall_s"], r["sides"][1]["wall_s"]) for r in runs]
    return {"runs": len(runs), "seeds": [r["config"]["seed"] for r in runs],
            "config": {k: v for k, v in runs[0]["config"].items() if k not in VARYING},
            "pool": pool.__dict__, "trl": trl.__dict__,
            "paired_heldout": paired(runs, "heldout"), "paired_train": paired(runs, "train"),
            "tax_equal_steps": sum(p for p, _ in walls) / sum(t for _, t in walls),
            "heldout": tax(pool, trl, "heldout"), "train": tax(pool, trl, "train"), "per_run": per_run}


def _f(x: float | None, spec: str = ".2f") -> str:
    return "—" if x is None else format(x, spec)


def render(agg: dict[str, Any]) -> str:
    pool, trl = agg["pool"], agg["trl"]
    lines = [f"{agg['runs']} runs, seeds {agg['seeds']}", "",
             "| step | held-out pool | held-out TRL | pool − TRL | train pool | train TRL | pool − TRL "
             "| wall pool / TRL (s) | generated pool / TRL |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for i, step in enumerate(pool["steps"]):
        dh, dt = agg["paired_heldout"][i], agg["paired_train"][i]
        lines.append(f"| {step} | {pool['heldout'][i]:.3f} ± {pool['heldout_se'][i]:.3f} "
                     f"| {trl['heldout'][i]:.3f} ± {trl['heldout_se'][i]:.3f} | {dh[0]:+.3f} ± {dh[1]:.3f} "
                     f"| {pool['train'][i]:.3f} ± {pool['train_se'][i]:.3f} "
                     f"| {trl['train'][i]:.3f} ± {trl['train_se'][i]:.3f} | {dt[0]:+.3f} ± {dt[1]:.3f} "
                     f"| {pool['wall_s'][i]:.0f} / {trl['wall_s'][i]:.0f} "
                     f"| {pool['samples'][i]:.0f} / {trl['samples'][i]:.0f} |")
    lines.append("")
    lines.append(f"wall-clock at equal steps (sum over runs): {agg['tax_equal_steps']:.2f}x")
    for metric in ("heldout", "train"):
        t = agg[metric]
        if t["target"] is None:
            lines.append(f"{metric}: the mean curves reach no common level above the start ({t['start']:.3f})")
            continue
        fp, ip = t["first_point"], t["interpolated"]
        lines.append(f"{metric}: tax to the same mean accuracy {t['target']:.3f} (start {t['start']:.3f}): "
                     f"first evaluated point {_f(fp['pool_s'], '.0f')} / {_f(fp['trl_s'], '.0f')} s = "
                     f"{_f(fp['tax'])}x; interpolated {_f(ip['pool_s'], '.0f')} / {_f(ip['trl_s'], '.0f')} s = "
                     f"{_f(ip['tax'])}x")
    lines.append("per run (seed: held-out final pool / TRL, tax at equal steps, own tax to own target):")
    for r in agg["per_run"]:
        hp, ht = r["heldout_final"]
        lines.append(f"  {r['seed']}: {hp:.2f} / {ht:.2f}, {_f(r['tax_equal_steps'])}x, "
                     f"{_f(r['heldout_tax_to_target'])}x to {_f(r['heldout_target'])}")
    return "\n".join(lines)


@click.command()
@click.argument("runs", nargs=-1, type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="also write the aggregate as JSON here")
def main(runs: tuple[Path, ...], json_out: Path | None) -> None:
    """Aggregate pool_vs_trl.py runs that differ only in --seed."""
    agg = aggregate(load_runs(runs))
    click.echo(render(agg))
    if json_out is not None:
        json_out.write_text(json.dumps(agg, indent=2))
        click.echo(f"wrote {json_out}")


if __name__ == "__main__":
    main()
