"""intellect.sdk.ipfs: CIDs identical to `ipfs add --cid-version 1 --raw-leaves`, against a real daemon."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
import requests

from intellect.sdk import SchemaVersionError
from intellect.sdk.http import HttpServer, JsonHandler
from intellect.sdk.ipfs import (
    CHUNK_SIZE,
    MAX_LINKS,
    Cid,
    CidMismatchError,
    ContentNotFoundError,
    ContentTooLargeError,
    EmbeddedIpfs,
    InvalidCidError,
    IpfsClient,
    IpfsDaemon,
    IpfsError,
    IpfsGateway,
    KuboIpfs,
    compute_cid,
    decode_node,
    open_ipfs,
)

KiB = 1024
SIZES = {
    "empty": 0,
    "one-byte": 1,
    "one-chunk": CHUNK_SIZE,
    "chunk-plus-one": CHUNK_SIZE + 1,
    "few-mib": 3 * 1024 * KiB + 17,
    "two-levels": (MAX_LINKS + 1) * CHUNK_SIZE + 7,  # 176 leaves: root -> [174 leaves, 2 leaves]
}


def _data(n: int, seed: int = 0) -> bytes:
    # deterministic and incompressible: sha256 counter stream
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}:{i}".encode()).digest() * 64
        i += 1
    return bytes(out[:n])


@pytest.fixture(scope="module")
def kubo(ipfs_daemon: IpfsDaemon) -> KuboIpfs:
    return KuboIpfs(ipfs_daemon.api_url)


@pytest.fixture
def store(tmp_path: Path) -> EmbeddedIpfs:
    return EmbeddedIpfs(tmp_path / "store")


# -- CIDs -------------------------------------------------------------------------------------
def test_compute_cid_known_vectors() -> None:
    # values printed by `ipfs add --cid-version 1 --raw-leaves` (Kubo) for these bytes
    assert compute_cid(b"hello\n") == "bafkreicysg23kiwv34eg2d7qweipxwosdo2py4ldv42nbauguluen5v6am"
    assert compute_cid(b"") == "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"


def test_cid_parse_roundtrips_v0_and_v1() -> None:
    v0 = Cid.parse("QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o")
    assert str(v0) == "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o"
    assert v0.codec_name == "dag-pb"
    v1 = v0.to_v1()
    assert str(v1).startswith("bafy")
    assert Cid.parse(str(v1)) == v1
    assert Cid.from_bytes(v1.to_bytes()) == v1


@pytest.mark.parametrize("bad", ["", "xyz", "bafkrei!!!", "Qm" + "1" * 44, "bafkreicysg23kiwv34eg2d7q"])
def test_cid_parse_rejects_garbage(bad: str) -> None:
    with pytest.raises(InvalidCidError):
        Cid.parse(bad)


def test_compute_cid_two_level_dag_shape() -> None:
    store_blocks: dict[str, bytes] = {}
    from intellect.sdk.ipfs import DagBuilder, chunks_of

    builder = DagBuilder(lambda c, b: store_blocks.__setitem__(str(c), b))
    data = _data(SIZES["two-levels"])
    for chunk in chunks_of(data):
        builder.add_chunk(chunk)
    root = builder.finish()
    node = decode_node(store_blocks[str(root.cid)])
    assert node.filesize == len(data)
    assert len(node.links) == 2
    assert [decode_node(store_blocks[str(c)]).links.__len__() for c in node.links] == [MAX_LINKS, 2]
    assert str(root.cid) == compute_cid(data)


# -- embedded store ---------------------------------------------------------------------------
@pytest.mark.parametrize("size", list(SIZES.values()), ids=list(SIZES))
def test_embedded_add_cat_roundtrip(store: EmbeddedIpfs, size: int) -> None:
    data = _data(size, seed=size)
    cid = store.add(data)
    assert cid == compute_cid(data)
    assert store.has(cid)
    assert store.cat(cid) == data
    assert cid in store.pins()


def test_embedded_add_file_equals_add(store: EmbeddedIpfs, tmp_path: Path) -> None:
    data = _data(5 * CHUNK_SIZE + 3)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert store.add_file(path) == compute_cid(data)
    out = tmp_path / "out.bin"
    assert store.get_to(compute_cid(data), out) == len(data)
    assert out.read_bytes() == data


def test_embedded_cat_refuses_corrupt_block(store: EmbeddedIpfs) -> None:
    data = _data(3 * CHUNK_SIZE)
    cid = store.add(data)
    leaf = decode_node(store.get_local_block(cid)).links[1]
    path = store._block_path(leaf)
    path.write_bytes(b"X" + path.read_bytes()[1:])
    with pytest.raises(CidMismatchError):
        store.cat(cid)


def test_embedded_cat_enforces_max_size(store: EmbeddedIpfs) -> None:
    small = store.add(_data(1000))
    with pytest.raises(ContentTooLargeError):
        store.cat(small, max_size=999)
    assert len(store.cat(small, max_size=1000)) == 1000
    big = store.add(_data(4 * CHUNK_SIZE))
    with pytest.raises(ContentTooLargeError) as err:
        store.cat(big, max_size=CHUNK_SIZE)
    assert err.value.size == 4 * CHUNK_SIZE


def test_embedded_cat_missing_without_peers(store: EmbeddedIpfs) -> None:
    with pytest.raises(ContentNotFoundError):
        store.cat(compute_cid(b"never added"))
    assert not store.has(compute_cid(b"never added"))


def test_embedded_fetches_from_peer_gateway(tmp_path: Path) -> None:
    origin = EmbeddedIpfs(tmp_path / "origin")
    data = _data(6 * CHUNK_SIZE + 11)
    cid = origin.add(data)
    with IpfsGateway(origin) as gw:
        other = EmbeddedIpfs(tmp_path / "other", peers=["http://127.0.0.1:9", gw.url])  # first peer is dead
        assert not other.has(cid)
        assert other.cat(cid) == data
        assert other.has(cid)  # blocks were verified and kept
    other.pin(cid)  # everything local now: no peer needed
    assert cid in other.pins()


def test_embedded_refuses_lying_peer(tmp_path: Path) -> None:
    class Liar(JsonHandler):
        def do_GET(self) -> None:
            self.reply(200, b"not what you asked for")

    with HttpServer(Liar, name="liar") as srv:
        store = EmbeddedIpfs(tmp_path / "s", peers=[srv.url])
        cid = compute_cid(b"the real content")
        with pytest.raises(CidMismatchError):
            store.cat(cid)
        assert not store.has_block(cid)  # nothing from a liar is stored


def test_embedded_gc_keeps_pinned(store: EmbeddedIpfs) -> None:
    keep = store.add(_data(3 * CHUNK_SIZE, seed=1))
    drop = store.add(_data(2 * CHUNK_SIZE, seed=2), pin=False)
    assert store.gc() == 3  # two leaves + the root of `drop`
    assert store.has(keep)
    assert not store.has(drop)


def test_embedded_refuses_unknown_store_version(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "VERSION").write_text("intellect.ipfs-store/v99\n")
    with pytest.raises(SchemaVersionError, match="v99"):
        EmbeddedIpfs(tmp_path / "s")


# -- gateway ----------------------------------------------------------------------------------
def test_gateway_serves_files_blocks_and_errors(store: EmbeddedIpfs) -> None:
    data = _data(2 * CHUNK_SIZE + 5)
    cid = store.add(data)
    with IpfsGateway(store) as gw:
        r = requests.get(f"{gw.url}/ipfs/{cid}", timeout=10)
        assert r.status_code == 200 and r.content == data
        assert r.headers["Etag"] == f'"{cid}"'
        h = requests.head(f"{gw.url}/ipfs/{cid}", timeout=10)
        assert h.status_code == 200 and int(h.headers["Content-Length"]) == len(data)
        raw = requests.get(f"{gw.url}/ipfs/{cid}?format=raw", timeout=10)
        assert raw.headers["Content-Type"] == "application/vnd.ipld.raw"
        assert Cid.parse(cid).matches(raw.content)
        assert requests.get(f"{gw.url}/ipfs/not-a-cid", timeout=10).status_code == 400
        assert requests.get(f"{gw.url}/ipfs/{compute_cid(b'x')}", timeout=10).status_code == 404
        assert requests.get(f"{gw.url}/other", timeout=10).status_code == 404


# -- a real daemon ----------------------------------------------------------------------------
@pytest.mark.parametrize("size", list(SIZES.values()), ids=list(SIZES))
def test_kubo_add_gives_embedded_cid(kubo: KuboIpfs, store: EmbeddedIpfs, size: int) -> None:
    data = _data(size, seed=size + 1)
    embedded_cid = store.add(data)
    params = {"cid-version": "1", "raw-leaves": "true", "pin": "true"}  # only what a Kubo user types
    resp = requests.post(f"{kubo.api_url}/api/v0/add", params=params,
                         files={"file": ("f", data, "application/octet-stream")}, timeout=120)
    resp.raise_for_status()
    daemon_cid = resp.json()["Hash"]  # js-ipfs answers base58btc ("zb2..."), Kubo base32: same CID
    assert Cid.parse(daemon_cid) == Cid.parse(embedded_cid)
    assert kubo.add(data) == embedded_cid
    assert kubo.cat(embedded_cid) == data


def test_kubo_add_file_streams(kubo: KuboIpfs, tmp_path: Path) -> None:
    data = _data(9 * CHUNK_SIZE + 123, seed=9)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    cid = kubo.add_file(path)
    assert cid == compute_cid(data)
    assert b"".join(kubo.cat_iter(cid)) == data


def test_cross_fetch_between_backends(kubo: KuboIpfs, ipfs_daemon: IpfsDaemon, tmp_path: Path) -> None:
    a = EmbeddedIpfs(tmp_path / "a")
    data = _data(4 * CHUNK_SIZE + 1, seed=42)
    cid = a.add(data)
    # embedded -> daemon: the daemon gets the bytes, names them the same, serves them back verified
    assert not kubo.has(cid)
    assert kubo.add(a.cat(cid)) == cid
    assert kubo.has(cid)
    # daemon -> embedded: blocks from the daemon are verified and stored
    a2 = EmbeddedIpfs(tmp_path / "a2")
    for c in [cid, *decode_node(kubo.get_block(cid)).links]:
        a2.put_block(c, kubo.get_block(c))
    assert a2.cat(cid) == data
    # embedded -> embedded over HTTP
    with IpfsGateway(a) as gw:
        b = EmbeddedIpfs(tmp_path / "b", peers=[gw.url])
        assert b.cat(cid) == data


def test_kubo_cat_enforces_max_size(kubo: KuboIpfs) -> None:
    cid = kubo.add(_data(100_000, seed=5))
    with pytest.raises(ContentTooLargeError):
        kubo.cat(cid, max_size=99_999)


def test_kubo_cat_refuses_lying_node() -> None:
    # an RPC endpoint that answers /cat and /block/get with other bytes than the CID names
    class Liar(JsonHandler):
        def do_POST(self) -> None:
            self.reply(200, b"forged content")

    with HttpServer(Liar, name="liar") as srv:
        liar = KuboIpfs(srv.url)
        with pytest.raises(CidMismatchError):
            liar.cat(compute_cid(b"genuine content"))
        with pytest.raises(CidMismatchError):
            liar.cat(compute_cid(_data(3 * CHUNK_SIZE)))  # dag-pb root: falls back to /block/get, refused


def test_kubo_pin_and_errors(kubo: KuboIpfs) -> None:
    cid = kubo.add(b"pin me", pin=False)
    kubo.pin(cid)
    with pytest.raises(IpfsError, match="unreachable"):
        KuboIpfs("http://127.0.0.1:9", timeout=2).add(b"x")


def test_open_ipfs_specs(tmp_path: Path, ipfs_daemon: IpfsDaemon) -> None:
    e = open_ipfs(f"embedded:{tmp_path / 'x'}")
    assert isinstance(e, EmbeddedIpfs) and isinstance(e, IpfsClient)
    k = open_ipfs(f"kubo:{ipfs_daemon.api_url}")
    assert isinstance(k, KuboIpfs) and isinstance(k, IpfsClient)
    assert isinstance(open_ipfs(ipfs_daemon.api_url), KuboIpfs)
    with pytest.raises(IpfsError):
        open_ipfs("ftp://nope")


def test_compute_cid_large_random_matches_daemon(kubo: KuboIpfs) -> None:
    data = os.urandom(CHUNK_SIZE * 2 + 99)
    assert kubo.add(data) == compute_cid(data)
