"""Shared helpers of the security suite (constants, revert matcher, `Net`, devnet and swarm context
managers): a module with its own name, so that `pytest tests/contracts tests/security` does not mix up the
two directories' `conftest` modules. The contract helpers mirror tests/contracts/contracts_helpers.py."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from brownie import accounts, chain, web3
from brownie.exceptions import VirtualMachineError
from eth_utils import keccak

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts._deployment import TOKEN  # noqa: E402
from scripts._eip712 import registration_signature  # noqa: E402


def _use_private_anvil_port() -> None:
    """brownie's development network launches anvil on 8545 and attaches to whatever listens there; other
    engineers' test sessions on this machine would share (and kill) one chain. Pick a free port first."""
    from brownie import network
    from brownie._config import CONFIG

    if network.is_connected() or "development" not in CONFIG.networks:
        return
    dev = CONFIG.networks["development"]
    if dev.get("cmd_settings", {}).get("port") not in (None, 8545):
        return  # another conftest already chose one
    port = os.environ.get("INTELLECT_ANVIL_PORT")
    if not port:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = str(sock.getsockname()[1])
    dev["host"] = "http://127.0.0.1"
    dev.setdefault("cmd_settings", {})["port"] = int(port)


_use_private_anvil_port()

WORKER, VALIDATOR, TRAINER, RELAY = 1, 2, 3, 4
T_NONE, T_CLAIMED, T_SUBMITTED, T_CHALLENGED, T_UPHELD, T_PAID, T_VOIDED = range(7)
C_NONE, C_OPEN, C_UPHELD, C_REJECTED = range(4)

MIN_STAKE = 100 * TOKEN
ROLLOUTS_CID = "bafkreicysg23kiwv34eg2d7qweipxwosdo2py4ldv42nbauguluen5v6am"
MANIFEST_CID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
PROOFS_HASH = "0x" + keccak(b"proofs").hex()


def _fmt(value: Any) -> str:
    if isinstance(value, str) and value.startswith("0x") and len(value) == 42:
        return value.lower()
    if hasattr(value, "address"):
        return value.address.lower()
    return str(value)


@contextlib.contextmanager
def reverts(error: str, *args: Any) -> Iterator[None]:
    """Expects the transaction/call in the block to revert with custom error `error` (and exactly `args`)."""
    try:
        yield
    except VirtualMachineError as exc:
        msg = exc.revert_msg or ""
        if args:
            expected = f"{error}: " + ", ".join(_fmt(a) for a in args)
            assert msg.lower() == expected.lower(), f"reverted with {msg!r}, expected {expected!r}"
        else:
            assert msg.split(":")[0] == error, f"reverted with {msg!r}, expected {error}"
    else:
        raise AssertionError(f"did not revert (expected {error})")


def selector(signature: str) -> bytes:
    return keccak(text=signature)[:4]


def set_balance(address: str, wei: int = 10**21) -> None:
    web3.provider.make_request("anvil_setBalance", [address, hex(wei)])


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


def _roles_helpers() -> Any:
    """tests/roles/conftest.py (Swarm, AgentProc, POOL_RULES) loaded under its own module name."""
    import importlib.util

    name = "_intellect_roles_swarm_helpers"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "roles" / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


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


@contextlib.contextmanager
def running_swarm(devnet: Any, tmp_path: Path) -> Iterator[Any]:
    """The roles tests' Swarm of agent processes on `devnet`, stopped on exit."""
    s = _roles_helpers().Swarm(devnet, tmp_path / "swarm")
    s.root.mkdir()
    try:
        yield s
    finally:
        s.stop()
