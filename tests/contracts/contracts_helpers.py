"""Shared helpers of the contract tests (constants, revert matcher, `Net`): a module with its own name, so
that `pytest tests/contracts tests/security` does not mix up the two directories' `conftest` modules."""

from __future__ import annotations

import contextlib
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

from scripts._anvil import use_private_anvil_port  # noqa: E402
from scripts._deployment import TOKEN  # noqa: E402
from scripts._eip712 import registration_signature  # noqa: E402
from scripts.deploy import Deployed  # noqa: E402

use_private_anvil_port()  # before brownie connects (pytest_collection_finish)

WORKER, VALIDATOR, TRAINER, RELAY = 1, 2, 3, 4
# TaskStatus / ChallengeStatus enums
T_NONE, T_CLAIMED, T_SUBMITTED, T_CHALLENGED, T_UPHELD, T_PAID, T_VOIDED = range(7)
C_NONE, C_OPEN, C_UPHELD, C_REJECTED, C_NO_QUORUM = range(5)

MIN_STAKE = 100 * TOKEN
ROLLOUTS_CID = "bafkreicysg23kiwv34eg2d7qweipxwosdo2py4ldv42nbauguluen5v6am"
MANIFEST_CID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
PROOFS_HASH = "0x" + keccak(b"proofs").hex()


def _load_brownie_stateful() -> Any:
    """brownie.test.stateful from its Python source. The mypyc-compiled module shipped in eth-brownie 1.22.2
    rejects every state machine (its @final _BrownieStateMachine.__init__ type-checks `self` against the
    exact class, but state_machine() always passes a generated subclass); the source is the same code."""
    import importlib.util

    import brownie.test

    path = Path(brownie.test.__file__).with_name("stateful.py")
    spec = importlib.util.spec_from_file_location("_intellect_brownie_stateful", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def brownie_state_machine(rules: type, *args: Any, settings: dict | None = None) -> None:
    """brownie.test.state_machine (run from source, see _load_brownie_stateful)."""
    _load_brownie_stateful().state_machine(rules, *args, settings=settings)


def _fmt(value: Any) -> str:
    if isinstance(value, str) and value.startswith("0x") and len(value) == 42:
        return value.lower()
    if hasattr(value, "address"):
        return value.address.lower()
    return str(value)


@contextlib.contextmanager
def reverts(error: str, *args: Any, leading_args: bool = True, ignore_case: bool = False) -> Iterator[None]:
    """Expects the transaction/call in the block to revert with custom error `error` and `args`.

    leading_args: `args` may be fewer than the error has (the leading ones are compared); False:
    exactly these. ignore_case: compare the message case-insensitively (the security suite's rule)."""
    try:
        yield
    except VirtualMachineError as exc:
        msg = exc.revert_msg or ""
        if args:
            expected = f"{error}: " + ", ".join(_fmt(a) for a in args)
            got, want = (msg.lower(), expected.lower()) if ignore_case else (msg, expected)
            ok = got == want or (leading_args and got.startswith(want + ", "))
            assert ok, f"reverted with {msg!r}, expected {expected!r}"
        else:
            assert msg.split(":")[0] == error, f"reverted with {msg!r}, expected {error}"
    else:
        raise AssertionError(f"did not revert (expected {error})")


def event(tx: Any, name: str, index: int = 0) -> dict:
    assert name in tx.events, f"{name} not emitted (events: {list(tx.events.keys())})"
    return dict(tx.events[name][index])


def has_voted(net: Any, challenge_id: int, validator: Any) -> bool:
    """Whether `validator` voted in the challenge's current round (its challenger counts as voted)."""
    c = net.ledger.challengeInfo(challenge_id)
    if _fmt(c["challenger"]) == _fmt(validator):
        return True
    voted_round, _ = net.ledger.voteOf(challenge_id, validator)
    return voted_round != 0 and voted_round == c["round"]


def set_balance(address: str, wei: int = 10**21) -> None:
    web3.provider.make_request("anvil_setBalance", [address, hex(wei)])


def new_key_account(seed: str) -> Any:
    """A brownie LocalAccount whose private key we hold (node keys sign their registration), with ETH."""
    acct = accounts.add("0x" + keccak(text=f"intellect-test-{seed}").hex())
    set_balance(acct.address)
    return acct


class Net:
    """The deployed protocol plus helpers that drive it like the agents do."""

    def __init__(self, deployed: Deployed) -> None:
        self.d = deployed
        self.token = deployed.token
        self.registry = deployed.registry
        self.stake = deployed.stake_manager
        self.ledger = deployed.ledger
        self.admin = accounts[0]
        self.pool_id = deployed.default_pool_id
        self._seeds = 0

    def fund(self, to: Any, amount: int) -> None:
        self.token.mint(to, amount, {"from": self.admin})

    def register(self, role: int, owner: Any = None, seed: str | None = None, stake: int = MIN_STAKE) -> Any:
        self._seeds += 1
        node = new_key_account(seed or f"n{self._seeds}-{chain.height}")
        owner = owner or node
        deadline = chain.time() + 3600
        sig = registration_signature(self.registry, node, owner.address, role, deadline)
        self.registry.register(node, role, "H100", 80, 8, "http://127.0.0.1:1", deadline, sig, {"from": owner})
        if stake:
            self.fund(owner, stake)
            self.token.approve(self.stake, stake, {"from": owner})
            self.stake.stake(node, stake, {"from": owner})
        return node

    def defund(self, amount: int, pool: int | None = None, to: Any = None) -> Any:
        """The pool owner (the admin) takes `amount` of budget back: announced, a lease duration waited (issue 33)."""
        pid = pool or self.pool_id
        self.ledger.announceDefund(pid, amount, {"from": self.admin})
        chain.sleep(int(self.ledger.pool(pid)["params"]["leaseDuration"]) + 1)
        return self.ledger.defundPool(pid, amount, to or self.admin, {"from": self.admin})

    def trainer(self) -> Any:
        return self.admin  # the default pool's trainer is the deployer

    def publish(self, step: int, pool: int | None = None) -> Any:
        return self.ledger.publishCheckpoint(pool or self.pool_id, step, f"{MANIFEST_CID}-{step}", {"from": self.trainer()})

    def claim(self, node: Any, pool: int | None = None) -> int:
        tx = self.ledger.claimTask(pool or self.pool_id, {"from": node})
        return int(tx.return_value)

    def submit(self, node: Any, task_id: int, units: int = 4, step: int | None = None) -> Any:
        if step is None:
            step = self.ledger.latestStep(self.pool_id)
        return self.ledger.submitWork(task_id, ROLLOUTS_CID, PROOFS_HASH, units, step, {"from": node})

    def pool(self, pool_id: int | None = None) -> Any:
        return self.ledger.pool(pool_id or self.pool_id)

    def bond_ready(self, validator: Any) -> None:
        bond = self.pool()["params"]["challengeBond"]
        self.fund(validator, bond)
        self.token.approve(self.ledger, bond, {"from": validator})


