"""The agents' shared parts: crash-safe state, the HTTP face, signed attestations."""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from intellect.agents.attestation import Attestation, AttestationError, sign_attestation
from intellect.agents.roles._server import AgentServer, HttpError, Metrics
from intellect.agents.roles._state import StateStore

LEDGER = "0x" + "11" * 20
PROOFS = "0x" + "22" * 32


def test_state_store_survives_kill(tmp_path):
    path = tmp_path / "state.sqlite"
    # a child process writes a record and is killed -9 right after the call returns
    code = (
        "import os, signal, sys\n"
        "from intellect.agents.roles._state import StateStore\n"
        f"s = StateStore({str(path)!r})\n"
        "s.put('submission', 7, 'sending', {'cid': 'bafk'})\n"
        "s.set('cursor', [12, 3])\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False)
    assert proc.returncode == -9
    store = StateStore(path)
    assert store.record("submission", 7)["status"] == "sending"
    assert store.record("submission", 7)["data"] == {"cid": "bafk"}
    assert store.get("cursor") == [12, 3]


def test_state_store_put_merges_and_filters(tmp_path):
    store = StateStore(tmp_path / "s.sqlite")
    store.put("verdict", 1, "accepted", {"a": 1})
    store.put("verdict", 1, "attested", {"b": 2})
    store.put("verdict", 2, "challenged")
    assert store.record("verdict", 1)["data"] == {"a": 1, "b": 2}
    assert [r["id"] for r in store.records("verdict", "challenged")] == ["2"]
    assert store.count("verdict") == 2
    assert store.record("verdict", 3) is None


def test_state_store_transaction_rolls_back(tmp_path):
    store = StateStore(tmp_path / "s.sqlite")
    with pytest.raises(RuntimeError), store.transaction():
        store.put("x", 1, "a")
        raise RuntimeError("boom")
    assert store.record("x", 1) is None


def test_state_store_refuses_unknown_version(tmp_path):
    store = StateStore(tmp_path / "s.sqlite")
    store.set("_schema_version", 99)
    store.close()
    with pytest.raises(RuntimeError, match="schema version 99"):
        StateStore(tmp_path / "s.sqlite")


def _get(url):
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.status, resp.headers["Content-Type"], resp.read()


def test_agent_server_status_metrics_and_routes():
    metrics = Metrics()
    metrics.declare("submissions_total", "counter", "Submissions sent")
    metrics.declare("backlog", "gauge", "Pending verifications")
    metrics.inc("submissions_total", role="worker")
    metrics.inc("submissions_total", role="worker")
    metrics.set("backlog", 3)
    server = AgentServer(lambda: {"role": "worker", "ok": True}, metrics).start()
    received = []

    def post(query, body):
        if not isinstance(body, dict):
            raise HttpError(400, "expected an object")
        received.append(body)
        return {"stored": len(received)}

    server.route("POST", "/attestations", post)
    try:
        status, ctype, body = _get(server.url + "/status")
        assert status == 200 and ctype == "application/json"
        assert json.loads(body) == {"role": "worker", "ok": True}
        status, ctype, body = _get(server.url + "/metrics")
        assert ctype.startswith("text/plain; version=0.0.4")
        text = body.decode()
        assert "# TYPE intellect_submissions_total counter" in text
        assert 'intellect_submissions_total{role="worker"} 2' in text
        assert "intellect_backlog 3" in text
        req = urllib.request.Request(server.url + "/attestations", data=b'{"a": 1}', method="POST")
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert json.loads(resp.read()) == {"stored": 1}
        req = urllib.request.Request(server.url + "/attestations", data=b"[1]", method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        assert err.value.code == 400
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(server.url + "/nope", timeout=5)
        assert err.value.code == 404
    finally:
        server.stop()


def test_metrics_refuses_undeclared_name():
    with pytest.raises(KeyError, match="not declared"):
        Metrics().inc("nope")


def test_attestation_round_trip_and_tamper():
    key = os.urandom(32)
    att = sign_attestation(key, chain_id=31337, ledger=LEDGER, submission_id=5, rollouts_cid="bafkrei",
                           proofs_hash=PROOFS, policy_step=2)
    wire = att.model_dump_json(by_alias=True)
    back = Attestation.model_validate_json(wire)
    back.verify()
    for change in ({"submission_id": 6}, {"rollouts_cid": "bafkother"}, {"policy_step": 3},
                   {"accepted": False}, {"chain_id": 1}):
        with pytest.raises(AttestationError, match="signed by"):
            back.model_copy(update=change).verify()


def test_attestation_refuses_unknown_schema_and_bad_signature():
    att = sign_attestation(os.urandom(32), chain_id=1, ledger=LEDGER, submission_id=1, rollouts_cid="c",
                           proofs_hash=PROOFS, policy_step=0)
    data = json.loads(att.model_dump_json(by_alias=True))
    with pytest.raises(ValueError, match="unknown attestation schema"):
        Attestation.model_validate({**data, "schema": "intellect.attestation/v9"})
    broken = Attestation.model_validate({**data, "signature": "0x" + "00" * 65})
    with pytest.raises(AttestationError, match="bad signature"):
        broken.verify()
