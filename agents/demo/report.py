"""The end-of-run report of a demo: `runs/<id>/report.html` + PNG plots (matplotlib, Agg).

    python -m intellect.agents.demo.report runs/20261122-031500     # (re)build from runs/<id>/summary.json

Plots: `reward_curve.png` (mean task reward per policy step, from the trainer), `throughput.png`
(rollouts and tokens per second over the run, from the demo's progress samples) and
`stake.png` (stake before/after, slashes and rewards claimed per node, from the chain). The
HTML page is self-contained apart from those PNGs next to it (no external assets).
"""

from __future__ import annotations

import html
import itertools
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from intellect.agents.demo.summary import DemoError, DemoSummary

if TYPE_CHECKING:
    from intellect.agents.demo.summary import DemoSummary

__all__ = ["plot_reward_curve", "plot_stake", "plot_throughput", "write_report"]

log = logging.getLogger(__name__)
TOKEN = 10**18


def _plt():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_reward_curve(summary: DemoSummary, path: Path) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=120)
    pts = [(s.step, s.mean_reward) for s in summary.steps if s.mean_reward is not None]
    if pts:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color="#2f9e44")
        ax.set_ylabel("mean task reward")
    else:
        ax.text(0.5, 0.5, "the trainer reported no mean reward", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("policy step")
    ax.set_title("Reward curve")
    ax.grid(alpha=0.3)
    return _save(plt, fig, path)


def plot_throughput(summary: DemoSummary, path: Path) -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=120)
    pr = summary.progress
    if len(pr) >= 2:
        ts = [p.t for p in pr]
        rate = [0.0] + [(b.rollouts - a.rollouts) / max(b.t - a.t, 1e-9) for a, b in itertools.pairwise(pr)]
        # smooth over ~5 samples: submissions arrive in bursts
        k = 5
        smooth = [sum(rate[max(0, i - k + 1):i + 1]) / len(rate[max(0, i - k + 1):i + 1]) for i in range(len(rate))]
        ax.plot(ts, smooth, color="#1971c2", label="rollouts/s (5-sample mean)")
        ax.set_ylabel("rollouts / s")
        ax2 = ax.twinx()
        ax2.plot(ts, [p.rollouts for p in pr], color="#868e96", linestyle="--", label="rollouts (cumulative)")
        ax2.set_ylabel("rollouts submitted")
        for p0, p1 in itertools.pairwise(pr):
            if p1.step > p0.step:
                ax.axvline(p1.t, color="#2f9e44", alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    else:
        ax.text(0.5, 0.5, "not enough progress samples", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("seconds since the agents started (green: new policy step)")
    ax.set_title("Throughput")
    return _save(plt, fig, path)


def plot_stake(summary: DemoSummary, path: Path) -> Path:
    plt = _plt()
    nodes = [n for n in summary.nodes if n.stake_before or n.stake_after or n.rewards_claimed]
    fig, ax = plt.subplots(figsize=(7.2, 3.8), dpi=120)
    if nodes:
        xs = range(len(nodes))
        w = 0.27
        ax.bar([x - w for x in xs], [n.stake_before / TOKEN for n in nodes], w, label="stake before", color="#74c0fc")
        ax.bar(list(xs), [n.stake_after / TOKEN for n in nodes], w, label="stake after", color="#1971c2")
        ax.bar([x + w for x in xs], [n.rewards_claimed / TOKEN for n in nodes], w, label="rewards claimed",
               color="#2f9e44")
        for x, n in zip(xs, nodes, strict=True):
            if n.slashed:
                ax.annotate(f"-{n.slashed / TOKEN:g} slashed", (x, n.stake_after / TOKEN), ha="center",
                            va="bottom", color="#e03131", fontsize=8)
        ax.set_xticks(list(xs), [n.name for n in nodes], rotation=20, ha="right", fontsize=8)
        ax.set_ylabel("tokens (INTL)")
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no stake on chain", ha="center", va="center", transform=ax.transAxes)
    ax.set_title("Stake movements")
    return _save(plt, fig, path)


_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#212529;max-width:1200px}
table{border-collapse:collapse;margin:8px 0 20px}th,td{padding:4px 10px;border-bottom:1px solid #dee2e6;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}code{font-size:12px}.bad{color:#e03131}
img{max-width:100%;border:1px solid #dee2e6;margin:6px 0}.grid{display:grid;grid-template-columns:1fr 1fr;gap:12px}"""


def _tok(wei: int) -> str:
    return f"{wei / TOKEN:,.4f}".rstrip("0").rstrip(".")


def write_report(run_dir: Path, summary: DemoSummary) -> Path:
    """Write the PNG plots and `report.html` into `run_dir`; returns the HTML's path."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    plot_reward_curve(summary, run_dir / "reward_curve.png")
    plot_throughput(summary, run_dir / "throughput.png")
    plot_stake(summary, run_dir / "stake.png")
    e = html.escape
    rows = []
    for n in summary.nodes:
        w = n.role == "worker"
        rows.append(f"<tr><td>{e(n.name)}</td><td>{e(n.role)}</td><td>{e(n.hardware)}</td><td><code>{e(n.address)}</code>"
                    f"</td><td class=n>{_tok(n.stake_before)}</td><td class=n>{_tok(n.stake_after)}</td>"
                    f"<td class=n>{n.submissions if w else '-'}</td><td class=n>{n.accepted if w else '-'}</td>"
                    f"<td class=n>{n.challenged if w else '-'}</td>"
                    f"<td class='n{' bad' if n.slashed else ''}'>{_tok(n.slashed)}</td>"
                    f"<td class=n>{_tok(n.rewards_claimed)}</td></tr>")
    steps = [f"<tr><td class=n>{s.step}</td><td><code>{e(s.checkpoint_cid)}</code></td>"
             f"<td class=n>{'-' if s.rollouts_used is None else s.rollouts_used}</td>"
             f"<td class=n>{'-' if s.mean_reward is None else f'{s.mean_reward:.3f}'}</td>"
             f"<td class=n>{'-' if s.eval_pass_at_1 is None else f'{s.eval_pass_at_1:.3f}'}</td>"
             f"<td class=n>{'-' if s.eval_mean_reward is None else f'{s.eval_mean_reward:.3f}'}</td>"
             f"<td class=n>{s.submissions}</td></tr>" for s in summary.steps]
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(summary.started_at))
    took = summary.finished_at - summary.started_at
    opts = ", ".join(f"{k}={v}" for k, v in summary.options.items() if k not in ("run_dir", "live"))
    notes = "".join(f"<li>{e(n)}</li>" for n in summary.notes)
    page = f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>intellect demo {e(summary.run_id)}</title>
<style>{_CSS}</style></head><body>
<h1>intellect-protocol demo run {e(summary.run_id)}</h1>
<p>started {started}, took {took:.0f} s; {'completed' if summary.completed else '<b class=bad>did not complete</b>'};
options: <code>{e(opts)}</code></p>
<h2>Nodes</h2><table><tr><th>node</th><th>role</th><th>hardware</th><th>address</th><th>stake before</th>
<th>stake after</th><th>submissions</th><th>accepted</th><th>challenged</th><th>slashed</th><th>rewards claimed</th></tr>
{''.join(rows)}</table>
<h2>Steps</h2><table><tr><th>step</th><th>checkpoint CID (manifest)</th><th>rollouts used</th><th>mean reward</th>
<th>held-out pass@1 (T=0)</th><th>held-out mean reward</th><th>submissions at step</th></tr>{''.join(steps)}</table>
<div class="grid"><img src="reward_curve.png" alt="reward curve"><img src="throughput.png" alt="throughput"></div>
<img src="stake.png" alt="stake movements">
{f'<h2>Notes</h2><ul>{notes}</ul>' if notes else ''}
</body></html>"""
    out = run_dir / "report.html"
    out.write_text(page)
    return out


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def main(run_dir: Path) -> None:
    """Rebuild RUN_DIR/report.html and its plots from RUN_DIR/summary.json."""
    try:
        summary = DemoSummary.read(run_dir / "summary.json")
    except (OSError, DemoError, ValueError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    click.echo(str(write_report(run_dir, summary)))


if __name__ == "__main__":
    main()
