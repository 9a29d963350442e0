"""intellect.sdk: the Python SDK of intellect-protocol (contracts client, events, IPFS, Shardcast, CLI).

The public face, as httpx's: the implementation sits in private modules (`_client`, `_models`, `_config`, ...)
and every name another package may use is re-exported here, in the public modules `intellect.sdk.http`
(bounded HTTP server and client), `intellect.sdk.procs` (child-process helpers), `intellect.sdk.ipfs`,
`intellect.sdk.shardcast`, `intellect.sdk.dashboard`, `intellect.sdk.poolrules` and `intellect.sdk.devnet`.
Nothing outside `sdk/` imports `intellect.sdk._*` (`tests/sdk/test_sdk_public.py` holds the rule).

Names are imported eagerly, except those of the four modules that load web3 or eth_account (the contract client,
the event stream, the transactor, the accounts: about 2 s of imports), which load on first use
(`_ON_FIRST_USE`) so that `import intellect.sdk.ipfs`, the verifier's isolated parser child and the CLI's
`--help` stay light. The SDK never imports torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._config import (
    CONTRACT_NAMES,
    DEPLOYMENT_SCHEMA,
    DEV_CHAIN_IDS,
    NETWORKS,
    OPTIONAL_CONTRACT_NAMES,
    ContractRecord,
    Deployment,
    load_abi,
    load_deployment,
    resolve_network,
)
from ._errors import (
    CidMismatchError,
    ConfigError,
    ContentNotFoundError,
    ContentTooLargeError,
    ContractRevert,
    DeploymentError,
    DeploymentSchemaError,
    IntellectError,
    InvalidCidError,
    IpfsError,
    RpcError,
    SchemaVersionError,
    TransactionTimeout,
    TransientRpcError,
)
from ._models import (
    LISTING_FLOOR,
    ZERO_ADDRESS,
    AttestationRootRecord,
    AttesterPoolRule,
    AttesterRecord,
    Challenge,
    ChallengeStatus,
    Checkpoint,
    DecodedEvent,
    FaucetInfo,
    Node,
    NodeBook,
    NodeStatus,
    Pool,
    PoolParams,
    PoolState,
    PoolStatus,
    Receipt,
    Rewards,
    Role,
    Stake,
    Submission,
    Task,
    TaskClaim,
    TaskStatus,
    claim_seed,
    format_tokens,
    parse_tokens,
)
from ._reverts import REVERT_HINTS, REVERT_MESSAGES
from ._validators import ValidatorHistory
from ._work_history import LeaseOutcome, WorkHistory

# name -> the web3-loading module that defines it (imported on first attribute access; see the docstring)
_ON_FIRST_USE: dict[str, str] = {
    "Protocol": "._client",
    "Cursor": "._events",
    "EventStream": "._events",
    "FileCursorStore": "._events",
    "MemoryCursorStore": "._events",
    "Reorg": "._events",
    "ErrorDecoder": "._tx",
    "RetryPolicy": "._tx",
    "is_transient": "._tx",
    "with_retries": "._tx",
    "create_keystore": "._accounts",
    "dev_account": "._accounts",
    "import_keystore": "._accounts",
    "load_keystore": "._accounts",
    "read_password": "._accounts",
}

__all__ = [  # grouped by module, as imported above
    # _config: networks and deployment files
    "CONTRACT_NAMES", "DEPLOYMENT_SCHEMA", "DEV_CHAIN_IDS", "NETWORKS", "OPTIONAL_CONTRACT_NAMES", "ContractRecord",
    "Deployment", "load_abi", "load_deployment", "resolve_network",
    # _errors: the exception tree under IntellectError
    "CidMismatchError", "ConfigError", "ContentNotFoundError", "ContentTooLargeError", "ContractRevert",
    "DeploymentError", "DeploymentSchemaError", "IntellectError", "InvalidCidError", "IpfsError", "RpcError",
    "SchemaVersionError", "TransactionTimeout", "TransientRpcError",
    # _models: what the contracts hold, typed
    "LISTING_FLOOR", "ZERO_ADDRESS", "AttestationRootRecord", "AttesterPoolRule", "AttesterRecord", "Challenge",
    "ChallengeStatus", "Checkpoint", "DecodedEvent", "FaucetInfo", "Node", "NodeBook", "NodeStatus", "Pool",
    "PoolParams", "PoolState", "PoolStatus", "Receipt",
    "Rewards", "Role", "Stake", "Submission", "Task", "TaskClaim", "TaskStatus", "claim_seed", "format_tokens",
    "parse_tokens",
    # _reverts, _validators, _work_history
    "REVERT_HINTS", "REVERT_MESSAGES", "ValidatorHistory", "LeaseOutcome", "WorkHistory",
    # loaded on first use (web3, eth_account)
    *_ON_FIRST_USE,
]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ON_FIRST_USE))


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'intellect.sdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
