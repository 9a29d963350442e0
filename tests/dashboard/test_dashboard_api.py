"""The dashboard's snapshot and HTTP API against a devnet with a scripted swarm history."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from dashboard_scenario import TOKEN, Scenario, serve_status

from intellect.sdk import SchemaVersionError
from intellect.sdk.dashboard import (
    SNAPSHOT_SCHEMA,
    ChainIndex,
    Dashboard,
    DashboardServer,
    StatusFetcher,
    collect,
    parse_snapshot,
)
from intellect.sdk.procs import free_port, wait_until


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_collect_scenario_counts_and_verdicts(scenario: Scenario) -> None:
    p = scenario.reader()
    snap = collect(p, ChainIndex(p), StatusFetcher(timeout=1.0))
    assert snap.schema_ == SNAPSHOT_SCHEMA and snap.chain_id == 31337
    t = snap.totals
    assert (t.nodes, t.submissions, t.accepted, t.pending_windows) == (5, 4, 2, 0)
    assert (t.challenges, t.upheld, t.checkpoints) == (1, 1, 2)
    assert t.rewards_claimed == 8 * TOKEN and t.slashed > 0
    honest, cheat = snap.node(scenario.honest), snap.node(scenario.cheat)
    assert honest is not None and cheat is not None
    assert (honest.submissions, honest.accepted, honest.challenged, honest.slashed) == (2, 2, 0, 0)
    assert honest.rewards_claimed == 8 * TOKEN and honest.stake_active == honest.stake_deposited == 100 * TOKEN
    assert honest.gpu_model == "H100-80GB" and honest.gpu_count == 8
    assert (cheat.submissions, cheat.accepted, cheat.challenged, cheat.upheld) == (2, 0, 1, 1)
    assert cheat.slashed > 0 and cheat.stake_active == 100 * TOKEN - cheat.slashed
    va, vb = (snap.node(a) for a in scenario.validators)
    assert va is not None and vb is not None
    assert va.challenges_opened == 1 and vb.votes_cast == 1
    verdicts = {s.submission_id: s.verdict for s in snap.submissions}
    assert verdicts == {scenario.honest_subs[0]: "paid", scenario.honest_subs[1]: "paid", scenario.cheat_sub: "slashed",
                        scenario.cheat_wiped: "wiped"}
    # the state derived from events agrees with the contract's views
    for s in snap.submissions:
        assert s.status == p.task(s.submission_id).status.name.lower()
        assert (s.verdict == "accepted") == (p.claimable(s.submission_id) > 0)
    for n in snap.nodes:
        st = p.stake_of(n.address)
        assert (n.stake_active, n.stake_unbonding, n.open_challenges) == (st.active, st.unbonding, st.open_challenges)
    info = p.challenge_info(scenario.cheat_sub)
    assert (snap.challenges[0].votes_for, snap.challenges[0].votes_against) == (info.votes_for, info.votes_against)
    [ch] = snap.challenges
    assert ch.status == "upheld" and ch.votes_for == 2 and ch.votes_against == 0 and ch.slashed == cheat.slashed
    assert [v.validator for v in ch.votes] == [scenario.validators[1]]
    assert [c.manifest_cid for c in snap.checkpoints] == scenario.manifest_cids
    assert [(r.step, r.mean_reward, r.submissions) for r in snap.reward_curve] == [(0, 0.25, 1), (1, 0.625, 3)]
    assert snap.checkpoints[1].rollouts_used == 16


def test_collect_node_paths_registered_to_reward_or_slash(scenario: Scenario) -> None:
    p = scenario.reader()
    snap = collect(p, ChainIndex(p), None)
    honest = [e.kind for e in snap.paths[scenario.honest]]
    assert honest[:3] == ["registered", "staked", "task"]
    for kind in ("proof", "verdict", "reward"):
        assert kind in honest
    assert honest.index("task") < honest.index("proof") < honest.index("verdict") < honest.index("reward")
    cheat = snap.paths[scenario.cheat]
    kinds = [e.kind for e in cheat]
    assert kinds.index("proof") < kinds.index("challenged") < kinds.index("verdict") < kinds.index("slash")
    assert [e.outcome for e in cheat if e.kind == "verdict"] == ["upheld"]
    assert "reward" not in kinds


def test_collect_agents_down_reported_not_fatal(scenario: Scenario) -> None:
    p = scenario.reader()
    snap = collect(p, ChainIndex(p), StatusFetcher(timeout=1.0))
    down = snap.node(scenario.validators[1])
    up = snap.node(scenario.honest)
    assert down is not None and down.agent_status is None and "unreachable" in (down.agent_error or "")
    assert up is not None and up.agent_status is not None and up.agent_status["role"] == "worker"
    assert snap.totals.agents_up == 4 and snap.totals.agents_down == 1


def test_chain_index_refresh_incremental_and_reorg(scenario: Scenario) -> None:
    p = scenario.reader()
    idx = ChainIndex(p)
    idx.refresh()
    n = len(idx.events)
    assert n > 0
    idx.refresh()
    assert len(idx.events) == n  # nothing new, nothing repeated
    anvil = scenario.net.anvil
    snap_id = anvil.snapshot()
    try:
        w = scenario.net.protocol(1)
        w.claim_task(scenario.pool_id)
        idx.refresh()
        assert len(idx.events) == n + 1 and idx.events[-1].event == "TaskClaimed"
    finally:
        anvil.revert(snap_id)
    anvil.mine(3)  # a different chain from the reverted block on
    idx.refresh()
    assert len(idx.events) == n


def test_status_fetcher_refuses_unknown_schema_and_bad_endpoints() -> None:
    srv, url = serve_status({"schema": "intellect.agent.status/v99", "role": "worker"})
    try:
        f = StatusFetcher(timeout=1.0)
        doc, err = f.fetch_one(url)
        assert doc is None and "v99" in (err or "")
        assert f.fetch_one("relay://not-http")[1] is not None
        assert f.fetch_one("")[1] == "no endpoint registered"
    finally:
        srv.stop()


def test_parse_snapshot_unknown_version_refused(scenario: Scenario) -> None:
    p = scenario.reader()
    doc = json.loads(collect(p, ChainIndex(p)).model_dump_json(by_alias=True))
    assert parse_snapshot(doc).block == doc["block"]
    doc["schema"] = "intellect.dashboard.snapshot/v2"
    with pytest.raises(SchemaVersionError, match="v2"):
        parse_snapshot(doc)


def test_dashboard_server_api_and_errors(scenario: Scenario) -> None:
    with DashboardServer(Dashboard(scenario.reader(), ttl=0.5)) as srv:
        code, body = _get(srv.url + "/api/snapshot")
        assert code == 200
        snap = parse_snapshot(json.loads(body))
        assert snap.totals.submissions == 4
        code, body = _get(f"{srv.url}/api/node/{scenario.cheat}")
        assert code == 200 and json.loads(body)["node"]["upheld"] == 1
        assert _get(srv.url + "/api/node/0xnothex")[0] == 400
        assert _get(srv.url + "/api/node/0x" + "00" * 20)[0] == 404
        assert _get(srv.url + "/node/<script>")[0] == 400
        code, page = _get(srv.url + "/")
        assert code == 200 and b"<script>" in page and b"http://" not in page.split(b"<body>")[0]
        assert _get(srv.url + "/healthz") == (200, b"ok\n")


def test_dashboard_server_rpc_down_answers_503() -> None:
    from intellect.sdk import devnet

    net = devnet.start()
    try:
        srv = DashboardServer(Dashboard(net.protocol(None), ttl=0)).start()
        try:
            assert _get(srv.url + "/api/snapshot")[0] == 200
            net.anvil.stop()
            from intellect.sdk import RetryPolicy

            srv.dashboard.protocol.retry = RetryPolicy(attempts=1, base_delay=0.01, max_delay=0.01)
            code, body = _get(srv.url + "/api/snapshot")
            assert code == 503 and "error" in json.loads(body)
            assert _get(srv.url + "/healthz")[0] == 200  # still serving
        finally:
            srv.stop()
    finally:
        net.stop()


def test_cli_dashboard_serves_until_sigterm(scenario: Scenario) -> None:
    port = free_port()
    net = scenario.net
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "intellect.sdk.cli", "dashboard", "--network", net.url,
                             "--deployment", str(net.deployment_file), "--port", str(port)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: _get(f"http://127.0.0.1:{port}/healthz")[0] == 200, 60), proc.stderr
        code, body = _get(f"http://127.0.0.1:{port}/api/snapshot")
        assert code == 200 and json.loads(body)["totals"]["challenges"] == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert f"127.0.0.1:{port}" in err


def test_cli_dashboard_port_in_use_is_a_usage_error(scenario: Scenario) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        net = scenario.net
        out = subprocess.run([sys.executable, "-m", "intellect.sdk.cli", "dashboard", "--network", net.url,
                              "--deployment", str(net.deployment_file), "--port", str(port)],
                             capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "pick another --port" in out.stderr
