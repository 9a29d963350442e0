"""Work that outlives the worker (issue 19): the trainer's `POST /store` keeps a worker's file (checked
CID, signed by an active worker) so validators fetch it by CID after the worker has gone offline."""

from __future__ import annotations

import base64
from types import SimpleNamespace

import pytest

from intellect.agents.roles._server import HttpError
from intellect.agents.roles.store import accept_pushed_file, store_request
from intellect.sdk import Role
from intellect.sdk.ipfs import EmbeddedIpfs, IpfsGateway, compute_cid


def _trainer(devnet, tmp_path):
    counts: dict[str, int] = {}
    return SimpleNamespace(protocol=devnet.protocol(0), ipfs=EmbeddedIpfs(tmp_path / "trainer-ipfs"),
                           count=lambda name, n=1: counts.__setitem__(name, counts.get(name, 0) + n), counts=counts)


def test_trainer_store_pins_an_active_workers_file_and_serves_it(devnet, tmp_path):
    w = devnet.protocol(1)
    w.register_node(Role.WORKER, gpu_model="cpu", endpoint="")  # a NAT'd worker: no endpoint at all
    w.drip()
    w.stake(w.address, w.min_stake(Role.WORKER))
    trainer = _trainer(devnet, tmp_path)
    data = b"rollouts " * 40_000  # several 256 KiB chunks: a DAG, not one raw block
    cid = compute_cid(data)
    body = store_request(w.account.key, w.chain_id, cid, data)

    assert accept_pushed_file(trainer, body) == {"cid": cid, "pinned": True}
    assert cid in trainer.ipfs.pins() and trainer.counts == {"files_stored": 1}
    # a validator that never met the worker fetches it from the trainer's gateway, hash-checked
    with IpfsGateway(trainer.ipfs) as gw:
        validator = EmbeddedIpfs(tmp_path / "validator-ipfs")
        validator.peers = [gw.url]
        assert validator.cat(cid) == data


def test_trainer_store_refuses_wrong_cid_strangers_and_forged_senders(devnet, tmp_path):
    w = devnet.protocol(1)
    w.register_node(Role.WORKER, gpu_model="cpu", endpoint="")
    w.drip()
    w.stake(w.address, w.min_stake(Role.WORKER))
    trainer = _trainer(devnet, tmp_path)
    data = b"honest rollouts"
    cid = compute_cid(data)

    lie = store_request(w.account.key, w.chain_id, cid, data)
    lie["data"] = base64.b64encode(b"other bytes").decode()
    with pytest.raises(HttpError, match="CID is"):
        accept_pushed_file(trainer, lie)
    stranger = devnet.protocol(7)  # no node: registration is free, storage is not
    with pytest.raises(HttpError, match="not an active worker"):
        accept_pushed_file(trainer, store_request(stranger.account.key, w.chain_id, cid, data))
    forged = store_request(stranger.account.key, w.chain_id, cid, data)
    forged["node"] = w.address  # claims the worker, signed by someone else
    with pytest.raises(HttpError, match="signed by"):
        accept_pushed_file(trainer, forged)
    other_chain = store_request(w.account.key, w.chain_id + 1, cid, data)
    with pytest.raises(HttpError, match=r"signed by"):
        accept_pushed_file(trainer, other_chain)
    with pytest.raises(HttpError, match=r"intellect\.store/v1"):
        accept_pushed_file(trainer, {"cid": cid})
    assert trainer.ipfs.pins() == [] and trainer.counts == {}


def test_worker_pushes_to_any_kubo_node_through_its_rpc_api(tmp_path):
    """`worker.push_to: kubo:<RPC URL>`: the file lands, pinned, in a real IPFS daemon (js-ipfs 0.66 through
    the Kubo RPC API, tools/ipfs) under the worker's CID, and the node serves it back."""
    from intellect.agents.roles.store import push_file
    from intellect.sdk.ipfs import KuboIpfs
    from intellect.sdk.ipfs._daemon import IpfsDaemon

    path = tmp_path / "task-1.parquet"
    path.write_bytes(b"rollouts " * 40_000)
    cid = compute_cid(path.read_bytes())
    with IpfsDaemon(repo=tmp_path / "repo") as daemon:
        worker = SimpleNamespace(cfg=SimpleNamespace(worker=SimpleNamespace(push_to=f"kubo:{daemon.api_url}")))
        assert push_file(worker, path, cid) == daemon.api_url
        node = KuboIpfs(daemon.api_url)
        assert node.cat(cid) == path.read_bytes()  # the client checks every block against the CID
        with pytest.raises(RuntimeError, match="stored the file as"):
            push_file(worker, path, compute_cid(b"another file"))
