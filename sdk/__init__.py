"""intellect.sdk: the Python SDK of intellect-protocol (contracts client, events, IPFS, CLI).

Heavy parts (web3) load on first use, so `import intellect.sdk.ipfs` stays light. The SDK never
imports torch.
"""

from __future__ import annotations

import importlib
from typing import Any

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

# name -> module that defines it (imported lazily on first attribute access)
_LAZY: dict[str, str] = {
    "Protocol": "._client",
    "EventStream": "._events",
    "FileCursorStore": "._events",
    "MemoryCursorStore": "._events",
    "Cursor": "._events",
    "Reorg": "._events",
    "ContractRecord": "._config",
    "Deployment": "._config",
    "NETWORKS": "._config",
    "load_deployment": "._config",
    "load_abi": "._config",
    "resolve_network": "._config",
    "create_keystore": "._accounts",
    "import_keystore": "._accounts",
    "load_keystore": "._accounts",
    "dev_account": "._accounts",
    "RetryPolicy": "._tx",
    "ValidatorHistory": "._validators",
    "LeaseOutcome": "._work_history",
    "WorkHistory": "._work_history",
    "AttesterPoolRule": "._models",
    "AttesterRecord": "._models",
    "Challenge": "._models",
    "ChallengeStatus": "._models",
    "Checkpoint": "._models",
    "DecodedEvent": "._models",
    "FaucetInfo": "._models",
    "Node": "._models",
    "NodeStatus": "._models",
    "Pool": "._models",
    "PoolParams": "._models",
    "Receipt": "._models",
    "Rewards": "._models",
    "Role": "._models",
    "Stake": "._models",
    "Submission": "._models",
    "Task": "._models",
    "TaskClaim": "._models",
    "NodeBook": "._models",
    "claim_seed": "._models",
    "TaskStatus": "._models",
    "PoolState": "._models",
    "PoolStatus": "._models",
    "format_tokens": "._models",
    "parse_tokens": "._models",
}

__all__ = [
    "NETWORKS",
    "AttesterPoolRule",
    "AttesterRecord",
    "Challenge",
    "ChallengeStatus",
    "Checkpoint",
    "CidMismatchError",
    "ConfigError",
    "ContentNotFoundError",
    "ContentTooLargeError",
    "ContractRecord",
    "ContractRevert",
    "Cursor",
    "DecodedEvent",
    "Deployment",
    "DeploymentError",
    "DeploymentSchemaError",
    "EventStream",
    "FaucetInfo",
    "FileCursorStore",
    "IntellectError",
    "InvalidCidError",
    "IpfsError",
    "LeaseOutcome",
    "MemoryCursorStore",
    "Node",
    "NodeBook",
    "NodeStatus",
    "Pool",
    "PoolParams",
    "PoolState",
    "PoolStatus",
    "Protocol",
    "Receipt",
    "Reorg",
    "RetryPolicy",
    "Rewards",
    "Role",
    "RpcError",
    "SchemaVersionError",
    "Stake",
    "Submission",
    "Task",
    "TaskClaim",
    "TaskStatus",
    "TransactionTimeout",
    "TransientRpcError",
    "ValidatorHistory",
    "WorkHistory",
    "claim_seed",
    "create_keystore",
    "dev_account",
    "format_tokens",
    "import_keystore",
    "load_abi",
    "load_deployment",
    "load_keystore",
    "parse_tokens",
    "resolve_network",
]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'intellect.sdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
