"""Origin → relays → client in one process (threads, real HTTP on loopback)."""

from __future__ import annotations

import http.client
import json
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from shardcast_helpers import assert_same_tree, corrupt_every_shard, relay_complete, wait_for

from intellect.sdk.shardcast import (
    API_PREFIX,
    Client,
    FetchError,
    Origin,
    OutputExistsError,
    Relay,
    UnknownSchemaVersionError,
)

SHARD = 256 * 1024


@pytest.fixture
def ipfs(tmp_path: Path):  # type: ignore[no-untyped-def]
    mod = pytest.importorskip("intellect.sdk.ipfs")
    return mod.EmbeddedIpfs(tmp_path / "ipfs")


@pytest.fixture
def origin(tmp_path: Path, ipfs):  # type: ignore[no-untyped-def]
    o = Origin(tmp_path / "origin", ipfs=ipfs, shard_size=SHARD).start()
    yield o
    o.stop()


def _relay(tmp_path: Path, name: str, upstreams: list[str], **kw) -> Relay:  # type: ignore[no-untyped-def]
    return Relay(upstreams, tmp_path / name, poll_wait=25, **kw).start()


def test_fetch_by_cid_through_two_level_tree_byte_identical(tmp_path: Path, origin: Origin, ipfs,
                                                            random_checkpoint: Path) -> None:
    r1 = _relay(tmp_path, "r1", [origin.url])
    r2 = _relay(tmp_path, "r2", [r1.url])  # depth 2: r2 only knows r1
    try:
        manifest, cid = origin.publish(random_checkpoint, step=7, model_name="tiny")
        assert cid is not None and cid.startswith("bafk")
        assert ipfs.cat(cid, max_size=1 << 20) == manifest.to_bytes()
        out = tmp_path / "out" / "step-7"
        result = Client([r2.url], ipfs=ipfs, workers=3).fetch_detailed(cid, out)
        assert result.path == out and result.downloaded_shards == len(manifest.shards)
        assert result.per_source == {r2.url: len(manifest.shards)}
        assert_same_tree(random_checkpoint, out)
        assert not (out.parent / ".step-7.shardcast").exists()  # sidecar cleaned up
        assert relay_complete(r2, manifest.id) and relay_complete(r1, manifest.id)
    finally:
        r2.stop()
        r1.stop()


def test_relay_learns_new_version_by_long_poll_not_timer(tmp_path: Path, origin: Origin,
                                                         random_checkpoint: Path) -> None:
    r = _relay(tmp_path, "r", [origin.url])
    try:
        time.sleep(0.5)
        t0 = time.monotonic()
        manifest, _ = origin.publish(random_checkpoint, step=1, model_name="tiny")
        wait_for(lambda: relay_complete(r, manifest.id), timeout=20, what="relay to hold the version")
        # Below the 25 s poll window: the long-poll answered on publish.
        assert time.monotonic() - t0 < 20
        # Once it knows a version, it parks in a 25 s long-poll; a new publish still arrives at once.
        (random_checkpoint / "config.json").write_text('{"step": 2}')
        time.sleep(0.5)
        t0 = time.monotonic()
        m2, _ = origin.publish(random_checkpoint, step=2, model_name="tiny")
        wait_for(lambda: r.store.get(m2.id) is not None, timeout=20, what="relay to learn step 2")
        assert time.monotonic() - t0 < 20
    finally:
        r.stop()


def test_fetch_corrupt_shard_at_relay_dropped_and_fetched_elsewhere(tmp_path: Path, origin: Origin,
                                                                    random_checkpoint: Path) -> None:
    bad = _relay(tmp_path, "bad", [origin.url])
    good = _relay(tmp_path, "good", [origin.url])
    try:
        manifest, _ = origin.publish(random_checkpoint, step=3, model_name="tiny")
        wait_for(lambda: relay_complete(bad, manifest.id) and relay_complete(good, manifest.id), what="relays complete")
        # Corrupt every shard on `bad`'s disk after it verified them (bit rot, or a malicious relay).
        corrupt_every_shard(bad, manifest, lambda n: n // 2, 0xFF)
        client = Client([bad.url, good.url], workers=2)
        result = client.fetch_detailed(manifest, tmp_path / "out")
        assert result.corrupt_dropped >= 1
        assert bad.url not in result.per_source
        assert sum(result.per_source.values()) == len(manifest.shards)
        assert_same_tree(random_checkpoint, tmp_path / "out")
    finally:
        bad.stop()
        good.stop()


def test_relay_keeps_last_n_versions(tmp_path: Path, origin: Origin, random_checkpoint: Path) -> None:
    r = _relay(tmp_path, "r", [origin.url], keep=2)
    try:
        ids = []
        for step in range(3):
            (random_checkpoint / "config.json").write_text(json.dumps({"step": step}))
            m, _ = origin.publish(random_checkpoint, step=step, model_name="tiny")
            ids.append(m.id)
            wait_for(lambda m=m: relay_complete(r, m.id), what=f"step {step} at relay")
        assert [v.manifest.id for v in r.store.versions()] == ids[1:]
        assert not (tmp_path / "r" / "versions" / ids[0]).exists()
        assert (tmp_path / "r" / "versions" / ids[2]).is_dir()
    finally:
        r.stop()


def test_server_range_request_returns_partial_content(origin: Origin, random_checkpoint: Path) -> None:
    m, _ = origin.publish(random_checkpoint, step=1, model_name="tiny")
    u = urlsplit(origin.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    path = f"{API_PREFIX}/versions/{m.id}/shards/1"
    full = (origin.data_dir / "versions" / m.id / "shards" / "1").read_bytes()
    conn.request("GET", path, headers={"Range": "bytes=100-199"})
    r = conn.getresponse()
    assert r.status == 206 and r.read() == full[100:200]
    assert r.getheader("Content-Range") == f"bytes 100-199/{len(full)}"
    conn.request("GET", path, headers={"Range": "bytes=-10"})  # same connection: keep-alive
    r = conn.getresponse()
    assert r.status == 206 and r.read() == full[-10:]
    conn.request("GET", path)
    r = conn.getresponse()
    assert r.status == 200 and r.getheader("X-Shard-Sha256") == m.shards[1].sha256 and r.read() == full
    conn.request("GET", f"{API_PREFIX}/versions/{'0' * 64}/shards/0")
    r = conn.getresponse()
    assert r.status == 404 and b"unknown version" in r.read()
    conn.close()


def test_fetch_existing_output_refused_unless_overwrite(tmp_path: Path, origin: Origin,
                                                        random_checkpoint: Path) -> None:
    m, _ = origin.publish(random_checkpoint, step=1, model_name="tiny")
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.bin").write_bytes(b"old")
    with pytest.raises(OutputExistsError, match="already exists"):
        Client([origin.url]).fetch(m, out)
    Client([origin.url]).fetch(m, out, overwrite=True)
    assert_same_tree(random_checkpoint, out)


def test_fetch_unknown_schema_cid_refused(ipfs, origin: Origin, random_checkpoint: Path) -> None:  # type: ignore[no-untyped-def]
    m, _ = origin.publish(random_checkpoint, step=1, model_name="tiny")
    raw = json.loads(m.to_bytes())
    raw["schema"] = "intellect.shardcast.manifest/v9"
    cid = ipfs.add(json.dumps(raw).encode())
    with pytest.raises(UnknownSchemaVersionError, match="manifest/v9"):
        Client([origin.url], ipfs=ipfs).fetch(cid, origin.data_dir.parent / "never")


def test_fetch_all_sources_down_fails_clearly(tmp_path: Path, origin: Origin, random_checkpoint: Path) -> None:
    m, _ = origin.publish(random_checkpoint, step=1, model_name="tiny")
    origin.stop()
    with pytest.raises(FetchError, match=r"no shard completed|no source had it|failed attempts"):
        Client([origin.url], stall_timeout=2, use_relay_hints=False).fetch(m, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_fetch_verify_total_catches_wrong_whole_hash(tmp_path: Path, origin: Origin,
                                                     random_checkpoint: Path) -> None:
    import shutil

    m, _ = origin.publish(random_checkpoint, step=1, model_name="tiny")
    # Right without verify_total's second pass:
    Client([origin.url], verify_total=True).fetch(m, tmp_path / "ok")
    assert_same_tree(random_checkpoint, tmp_path / "ok")
    # A manifest whose shards are right but whose whole-stream sha256 lies (served as its own version).
    forged = m.model_copy(update={"total_sha256": "ab" * 32})
    shutil.copytree(origin.data_dir / "versions" / m.id / "shards", origin.data_dir / "versions" / forged.id / "shards")
    origin.store.add_version(forged, present={s.index for s in forged.shards})
    with pytest.raises(FetchError, match="whole-checkpoint sha256"):
        Client([origin.url], verify_total=True).fetch(forged, tmp_path / "bad")
    assert not (tmp_path / "bad").exists()


def test_relay_restart_serves_verified_shards_from_disk(tmp_path: Path, origin: Origin,
                                                         random_checkpoint: Path) -> None:
    r = _relay(tmp_path, "r", [origin.url])
    m, _ = origin.publish(random_checkpoint, step=5, model_name="tiny")
    wait_for(lambda: relay_complete(r, m.id), what="relay complete")
    r.stop()
    origin.stop()  # the upstream is gone: the restarted relay must serve from its own disk
    (tmp_path / "r" / "versions" / m.id / "shards" / "0.part").write_bytes(b"half a shard")
    r2 = _relay(tmp_path, "r", ["http://127.0.0.1:9"])
    try:
        assert relay_complete(r2, m.id)
        assert not (tmp_path / "r" / "versions" / m.id / "shards" / "0.part").exists()
        Client([r2.url], use_relay_hints=False).fetch(m, tmp_path / "out")
        assert_same_tree(random_checkpoint, tmp_path / "out")
    finally:
        r2.stop()


def test_versions_long_poll_on_empty_store_parks_until_first_publish(origin: Origin,
                                                                     random_checkpoint: Path) -> None:
    u = urlsplit(origin.url)
    # No version and nothing published: the request is held for its whole `wait`.
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    t0 = time.monotonic()
    conn.request("GET", f"{API_PREFIX}/versions?wait=0.6")
    assert json.loads(conn.getresponse().read())["versions"] == []
    assert time.monotonic() - t0 >= 0.5
    # A publish during the wait answers it at once, with the new version.
    published: list[str] = []

    def publish_later() -> None:
        time.sleep(0.4)
        published.append(origin.publish(random_checkpoint, step=3, model_name="tiny")[0].id)

    t = threading.Thread(target=publish_later)
    t.start()
    t0 = time.monotonic()
    conn.request("GET", f"{API_PREFIX}/versions?wait=20")
    doc = json.loads(conn.getresponse().read())
    t.join()
    assert [v["id"] for v in doc["versions"]] == published
    assert time.monotonic() - t0 < 10
    conn.close()


def test_fetch_reused_client_keeps_corrupting_relay_benched(tmp_path: Path, origin: Origin,
                                                           random_checkpoint: Path) -> None:
    bad = _relay(tmp_path, "bad", [origin.url])
    good = _relay(tmp_path, "good", [origin.url])
    try:
        m1, _ = origin.publish(random_checkpoint, step=1, model_name="tiny")
        (random_checkpoint / "config.json").write_text('{"step": 2}')
        m2, _ = origin.publish(random_checkpoint, step=2, model_name="tiny")
        wait_for(lambda: all(relay_complete(r, m.id) for r in (bad, good) for m in (m1, m2)), what="relays complete")
        for m in (m1, m2):  # `bad` serves flipped bits for every shard of both versions
            corrupt_every_shard(bad, m, lambda n: 0, 0x01)
        client = Client([bad.url, good.url], workers=2)
        r1 = client.fetch_detailed(m1, tmp_path / "out1")
        assert r1.corrupt_dropped >= 1 and client.reputation.offences(bad.url) >= 1
        # The next checkpoint: the bench outlives the first fetch, so `bad` gets no request at all.
        r2 = client.fetch_detailed(m2, tmp_path / "out2")
        assert r2.corrupt_dropped == 0 and r2.failures == 0
        assert r2.per_source == {good.url: len(m2.shards)}
        # A fresh client (no shared reputation) has to find out again.
        r3 = Client([bad.url, good.url], workers=2).fetch_detailed(m2, tmp_path / "out3")
        assert r3.corrupt_dropped >= 1
    finally:
        bad.stop()
        good.stop()


def test_fetch_dripping_source_cut_at_its_shard_deadline(tmp_path: Path, origin: Origin,
                                                          random_checkpoint: Path) -> None:
    """Issue 22: a registered relay that answers a shard with the right headers and then one byte every 0.2 s
    never trips a per-read timeout; the shard's total deadline cuts it off and the shard comes from elsewhere."""
    import socket

    manifest, _ = origin.publish(random_checkpoint, step=1, model_name="tiny")
    sizes = {s.index: s.size for s in manifest.shards}
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    stop = threading.Event()
    served: list[str] = []

    def drip(conn: socket.socket) -> None:
        with conn:
            request = conn.recv(65536).decode(errors="replace").split(" ")[1]
            served.append(request)
            index = int(request.split("/shards/")[1].split("?")[0])
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {sizes[index]}\r\n\r\n".encode())
            while not stop.is_set():
                try:
                    conn.send(b"\0")
                except OSError:
                    return
                time.sleep(0.2)

    def accept() -> None:
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=drip, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    dripper = f"http://127.0.0.1:{srv.getsockname()[1]}"
    try:
        result = Client([dripper, origin.url], workers=2, wait=0.5,
                        deadline_slack=1.0).fetch_detailed(manifest, tmp_path / "out")  # seconds, not 30
        assert served, "the dripping source was never asked"
        assert dripper not in result.per_source and sum(result.per_source.values()) == len(manifest.shards)
        assert_same_tree(random_checkpoint, tmp_path / "out")
    finally:
        stop.set()
        srv.close()
