"""The relay's RAM arena: shards received into shared memory, served from it, written behind."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from shardcast_helpers import assert_same_tree, corrupt_every_shard, relay_complete, wait_for

from intellect.sdk.shardcast import API_PREFIX, Arena, Client, Manifest, Origin, Relay, http_get
from intellect.sdk.shardcast import ARENA_ALIGN as ALIGN

SHARD = 256 * 1024


@pytest.fixture
def origin(tmp_path: Path):  # type: ignore[no-untyped-def]
    o = Origin(tmp_path / "origin", shard_size=SHARD).start()
    yield o
    o.stop()


def _health(url: str) -> dict:
    return json.loads(http_get(url, "/health"))


def _files_on_disk(relay: Relay, m: Manifest) -> set[int]:
    d = relay.store.data_dir / "versions" / m.id / "shards"
    return {int(p.name) for p in d.iterdir() if p.name.isdigit()}


# -- the allocator ---------------------------------------------------------------------------------


def test_arena_alloc_release_coalesces_free_extents() -> None:
    a = Arena(16 * ALIGN)
    try:
        s1, s2, s3 = (a.alloc(10_000) for _ in range(3))
        assert s1 and s2 and s3
        assert [s.offset for s in (s1, s2, s3)] == [0, 3 * ALIGN, 6 * ALIGN]  # 10,000 B spans 3 pages
        assert a.alloc(8 * ALIGN) is None  # 7 pages left
        a.release(s2)
        hole = a.alloc(3 * ALIGN)
        assert hole is not None and hole.offset == 3 * ALIGN  # first fit reuses the hole
        for s in (s1, hole, s3):
            a.release(s)
        assert a.free_bytes() == 16 * ALIGN
        whole = a.alloc(16 * ALIGN)  # neighbours merged back into one extent
        assert whole is not None and whole.offset == 0
        a.view(whole)[:5] = b"hello"
        assert bytes(a.view(whole)[:5]) == b"hello"
    finally:
        a.close()


def test_arena_slot_not_reused_while_pinned_or_draining() -> None:
    a = Arena(4 * ALIGN)
    try:
        s = a.alloc(4 * ALIGN)
        assert s is not None and a.pin(s)
        a.release(s)
        assert not a.pin(s)  # released: later requests go to disk instead
        assert a.alloc(ALIGN) is None  # a send is still running from it
        a.unpin(s)
        assert a.alloc(ALIGN) is None  # its socket buffers may still reference the pages
        a.reuse_grace_s = 0.0
        assert a.alloc(4 * ALIGN) is not None
    finally:
        a.close()


def test_arena_refuses_sizes_below_a_page() -> None:
    with pytest.raises(ValueError, match="below one page"):
        Arena(100)


# -- a relay with an arena -------------------------------------------------------------------------


def test_relay_ram_arena_keeps_shards_off_disk_until_idle(tmp_path: Path, origin: Origin,
                                                          random_checkpoint: Path) -> None:
    r = Relay([origin.url], tmp_path / "r", ram_bytes=8 * 2**20, persist_idle=3600).start()
    try:
        m, _ = origin.publish(random_checkpoint, step=1, model_name="tiny")
        wait_for(lambda: relay_complete(r, m.id), what="relay complete")
        result = Client([r.url], workers=3).fetch_detailed(m, tmp_path / "out")
        assert result.per_source == {r.url: len(m.shards)}
        assert_same_tree(random_checkpoint, tmp_path / "out")
        st = r.store.get(m.id)
        assert st is not None and set(st.ram) == {s.index for s in m.shards}
        assert _files_on_disk(r, m) == set()  # served from RAM: the relay wrote nothing yet
        h = _health(r.url)
        assert h["unpersisted_bytes"] == m.total_size
        assert h["ram_free_bytes"] == 8 * 2**20 - sum(st.ram[s.index].span for s in m.shards)
    finally:
        r.stop()


def test_relay_ram_arena_writes_behind_and_restart_serves_from_disk(tmp_path: Path, origin: Origin,
                                                                     random_checkpoint: Path) -> None:
    r = Relay([origin.url], tmp_path / "r", ram_bytes=8 * 2**20, persist_idle=0.2).start()
    try:
        m, _ = origin.publish(random_checkpoint, step=1, model_name="tiny")
        Client([r.url], workers=2).fetch(m, tmp_path / "out1")
        wait_for(lambda: _health(r.url)["unpersisted_bytes"] == 0, what="write-behind")
        shard_dir = tmp_path / "r" / "versions" / m.id / "shards"
        stream = b"".join(p.read_bytes() for p in sorted(shard_dir.iterdir(), key=lambda p: int(p.name)))
        assert len(stream) == m.total_size and not list(shard_dir.glob("*.part"))
    finally:
        r.stop()
    origin.stop()  # the restarted relay can only serve what it wrote
    r2 = Relay(["http://127.0.0.1:9"], tmp_path / "r", ram_bytes=8 * 2**20).start()
    try:
        st = r2.store.get(m.id)
        assert st is not None and st.complete and not st.ram
        Client([r2.url], workers=2).fetch(m, tmp_path / "out2")
        assert_same_tree(random_checkpoint, tmp_path / "out2")
    finally:
        r2.stop()


def test_relay_arena_too_small_spills_to_disk_and_serves_ranges(tmp_path: Path, origin: Origin,
                                                                random_checkpoint: Path) -> None:
    r = Relay([origin.url], tmp_path / "r", ram_bytes=3 * SHARD, persist_idle=3600, workers=1).start()
    try:
        m, _ = origin.publish(random_checkpoint, step=1, model_name="tiny")
        wait_for(lambda: relay_complete(r, m.id), what="relay complete")
        st = r.store.get(m.id)
        assert st is not None and len(st.ram) == 3
        assert _files_on_disk(r, m) == {s.index for s in m.shards} - set(st.ram)
        in_ram = min(st.ram)
        full = bytes(r.arena.view(st.ram[in_ram]))  # type: ignore[union-attr]
        u = urlsplit(r.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("GET", f"{API_PREFIX}/versions/{m.id}/shards/{in_ram}", headers={"Range": "bytes=100-199"})
        resp = conn.getresponse()
        assert resp.status == 206 and resp.read() == full[100:200]
        conn.close()
        Client([r.url], workers=3).fetch(m, tmp_path / "out")
        assert_same_tree(random_checkpoint, tmp_path / "out")
    finally:
        r.stop()


def test_relay_arena_drops_persisted_version_for_the_next(tmp_path: Path, origin: Origin,
                                                          random_checkpoint: Path) -> None:
    size = sum(p.stat().st_size for p in random_checkpoint.rglob("*") if p.is_file())
    r = Relay([origin.url], tmp_path / "r", ram_bytes=size + 64 * ALIGN, persist_idle=0.2)
    assert r.arena is not None
    r.arena.reuse_grace_s = 0.0
    r.start()
    try:
        m1, _ = origin.publish(random_checkpoint, step=1, model_name="tiny")
        wait_for(lambda: relay_complete(r, m1.id), what="step 1 at relay")
        wait_for(lambda: _health(r.url)["unpersisted_bytes"] == 0, what="write-behind of step 1")
        (random_checkpoint / "config.json").write_text('{"model_type": "llama", "step": 2}')
        m2, _ = origin.publish(random_checkpoint, step=2, model_name="tiny")
        wait_for(lambda: relay_complete(r, m2.id), what="step 2 at relay")
        st1, st2 = r.store.get(m1.id), r.store.get(m2.id)
        assert st1 is not None and st2 is not None
        assert set(st2.ram) == {s.index for s in m2.all_shards()}  # the new version (and its delta) in RAM
        assert not st1.ram and st1.complete  # the old one moved out, still served from its files
        Client([r.url], workers=2).fetch(m1, tmp_path / "out1")
        Client([r.url], workers=2).fetch(m2, tmp_path / "out2")
        assert_same_tree(random_checkpoint, tmp_path / "out2")
    finally:
        r.stop()


def test_ram_relay_drops_corrupt_upstream_shards_and_frees_their_slots(tmp_path: Path, origin: Origin,
                                                                       random_checkpoint: Path) -> None:
    bad = Relay([origin.url], tmp_path / "bad").start()
    try:
        m, _ = origin.publish(random_checkpoint, step=1, model_name="tiny")
        wait_for(lambda: relay_complete(bad, m.id), what="bad relay complete")
        corrupt_every_shard(bad, m, lambda n: n // 3, 0x01)  # bit rot (or a malicious relay) after verification
        ram = Relay([bad.url, origin.url], tmp_path / "ram", ram_bytes=8 * 2**20, persist_idle=3600).start()
        try:
            wait_for(lambda: relay_complete(ram, m.id), what="RAM relay complete")
            st = ram.store.get(m.id)
            assert st is not None and ram.reputation.offences(bad.url) >= 1
            held = sum(slot.span for slot in st.ram.values())
            # Slots of rejected copies went back (after the reuse grace): only verified shards hold RAM.
            wait_for(lambda: ram.arena.free_bytes() == 8 * 2**20 - held,  # type: ignore[union-attr]
                     what="aborted slots freed", timeout=ram.arena.reuse_grace_s + 10)  # type: ignore[union-attr]
            Client([ram.url], workers=2).fetch(m, tmp_path / "out")
            assert_same_tree(random_checkpoint, tmp_path / "out")
        finally:
            ram.stop()
    finally:
        bad.stop()
