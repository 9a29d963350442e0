"""What the dashboard serves at `/api/snapshot` (schema `intellect.dashboard.snapshot/v1`).

Everything comes from the chain (views and events of one deployment) and from each registered
node's `/status` (schema `intellect.agent.status/v1`). Amounts are token wei as integers; times
are chain timestamps (seconds).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .._errors import SchemaVersionError

__all__ = [
    "AGENT_STATUS_SCHEMA",
    "SNAPSHOT_SCHEMA",
    "ChallengeView",
    "CheckpointView",
    "NodeView",
    "PathEvent",
    "PoolView",
    "RewardPoint",
    "Snapshot",
    "SubmissionView",
    "Totals",
    "VoteView",
    "parse_snapshot",
]

SNAPSHOT_SCHEMA = "intellect.dashboard.snapshot/v1"
AGENT_STATUS_SCHEMA = "intellect.agent.status/v1"


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PathEvent(_View):
    """One step of a node's path: registered → staked → task → proof → verdict → reward / slash."""

    kind: str
    """registered, staked, task, proof, challenged, vote, verdict, reward, slash, wiped, checkpoint,
    unstake, withdrawn, exited, key rotated."""
    time: int
    block: int
    tx: str = ""
    submission_id: int | None = None
    detail: str = ""
    outcome: str = ""
    """For verdicts: accepted, upheld (slashed), rejected (work stands); empty otherwise."""


class NodeView(_View):
    address: str
    owner: str
    role: str
    status: str
    gpu_model: str
    vram_gib: int
    gpu_count: int
    endpoint: str
    registered_at: int
    stake_active: int
    stake_unbonding: int
    stake_deposited: int
    """Sum of its Staked events (what went in)."""
    open_challenges: int
    submissions: int = 0
    accepted: int = 0
    """Submissions whose window closed unchallenged, or whose challenge was rejected."""
    pending: int = 0
    """Submissions still inside their window."""
    challenged: int = 0
    """Challenges opened against its work."""
    upheld: int = 0
    slashed: int = 0
    """Stake slashed (wei)."""
    rewards_claimed: int = 0
    rewards_claimable: int = 0
    challenges_opened: int = 0
    """As a validator: challenges it opened."""
    votes_cast: int = 0
    rotated_to: str | None = None
    """The key this node moved to (`NodeRegistry.rotateKey`, issue 36): its stake and record went with it."""
    rotated_from: str | None = None
    """The key this node was before its last rotation (None for a key registered as itself)."""
    agent_url: str | None = None
    agent_asked: bool = False
    """Its `/status` was asked this refresh (pools' trainers and nodes staked at least `LISTING_FLOOR`, the most
    staked first, up to `MAX_STATUS_FETCHES`; an unstaked registration is shown but never asked)."""
    agent_status: dict[str, Any] | None = None
    agent_error: str | None = None


class PoolView(_View):
    pool_id: int
    owner: str
    trainer: str
    rules_cid: str
    reward_per_unit: int
    challenge_bond: int
    slash_amount: int
    window_length: int
    vote_period: int
    async_level: int
    quorum: int
    budget: int
    reserved: int
    latest_step: int | None


class CheckpointView(_View):
    pool_id: int
    step: int
    manifest_cid: str
    block: int
    time: int
    tx: str
    submissions: int = 0
    """Submissions on-chain that name this policy step."""
    rollouts_used: int | None = None
    """From the trainer's /status, when it reports it."""
    mean_reward: float | None = None
    eval_pass_at_1: float | None = None
    """Held-out pass@1 at temperature 0 of this step's checkpoint (trainer /status), when evaluated."""
    eval_mean_reward: float | None = None


class VoteView(_View):
    validator: str
    uphold: bool
    block: int
    time: int


class ChallengeView(_View):
    challenge_id: int
    """Equal to the challenged submission's id."""
    node: str
    challenger: str
    evidence_cid: str
    vote_end: int
    seconds_left: int
    votes_for: int
    votes_against: int
    status: str
    votes: list[VoteView] = Field(default_factory=list)
    """The votes of the latest round (a challenge rejected inside the window may be opened again)."""
    slashed: int = 0
    round: int = 1
    """The latest round's number; `votes_for`, `votes_against`, `votes` and `status` are that round's."""


class SubmissionView(_View):
    submission_id: int
    pool_id: int
    node: str
    rollouts_cid: str
    proofs_hash: str
    work_units: int
    policy_step: int
    reward: int
    window_end: int
    seconds_left: int
    """Until its window closes (0 once closed)."""
    status: str
    """The TaskLedger status: submitted, challenged, upheld, paid, voided."""
    verdict: str
    """in window, accepted, challenged, slashed, paid, voided, wiped."""
    block: int
    time: int


class RewardPoint(_View):
    step: int
    mean_reward: float | None = None
    """Mean task reward of the rollouts the step trained on (trainer /status)."""
    eval_pass_at_1: float | None = None
    """Held-out pass@1 (temperature 0) of the step's checkpoint, when the trainer evaluated it."""
    rollouts: int | None = None
    submissions: int = 0
    """On-chain submissions naming this policy step."""
    tokens: int = 0
    """Token rewards (wei) of those submissions."""


class Totals(_View):
    nodes: int = 0
    submissions: int = 0
    accepted: int = 0
    pending_windows: int = 0
    challenges: int = 0
    open_challenges: int = 0
    upheld: int = 0
    slashed: int = 0
    rewards_claimed: int = 0
    checkpoints: int = 0
    agents_up: int = 0
    agents_down: int = 0


class Snapshot(_View):
    """Everything the pages show, built at one chain head."""

    schema_: str = Field(SNAPSHOT_SCHEMA, alias="schema")
    chain_id: int
    rpc_url: str
    block: int
    chain_time: int
    generated_at: float
    contracts: dict[str, str]
    pools: list[PoolView]
    nodes: list[NodeView]
    checkpoints: list[CheckpointView]
    submissions: list[SubmissionView]
    challenges: list[ChallengeView]
    reward_curve: list[RewardPoint]
    totals: Totals
    paths: dict[str, list[PathEvent]] = Field(default_factory=dict)
    """Node address (checksummed) → its path, oldest first."""
    errors: list[str] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def node(self, address: str) -> NodeView | None:
        for n in self.nodes:
            if n.address.lower() == address.lower():
                return n
        return None


def parse_snapshot(data: dict[str, Any]) -> Snapshot:
    """Validate a snapshot document; refuses other schema versions with SchemaVersionError."""
    schema = data.get("schema")
    if schema != SNAPSHOT_SCHEMA:
        raise SchemaVersionError("dashboard snapshot", schema, SNAPSHOT_SCHEMA)
    return Snapshot.model_validate(data)
