"""Pydantic models of what the contracts hold and emit. Amounts are integers in token wei (18 decimals)."""

from __future__ import annotations

from enum import IntEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AttestationRootRecord",
    "AttesterPoolRule",
    "AttesterRecord",
    "Challenge",
    "ChallengeStatus",
    "Checkpoint",
    "DecodedEvent",
    "FaucetInfo",
    "Node",
    "NodeBook",
    "NodeStatus",
    "Pool",
    "PoolParams",
    "Receipt",
    "Rewards",
    "Role",
    "Stake",
    "Submission",
    "Task",
    "TaskClaim",
    "TaskStatus",
    "claim_seed",
    "format_tokens",
    "parse_tokens",
]

ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"
LISTING_FLOOR = 10**18
"""Least active stake (1 token) with which a node is listed by role, on top of its role's on-chain minimum:
agents discover peers (and the dashboard asks agents' `/status`) only among nodes staked at least
`max(minStake(role), LISTING_FLOOR)`. Registering is free and relays' and trainers' minimum is 0: a node
listed without stake would cost every agent a `/status` fetch per refresh, its author nothing (issue 22)."""


class Role(IntEnum):
    """INodeRegistry.Role."""

    NONE = 0
    WORKER = 1
    VALIDATOR = 2
    TRAINER = 3
    RELAY = 4

    @classmethod
    def parse(cls, value: str | int | Role) -> Role:
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                raise ValueError(f"unknown role {value!r}: use worker, validator, trainer or relay") from None
        return cls(value)


class NodeStatus(IntEnum):
    """INodeRegistry.Status."""

    NONE = 0
    ACTIVE = 1
    EXITED = 2
    ROTATED = 3


class PoolState(IntEnum):
    """ITaskLedger.PoolState (issue 37): OPEN takes claims while its trainer is alive; PAUSED by its owner;
    FINISHED for good (budget refunded); STALLED: open, but the trainer's heartbeat lapsed (never stored)."""

    OPEN = 0
    PAUSED = 1
    FINISHED = 2
    STALLED = 3


class PoolStatus(BaseModel):
    """A pool's state as `TaskLedger.poolState` reports it; `open_until`: claims are taken up to this time (unix
    seconds; 0: no checkpoint yet, 1 paused, 2 finished)."""

    model_config = ConfigDict(frozen=True)

    pool_id: int
    state: PoolState
    open_until: int

    @property
    def takes_claims(self) -> bool:
        return self.state == PoolState.OPEN and self.open_until > 2


class TaskStatus(IntEnum):
    """ITaskLedger.TaskStatus."""

    NONE = 0
    CLAIMED = 1
    SUBMITTED = 2
    CHALLENGED = 3
    UPHELD = 4
    PAID = 5
    VOIDED = 6
    EXPIRED = 7  # the lease ran out unsubmitted and expireLease freed its slot


class ChallengeStatus(IntEnum):
    """ITaskLedger.ChallengeStatus."""

    NONE = 0
    OPEN = 1
    UPHELD = 2
    REJECTED = 3
    NO_QUORUM = 4  # the vote period ended below the pool's quorum: no outcome, no loser (issue 33)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, use_enum_values=False, ser_json_bytes="hex", val_json_bytes="hex")


def format_tokens(wei: int, decimals: int = 18) -> str:
    """12.5 style rendering of a token amount in wei."""
    sign = "-" if wei < 0 else ""
    whole, frac = divmod(abs(wei), 10**decimals)
    fs = str(frac).rjust(decimals, "0").rstrip("0")
    return f"{sign}{whole}{'.' + fs if fs else ''}"


def parse_tokens(text: str | int, decimals: int = 18) -> int:
    """"12.5" -> wei; "12.5wei"/"1000wei" -> exact wei. Raises ValueError on garbage or < 0."""
    if isinstance(text, int):
        return text
    t = text.strip().lower().replace("_", "")
    if t.endswith("wei"):
        value = int(t[:-3])
    else:
        if t.count(".") > 1 or not t.replace(".", "").isdigit():
            raise ValueError(f"not an amount: {text!r} (use e.g. 100 or 12.5, or 1000wei)")
        whole, _, frac = t.partition(".")
        if len(frac) > decimals:
            raise ValueError(f"{text!r} has more than {decimals} decimals")
        value = int(whole or "0") * 10**decimals + int(frac.ljust(decimals, "0") or "0")
    if value < 0:
        raise ValueError(f"amount must be >= 0, got {text!r}")
    return value


class Node(_Model):
    """A node in the NodeRegistry."""

    address: str
    owner: str
    role: Role
    status: NodeStatus
    gpu_model: str = ""
    vram_gib: int = 0
    gpu_count: int = 0
    registered_at: int = 0
    endpoint: str = ""

    @property
    def active(self) -> bool:
        return self.status == NodeStatus.ACTIVE


class Stake(_Model):
    """A node's stake in the StakeManager."""

    node: str
    active: int
    unbonding: int
    release_at: int
    open_challenges: int
    min_stake: int | None = None  # of the node's role, when known

    @property
    def meets_minimum(self) -> bool | None:
        return None if self.min_stake is None else self.active >= self.min_stake


class PoolParams(_Model):
    """ITaskLedger.PoolParams."""

    trainer: str
    rules_cid: str
    reward_per_unit: int
    challenge_bond: int
    slash_amount: int
    window_length: int = 24 * 3600
    vote_period: int = 3600
    lease_duration: int = 3600
    max_units_per_submission: int = 1_000
    async_level: int = 2
    quorum: int = 1
    max_open_leases: int = 2  # unsubmitted leases one node may hold in the pool
    max_reservation_bps: int = 1_000  # most of the pool's escrow one node may hold in reservations

    def as_tuple(self) -> tuple[Any, ...]:
        return (self.trainer, self.rules_cid, self.reward_per_unit, self.challenge_bond, self.slash_amount,
                self.window_length, self.vote_period, self.lease_duration, self.max_units_per_submission,
                self.async_level, self.quorum, self.max_open_leases, self.max_reservation_bps)

    @classmethod
    def from_tuple(cls, t: Any) -> PoolParams:
        return cls(trainer=t[0], rules_cid=t[1], reward_per_unit=t[2], challenge_bond=t[3], slash_amount=t[4],
                   window_length=t[5], vote_period=t[6], lease_duration=t[7], max_units_per_submission=t[8],
                   async_level=t[9], quorum=t[10], max_open_leases=t[11], max_reservation_bps=t[12])


class Pool(_Model):
    """A pool as the TaskLedger returns it."""

    pool_id: int
    owner: str
    params: PoolParams
    budget: int
    reserved: int
    has_checkpoint: bool
    latest_step: int | None  # None until the first checkpoint


class Checkpoint(_Model):
    """A published checkpoint: the Shardcast manifest's CID for a pool's step."""

    pool_id: int
    step: int
    manifest_cid: str
    block_number: int | None = None
    tx_hash: str | None = None


class Task(_Model):
    """A task and (once submitted) its submission state."""

    task_id: int
    node: str
    pool_id: int
    lease_expiry: int
    status: TaskStatus
    reward: int
    window_end: int
    slash_epoch: int


def claim_seed(block_hash: bytes | str, node: str, task_id: int) -> bytes:
    """The seed of a claim: keccak256(abi.encode(hash of the claim's block, node, taskId)) (ITaskLedger.TaskClaimed).
    No transaction can know the hash of its own block, so a claim cannot depend on its seed."""
    from eth_abi import encode
    from eth_utils import keccak, to_checksum_address

    bh = bytes.fromhex(block_hash.removeprefix("0x")) if isinstance(block_hash, str) else bytes(block_hash)
    if len(bh) != 32:
        raise ValueError(f"block hash must be 32 bytes, got {len(bh)}")
    return keccak(encode(["bytes32", "address", "uint256"], [bh, to_checksum_address(node), int(task_id)]))


class NodeBook(_Model):
    """A node's book in one pool (ITaskLedger.NodeBook)."""

    reserved: int
    open_leases: int
    expired_leases: int
    claims: int


class TaskClaim(_Model):
    """The outcome of `claim_task`: the id and the seed (from the hash of the claim's block)."""

    task_id: int
    pool_id: int
    node: str
    seed: bytes
    lease_expiry: int
    tx_hash: str
    block_number: int


class Submission(_Model):
    """A WorkSubmitted event (the rollouts CID lives only in the log), with the task's current state."""

    submission_id: int
    pool_id: int
    node: str
    rollouts_cid: str
    proofs_hash: bytes
    work_units: int
    policy_step: int
    reward: int
    window_end: int
    block_number: int | None = None
    tx_hash: str | None = None
    status: TaskStatus | None = None


class Challenge(_Model):
    """A challenge (its id is the submission id; its latest round). Votes weigh the voters' validator stake at
    `snapshot_block`; `electorate` is all validator stake then; `resolvable`: `resolve` would succeed now."""

    challenge_id: int
    challenger: str
    vote_end: int
    votes_for: int
    votes_against: int
    status: ChallengeStatus
    weight_for: int = 0
    weight_against: int = 0
    electorate: int = 0
    snapshot_block: int = 0
    round: int = 1
    resolvable: bool = False


class Rewards(_Model):
    """A node's rewards: what can be claimed now and what waits for its window or a challenge."""

    node: str
    claimable: int
    claimable_ids: list[int] = Field(default_factory=list)
    pending: int = 0
    pending_ids: list[int] = Field(default_factory=list)
    paid: int = 0


class AttesterPoolRule(_Model):
    """A pool's attester rule (AttesterBook): tokens per attestation the trainer used, and the unreserved budget."""

    pool_id: int
    reward_per_attestation: int
    budget: int


class AttesterRecord(_Model):
    """One attestation the trainer recorded as used (AttestationRecorded); `reserved`: the reward still held for
    it now (0 once paid, released or slashed)."""

    submission_id: int
    validator: str
    reward: int
    reserved: int = 0
    block_number: int = 0


class AttestationRootRecord(_Model):
    """A root a pool's trainer recorded (AttestationRootRecorded): its leaves file's CID and, read when listed,
    what it still reserves (`remaining`: leaves neither paid nor released)."""

    pool_id: int
    root: str
    leaf_count: int
    total: int
    leaves_cid: str
    remaining: int
    block_number: int = 0


class FaucetInfo(_Model):
    enabled: bool
    amount: int
    cooldown: int
    next_drip_at: int


class DecodedEvent(_Model):
    """One decoded contract event, with where it sits in the chain (its cursor position)."""

    contract: str
    event: str
    args: dict[str, Any]
    block_number: int
    block_hash: str
    log_index: int
    tx_hash: str

    @property
    def position(self) -> tuple[int, int]:
        return (self.block_number, self.log_index)


class Receipt(_Model):
    """A mined transaction and the protocol events it emitted."""

    tx_hash: str
    block_number: int
    gas_used: int
    effective_gas_price: int
    events: list[DecodedEvent] = Field(default_factory=list)

    def event(self, name: str) -> DecodedEvent:
        for e in self.events:
            if e.event == name:
                return e
        raise LookupError(f"transaction {self.tx_hash} emitted no {name}")
