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

import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

__all__ = [
    "AgentConfig",
    "ChainSettings",
    "ConfigError",
    "IpfsSettings",
    "RelaySettings",
    "Role",
    "ServerSettings",
    "TaskSettings",
    "TrainerSettings",
    "ValidatorSettings",
    "WorkerSettings",
    "load_config",
]

ENV_PREFIX = "INTELLECT_AGENT__"


class ConfigError(ValueError):
    """The configuration is missing, malformed or inconsistent; the message says which field."""


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


class ServerSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(0, ge=0, le=65535)
    """0 picks a free port."""
    public_url: str | None = None
    """URL other nodes use to reach this agent (registered on-chain); defaults to http://host:port."""


class TaskSettings(_Section):
    """What the pool's problems are and how long answers may be (must agree across the pool)."""

    source: str = "pool"
    """`pool` (the pool's task-set CID, fetched from IPFS), `synthetic:N:SEED` (built locally), or a file path."""
    length_alpha: float = Field(0.0, ge=0.0)
    """Length-penalty coefficient (reward = task reward − α·|target − actual|)."""
    budgets: dict[str, list[int]] = Field(
        default_factory=lambda: {"cpu": [64, 128], "gpu-small": [256, 512], "gpu-large": [1024, 2048]}
    )
    """Thinking budgets (target lengths, tokens) per hardware class: slow nodes get short tasks."""
    temperature: float = Field(1.0, gt=0)
    """Sampling temperature of the pool (the validator's sampling check uses it)."""


class WorkerSettings(_Section):
    engine: Literal["transformers", "vllm"] = "transformers"
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
    adversary: str | None = None
    """Test-only misbehaviour (see `intellect.agents.adversary`); None for an honest worker."""
    claim_rewards: bool = True
    """Claim finalised rewards (windows closed unchallenged) while running."""
    poll_interval: float = Field(1.0, gt=0)


class ValidatorSettings(_Section):
    concurrency: int = Field(2, ge=1)
    stake_amount: float = Field(100.0, gt=0)
    auto_stake: bool = True
    trainer_url: str | None = None
    """Where to post attestations; discovered from the registry (the pool trainer's endpoint) if unset."""
    adversary: str | None = None
    fetch_attempts: int = Field(3, ge=1)
    """Tries (with backoff) to fetch a rollout file before rejecting it as unavailable."""
    cached_checkpoints: int = Field(2, ge=1)
    poll_interval: float = Field(1.0, gt=0)
    toploc_profile: Literal["fp32", "reference"] = "fp32"
    """TOPLOC bounds: `fp32` (strict; the pool's workers compute in fp32, as the transformers engine does)
    or `reference` (the reference's mixed-precision bounds, for bf16/vLLM workers). The reference bounds
    accept completions with altered tokens on small models (tests/security/test_security_altered.py)."""


class TrainerSettings(_Section):
    model: str = "tiny"
    """`tiny` (config-built, for tests), `tiny-warm` (the tiny model warm-started on the pool's synthetic
    tasks and budgets, cached: `intellect.agents.learn.warm_start_cached`), `smollm2` (real SmolLM2-135M),
    or an HF model directory."""
    batch_groups: int = Field(4, ge=1)
    """GRPO groups (problems) per training step."""
    attestation_quorum: int = Field(1, ge=1)
    max_steps: int = Field(3, ge=1)
    learning_rate: float = Field(1e-5, gt=0)
    optimizer_steps: int = Field(1, ge=1)
    shard_size: int = Field(50 * 1024 * 1024, gt=0)
    keep_checkpoints: int = Field(4, ge=1)
    seed: int = 0
    poll_interval: float = Field(1.0, gt=0)


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


def _scalar(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError):
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
            loaded = yaml.safe_load(path.read_text())
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config file {path} is not UTF-8 text: {exc}") from None
        except (yaml.YAMLError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
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
    except ValidationError as exc:
        where = f"config {path}" if path is not None else "config"
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"{where}: {problems}") from None
