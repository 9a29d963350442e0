"""A registered, staked node on a devnet: the setup most chain-level tests start from."""

from __future__ import annotations

from typing import Any

TOKEN = 10**18


def staked_node(devnet: Any, account: int, role: Any, stake: int = 100 * TOKEN, gpu_model: str = "cpu",
                endpoint: str = "") -> Any:
    """`devnet.protocol(account)`, dripped, registered as `role` (a Role or its name) at `endpoint` and staked
    `stake` wei."""
    p = devnet.protocol(account)
    p.drip()
    p.register_node(role, gpu_model=gpu_model, endpoint=endpoint)
    p.stake(p.address, stake)
    return p
