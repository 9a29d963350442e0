"""`Protocol`'s calls of the node registry and stake: one concern of the SDK's contract client (issue 34 split
the class; use them through `intellect.sdk.Protocol`).

`_RegistryCalls` is a mixin of `intellect.sdk._client.Protocol`: its methods use the client's `call`, `transact`,
`get_events`, `_ask`, `contracts`, `account` and friends, and are public on `Protocol` under the same names.
"""

from __future__ import annotations

import logging

from eth_account import Account
from eth_account.signers.local import LocalAccount

from ._client_util import _addr, _built
from ._errors import ConfigError
from ._models import (
    Node,
    NodeStatus,
    Receipt,
    Role,
    Stake,
)

__all__ = ["_RegistryCalls"]

log = logging.getLogger(__name__)


class _RegistryCalls:
    """NodeRegistry (registration, nodes) and StakeManager (stake, unbonding, minimums)."""

    # -- NodeRegistry ---------------------------------------------------------------------------
    def registration_digest(self, node: str, owner: str, role: Role | str | int, deadline: int) -> bytes:
        return bytes(self.call("NodeRegistry", "registrationDigest", _addr(node), _addr(owner),
                               int(Role.parse(role)), int(deadline)))

    def registration_nonce(self, node: str) -> int:
        return int(self.call("NodeRegistry", "nonces", _addr(node)))

    def sign_registration(self, node_account: LocalAccount, owner: str, role: Role | str | int,
                          deadline: int) -> bytes:
        """The node key's EIP-712 signature allowing `owner` to register it with `role`."""
        digest = self.registration_digest(node_account.address, owner, role, deadline)
        return bytes(Account.unsafe_sign_hash(digest, node_account.key).signature)

    def register_node(self, role: Role | str | int, *, node_account: LocalAccount | None = None,
                      node_signature: bytes | None = None, node: str | None = None, gpu_model: str = "cpu",
                      vram_gib: int = 0, gpu_count: int = 0, endpoint: str = "",
                      deadline: int | None = None) -> Node:
        """Register a node owned by this account. The node key signs (default: this account is the node)."""
        r = Role.parse(role)
        if deadline is None:
            deadline = self.chain_time() + 3600
        if node_signature is None:
            signer = node_account or self.account
            if signer is None:
                raise ConfigError("register_node needs the node key (node_account) or its signature")
            node = signer.address
            node_signature = self.sign_registration(signer, self.address, r, deadline)
        elif node is None:
            raise ConfigError("register_node with a ready signature needs the node address")
        self.transact("NodeRegistry", "register", _addr(node), int(r), gpu_model, int(vram_gib), int(gpu_count),
                      endpoint, int(deadline), node_signature)
        return self.node(node)

    def rotate_node_key(self, old_node: str, *, new_node_account: LocalAccount | None = None,
                        new_node_signature: bytes | None = None, new_node: str | None = None,
                        deadline: int | None = None) -> Node:
        """Move the active node `old_node` (owned by this account) to a new key (issue 36): the new key takes over
        its registration, stake, unbonding, challenge locks and record; the old key is retired for good. Only the
        owner signs the transaction and the old key is not needed, so a lost or leaked node key is recovered this
        way. The new key consents with the same EIP-712 message as a registration (`sign_registration` with the
        node's role): pass its account, or its ready signature and address. Returns the new key's record."""
        old = _addr(old_node)
        if deadline is None:
            deadline = self.chain_time() + 3600
        if new_node_signature is None:
            if new_node_account is None:
                raise ConfigError("rotate_node_key needs the new node key (new_node_account) or its signature")
            _, role, _ = self.node_core(old)
            new_node = new_node_account.address
            new_node_signature = self.sign_registration(new_node_account, self.address, role, deadline)
        elif new_node is None:
            raise ConfigError("rotate_node_key with a ready signature needs the new node's address")
        self.transact("NodeRegistry", "rotateKey", old, _addr(new_node), int(deadline), new_node_signature)
        log.info("node %s rotated to key %s", old, new_node)
        return self.node(new_node)

    def current_key(self, node: str) -> str:
        """The key the node `node` was rotated into (`node` itself while it was never rotated away)."""
        return str(self.call("NodeRegistry", "currentKey", _addr(node)))

    def update_node(self, node: str, *, gpu_model: str, vram_gib: int, gpu_count: int, endpoint: str) -> Node:
        self.transact("NodeRegistry", "update", _addr(node), gpu_model, int(vram_gib), int(gpu_count), endpoint)
        return self.node(node)

    def exit_node(self, node: str | None = None) -> Receipt:
        return self.transact("NodeRegistry", "exit", _addr(node or self.address))

    def node(self, address: str | None = None) -> Node:
        a = _addr(address or self.address)
        info = self.call("NodeRegistry", "nodeInfo", a)
        return _built("NodeRegistry.nodeInfo", lambda: Node(
            address=a, owner=info[0], role=Role(info[1]), status=NodeStatus(info[2]), vram_gib=info[3],
            gpu_count=info[4], registered_at=info[5], gpu_model=info[6], endpoint=info[7]))

    def node_core(self, address: str) -> tuple[str, Role, NodeStatus]:
        v = self.call("NodeRegistry", "nodeCore", _addr(address))
        return _built("NodeRegistry.nodeCore", lambda: (str(v[0]), Role(v[1]), NodeStatus(v[2])))

    def owner_of(self, node: str) -> str:
        return str(self.call("NodeRegistry", "ownerOf", _addr(node)))

    def is_active(self, node: str, role: Role | str | int) -> bool:
        return bool(self.call("NodeRegistry", "isActive", _addr(node), int(Role.parse(role))))

    def active_count(self, role: Role | str | int) -> int:
        return int(self.call("NodeRegistry", "activeCount", int(Role.parse(role))))

    # -- StakeManager ---------------------------------------------------------------------------
    def stake(self, node: str, amount: int, *, approve: bool = True) -> Stake:
        """Add `amount` to `node`'s active stake (approving the StakeManager first when needed)."""
        if approve:
            self._ensure_allowance("StakeManager", amount)
        self.transact("StakeManager", "stake", _addr(node), int(amount))
        return self.stake_of(node)

    def stake_with_permit(self, node: str, amount: int, *, deadline: int | None = None) -> Stake:
        """Stake in one transaction, approving through an EIP-2612 permit signed here."""
        deadline = deadline or self.chain_time() + 3600
        v, r, s_ = self.sign_permit(self.contracts["StakeManager"].address, amount, deadline)
        self.transact("StakeManager", "stakeWithPermit", _addr(node), int(amount), int(deadline), v, r, s_)
        return self.stake_of(node)

    def request_unstake(self, node: str, amount: int) -> Stake:
        self.transact("StakeManager", "requestUnstake", _addr(node), int(amount))
        return self.stake_of(node)

    def withdraw(self, node: str) -> int:
        """Withdraw the released unbonding stake to the owner; returns the amount."""
        rc = self.transact("StakeManager", "withdraw", _addr(node))
        return int(rc.event("Withdrawn").args["amount"])

    def stake_of(self, node: str | None = None) -> Stake:
        a = _addr(node or self.address)
        s = self.call("StakeManager", "stakeOf", a)
        _, role, _ = self.node_core(a)
        min_stake = self.min_stake(role) if role != Role.NONE else None
        return _built("StakeManager.stakeOf", lambda: Stake(node=a, active=s[0], unbonding=s[1], release_at=s[2],
                                                            open_challenges=s[3], min_stake=min_stake))

    def active_stake(self, node: str) -> int:
        return int(self.call("StakeManager", "activeStake", _addr(node)))

    def has_min_stake(self, node: str, role: Role | str | int) -> bool:
        return bool(self.call("StakeManager", "hasMinStake", _addr(node), int(Role.parse(role))))

    def min_stake(self, role: Role | str | int) -> int:
        return int(self.call("StakeManager", "minStake", int(Role.parse(role))))

    def validator_weight_at(self, node: str, block: int) -> int:
        """`node`'s validator weight (active stake while an active validator, else 0) at the end of past block
        `block`: checkpointed on-chain, so any node answers it (no archive state needed)."""
        return int(self.call("StakeManager", "validatorWeightAt", _addr(node), int(block)))

    def unbonding_period(self) -> int:
        return int(self.call("StakeManager", "unbondingPeriod"))

    def unbonding_floor(self) -> int:
        return int(self.call("StakeManager", "unbondingFloor"))

    def challenger_share_bps(self) -> int:
        return int(self.call("StakeManager", "challengerShareBps"))

    def treasury(self) -> str:
        return str(self.call("StakeManager", "treasury"))

    def total_staked(self) -> int:
        return int(self.call("StakeManager", "totalStaked"))

    def set_min_stake(self, role: Role | str | int, amount: int) -> Receipt:
        """Admin only."""
        return self.transact("StakeManager", "setMinStake", int(Role.parse(role)), int(amount))

    def set_unbonding_period(self, period: int) -> Receipt:
        """Admin only."""
        return self.transact("StakeManager", "setUnbondingPeriod", int(period))

    def set_challenger_share_bps(self, bps: int) -> Receipt:
        """Admin only."""
        return self.transact("StakeManager", "setChallengerShareBps", int(bps))

    def set_treasury(self, treasury: str) -> Receipt:
        """Admin only."""
        return self.transact("StakeManager", "setTreasury", _addr(treasury))
