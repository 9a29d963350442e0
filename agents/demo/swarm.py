"""`make demo` = `python -m intellect.agents.demo`: a whole local training swarm in one command.

    python -m intellect.agents.demo                      # 12 policy steps, warm-started tiny model, dashboard on :8090
    python -m intellect.agents.demo --steps 5 --model smollm2 --keep-dashboard

What it does, in order:
1. starts anvil and deploys the contracts with the SDK's deploy (`intellect.sdk.devnet`, `intellect.sdk.deploy`);
2. (`--model tiny-warm`, the default) builds the warm-started step-0 model once (cached under
   `~/.cache/intellect/models/tiny-warm-<recipe key>`; later runs reuse it), then writes one YAML config per agent into `runs/<id>/configs/` and starts, each as its own process
   (`intellect-agent`, own process group): the trainer, a relay, 3 honest workers declaring
   different hardware classes, 1 cheating worker (`worker.adversary: wrong_model`) and 2 validators;
3. serves the dashboard (`intellect.sdk.dashboard`) and shows a progress display (steps,
   rollouts/s, pending windows, challenges) until the trainer has published `--steps` steps and
   the validators have caught up;
4. stops the workers, moves chain time past the vote period (open challenges get resolved) and
   past the challenge window, and lets the honest workers claim their rewards with their keys;
5. prints the final table (per node and per step), writes `runs/<id>/summary.json` and the report
   (`runs/<id>/report.html` + PNG plots), and stops every process it started — also on Ctrl-C,
   SIGTERM or an error (atexit + signal handlers, process groups).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import yaml
from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table

from intellect.agents.config import TaskSettings
from intellect.agents.demo.report import write_report
from intellect.agents.demo.summary import (
    SUMMARY_SCHEMA,
    DemoError,
    DemoSummary,
    NodeRow,
    ProgressSample,
    StepRow,
)
from intellect.sdk import ChallengeStatus, ContractRevert, dev_account, devnet
from intellect.sdk.dashboard import Dashboard, DashboardServer
from intellect.sdk.poolrules import PROBLEM_ORDERS, ProblemOrder

__all__ = [
    "SUMMARY_SCHEMA",
    "DemoError",
    "DemoOptions",
    "DemoSummary",
    "NodeRow",
    "NodeSpec",
    "StepRow",
    "Supervisor",
    "final_tables",
    "main",
    "node_specs",
    "run_demo",
    "summarize",
    "write_configs",
]

log = logging.getLogger(__name__)
TOKEN = 10**18


# ---------------------------------------------------------------------------------------------
# options and the swarm's layout


GROUP_SIZE = 16
PROBLEMS_PER_TASK = 4


class DemoOptions(BaseModel):
    """Everything `make demo` can change (the CLI flags)."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(12, ge=1)
    """Policy steps the trainer publishes after step 0."""
    workers: int = Field(3, ge=1, le=6)
    """Honest workers (each declares another hardware class, round robin)."""
    cheaters: int = Field(1, ge=0, le=2)
    """Cheating workers (`wrong_model`: generate with a perturbed model, claim the real one)."""
    validators: int = Field(2, ge=1, le=4)
    model: str = "tiny-warm"
    """`tiny-warm` (the tiny model warm-started on the pool's tasks, built once and cached), `tiny`
    (config-built, never solves a task: every GRPO group is filtered), `smollm2` (the real
    SmolLM2-135M), or an HF model directory."""
    taskset: Path | None = None
    """A task-set file (`intellect.taskset/v1`, e.g. from `intellect taskset convert`) instead of the synthetic
    `synthetic:64:0`; needs a model other than `tiny-warm` (whose warm start is made for the synthetic set)."""
    eval_tasks: Path | None = None
    """A held-out task-set file the trainer evaluates on every `eval_every` steps (pass@1 at T=0)."""
    eval_every: int = Field(0, ge=0)
    port: int = Field(8090, ge=0, le=65535)
    """Dashboard port (0: a free one)."""
    run_dir: Path | None = None
    """Default `runs/<id>`."""
    timeout: float = Field(900.0, gt=0)
    """Seconds the swarm gets to reach `steps` before the demo gives up (and still reports)."""
    settle_timeout: float = Field(300.0, gt=0)
    """Seconds to wait, after the target step, for the workers' last tasks and the validators' verdicts."""
    keep_dashboard: bool = False
    """Keep the dashboard, the chain and the (idle) agents up after the final table until Ctrl-C."""
    tasks_per_worker: int | None = Field(None, ge=1)
    """Tasks each worker does before it idles (serving its rollouts until the end); default 3·steps + 3.
    Workers must stay up until validators have fetched their rollouts: a rollout file nobody can
    fetch is challenged as unavailable (and slashed)."""
    tasks_per_step: int | None = Field(1, ge=1)
    """Submissions each worker makes with one policy step before waiting for the next checkpoint
    (None: no limit; then fast workers do most tasks at step 0)."""
    learning_rate: float = Field(5e-4, gt=0)
    """GRPO learning rate (tiny-warm, 12 groups × 16: 5e-4 rose 0.05 → ~0.3 in 20 offline steps; 1e-3 and
    2e-3 oscillated without a clear rise)."""
    optimizer_steps: int = Field(2, ge=1)
    group_size: int = Field(GROUP_SIZE, ge=2)
    problems_per_task: int = Field(PROBLEMS_PER_TASK, ge=1)
    problem_order: ProblemOrder = "epochs"
    """How claims' problems are chosen (the pool rule `problem_order`): seeded shuffled passes, per-claim draws, or
    per-claim draws weighted by the trainer's difficulty table (`adaptive`)."""
    batch_groups: int | None = Field(None, ge=1)
    """GRPO groups (problems) per training step; default problems_per_task × workers (one submission of
    each honest worker per step)."""
    live: bool = True
    """Rich live progress display (off: one log line per change)."""


# the hardware each honest worker declares: one per class (gpu-large, gpu-small, cpu), round robin
HARDWARE = [("H100-80GB", 80, 8), ("RTX4090", 24, 1), ("cpu", 0, 0)]
CHEATER_HARDWARE = ("A100-80GB", 80, 1)
# per-class thinking budgets (target lengths in tokens) sized for CPU demos
BUDGETS = {"tiny": {"cpu": [6, 8], "gpu-small": [10, 12], "gpu-large": [12, 16]},
           "smollm2": {"cpu": [16, 24], "gpu-small": [24, 32], "gpu-large": [32, 48]}}


@dataclass
class NodeSpec:
    """One agent process of the demo."""

    name: str
    role: str
    dev_account: int
    settings: dict[str, Any] = field(default_factory=dict)
    honest: bool = True

    @property
    def hardware(self) -> str:
        w = self.settings.get("worker", {})
        if self.role != "worker" or not w.get("gpu_count"):
            return "cpu"
        return f"{w['gpu_count']}x {w.get('gpu_model', '?')}"


def node_specs(opts: DemoOptions) -> list[NodeSpec]:
    """The swarm: anvil dev account 0 is the deployer and the default pool's trainer."""
    # The relay keeps the newest checkpoints (~2 MB each for the tiny model) in a RAM arena and
    # writes them behind to disk between steps.
    specs = [NodeSpec("trainer", "trainer", 0), NodeSpec("relay", "relay", 1, {"relay": {"ram_mib": 8}})]
    acct = 2
    for i in range(opts.workers):
        gpu, vram, count = HARDWARE[i % len(HARDWARE)]
        specs.append(NodeSpec(f"worker-{i + 1}", "worker", acct,
                              {"worker": {"gpu_model": gpu, "vram_gib": vram, "gpu_count": count}}))
        acct += 1
    for i in range(opts.cheaters):
        gpu, vram, count = CHEATER_HARDWARE
        specs.append(NodeSpec(f"cheater-{i + 1}", "worker", acct,
                              {"worker": {"gpu_model": gpu, "vram_gib": vram, "gpu_count": count,
                                          "adversary": "wrong_model"}}, honest=False))
        acct += 1
    for i in range(opts.validators):
        specs.append(NodeSpec(f"validator-{i + 1}", "validator", acct))
        acct += 1
    return specs


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def pool_rules(opts: DemoOptions) -> dict[str, Any]:
    """The settings every agent of the pool must agree on."""
    budgets = BUDGETS["tiny" if opts.model in ("tiny", "tiny-warm") else "smollm2"]
    if opts.tasks_per_worker:
        max_tasks = opts.tasks_per_worker
    elif opts.tasks_per_step:  # one quota per policy step 0..steps
        max_tasks = (opts.steps + 1) * opts.tasks_per_step
    else:
        max_tasks = 3 * opts.steps + 3
    return {
        "tasks": {"source": str(opts.taskset.resolve()) if opts.taskset else "synthetic:64:0", "budgets": budgets,
                  "problem_order": opts.problem_order},
        "worker": {"problems_per_task": opts.problems_per_task, "group_size": opts.group_size, "poll_interval": 0.5,
                   "max_tasks": max_tasks, "tasks_per_step": opts.tasks_per_step, "claim_rewards": True},
        "validator": {"poll_interval": 0.5, "concurrency": 2},
        "trainer": {"model": opts.model, "batch_groups": opts.batch_groups or opts.problems_per_task * opts.workers, "max_steps": opts.steps,
                    "poll_interval": 0.5, "grpo": {"lr": opts.learning_rate, "optimizer_steps": opts.optimizer_steps},
                    "eval_every": opts.eval_every,
                    **({"eval_tasks": str(opts.eval_tasks.resolve())} if opts.eval_tasks else {})},
    }


def write_configs(run_dir: Path, rpc_url: str, deployment_file: Path, specs: list[NodeSpec],
                  opts: DemoOptions) -> dict[str, Path]:
    """One YAML per agent in `run_dir/configs`; data in `run_dir/agents/<name>`. Returns name → path."""
    cfg_dir = run_dir / "configs"
    cfg_dir.mkdir(parents=True, exist_ok=True)
    rules = pool_rules(opts)
    out = {}
    for s in specs:
        cfg = _merge(rules, {"role": s.role, "data_dir": str(run_dir / "agents" / s.name), "log_level": "INFO",
                             "chain": {"rpc_url": rpc_url, "deployment_file": str(deployment_file),
                                       "dev_account": s.dev_account}})
        cfg = _merge(cfg, s.settings)
        path = cfg_dir / f"{s.name}.yaml"
        path.write_text(f"# {s.name}: written by intellect.agents.demo\n" + yaml.safe_dump(cfg, sort_keys=False))
        out[s.name] = path
    return out


# ---------------------------------------------------------------------------------------------
# process supervision


class Supervisor:
    """Starts child processes in their own process groups and stops them all, once, on exit,
    Ctrl-C or SIGTERM (atexit + signal handlers)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()
        self._stopped = False
        self._installed = False
        self._old: dict[int, Any] = {}
        self.interrupted = threading.Event()

    def install(self) -> Supervisor:
        if not self._installed:
            atexit.register(self.stop_all)
            if threading.current_thread() is threading.main_thread():  # signal handlers live there only
                for sig in (signal.SIGINT, signal.SIGTERM):
                    self._old[sig] = signal.signal(sig, self._on_signal)
            self._installed = True
        return self

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self.interrupted.is_set():  # a second Ctrl-C must not interrupt the clean-up itself
            return
        log.warning("signal %d: stopping the swarm", signum)
        self.interrupted.set()
        raise KeyboardInterrupt

    def start(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._stopped:
                raise DemoError("the supervisor is stopping; no new processes")
            logf = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
            proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            logf.close()
            self.procs[name] = proc
            log.info("started %s (pid %d): %s", name, proc.pid, " ".join(cmd[-4:]))
            return proc

    def alive(self, name: str) -> bool:
        p = self.procs.get(name)
        return p is not None and p.poll() is None

    def dead(self) -> dict[str, int]:
        """Children that exited (name → exit code)."""
        return {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}

    def stop(self, names: list[str], timeout: float = 20.0) -> None:
        """SIGTERM to each process group, then SIGKILL what is left after `timeout`."""
        procs = [(n, self.procs[n]) for n in names if n in self.procs]
        for _n, p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for n, p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop within %.0f s: killing its process group", n, timeout)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
            # the group may hold helpers that outlived their parent
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)

    def stop_all(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self.stop(list(self.procs))
        for sig, old in self._old.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, old)

    def tail(self, name: str, lines: int = 20) -> str:
        p = self.log_dir / f"{name}.log"
        if not p.is_file():
            return ""
        return "\n".join(p.read_text(errors="replace").splitlines()[-lines:])


# ---------------------------------------------------------------------------------------------
# the summary's rows and tables


def summarize(snapshot: Any, specs: list[NodeSpec], accounts: dict[str, str]) -> tuple[list[NodeRow], list[StepRow]]:
    """Final-table rows from a dashboard Snapshot (chain + the trainer's /status)."""
    rows = []
    for s in specs:
        n = snapshot.node(accounts[s.name])
        if n is None:
            rows.append(NodeRow(name=s.name, role=s.role, address=accounts[s.name], hardware=s.hardware,
                                honest=s.honest, stake_before=0, stake_after=0, submissions=0, accepted=0,
                                challenged=0, slashed=0, rewards_claimed=0))
            continue
        rows.append(NodeRow(name=s.name, role=s.role, address=n.address, hardware=s.hardware, honest=s.honest,
                            stake_before=n.stake_deposited, stake_after=n.stake_active + n.stake_unbonding,
                            submissions=n.submissions, accepted=n.accepted, challenged=n.challenged,
                            slashed=n.slashed, rewards_claimed=n.rewards_claimed))
    steps = [StepRow(step=c.step, checkpoint_cid=c.manifest_cid, rollouts_used=c.rollouts_used,
                     mean_reward=c.mean_reward, submissions=c.submissions, eval_pass_at_1=c.eval_pass_at_1,
                     eval_mean_reward=c.eval_mean_reward) for c in snapshot.checkpoints]
    return rows, steps


def _tok(wei: int) -> str:
    v = wei / TOKEN
    return f"{v:,.4f}".rstrip("0").rstrip(".") if v else "0"


def final_tables(summary: DemoSummary) -> tuple[Table, Table]:
    nodes = Table(title="Nodes", title_justify="left")
    for col, just in (("node", "left"), ("role", "left"), ("hardware", "left"), ("stake before", "right"),
                      ("stake after", "right"), ("submissions", "right"), ("accepted", "right"),
                      ("challenged", "right"), ("slashed", "right"), ("rewards claimed", "right")):
        nodes.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in summary.nodes:
        nodes.add_row(r.name, r.role, r.hardware, _tok(r.stake_before), _tok(r.stake_after),
                      str(r.submissions) if r.role == "worker" else "-",
                      str(r.accepted) if r.role == "worker" else "-",
                      str(r.challenged) if r.role == "worker" else "-",
                      f"[red]{_tok(r.slashed)}[/red]" if r.slashed else "0", _tok(r.rewards_claimed))
    steps = Table(title="Steps", title_justify="left")
    for col, just in (("step", "right"), ("checkpoint CID (manifest)", "left"), ("rollouts used", "right"),
                      ("mean reward", "right"), ("submissions at step", "right")):
        steps.add_column(col, justify=just)  # type: ignore[arg-type]
    for st in summary.steps:
        steps.add_row(str(st.step), st.checkpoint_cid, "-" if st.rollouts_used is None else str(st.rollouts_used),
                      "-" if st.mean_reward is None else f"{st.mean_reward:.3f}", str(st.submissions))
    return nodes, steps


def plain_tables(summary: DemoSummary) -> str:
    """The final table as plain Markdown (docs, logs)."""
    lines = ["| node | role | hardware | stake before | stake after | submissions | accepted | challenged | slashed "
             "| rewards claimed |", "|---|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    for r in summary.nodes:
        w = r.role == "worker"
        lines.append(f"| {r.name} | {r.role} | {r.hardware} | {_tok(r.stake_before)} | {_tok(r.stake_after)} | "
                     f"{r.submissions if w else '-'} | {r.accepted if w else '-'} | {r.challenged if w else '-'} | "
                     f"{_tok(r.slashed)} | {_tok(r.rewards_claimed)} |")
    lines += ["", "| step | checkpoint CID (manifest) | rollouts used | mean reward | submissions at step |",
              "|--:|---|--:|--:|--:|"]
    for st in summary.steps:
        lines.append(f"| {st.step} | `{st.checkpoint_cid}` | {'-' if st.rollouts_used is None else st.rollouts_used} | "
                     f"{'-' if st.mean_reward is None else f'{st.mean_reward:.3f}'} | {st.submissions} |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# the run


def _progress_table(snap: Any, specs: list[NodeSpec], accounts: dict[str, str], target: int, elapsed: float,
                    rollouts: int, tokens: int) -> Table:
    latest = max((c.step for c in snap.checkpoints), default=None)
    t = snap.totals
    head = Table.grid(padding=(0, 2))
    done = max(latest or 0, 0)
    head.add_row(ProgressBar(total=target, completed=min(done, target), width=24),
                 f"[b]steps[/b] {latest if latest is not None else '-'} / {target}",
                 f"[b]rollouts/s[/b] {rollouts / max(elapsed, 1e-9):.2f}",
                 f"[b]tokens/s[/b] {tokens / max(elapsed, 1e-9):.1f}",
                 f"[b]submissions[/b] {t.submissions}", f"[b]pending windows[/b] {t.pending_windows}",
                 f"[b]challenges[/b] {t.challenges} ({t.open_challenges} open, {t.upheld} upheld)",
                 f"[b]elapsed[/b] {elapsed:.0f} s")
    agents = Table(box=None, show_header=True, header_style="dim")
    for col in ("agent", "role", "subs", "slashed", "doing"):
        agents.add_column(col)
    for s in specs:
        n = snap.node(accounts[s.name])
        doing = "(not registered yet)"
        if n is not None:
            doing = (n.agent_status or {}).get("doing") or (n.agent_error or "")
        agents.add_row(s.name, s.role, str(n.submissions) if n else "-",
                       _tok(n.slashed) if n and n.slashed else "", str(doing)[:70])
    outer = Table.grid()
    outer.add_row(head)
    outer.add_row(agents)
    return outer


def _agent_cmd(cfg: Path, honest: bool = True) -> list[str]:
    """`intellect-agent` for an honest node; the attack kit's launcher (same CLI) for a cheater."""
    module = "intellect.agents.cli" if honest else "intellect.agents.adversary"
    return [sys.executable, "-m", module, "--config", str(cfg)]


NO_SIGNAL_STOP_S = 180.0
"""How long the trainer may report no group with learning signal (its /status `no_signal`) before the demo stops."""


def no_signal_stall(snap: Any) -> str | None:
    """The trainer's no-signal message (solve rate, what to change: `intellect.agents.roles.signal`) once it has
    waited `NO_SIGNAL_STOP_S` for a group with signal, else None: a demo on a task set its model cannot learn ends
    with that message instead of at its timeout."""
    for node in snap.nodes:
        report = (node.agent_status or {}).get("no_signal")
        if isinstance(report, dict) and float(report.get("waited_s") or 0) >= NO_SIGNAL_STOP_S:
            return str(report.get("message") or "the trainer has no group with learning signal")
    return None


def run_demo(opts: DemoOptions, console: Console | None = None) -> DemoSummary:
    """Run the whole demo; returns the summary (also written to `run_dir/summary.json`)."""
    if opts.taskset is not None and opts.model == "tiny-warm":
        raise DemoError("--taskset needs --model tiny, smollm2 or an HF model directory (tiny-warm is warm-started "
                        "on the synthetic set)")
    console = console or (Console() if sys.stdout.isatty() else Console(width=170))
    run_id = time.strftime("%Y%m%d-%H%M%S")
    run_dir = (opts.run_dir or Path.cwd() / "runs" / run_id).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(run_dir / "demo.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    specs = node_specs(opts)
    accounts = {s.name: dev_account(s.dev_account).address for s in specs}
    sup = Supervisor(run_dir / "logs").install()
    started = time.time()
    notes: list[str] = []
    net = None
    server = None
    progress: list[ProgressSample] = []
    completed = False
    try:
        console.print(f"[b]intellect-protocol demo[/b] run [cyan]{run_id}[/cyan] in {run_dir}")
        console.print("starting anvil and deploying the contracts (the SDK's deploy) …")
        net = devnet.start(run_dir / "chain")
        console.print(f"chain {net.deployment.chain_id} at {net.url}; deployment {net.deployment_file}")
        for s in specs:  # anvil funds only its first 10 accounts with ETH (gas)
            if s.dev_account >= 10:
                net.anvil.rpc("anvil_setBalance", [accounts[s.name], hex(1000 * TOKEN)])
        cfgs = write_configs(run_dir, net.url, net.deployment_file, specs, opts)
        if opts.model == "tiny-warm":
            _prepare_warm_start(opts, console)
        env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1",
                   TOKENIZERS_PARALLELISM="false")
        reader = net.protocol(None)
        dash = Dashboard(reader, ttl=1.0, status_timeout=3.0)
        try:
            server = DashboardServer(dash, "127.0.0.1", opts.port).start()
        except OSError as exc:
            log.warning("dashboard port %d unavailable (%s): using a free port", opts.port, exc)
            server = DashboardServer(dash, "127.0.0.1", 0).start()
        console.print(f"dashboard: [link={server.url}]{server.url}[/link]")
        # the trainer first (it publishes step 0 and serves Shardcast), then the rest
        for s in specs:
            sup.start(s.name, _agent_cmd(cfgs[s.name], s.honest), env)
        rollouts_per_sub = opts.problems_per_task * opts.group_size
        t0 = time.monotonic()
        deadline = t0 + opts.timeout
        caught_up_since: float | None = None

        def tick() -> tuple[Any, bool]:
            snap = dash.snapshot(fresh=True)
            latest = max((c.step for c in snap.checkpoints), default=-1)
            elapsed = time.monotonic() - t0
            tokens = sum(sb.work_units for sb in snap.submissions)
            progress.append(ProgressSample(t=elapsed, step=max(latest, 0), submissions=len(snap.submissions),
                                           rollouts=len(snap.submissions) * rollouts_per_sub, tokens=tokens,
                                           pending_windows=snap.totals.pending_windows,
                                           challenges=snap.totals.challenges))
            return snap, latest >= opts.steps

        def failed() -> str | None:
            dead = {n: c for n, c in sup.dead().items() if c != 0}
            if dead:
                name = next(iter(dead))
                return f"{name} exited with code {dead[name]}; its log ends:\n{sup.tail(name)}"
            return None

        with Live(console=console, refresh_per_second=2, transient=False) if opts.live else contextlib.nullcontext() as live:
            while True:
                snap, reached = tick()
                p = progress[-1]
                if live is not None:
                    live.update(_progress_table(snap, specs, accounts, opts.steps, p.t, p.rollouts, p.tokens))
                elif len(progress) == 1 or progress[-2].model_dump(exclude={"t"}) != p.model_dump(exclude={"t"}):
                    log.info("step %d/%d, %d submissions, %d pending windows, %d challenges", p.step, opts.steps,
                             p.submissions, p.pending_windows, p.challenges)
                err = failed()
                if err:
                    raise DemoError(err)
                if reached:
                    completed = True
                    break
                if (stall := no_signal_stall(snap)) is not None:  # issue 37: say why, do not wait out the timeout
                    notes.append(f"stopped before step {opts.steps}: {stall}")
                    break
                if time.monotonic() > deadline:
                    notes.append(f"timed out after {opts.timeout:.0f} s before step {opts.steps}")
                    break
                time.sleep(2.0)
            # workers idle once they did their tasks (serving their rollouts); validators finish the backlog
            console.print("target reached: waiting for the workers' last tasks and the validators' verdicts …"
                          if completed else "waiting for the validators' verdicts …")
            settle_deadline = time.monotonic() + opts.settle_timeout
            while time.monotonic() < settle_deadline:
                snap, _ = tick()
                if live is not None:
                    p = progress[-1]
                    live.update(_progress_table(snap, specs, accounts, opts.steps, p.t, p.rollouts, p.tokens))
                err = failed()
                if err:
                    raise DemoError(err)
                if _workers_done(snap, specs, accounts) and _validators_caught_up(snap, specs, accounts):
                    caught_up_since = caught_up_since or time.monotonic()
                    if time.monotonic() - caught_up_since > 3:
                        break
                else:
                    caught_up_since = None
                time.sleep(2.0)
            else:
                notes.append(f"workers or validators were still busy after {opts.settle_timeout:.0f} s")
        # move chain time: past the vote period (resolve challenges), then past the window
        pool = reader.pool(net.deployment.default_pool_id or 1)
        console.print(f"moving chain time past the vote period ({pool.params.vote_period} s) …")
        net.increase_time(pool.params.vote_period + 1)
        _resolve_open(net, reader, specs, console)
        console.print(f"moving chain time past the challenge window ({pool.params.window_length} s) …")
        net.increase_time(pool.params.window_length + pool.params.vote_period + 1)
        paid = _claim_honest(net, reader, specs, accounts, console)
        if paid:
            notes.append(f"the demo claimed {paid / TOKEN:g} tokens for honest workers the agents had not claimed")
        snap = dash.snapshot(fresh=True)
        rows, steps = summarize(snap, specs, accounts)
        summary = DemoSummary(run_id=run_id, started_at=started, finished_at=time.time(),
                              options=json.loads(opts.model_dump_json()), completed=completed, nodes=rows,
                              steps=steps, progress=progress, dashboard_url=server.url, notes=notes)
        summary.write(run_dir / "summary.json")
        (run_dir / "snapshot.json").write_text(snap.model_dump_json(by_alias=True, indent=1))
        for t in final_tables(summary):
            console.print(t)
        try:
            report = write_report(run_dir, summary)
            console.print(f"report: {report}")
        except Exception as exc:  # the table is printed; a plotting failure must not hide it
            log.exception("report failed")
            console.print(f"[yellow]report not written: {exc}[/yellow]")
        for n in notes:
            console.print(f"[dim]note: {n}[/dim]")
        if opts.keep_dashboard:
            console.print(f"dashboard stays up at {server.url} (the chain and the agents too); Ctrl-C to stop")
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
        return summary
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: stopping every process[/yellow]")
        raise
    finally:
        sup.stop_all()
        if server is not None:
            server.stop()
        if net is not None:
            net.stop()
        logging.getLogger().removeHandler(handler)
        handler.close()


def _prepare_warm_start(opts: DemoOptions, console: Console) -> Path:
    """Build (first run only; cached under the user cache dir, keyed by its recipe) the warm-started
    step-0 model the trainer will load, before the agents start and wait on it."""
    from intellect.agents.roles.trainer import (
        warm_start_recipe,  # deferred: torch (the demo's parent process stays light)
    )
    from intellect.agents.warmstart import warm_start_cached  # deferred: torch

    rules = pool_rules(opts)["tasks"]
    recipe = warm_start_recipe(TaskSettings(source=rules["source"], budgets=rules["budgets"]))
    console.print(f"warm start of the tiny model (recipe {recipe.key()}; built once, then cached) …")
    t0 = time.monotonic()
    path = warm_start_cached(recipe)
    console.print(f"step-0 model: {path} ({time.monotonic() - t0:.0f} s)")
    return path


def _workers_done(snap: Any, specs: list[NodeSpec], accounts: dict[str, str]) -> bool:
    """Every worker reports `done` (its tasks are submitted; it idles, serving its rollouts) or was
    slashed (an upheld challenge: the pool no longer lets it claim, so it never reaches max_tasks)."""
    for s in specs:
        if s.role == "worker":
            n = snap.node(accounts[s.name])
            if n is None:
                return False
            if not (n.agent_status or {}).get("done") and not (n.upheld > 0 and n.open_challenges == 0):
                return False
    return True


def _validators_caught_up(snap: Any, specs: list[NodeSpec], accounts: dict[str, str]) -> bool:
    """Every validator reports an empty backlog, and every submission has a verdict of one of them (a validator
    checks the submissions it holds a slot of and the challenged ones: `validator.check`, issue 33)."""
    subs = {s.submission_id for s in snap.submissions}
    seen: set[int] = set()
    validators = [s for s in specs if s.role == "validator"]
    for s in validators:
        n = snap.node(accounts[s.name])
        st = (n.agent_status if n else None) or {}
        if st.get("backlog", 1) != 0:
            return False
        seen |= {int(v["submission_id"]) for v in st.get("verdicts", []) if "submission_id" in v}
    return not validators or subs <= seen


def _resolve_open(net: Any, reader: Any, specs: list[NodeSpec], console: Console) -> None:
    """Resolve challenges whose vote ended (the validators do it too; this makes sure before the window)."""
    validator = next((s for s in specs if s.role == "validator"), None)
    if validator is None:
        return
    p = net.protocol(validator.dev_account)
    for e in reader.get_events(["ChallengeOpened"]):
        cid = int(e.args["challengeId"])
        if reader.challenge_info(cid).status != ChallengeStatus.OPEN:
            continue
        try:
            upheld = p.resolve(cid)
            console.print(f"resolved challenge {cid}: {'upheld' if upheld else 'rejected'}")
        except ContractRevert as exc:
            console.print(f"[yellow]challenge {cid} not resolved: {exc}[/yellow]")


def _claim_honest(net: Any, reader: Any, specs: list[NodeSpec], accounts: dict[str, str], console: Console,
                  wait: float = 30.0) -> int:
    """Honest workers claim what their windows released: the agents do it themselves (they are still
    running); what is left after `wait` seconds the demo claims with each worker's own key."""
    honest = [s for s in specs if s.role == "worker" and s.honest]
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if all(not reader.rewards(accounts[s.name]).claimable_ids for s in honest):
            console.print("honest workers claimed their rewards")
            return 0
        time.sleep(2.0)
    total = 0
    for s in honest:
        p = net.protocol(s.dev_account)
        r = p.rewards()
        if r.claimable_ids:
            paid = p.claim_rewards(r.claimable_ids)
            total += paid
            console.print(f"{s.name} claimed {paid / TOKEN:g} tokens for {len(r.claimable_ids)} submissions")
    return total


# ---------------------------------------------------------------------------------------------
# CLI


@click.command(context_settings={"help_option_names": ["-h", "--help"], "auto_envvar_prefix": "INTELLECT_DEMO"})
@click.option("--steps", type=click.IntRange(1, 1000), default=12, show_default=True, help="Policy steps to train.")
@click.option("--workers", type=click.IntRange(1, 6), default=3, show_default=True,
              help="Honest workers (hardware classes gpu-large, gpu-small, cpu, round robin).")
@click.option("--cheaters", type=click.IntRange(0, 2), default=1, show_default=True,
              help="Cheating workers (wrong_model).")
@click.option("--validators", type=click.IntRange(1, 4), default=2, show_default=True)
@click.option("--model", default="tiny-warm", show_default=True,
              help="tiny-warm (warm-started, cached) | tiny | smollm2 | an HF model directory.")
@click.option("--taskset", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Task-set file (intellect taskset convert/gym) instead of the synthetic set; with --model "
                   "smollm2, tiny or a directory.")
@click.option("--eval-tasks", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Held-out task-set file the trainer evaluates on.")
@click.option("--eval-every", type=click.IntRange(min=0), default=0, show_default=True,
              help="Evaluate every N steps on --eval-tasks (0: off).")
@click.option("--learning-rate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="GRPO learning rate (default 5e-4, tuned for tiny-warm; SmolLM2 wants ~2e-5).")
@click.option("--batch-groups", type=click.IntRange(min=1), default=None,
              help="GRPO groups with signal per training step (default: problems per task × workers).")
@click.option("--group-size", type=click.IntRange(min=2), default=None,
              help=f"Completions per problem (the pool rules' group size; default {GROUP_SIZE}).")
@click.option("--tasks-per-step", type=click.IntRange(min=1), default=1, show_default=True,
              help="Submissions each worker makes per policy step (raise it with --batch-groups, so flat groups "
                   "can be refilled).")
@click.option("--problem-order", type=click.Choice(PROBLEM_ORDERS), default="epochs", show_default=True,
              help="How claims' problems are chosen: seeded shuffled passes over the task set, per-claim draws, or "
                   "adaptive (per-claim draws weighted by the solve rates the trainer publishes with each checkpoint).")
@click.option("--port", type=click.IntRange(0, 65535), default=8090, show_default=True,
              help="Dashboard port (0: a free one).")
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where configs, logs, chain state and the report go (default runs/<id>).")
@click.option("--timeout", type=click.FloatRange(10, 24 * 3600), default=900, show_default=True,
              help="Seconds to reach --steps before reporting what happened so far.")
@click.option("--keep-dashboard", is_flag=True,
              help="Keep the dashboard, chain and idle agents up after the final table (until Ctrl-C).")
@click.option("--no-live", is_flag=True, help="Plain log lines instead of the live progress display.")
@click.option("-v", "--verbose", is_flag=True, help="Log to the terminal too.")
def main(steps: int, workers: int, cheaters: int, validators: int, model: str, taskset: Path | None,
         eval_tasks: Path | None, eval_every: int, learning_rate: float | None, batch_groups: int | None,
         group_size: int | None, tasks_per_step: int, problem_order: str, port: int, run_dir: Path | None,
         timeout: float, keep_dashboard: bool, no_live: bool, verbose: bool) -> None:
    """Run a local training swarm (chain, trainer, relay, workers, a cheater, validators) to a final table."""
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    extra: dict[str, Any] = {k: v for k, v in (("learning_rate", learning_rate), ("group_size", group_size))
                              if v is not None}
    opts = DemoOptions(steps=steps, workers=workers, cheaters=cheaters, validators=validators, model=model,
                       taskset=taskset, eval_tasks=eval_tasks, eval_every=eval_every, batch_groups=batch_groups,
                       tasks_per_step=tasks_per_step, problem_order=problem_order, port=port, run_dir=run_dir,
                       timeout=timeout, keep_dashboard=keep_dashboard, live=not no_live, **extra)
    try:
        summary = run_demo(opts)
    except KeyboardInterrupt:
        sys.exit(130)
    except DemoError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    sys.exit(0 if summary.completed else 1)


if __name__ == "__main__":
    main()
