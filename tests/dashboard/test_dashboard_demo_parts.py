"""The demo orchestrator's parts that need no agents: configs, process supervision, the final
table and the report from recorded data."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from dashboard_scenario import TOKEN, Scenario

from intellect.agents.config import load_config
from intellect.agents.demo.report import write_report
from intellect.agents.demo.swarm import (
    DemoError,
    DemoOptions,
    DemoSummary,
    NodeRow,
    NodeSpec,
    ProgressSample,
    StepRow,
    Supervisor,
    final_tables,
    node_specs,
    plain_tables,
    summarize,
    write_configs,
)
from intellect.sdk.dashboard import ChainIndex, StatusFetcher, collect


def test_node_specs_default_swarm_roles_and_hardware() -> None:
    specs = node_specs(DemoOptions())
    roles = [s.role for s in specs]
    assert roles.count("trainer") == 1 and roles.count("relay") == 1 and roles.count("validator") == 2
    workers = [s for s in specs if s.role == "worker"]
    assert len(workers) == 4 and [s.honest for s in workers] == [True, True, True, False]
    assert len({s.hardware for s in workers if s.honest}) == 3  # three hardware classes
    assert workers[-1].settings["worker"]["adversary"] == "wrong_model"
    assert len({s.dev_account for s in specs}) == len(specs) and specs[0].dev_account == 0


def test_write_configs_load_as_agent_configs(tmp_path: Path) -> None:
    opts = DemoOptions(steps=2)
    specs = node_specs(opts)
    dep = tmp_path / "31337.json"
    paths = write_configs(tmp_path, "http://127.0.0.1:9", dep, specs, opts)
    assert set(paths) == {s.name for s in specs}
    for s in specs:
        cfg = load_config(paths[s.name])
        assert cfg.role.value == s.role and cfg.chain.dev_account == s.dev_account
        assert cfg.chain.deployment_file == dep and cfg.chain.rpc_url == "http://127.0.0.1:9"
        assert cfg.data_dir == tmp_path / "agents" / s.name
        assert cfg.trainer.max_steps == 2 and cfg.tasks.source == "synthetic:64:0"
    cheat = load_config(paths["cheater-1"])
    assert cheat.worker.adversary == "wrong_model" and cheat.worker.gpu_model == "A100-80GB"
    assert yaml.safe_load(paths["worker-1"].read_text())["worker"]["gpu_count"] == 8


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its reaper counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def test_supervisor_stop_all_kills_process_groups(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path / "logs")
    # a child that ignores SIGTERM and has a grandchild of its own
    code = ("import signal, subprocess, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(600)\n")
    proc = sup.start("stubborn", [sys.executable, "-c", code])
    log = tmp_path / "logs" / "stubborn.log"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not log.read_text().strip():
        time.sleep(0.1)
    grandchild = int(log.read_text().split()[0])
    assert _alive(proc.pid) and _alive(grandchild)
    t0 = time.monotonic()
    sup.stop(["stubborn"], timeout=1.0)
    assert proc.poll() is not None and time.monotonic() - t0 < 15
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(grandchild):
        time.sleep(0.1)
    assert not _alive(grandchild)
    sup.stop_all()
    sup.stop_all()  # idempotent
    with pytest.raises(DemoError):
        sup.start("late", [sys.executable, "-c", "pass"])


def test_demo_sigterm_stops_children(tmp_path: Path) -> None:
    """The orchestrator's signal handler path: SIGTERM → every child's process group is gone."""
    code = ("import sys, time\n"
            "from pathlib import Path\n"
            "from intellect.agents.demo.swarm import Supervisor\n"
            f"sup = Supervisor(Path({str(tmp_path)!r}) / 'logs').install()\n"
            "try:\n"
            "    p = sup.start('sleeper', [sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            "    print(p.pid, flush=True)\n"
            "    time.sleep(600)\n"
            "except KeyboardInterrupt:\n"
            "    sup.stop_all(); sys.exit(130)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    assert _alive(child)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 130
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.1)
    assert not _alive(child)


def _summary(rows: list[NodeRow], steps: list[StepRow]) -> DemoSummary:
    progress = [ProgressSample(t=i * 2.0, step=i // 3, submissions=i, rollouts=8 * i, tokens=50 * i,
                               pending_windows=1, challenges=int(i > 4)) for i in range(10)]
    return DemoSummary(run_id="test", started_at=1.0, finished_at=100.0, options=DemoOptions().model_dump(mode="json"),
                       completed=True, nodes=rows, steps=steps, progress=progress, notes=["a note"])


def test_summarize_from_scenario_final_table_and_report(scenario: Scenario, tmp_path: Path) -> None:
    p = scenario.reader()
    snap = collect(p, ChainIndex(p), StatusFetcher(timeout=2.0))

    specs = [NodeSpec("trainer", "trainer", 0), NodeSpec("honest", "worker", 1),
             NodeSpec("cheat", "worker", 2, honest=False), NodeSpec("validator-1", "validator", 3),
             NodeSpec("validator-2", "validator", 4), NodeSpec("ghost", "worker", 9)]
    accounts = {"trainer": scenario.trainer, "honest": scenario.honest, "cheat": scenario.cheat,
                "validator-1": scenario.validators[0], "validator-2": scenario.validators[1],
                "ghost": "0x" + "99" * 20}
    rows, steps = summarize(snap, specs, accounts)
    by = {r.name: r for r in rows}
    assert (by["honest"].submissions, by["honest"].accepted, by["honest"].rewards_claimed) == (2, 2, 8 * TOKEN)
    assert by["honest"].stake_before == by["honest"].stake_after == 100 * TOKEN
    assert by["cheat"].challenged == 1 and by["cheat"].slashed > 0
    assert by["cheat"].stake_after == 100 * TOKEN - by["cheat"].slashed
    assert by["ghost"].submissions == 0  # never registered: a row of zeros, not a crash
    assert [(s.step, s.checkpoint_cid, s.mean_reward) for s in steps] == [
        (0, scenario.manifest_cids[0], 0.25), (1, scenario.manifest_cids[1], 0.625)]
    summary = _summary(rows, steps)
    md = plain_tables(summary)
    assert scenario.manifest_cids[1] in md and "| cheat | worker |" in md
    nodes_t, steps_t = final_tables(summary)
    assert nodes_t.row_count == len(rows) and steps_t.row_count == 2
    path = summary.write(tmp_path / "summary.json")
    again = DemoSummary.read(path)
    assert again.nodes == summary.nodes
    report = write_report(tmp_path, again)
    text = report.read_text()
    assert scenario.manifest_cids[0] in text and "reward_curve.png" in text
    for png in ("reward_curve.png", "throughput.png", "stake.png"):
        data = (tmp_path / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_summary_read_unknown_version_refused(tmp_path: Path) -> None:
    p = tmp_path / "summary.json"
    p.write_text('{"schema": "intellect.demo.summary/v0"}')
    with pytest.raises(DemoError, match="v0"):
        DemoSummary.read(p)


def test_report_cli_rebuilds_from_summary(tmp_path: Path) -> None:
    _summary([], [StepRow(step=0, checkpoint_cid="bafkreiabc")]).write(tmp_path / "summary.json")
    out = subprocess.run([sys.executable, "-m", "intellect.agents.demo.report", str(tmp_path)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "report.html").is_file() and "bafkreiabc" in (tmp_path / "report.html").read_text()
    bad = subprocess.run([sys.executable, "-m", "intellect.agents.demo.report", str(tmp_path / "nope")],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2


def test_demo_flags_reach_the_agents_configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--batch-groups`, `--group-size`, `--tasks-per-step`, `--problem-order`: the trainer's batch, the workers'
    group size and per-step quota (what a real-model run needs to refill flat groups), every agent's problem order,
    in the configs the demo writes."""
    from click.testing import CliRunner

    from intellect.agents.demo import swarm

    seen: list[DemoOptions] = []
    monkeypatch.setattr(swarm, "run_demo", lambda opts: seen.append(opts) or sys.exit(0))
    result = CliRunner().invoke(swarm.main, ["--batch-groups", "8", "--group-size", "4", "--tasks-per-step", "3",
                                             "--steps", "2", "--problem-order", "random", "--no-live"])
    assert result.exit_code == 0, result.output
    opts = seen[0]
    paths = write_configs(tmp_path, "http://127.0.0.1:9", tmp_path / "31337.json", node_specs(opts), opts)
    trainer, worker = load_config(paths["trainer"]), load_config(paths["worker-1"])
    assert trainer.trainer.batch_groups == 8 and worker.worker.group_size == 4
    assert worker.worker.tasks_per_step == 3 and worker.worker.max_tasks == 3 * 3  # (steps + 1) × per step
    validator = load_config(paths["validator-1"])
    assert worker.tasks.problem_order == validator.tasks.problem_order == trainer.tasks.problem_order == "random"
    default = CliRunner().invoke(swarm.main, ["--no-live"])
    assert default.exit_code == 0 and seen[1].tasks_per_step == 1 and seen[1].batch_groups is None
    assert seen[1].problem_order == "epochs"


def test_demo_stops_with_the_trainers_no_signal_message() -> None:
    """Issue 37: a demo whose trainer reports no learning signal for NO_SIGNAL_STOP_S stops with its message (solve
    rate, what to change) instead of running to its timeout; shorter reports, or none, let it go on."""
    from intellect.agents.demo.swarm import NO_SIGNAL_STOP_S, no_signal_stall
    from intellect.agents.grpo_trainer import Sample
    from intellect.agents.roles.signal import no_signal_report
    from intellect.sdk.dashboard import NodeView, Snapshot

    flat = [Sample("a", [1], [2], 0.0, 0, 0.0, "7") for _ in range(4)]

    def snap(waited: float | None) -> Snapshot:
        status = None if waited is None else {"no_signal": no_signal_report(
            flat, step=1, submissions=1, waited_s=waited, group_size=4, length_alpha=0.0, batch_groups=2).model_dump()}
        nodes = [NodeView.model_construct(agent_status={"doing": "working"}),
                 NodeView.model_construct(agent_status=status)]
        return Snapshot.model_construct(nodes=nodes)

    assert no_signal_stall(snap(None)) is None
    assert no_signal_stall(snap(NO_SIGNAL_STOP_S - 1)) is None
    msg = no_signal_stall(snap(NO_SIGNAL_STOP_S))
    assert msg is not None and msg.startswith("step 1: no group with learning signal for 180 s")
    assert "solve rate 0.0%" in msg and "--problem-order adaptive" in msg
