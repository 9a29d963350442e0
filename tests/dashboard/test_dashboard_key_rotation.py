"""The dashboard follows a node to its new key (issue 36): `NodeKeyRotated` retires the old key's row and shows the
new key with the owner, role, hardware, registration time and moved stake, each on the other's path."""

from __future__ import annotations

from eth_account import Account
from nodes import staked_node  # type: ignore[import-not-found]

from intellect.sdk import Role
from intellect.sdk.dashboard import ChainIndex, collect

TOKEN = 10**18


def test_rotated_key_is_followed_to_the_new_one(fresh_devnet) -> None:
    node = staked_node(fresh_devnet, 1, Role.VALIDATOR, stake=150 * TOKEN, gpu_model="H100", endpoint="http://10.0.0.7:8000")
    old = node.address
    p = fresh_devnet.protocol(0)
    index = ChainIndex(p)
    before = collect(p, index)
    ov = before.node(old)
    assert ov is not None and ov.status == "active" and ov.rotated_to is None

    first, second = Account.create(), Account.create()
    for new in (first, second):  # two rotations: the row follows each
        fresh_devnet.anvil.rpc("anvil_setBalance", [new.address, hex(10**20)])
        node.rotate_node_key(node.current_key(old), new_node_account=new)
    snap = collect(p, index)  # incremental: the rotations arrive as new events

    ov, mid, nv = snap.node(old), snap.node(first.address), snap.node(second.address)
    assert ov is not None and mid is not None and nv is not None
    assert (ov.status, ov.rotated_to, ov.stake_active) == ("rotated", first.address, 0)
    assert (mid.status, mid.rotated_from, mid.rotated_to) == ("rotated", old, second.address)
    assert (nv.status, nv.rotated_from, nv.rotated_to) == ("active", first.address, None)
    assert (nv.owner, nv.role, nv.gpu_model, nv.endpoint) == (ov.owner, "validator", "H100", "http://10.0.0.7:8000")
    assert nv.registered_at == ov.registered_at and nv.stake_active == 150 * TOKEN
    old_path = [e.kind for e in snap.paths[old]]
    new_path = [e for e in snap.paths[second.address] if e.kind == "key rotated"]
    assert old_path[-1] == "key rotated" and len(new_path) == 1 and first.address in new_path[0].detail
