"""Shared helpers of the security suite (constants, revert matcher, `Net`, devnet and swarm context
managers): a module with its own name, so that `pytest tests/contracts tests/security` does not mix up the
two directories' `conftest` modules. The chain constants and small helpers come from
tests/contracts/contracts_helpers.py; `reverts` here compares exactly and case-insensitively."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from brownie import accounts, chain
from eth_utils import keccak
from swarm_loader import running_swarm

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts._deployment import TOKEN  # noqa: E402
from scripts._eip712 import registration_signature  # noqa: E402

# The chain constants, `set_balance`, `reverts` and the private anvil port are the contract tests' own:
# tests/contracts/contracts_helpers.py (importing it picks the port before brownie connects).
if str(ROOT / "tests" / "contracts") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests" / "contracts"))
from contracts_helpers import (  # noqa: E402
    C_NONE,
    C_OPEN,
    C_REJECTED,
    C_UPHELD,
    MANIFEST_CID,
    MIN_STAKE,
    PROOFS_HASH,
    RELAY,
    ROLLOUTS_CID,
    T_CHALLENGED,
    T_CLAIMED,
    T_NONE,
    T_PAID,
    T_SUBMITTED,
    T_UPHELD,
    T_VOIDED,
    TRAINER,
    VALIDATOR,
    WORKER,
    set_balance,
)
from contracts_helpers import reverts as _reverts  # noqa: E402

__all__ = [
    "C_NONE",
    "C_OPEN",
    "C_REJECTED",
    "C_UPHELD",
    "MANIFEST_CID",
    "MIN_STAKE",
    "PROOFS_HASH",
    "RELAY",
    "ROLLOUTS_CID",
    "TOKEN",
    "TRAINER",
    "T_CHALLENGED",
    "T_CLAIMED",
    "T_NONE",
    "T_PAID",
    "T_SUBMITTED",
    "T_UPHELD",
    "T_VOIDED",
    "VALIDATOR",
    "WORKER",
    "Net",
    "new_key_account",
    "registration_signature",
    "reverts",
    "running_devnet",
    "running_swarm",
    "selector",
    "set_balance",
]


def reverts(error: str, *args: Any) -> contextlib.AbstractContextManager[None]:
    """Expects a revert with custom error `error` and exactly `args`, compared case-insensitively."""
    return _reverts(error, *args, leading_args=False, ignore_case=True)


def selector(signature: str) -> bytes:
    return keccak(text=signature)[:4]


def new_key_account(seed: str) -> Any:
    """A brownie LocalAccount whose private key we hold (node keys sign their registration), with ETH."""
    acct = accounts.add("0x" + keccak(text=f"intellect-security-{seed}").hex())
    set_balance(acct.address)
    return acct


class Net:
    """A deployed protocol (token, registry, stake manager, ledger) plus helpers that drive it like agents."""

    def __init__(self, token: Any, registry: Any, stake: Any, ledger: Any, pool_id: int) -> None:
        self.token = token
        self.registry = registry
        self.stake = stake
        self.ledger = ledger
        self.admin = accounts[0]
        self.pool_id = pool_id
        self._seeds = 0

    def fund(self, to: Any, amount: int) -> None:
        self.token.mint(to, amount, {"from": self.admin})

    def new_node(self, role: int, owner: Any = None) -> Any:
        """Registers (not stakes) a node owned by `owner` (an account; default the node key itself)."""
        self._seeds += 1
        node = new_key_account(f"{self.ledger.address}-{self._seeds}-{chain.height}")
        owner = owner or node
        deadline = chain.time() + 3600
        sig = registration_signature(self.registry, node, owner.address, role, deadline)
        self.registry.register(node, role, "H100", 80, 8, "http://127.0.0.1:1", deadline, sig, {"from": owner})
        return node

    def register(self, role: int, owner: Any = None, stake: int = MIN_STAKE) -> Any:
        owner_acct = owner
        node = self.new_node(role, owner)
        owner_acct = owner_acct or node
        if stake:
            self.fund(owner_acct, stake)
            self.token.approve(self.stake, stake, {"from": owner_acct})
            self.stake.stake(node, stake, {"from": owner_acct})
        return node

    def publish(self, step: int) -> Any:
        return self.ledger.publishCheckpoint(self.pool_id, step, f"{MANIFEST_CID}-{step}", {"from": self.admin})

    def claim(self, node: Any) -> int:
        return int(self.ledger.claimTask(self.pool_id, {"from": node}).return_value)

    def submit(self, node: Any, task_id: int, units: int = 4, step: int = 0) -> Any:
        return self.ledger.submitWork(task_id, ROLLOUTS_CID, PROOFS_HASH, units, step, {"from": node})

    def params(self) -> Any:
        return self.ledger.pool(self.pool_id)["params"]

    def bond_ready(self, validator: Any) -> int:
        bond = self.params()["challengeBond"]
        self.fund(validator, bond)
        self.token.approve(self.ledger, bond, {"from": validator})
        return bond

    def held(self) -> int:
        """Tokens held by the stake manager and the ledger (stake + escrow + open bonds)."""
        return self.token.balanceOf(self.stake) + self.token.balanceOf(self.ledger)


# ------------------------------------------------------------------------------------- agent swarms (roles)


@contextlib.contextmanager
def running_devnet(tmp_path: Path, **anvil_kw: Any) -> Iterator[Any]:
    """anvil with 24 funded dev accounts (a swarm of many cheaters) and the real dev deployment;
    `anvil_kw` go to `devnet.Anvil` (e.g. `state_file` for a chain that survives a restart)."""
    from intellect.sdk import devnet as dn

    anvil = dn.Anvil(extra_args=["--accounts", "24"], **anvil_kw).start()
    try:
        dep = dn.deploy(anvil.url, tmp_path / "deployments")
        yield dn.Devnet(anvil, dep, tmp_path / "deployments", False)
    finally:
        anvil.stop()


