"""Bounded work for every byte from a stranger (issue 22): outbound HTTP has a total deadline, a
stalling peer is benched, discovery lists only staked nodes and follows registry and stake events
incrementally, `/attestations` is paged."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest
from nodes import TOKEN, staked_node  # type: ignore[import-not-found]
from role_config import role_config  # type: ignore[import-not-found]
from rpc_counter import count_rpc  # type: ignore[import-not-found]

from intellect.agents.roles._runtime import LISTING_FLOOR, MAX_ATTESTATIONS_PAGE, Directory, attestation_page
from intellect.sdk.http import HttpServer, JsonHandler, PeerDeadlineError, PeerHttpError, fetch


class DripServer:
    """A real TCP peer that answers one byte every `pause` seconds (headers first)."""

    def __init__(self, pause: float = 0.2) -> None:
        self.pause = pause
        self.connections = 0
        self.opened: list[float] = []  # when each connection was accepted and when its sender stopped
        self.closed: list[float] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self.opened.append(time.monotonic())
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        try:
            self._send(conn)
        finally:
            self.closed.append(time.monotonic())

    @staticmethod
    def overlap(servers: list[DripServer]) -> int:
        """Most connections open at one moment across `servers` (from their open/close times)."""
        marks = sorted([(t, 1) for s in servers for t in s.opened] + [(t, -1) for s in servers for t in s.closed],
                       key=lambda m: (m[0], m[1]))
        best = cur = 0
        for _, step in marks:
            cur += step
            best = max(best, cur)
        return best

    def _send(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            try:
                for b in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Pad: " + b"a" * 4096:
                    if self._stop.is_set():
                        return
                    conn.send(bytes([b]))
                    time.sleep(self.pause)
            except OSError:
                return

    def close(self) -> None:
        self._stop.set()
        self.sock.close()


class StatusHandler(JsonHandler):
    def do_GET(self) -> None:
        self.reply_json(200, {"schema": "intellect.agent.status/v1", "services": {"ipfs": "http://127.0.0.1:1/ipfs"}})


@contextlib.contextmanager
def status_server():
    with HttpServer(StatusHandler, name="status") as srv:
        yield srv.url


@pytest.fixture
def drip():
    d = DripServer()
    yield d
    d.close()


def test_fetch_has_a_total_deadline_against_a_dripping_peer(drip):
    t0 = time.monotonic()
    with pytest.raises(PeerDeadlineError, match="deadline"):
        fetch("GET", drip.url + "/status", deadline=1.0, timeout=3.0)  # each byte well inside the read timeout
    assert time.monotonic() - t0 < 10  # 5e47eb6's requests call read on for 4096 × 0.2 s


def test_fetch_caps_the_body_and_reads_real_json():
    with status_server() as url:
        reply = fetch("GET", url + "/status", deadline=5.0)
        assert reply.ok and reply.json()["services"]["ipfs"].startswith("http://")
        with pytest.raises(PeerHttpError, match="larger than 10 bytes"):
            fetch("GET", url + "/status", deadline=5.0, max_bytes=10)
    with pytest.raises(PeerHttpError):
        fetch("GET", "file:///etc/passwd")


def test_attestation_page_is_stable_across_ties():
    records = [{"id": str(i), "updated_at": 10.0 + i // 3, "data": {}} for i in range(10)]
    seen, since, after = [], 0.0, -1
    while True:
        page = attestation_page(records, since, after, 4)
        seen += [r["id"] for r in page]
        if len(page) < 4:
            break
        since, after = page[-1]["updated_at"], int(page[-1]["id"])
    assert seen == [str(i) for i in range(10)]
    assert MAX_ATTESTATIONS_PAGE <= 1000


def test_directory_benches_a_dripping_peer_and_follows_events(devnet, drip):
    """A staked node whose endpoint drips its /status must not hold every agent's refresh (5e47eb6: > 30 s per
    call, every call), and a new node is found from its events alone."""
    from intellect.sdk import Role

    with status_server() as honest:
        staked_node(devnet, 1, Role.WORKER, endpoint=drip.url)
        staked_node(devnet, 2, Role.WORKER, endpoint=honest)
        p = devnet.protocol(0)
        reads: list[str] = []
        real_node = p.node

        def counting_node(address=None):
            reads.append(address)
            return real_node(address)

        p.node = counting_node
        d = Directory(p, timeout=1.0)
        t0 = time.monotonic()
        assert d.services("ipfs") == ["http://127.0.0.1:1/ipfs"]
        assert time.monotonic() - t0 < 10
        assert d.benched(devnet.protocol(1).address) and not d.benched(devnet.protocol(2).address)
        before = drip.connections
        d._status.clear()  # even with nothing cached, a benched peer is not asked again
        assert d.services("ipfs") == ["http://127.0.0.1:1/ipfs"]
        assert drip.connections == before
        # incremental: a refresh with no new registry event reads no node again; a new node is read once
        n_reads = len(reads)
        d.nodes(refresh=True)
        assert len(reads) == n_reads
        staked_node(devnet, 3, Role.VALIDATOR, endpoint=honest)
        nodes = d.nodes(refresh=True)
        assert devnet.protocol(3).address in nodes and reads[n_reads:] == [devnet.protocol(3).address]


def test_a_benched_node_back_on_a_new_endpoint_is_asked_again(devnet, drip):
    """A worker restarted on another port registers its new endpoint; the bench its old endpoint earned (a dead
    or dripping /status) must not hide the new one for up to `bench_max` (its files would be fetched by no
    validator, its work challenged as unavailable). The same endpoint stays benched."""
    from intellect.sdk import Role

    with status_server() as honest:
        w = staked_node(devnet, 1, Role.WORKER, endpoint=drip.url)
        d = Directory(devnet.protocol(0), timeout=1.0)
        assert d.services("ipfs") == [] and d.benched(w.address)
        w.update_node(w.address, gpu_model="cpu", vram_gib=0, gpu_count=0, endpoint=drip.url)  # same endpoint
        d.nodes(refresh=True)
        assert d.benched(w.address)
        w.update_node(w.address, gpu_model="cpu", vram_gib=0, gpu_count=0, endpoint=honest)  # back, elsewhere
        d.nodes(refresh=True)
        assert not d.benched(w.address)
        assert d.services("ipfs") == ["http://127.0.0.1:1/ipfs"] and d.status(w.address) is not None


def test_dripping_peers_are_asked_together_and_benched(devnet):
    """Three staked peers that drip: one refresh asks them at once (never one deadline after another), benches
    all three, and still returns the honest peer's service; the next refresh asks none of them."""
    from intellect.sdk import Role

    drips = [DripServer() for _ in range(3)]
    try:
        with status_server() as honest:
            for i, dr in enumerate(drips, start=1):
                staked_node(devnet, i, Role.WORKER, endpoint=dr.url)
            staked_node(devnet, 4, Role.RELAY, stake=LISTING_FLOOR, endpoint=honest)
            d = Directory(devnet.protocol(0), timeout=1.0, status_ttl=0.0)
            t0 = time.monotonic()
            assert d.services("ipfs") == ["http://127.0.0.1:1/ipfs"]
            assert time.monotonic() - t0 < 20  # liveness only; 5e47eb6 read 4096 bytes × 0.2 s from each in a row
            assert [dr.connections for dr in drips] == [1, 1, 1]
            # all three open at once (asked one after another, at most two overlap: one closing, the next opening)
            assert DripServer.overlap(drips) == 3
            assert all(d.benched(devnet.protocol(i).address) for i in (1, 2, 3))
            assert d.services("ipfs") == ["http://127.0.0.1:1/ipfs"]
            assert [dr.connections for dr in drips] == [1, 1, 1]
    finally:
        for dr in drips:
            dr.close()


class CountingStatus(JsonHandler):
    calls = 0

    def do_GET(self) -> None:
        type(self).calls += 1
        self.reply_json(200, {"schema": "intellect.agent.status/v1", "services": {"ipfs": "http://127.0.0.1:1/ipfs"}})


def test_unstaked_registrations_cost_a_refresh_nothing(devnet):
    """Registering costs gas only; a node is listed once it holds the role's minimum stake (and at least
    LISTING_FLOOR). 200 registrations without it add no /status fetch and no node read to an agent's refresh
    (5e47eb6: every one of them asked, 64 a refresh; read one by one every 5 s); one that stakes is found from
    its StakeUpdated event; a raised minimum unlists a node (MinStakeSet)."""
    from eth_account import Account

    from intellect.sdk import Role

    roles = [Role.WORKER, Role.VALIDATOR, Role.TRAINER, Role.RELAY]
    with HttpServer(CountingStatus, name="counting-status") as srv:
        CountingStatus.calls = 0
        staked_node(devnet, 1, Role.WORKER, endpoint=srv.url)
        p = devnet.protocol(0)
        d = Directory(p, timeout=2.0, status_ttl=0.0)  # every listed node asked on every call
        assert d.services("ipfs") == ["http://127.0.0.1:1/ipfs"] and CountingStatus.calls == 1

        spam = devnet.protocol(2)
        spam.drip()
        keys = [Account.create() for _ in range(200)]
        for i, key in enumerate(keys):
            spam.register_node(roles[i % 4], node_account=key, endpoint=srv.url)
        spam.stake(keys[0].address, 100 * TOKEN - 1)  # a worker one wei short of the minimum
        spam.stake(keys[3].address, LISTING_FLOOR // 2)  # a relay (minimum 0) under the listing floor
        assert spam.min_stake(Role.RELAY) == 0

        with count_rpc(p.w3) as rpc:
            CountingStatus.calls = 0
            d.nodes(refresh=True)
            assert d.services("ipfs") == ["http://127.0.0.1:1/ipfs"]
            assert CountingStatus.calls == 1  # the staked node only
            assert rpc.count("eth_call") == 0  # no node record read for any of the 200
            assert len(d.by_role("worker")) == 1 and not d.by_role("relay")

        spam.stake(keys[3].address, LISTING_FLOOR // 2)  # the relay reaches the floor: listed from its event
        with count_rpc(p.w3) as rpc:
            CountingStatus.calls = 0
            d.nodes(refresh=True)
            d.services("ipfs")
            assert CountingStatus.calls == 2 and rpc.count("eth_call") == 1
            assert [n.address for n in d.by_role("relay")] == [keys[3].address]

        # the admin raises the worker minimum above the staked worker's stake: unlisted at the next refresh
        p.transact("StakeManager", "setMinStake", int(Role.WORKER), 200 * TOKEN)
        d.nodes(refresh=True)
        assert not d.by_role("worker") and d.by_role("relay")
        CountingStatus.calls = 0
        d.services("ipfs")
        assert CountingStatus.calls == 1


def test_shardcast_http_get_deadline_is_total(drip):
    """The SDK's small-document helper (versions, manifests, health) shares the total deadline."""
    from intellect.sdk.shardcast import UpstreamError, http_get

    t0 = time.monotonic()
    with pytest.raises(UpstreamError, match="deadline"):
        http_get(drip.url, "/versions", timeout=1.0)
    assert time.monotonic() - t0 < 10


def test_ipfs_peer_dripping_a_block_is_cut_off(drip, tmp_path):
    """Every agent fetches missing blocks from every registered node's gateway: one that drips is cut off."""
    from intellect.sdk.ipfs import Cid, ContentNotFoundError, EmbeddedIpfs

    store = EmbeddedIpfs(tmp_path / "ipfs", peers=[drip.url], timeout=1.0)
    t0 = time.monotonic()
    with pytest.raises(ContentNotFoundError):
        store.cat(str(Cid.of(b"x" * 100)))
    assert time.monotonic() - t0 < 10


def test_trainer_pulls_attestations_only_from_listed_validators_and_benches_a_stall(devnet, drip, tmp_path):
    """The trainer's attestation pull asks staked validators only (an unstaked registration is never asked), and
    one that drips is cut at its deadline and benched: the next round does not ask it again."""
    from intellect.agents.roles.attestation_intake import pull_attestations
    from intellect.agents.roles.trainer import Trainer
    from intellect.sdk import Role

    with HttpServer(CountingStatus, name="counting-attestations") as srv:
        CountingStatus.calls = 0
        staked_node(devnet, 1, Role.VALIDATOR, endpoint=drip.url)
        devnet.protocol(2).register_node(Role.VALIDATOR, endpoint=srv.url)  # registered, never staked
        cfg = role_config(devnet, "trainer", tmp_path / "t", 0)
        t = Trainer(cfg)
        try:
            t.connect()
            pull_attestations(t.directory, t.state, t.accept_attestation)
            assert drip.connections == 1 and CountingStatus.calls == 0
            assert t.directory.benched(devnet.protocol(1).address)
            pull_attestations(t.directory, t.state, t.accept_attestation)
            assert drip.connections == 1 and CountingStatus.calls == 0
        finally:
            t.state.close()


def test_an_advertising_relay_stakes_the_listing_floor_and_is_found(devnet, tmp_path):
    """The relay minimum is 0, but peers list a relay only from LISTING_FLOOR: the relay agent stakes it."""
    from intellect.agents.roles.relay import RelayAgent

    cfg = role_config(devnet, "relay", tmp_path / "r", 5)
    relay = RelayAgent(cfg)
    try:
        relay.connect()
        relay.start_server()
        relay.ensure_node()
        p = relay.protocol
        assert p.min_stake("relay") == 0 and p.active_stake(p.address) == LISTING_FLOOR
        assert [n.address for n in Directory(devnet.protocol(0)).by_role("relay")] == [p.address]
    finally:
        for close in relay._closers:
            close()
        relay.state.close()


def test_directory_fetches_a_bounded_number_of_peers_per_call(devnet):
    """A flood of listed (staked) nodes is worked through a bounded number per refresh, the most staked first."""
    from intellect.sdk import Role

    with status_server() as honest:
        for i in range(1, 4):
            staked_node(devnet, i, Role.WORKER, stake=(100 + i) * TOKEN, endpoint=honest)
        d = Directory(devnet.protocol(0), timeout=2.0, max_fetch_per_call=2)
        assert len(d.services("ipfs")) == 1  # one URL, served by every node
        asked = {a for a, (_, doc) in d._status.items() if doc is not None}
        assert asked == {devnet.protocol(i).address.lower() for i in (2, 3)}
        d.services("ipfs")
        assert sum(1 for _, doc in d._status.values() if doc is not None) == 3


def test_status_lists_are_bounded():
    """An agent's /status lists grow with its history: each is served as its newest items only."""
    from intellect.agents.roles._server import MAX_STATUS_LIST, AgentServer, Metrics

    srv = AgentServer(lambda: {"schema": "s", "verdicts": list(range(5000)), "node": "n"}, Metrics()).start()
    try:
        doc = fetch("GET", srv.url + "/status", deadline=5.0).json()
        assert doc["verdicts"] == list(range(5000 - MAX_STATUS_LIST, 5000)) and doc["truncated"] == {"verdicts": 5000}
        assert len(fetch("GET", srv.url + "/status", params={"limit": 1000}, deadline=5.0).json()["verdicts"]) == 1000
        assert fetch("GET", srv.url + "/status", params={"limit": 10**6}, deadline=5.0).status == 400
    finally:
        srv.stop()


def test_directory_follows_a_node_to_its_rotated_key(devnet):
    """Issue 36: the owner moves a listed node to a new key (`NodeKeyRotated`, no new registration): the next
    refresh lists the new key with the node's role and endpoint and drops the old one."""
    from eth_account import Account
    from eth_utils import keccak

    from intellect.sdk import Role

    owner = staked_node(devnet, 1, Role.VALIDATOR, endpoint="http://127.0.0.1:1")
    d = Directory(devnet.protocol(0), timeout=1.0)
    assert owner.address in d.nodes(refresh=True)
    new = Account.from_key(keccak(text="intellect-directory-rotation"))
    owner.rotate_node_key(owner.address, new_node_account=new)
    nodes = d.nodes(refresh=True)
    assert owner.address not in nodes and new.address in nodes
    assert nodes[new.address].role == Role.VALIDATOR and nodes[new.address].endpoint == "http://127.0.0.1:1"
    assert [n.address for n in d.by_role("validator")] == [new.address]
