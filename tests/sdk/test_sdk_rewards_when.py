"""`intellect rewards status` says when each pending reward becomes claimable: its challenge window's end."""

from __future__ import annotations

import json

from cli_runner import run_cli  # type: ignore[import-not-found]

from intellect.sdk import parse_tokens
from intellect.sdk.devnet import Devnet


def test_pending_rewards_show_when_they_become_claimable(net: Devnet) -> None:
    net.protocol(0).publish_checkpoint(1, 0, "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku")
    w = net.protocol(4)
    w.drip()
    w.register_node("worker", gpu_model="cpu")
    w.stake(w.address, parse_tokens("100"))
    claim = w.claim_task(1)
    sub = w.submit_work(claim.task_id, "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", b"\x01" * 32,
                        4, 0)
    chain = ["--network", net.url, "--deployment", str(net.deployment_file), "--dev-account", "4"]
    code, out, err = run_cli([*chain, "--json", "rewards", "status"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["pending_ids"] == [sub.submission_id]
    assert doc["claimable_at"] == {str(sub.submission_id): sub.window_end}
    code, out, _ = run_cli([*chain, "rewards", "status"])
    assert f"#{sub.submission_id}" in out and "claimable from" in out and "unless challenged" in out
