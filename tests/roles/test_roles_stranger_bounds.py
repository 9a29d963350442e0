"""Bounded work for every byte from a stranger (issue 22): outbound HTTP has a total deadline, a
stalling peer is benched, discovery follows registry events incrementally, `/attestations` is paged."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest

from intellect.agents.roles._runtime import MAX_ATTESTATIONS_PAGE, Directory, attestation_page
from intellect.sdk._fetch import PeerDeadlineError, PeerHttpError, fetch
from intellect.sdk._http import HttpServer, JsonHandler


class DripServer:
    """A real TCP peer that answers one byte every `pause` seconds (headers first)."""

    def __init__(self, pause: float = 0.2) -> None:
        self.pause = pause
        self.connections = 0
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
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
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
    """Registration needs no stake: a node whose endpoint drips its /status must not hold every agent's
    refresh (5e47eb6: > 30 s per call, every call), and a new node is found from its event alone."""
    from intellect.sdk import Role

    with status_server() as honest:
        devnet.protocol(1).register_node(Role.WORKER, endpoint=drip.url)
        devnet.protocol(2).register_node(Role.WORKER, endpoint=honest)
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
        devnet.protocol(3).register_node(Role.VALIDATOR, endpoint=honest)
        nodes = d.nodes(refresh=True)
        assert devnet.protocol(3).address in nodes and reads[n_reads:] == [devnet.protocol(3).address]


def test_shardcast_http_get_deadline_is_total(drip):
    """The SDK's small-document helper (versions, manifests, health) shares the total deadline."""
    from intellect.sdk.shardcast._download import http_get
    from intellect.sdk.shardcast._errors import UpstreamError

    t0 = time.monotonic()
    with pytest.raises(UpstreamError, match="deadline"):
        http_get(drip.url, "/versions", timeout=1.0)
    assert time.monotonic() - t0 < 10


def test_ipfs_peer_dripping_a_block_is_cut_off(drip, tmp_path):
    """Every agent fetches missing blocks from every registered node's gateway: one that drips is cut off."""
    from intellect.sdk.ipfs import ContentNotFoundError, EmbeddedIpfs
    from intellect.sdk.ipfs._cid import Cid

    store = EmbeddedIpfs(tmp_path / "ipfs", peers=[drip.url], timeout=1.0)
    t0 = time.monotonic()
    with pytest.raises(ContentNotFoundError):
        store.cat(str(Cid.of(b"x" * 100)))
    assert time.monotonic() - t0 < 10


def test_directory_fetches_a_bounded_number_of_peers_per_call(devnet):
    """Registration is free: a flood of registered nodes is worked through a bounded number per refresh."""
    from intellect.sdk import Role

    with status_server() as honest:
        for i in range(1, 4):
            devnet.protocol(i).register_node(Role.WORKER, endpoint=honest)
        d = Directory(devnet.protocol(0), timeout=2.0, max_fetch_per_call=2)
        assert len(d.services("ipfs")) == 1  # one URL, served by every node
        assert sum(1 for _, doc in d._status.values() if doc is not None) == 2
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
