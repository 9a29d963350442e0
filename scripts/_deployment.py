"""Deployment parameters (pydantic models) and the network profiles of `brownie run deploy`.

The deployment file (``deployments/<chainId>.json``) has one owner, the SDK: ``Deployment``,
``ContractRecord`` and ``DeploymentError`` are ``intellect.sdk``'s, re-exported here for the scripts.
``abiSha256`` is the sha256 of the canonical JSON (sorted keys, no spaces) of the contract's own ABI, the
``abi`` field of ``sdk/abi/<Contract>.json`` (see scripts/export_abi.py: ``abi_sha256``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from intellect.sdk import CONTRACT_NAMES, DEPLOYMENT_SCHEMA, ContractRecord, Deployment, DeploymentError

ROLE_IDS = {"worker": 1, "validator": 2, "trainer": 3, "relay": 4}
EMPTY_FILE_CID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"  # CIDv1 raw sha2-256 of b""

TOKEN = 10**18


class PoolParams(BaseModel):
    """Parameters of a pool (mirrors ITaskLedger.PoolParams); durations in seconds, amounts in wei."""

    model_config = ConfigDict(extra="forbid")

    trainer: str | None = Field(None, description="trainer address; None = the deployer")
    rulesCid: str = Field(EMPTY_FILE_CID, min_length=1, description="IPFS CID of the pool's rules document (intellect.poolrules/v1), or of a bare task set")
    rewardPerUnit: int = Field(1 * TOKEN, gt=0, lt=2**96)
    challengeBond: int = Field(10 * TOKEN, gt=0, lt=2**128)
    slashAmount: int = Field(50 * TOKEN, ge=0, lt=2**128)
    windowLength: int = Field(24 * 3600, gt=0, lt=2**32, description="challenge window (default 24 h)")
    votePeriod: int = Field(6 * 3600, gt=0, lt=2**32)
    leaseDuration: int = Field(3600, gt=0, lt=2**32)
    maxUnitsPerSubmission: int = Field(16_384, gt=0, lt=2**32, description="admits the agents' largest default "
                                       "budget: gpu-large 2,048 tokens × group_size 4 × problems_per_task 2")
    asyncLevel: int = Field(2, ge=0, lt=2**16, description="INTELLECT-2's async_level")
    quorum: int = Field(3, gt=0, lt=2**16)
    maxOpenLeases: int = Field(2, gt=0, lt=2**8, description="unsubmitted leases one node may hold")
    maxReservationBps: int = Field(1_000, gt=0, le=10_000, description="most of the escrow one node may reserve")

    def as_tuple(self, default_trainer: str) -> tuple:
        """The ITaskLedger.PoolParams tuple, in field order."""
        return (
            self.trainer or default_trainer,
            self.rulesCid,
            self.rewardPerUnit,
            self.challengeBond,
            self.slashAmount,
            self.windowLength,
            self.votePeriod,
            self.leaseDuration,
            self.maxUnitsPerSubmission,
            self.asyncLevel,
            self.quorum,
            self.maxOpenLeases,
            self.maxReservationBps,
        )


class DeployParams(BaseModel):
    """Everything deploy_all needs besides the deployer account."""

    model_config = ConfigDict(extra="forbid")

    faucet: bool = Field(False, description="enable the token faucet (dev/test networks only)")
    faucetAmount: int = Field(10_000 * TOKEN, ge=0)
    faucetCooldown: int = Field(3600, ge=0)
    treasury: str | None = Field(None, description="treasury address; None = the deployer")
    unbondingPeriod: int = Field(7 * 24 * 3600, gt=0, lt=2**32)
    challengerShareBps: int = Field(5_000, ge=0, le=10_000)
    minStake: dict[str, int] = Field(
        default_factory=lambda: {"worker": 100 * TOKEN, "validator": 100 * TOKEN, "trainer": 0, "relay": 0}
    )
    minWindowLength: int = Field(24 * 3600, gt=0, lt=2**32)
    minChallengeBond: int = Field(10 * TOKEN, ge=0, lt=2**128, description="protocol floor on pools' bonds")
    minQuorum: int = Field(3, ge=0, lt=2**16, description="protocol floor on pools' quorum")
    attesterSlash: int = Field(20 * TOKEN, ge=0, description="slash per accepting attestation of upheld work")
    voterSlash: int = Field(10 * TOKEN, ge=0, description="slash per vote against a challenge's outcome")
    initialMint: int = Field(0, ge=0, description="tokens minted to the deployer")
    defaultPool: PoolParams | None = Field(None, description="pool created on deployment (dev networks)")
    defaultPoolFunding: int = Field(0, ge=0)

    @field_validator("minStake")
    @classmethod
    def _known_roles(cls, value: dict[str, int]) -> dict[str, int]:
        unknown = set(value) - set(ROLE_IDS)
        if unknown:
            raise ValueError(f"unknown role(s) {sorted(unknown)}; roles are {sorted(ROLE_IDS)}")
        if any(v < 0 for v in value.values()):
            raise ValueError("minimum stakes must be >= 0")
        return value


def dev_params() -> DeployParams:
    """Local anvil: faucet on, short windows, a funded default pool with quorum 1."""
    return DeployParams(
        faucet=True,
        unbondingPeriod=3600,
        minWindowLength=60,
        minChallengeBond=1,
        minQuorum=1,
        initialMint=1_000_000 * TOKEN,
        # a 25 % reservation share admits a full-length gpu-large submission (16,384 units) of the funded escrow
        defaultPool=PoolParams(windowLength=300, votePeriod=120, leaseDuration=600, quorum=1, maxReservationBps=2_500),
        defaultPoolFunding=100_000 * TOKEN,
    )


def testnet_params() -> DeployParams:
    """Base Sepolia: faucet on, 24 h minimum window, no default pool."""
    return DeployParams(faucet=True)


def mainnet_params() -> DeployParams:
    """Base mainnet: no faucet, 24 h minimum window, no default pool."""
    return DeployParams(faucet=False)


PROFILES = {"development": dev_params, "base-sepolia": testnet_params, "base-mainnet": mainnet_params}


def params_for_network(network_name: str, override_file: str | None = None) -> DeployParams:
    """Default parameters for `network_name` (unknown networks get the dev profile only if chain-local),
    or the DeployParams JSON at `override_file`."""
    if override_file:
        try:
            return DeployParams.model_validate_json(Path(override_file).read_text())
        except (OSError, ValueError) as exc:
            raise DeploymentError(f"deployment parameters {override_file}: {exc}") from exc
    factory = PROFILES.get(network_name)
    if factory is None:
        if network_name.startswith("development") or network_name.endswith("-fork"):
            return dev_params()
        raise DeploymentError(
            f"no deployment parameters for network {network_name!r}; "
            f"known: {sorted(PROFILES)}; or set INTELLECT_DEPLOY_PARAMS to a DeployParams JSON file"
        )
    return factory()
