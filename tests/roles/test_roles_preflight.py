"""`intellect node preflight` against a real trainer agent (its registered endpoint answers /status) and a real
relay: a registered, staked worker is ready; `--strict` turns the remaining warnings into exit 6; with the trainer
stopped the same worker is not ready (exit 5), told so in one line within the liveness timeout."""

from __future__ import annotations

import json

from cli_runner import run_cli  # type: ignore[import-not-found]

from intellect.agents.preflight import EXIT_NOT_READY, EXIT_WARNINGS
from intellect.sdk import parse_tokens


def test_preflight_with_a_live_trainer_and_relay(swarm) -> None:
    net = swarm.devnet
    p = net.protocol(0)
    trainer = swarm.add("trainer", "trainer", 0).start()
    relay = swarm.add("relay", "relay", 3).start()
    swarm.wait(lambda: p.node(p.address).endpoint and trainer.status() is not None, 240, "the trainer's endpoint")
    swarm.wait(lambda: relay.status() is not None, 120, "the relay's /status")
    w = net.protocol(7)
    w.drip()
    w.register_node("worker", gpu_model="cpu", endpoint="")
    w.stake(w.address, parse_tokens("100"))
    args = ["--network", net.url, "--deployment", str(net.deployment_file), "--dev-account", "7", "--json",
            "node", "preflight", "--role", "worker", "--timeout", "5"]
    code, out, _ = run_cli(args)
    doc = json.loads(out)
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["trainer"]["level"] == "OK" and "live" in checks["trainer"]["detail"], (out, swarm.tails())
    assert checks["stake"]["level"] == checks["registration"]["level"] == "OK"
    assert code == 0 and doc["verdict"].startswith("ready"), out
    if doc["verdict"] != "ready":
        assert run_cli([*args, "--strict"])[0] == EXIT_WARNINGS
    trainer.stop()
    code, out, _ = run_cli(args)
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert code == EXIT_NOT_READY and checks["trainer"]["level"] == "FAIL"
    assert "did not answer within 5 s" in checks["trainer"]["detail"]
