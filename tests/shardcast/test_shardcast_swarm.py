"""Multi-process integration: origin, relays and clients as separate CLI processes on loopback.

One swarm, three faults at once, a real (tiny, random-init) Llama checkpoint:

    origin O ── relay A (slow; SIGKILLed mid-transfer) ──┐
       │   └─── relay B (its shards corrupted on disk)   ├── relay C (upstreams A and O, depth 2)
       └────────────────────────────────────────────────┘   (C: RAM arena)
    client 1: [B, C]   drops B's corrupt shards, finishes from C
    client 2: [A, C]   A dies under it, fails over to C
    client 3: [C]      SIGKILLed after a few shards, resumed without re-downloading them

Every client must end with byte-identical files that transformers loads.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from shardcast_helpers import Procs, assert_same_tree, wait_for

from intellect.sdk.shardcast import Manifest

SHARD = 32 * 1024
SLOW = str(100 * 1024)  # bytes/s per response: slow enough to kill things mid-transfer


def _journal_lines(out: Path) -> int:
    j = out.parent / f".{out.name}.shardcast" / "journal"
    try:
        return len(j.read_text().split())
    except FileNotFoundError:
        return 0


def _summary(procs: Procs, name: str) -> dict:
    lines = [ln for ln in procs.stdout(name).splitlines() if ln.startswith("{")]
    assert lines, f"{name} printed no summary; stderr:\n{procs.log(name)}"
    return json.loads(lines[-1])


def test_swarm_faults_every_client_byte_identical_and_loadable(tmp_path: Path, procs: Procs,
                                                                hf_checkpoint: Path) -> None:
    mf = tmp_path / "manifest.json"
    _, o_url = procs.server("publish", str(hf_checkpoint), "--step", "1", "--model-name", "tiny-llama",
                            "--shard-size", str(SHARD), "--data-dir", str(tmp_path / "o"),
                            "--manifest-out", str(mf), name="origin")
    manifest = Manifest.from_bytes(mf.read_bytes())
    n = len(manifest.shards)
    assert n >= 20
    relay_a, a_url = procs.server("relay", "--upstream", o_url, "--data-dir", str(tmp_path / "a"),
                                  "--max-rate", SLOW, name="relay-a")
    _, b_url = procs.server("relay", "--upstream", o_url, "--data-dir", str(tmp_path / "b"), name="relay-b")
    # C keeps shards in a RAM arena (1 MiB holds this ~0.8 MB checkpoint) and serves them from memory.
    _, c_url = procs.server("relay", "--upstream", a_url, "--upstream", o_url, "--data-dir",
                            str(tmp_path / "c"), "--max-rate", SLOW, "--ram-mib", "1", name="relay-c")

    # Corrupt relay B's copy once it has verified and stored every shard.
    b_shards = tmp_path / "b" / "versions" / manifest.id / "shards"
    wait_for(lambda: all((b_shards / str(i)).is_file() for i in range(n)), what="relay B to hold all shards")
    for i in range(n):
        p = b_shards / str(i)
        data = bytearray(p.read_bytes())
        data[7] ^= 0x55
        p.write_bytes(bytes(data))

    fetch = ["fetch", str(mf), "--json", "--no-progress"]
    out1, out2, out3 = (tmp_path / "clients" / f"c{i}" for i in (1, 2, 3))
    c1 = procs.start(*fetch, str(out1), "--relay", b_url, "--relay", c_url, "--workers", "2", log_name="client-1")
    c2 = procs.start(*fetch, str(out2), "--relay", a_url, "--relay", c_url, "--workers", "2", log_name="client-2")
    c3 = procs.start(*fetch, str(out3), "--relay", c_url, "--workers", "2", log_name="client-3")

    # Kill relay A while client 2 is part-way through.
    wait_for(lambda: _journal_lines(out2) >= 1, what="client 2 to verify a shard")
    relay_a.send_signal(signal.SIGKILL)
    # Kill client 3 after a few verified shards; the output must not exist yet (atomic install).
    wait_for(lambda: _journal_lines(out3) >= 3, what="client 3 to verify 3 shards")
    c3.send_signal(signal.SIGKILL)
    c3.wait(timeout=10)
    assert not out3.exists()
    verified_before = _journal_lines(out3)
    assert verified_before < n, "client 3 finished before it could be killed"
    c3b = procs.start(*fetch, str(out3), "--relay", c_url, "--workers", "2", log_name="client-3b")

    for name, p in (("client-1", c1), ("client-2", c2), ("client-3b", c3b)):
        assert p.wait(timeout=120) == 0, f"{name} failed:\n{procs.log(name)}"

    s1, s2, s3 = _summary(procs, "client-1"), _summary(procs, "client-2"), _summary(procs, "client-3b")
    assert s1["corrupt_dropped"] >= 1 and b_url not in s1["per_source"]
    assert s2["per_source"].get(c_url, 0) >= 1 and s2["failures"] >= 1  # A's death was noticed
    assert s3["resumed_shards"] >= verified_before - 1  # the last journal line may be mid-write
    assert s3["resumed_shards"] + s3["downloaded_shards"] == n
    assert s3["downloaded_shards"] < n

    from transformers import AutoModelForCausalLM, AutoTokenizer

    for out in (out1, out2, out3):
        assert_same_tree(hf_checkpoint, out)
        model = AutoModelForCausalLM.from_pretrained(out)
        assert model.config.hidden_size == 64
    assert AutoTokenizer.from_pretrained(out1).encode("the policy step")
